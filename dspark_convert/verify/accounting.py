"""``verify``'s tensor accounting: every tensor on both sides is read, compared, or dropped by a named rule.

Two forwards agreeing proves only the tensors they read. A GGUF tensor no forward reads (a new selector tensor in
a file whose forward ignores it), or a checkpoint tensor the converter silently left
out, would pass unnoticed. So after the forwards ran, each tensor of the GGUF and of the draft checkpoint is put in
exactly one bin:

- **read by forward**: its data was read by the numpy forward (GGUF side, recorded by
  :class:`reference.weights.GGUFWeights`) or by the torch side (checkpoint side, recorded by
  :class:`reference.hf_draft.TorchCheckpoint`; this includes the metadata rows' reads, such as ``d2t``);
- **compared**: checked at tensor level (a variant whose proof is ``tensors``: every tensor against its
  checkpoint sources);
- **dropped**: named by one of the variant's :class:`~dspark_convert.registry.DropRule` rows, with its reason;
- **unaccounted**: anything else. One failing row, ``tensor accounting``, names them and fails the report.

The counts and the dropped tensors' reasons are in the report (``VerifyReport.tensors``, JSON ``tensors``).

Example:
    >>> from dspark_convert.registry import Variant
    >>> plain = Variant("plain", "plain", lambda v, n: True, ())
    >>> a = account(plain, ["fc.weight", "selector_hidden.weight"], {"fc.weight"}, set(), ["fc.weight", "t2d"],
    ...             {"fc.weight"}, set())
    >>> a.unaccounted(), a.counts()["checkpoint"]["unaccounted"]
    (['GGUF selector_hidden.weight', 'checkpoint t2d'], 1)
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..reference.compare import OutputCheck
from ..registry import DropRule, Variant
from ..roles.proof import Tensors

ROW = "tensor accounting"


@dataclass
class SideAccount:
    """One side's tensors in their bins (names in file order)."""

    read: list[str] = field(default_factory=list)
    compared: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)      # name -> reason
    unaccounted: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {"total": len(self.read) + len(self.compared) + len(self.dropped) + len(self.unaccounted),
                "read_by_forward": len(self.read), "compared": len(self.compared), "dropped": len(self.dropped),
                "unaccounted": len(self.unaccounted)}


@dataclass
class TensorAccount:
    """Both sides' accounts (see the module docstring)."""

    variant: str
    gguf: SideAccount
    checkpoint: SideAccount

    def unaccounted(self) -> list[str]:
        return [f"GGUF {n}" for n in self.gguf.unaccounted] + [f"checkpoint {n}" for n in self.checkpoint.unaccounted]

    def counts(self) -> dict[str, dict[str, int]]:
        return {"gguf": self.gguf.counts(), "checkpoint": self.checkpoint.counts()}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the counts, the dropped tensors with their reasons, the unaccounted names."""
        return {"variant": self.variant, "counts": self.counts(),
                "dropped": {"gguf": dict(self.gguf.dropped), "checkpoint": dict(self.checkpoint.dropped)},
                "unaccounted": {"gguf": list(self.gguf.unaccounted), "checkpoint": list(self.checkpoint.unaccounted)}}

    def row(self) -> OutputCheck:
        """The exact-mode row: passes iff nothing is unaccounted; its detail names every unaccounted tensor."""
        bad = self.unaccounted()
        c = self.counts()
        summary = "; ".join(f"{side}: {n['read_by_forward']} read, {n['compared']} compared, {n['dropped']} dropped"
                            for side, n in c.items())
        if not bad:
            return OutputCheck(ROW, [], grade="complete", passed=True, detail=summary)
        return OutputCheck(ROW, [], grade="unaccounted", passed=False,
                           detail=f"no forward reads, no tensor check compares and no rule drops: {', '.join(bad)} "
                                  f"({summary})")


def _side(names: Iterable[str], read: Collection[str], compared: Collection[str], rules: tuple[DropRule, ...],
          gguf_names: Collection[str]) -> SideAccount:
    s = SideAccount()
    for n in names:
        if n in read:
            s.read.append(n)
        elif n in compared:
            s.compared.append(n)
        else:
            rule = next((r for r in rules if r.covers(n, gguf_names)), None)
            if rule is not None:
                s.dropped[n] = rule.reason
            else:
                s.unaccounted.append(n)
    return s


def account(variant: Variant, gguf_names: list[str], gguf_read: Collection[str], gguf_compared: Collection[str],
            ckpt_names: list[str], ckpt_read: Collection[str], ckpt_compared: Collection[str]) -> TensorAccount:
    """Put every tensor of both sides in its bin, with ``variant``'s drop rules (:func:`account_for` takes a
    :class:`Tensors`)."""
    have = frozenset(gguf_names)
    return TensorAccount(variant.name, _side(gguf_names, gguf_read, gguf_compared, variant.gguf_drops, have),
                         _side(ckpt_names, ckpt_read, ckpt_compared, variant.checkpoint_drops, have))


def account_for(variant: Variant, gguf_names: list[str], t: Tensors) -> TensorAccount:
    """:func:`account` of a proof's :class:`Tensors`."""
    return account(variant, gguf_names, t.gguf_read, t.gguf_compared, t.checkpoint_names, t.checkpoint_read,
                   t.checkpoint_compared)
