"""Which variant is this? One registry for a GGUF file and for a Hugging Face checkpoint.

A *GGUF variant* is one way llama.cpp loads a draft file (the unit is the file, not the HF family: DSpark and
DFlash checkpoints both write a ``dflash`` file, and so does DeepSeek-V4 DSpark, told apart by its
hyper-connection count). Each variant is one small :class:`Variant` descriptor in :data:`VARIANTS`, in match
order (a variant ahead of the one it ``refines``):

- ``matches(value, tensor_names)``: the numpy-free predicate every GGUF-side dispatch point asks through
  :func:`gguf_variant` (``check``'s loader variants, ``verify``, the numpy forward's refusal);
- ``families``: the converter families (module names) whose checkpoints produce it, so
  :func:`.recognize.checkpoint_variant` answers the same question for a checkpoint;
- ``gguf_drops`` / ``checkpoint_drops``: verify's tensor accounting (:mod:`.verify_accounting`). Every tensor on
  either side must be read by a forward, compared at tensor level, or dropped by one of these rules, which says
  why; anything else fails ``verify`` with the tensor's name. A new family declares its drops here (DFlash2's
  selector and convolution tensors are *read* by its forward, so they need no rule; a tensor no rule names and
  no forward reads is a defect).

Only names and predicates live here: no numpy, no torch, no converter code (``check`` imports it; the HF side,
which needs the converter's family recognition, is :mod:`.recognize`).

Example:
    >>> gguf_variant({"general.architecture": "dflash", "dflash.hyper_connection.count": 4}.get, []).name
    'dsv4'
    >>> gguf_variant({"general.architecture": "eagle3"}.get, []).name
    'eagle3'
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from .. import schema as S

Value = Callable[[str], Any]          # metadata key -> value (None when absent): a GGUFWeights/Plan/dict getter


@dataclass(frozen=True)
class DropRule:
    """A tensor ``verify`` may leave unread, and why. ``pattern`` matches the whole name (``{n}`` stands for a
    layer or stage number). The rule applies only while the other side agrees: ``if_gguf_has`` names a GGUF tensor
    that must be present (``t2d`` is dropped because ``d2t`` was written), ``if_gguf_lacks`` one that must be
    absent (the draft's ``embed_tokens`` copy is dropped because the GGUF reads the target's)."""

    pattern: str
    reason: str
    if_gguf_has: str | None = None
    if_gguf_lacks: str | None = None

    def covers(self, name: str, gguf_names: Collection[str]) -> bool:
        import re

        rx = re.escape(self.pattern).replace(r"\{n\}", r"\d+")
        if re.fullmatch(rx, name) is None:
            return False
        if self.if_gguf_has is not None and self.if_gguf_has not in gguf_names:
            return False
        return not (self.if_gguf_lacks is not None and self.if_gguf_lacks in gguf_names)


def _int_above_zero(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


@dataclass(frozen=True)
class Variant:
    """One GGUF variant: its name, the arch it writes, what it refines, its predicate, its HF families and its
    tensor-accounting rules (see the module docstring)."""

    name: str
    arch: str
    matches: Callable[[Value, Collection[str]], bool]
    families: tuple[str, ...]
    refines: str | None = None
    #: how verify proves the file: ``forward`` (two forwards, tensors read) or ``tensors`` (tensor by tensor)
    proof: str = "forward"
    gguf_drops: tuple[DropRule, ...] = ()
    checkpoint_drops: tuple[DropRule, ...] = ()
    #: the variant's own subpackage (``dspark_convert/variants/<package>/``: its ``verify.rows`` and ``fit.RULES``
    #: are what the shared drivers run for it); None: the variant's code is still in the shared modules
    package: str | None = None


_T2D = DropRule("t2d", "the target -> draft mask is the inverse of d2t; the GGUF keeps d2t only (llama.cpp reads d2t)",
                if_gguf_has=S.T_D2T)
_FULL_VOCAB_EMBED = DropRule("embed_tokens.weight", "the GGUF has no token_embd: the draft's stored copy is "
                             "replaced by the target's embeddings (full-vocab draft)", if_gguf_lacks=S.T_TOKEN_EMBD)
_FULL_VOCAB_HEAD = DropRule("lm_head.weight", "the GGUF has no output: the draft's stored copy is replaced by the "
                            "target's lm_head (full-vocab draft)", if_gguf_lacks=S.T_OUTPUT)

# a variant with its own subpackage declares its descriptor there (names and predicates only)
from .gemma4 import VARIANT as _GEMMA4_DSPARK  # noqa: E402  (needs Variant and DropRule above)

VARIANTS: tuple[Variant, ...] = (
    _GEMMA4_DSPARK,  # blk.0.layer_output_scale.weight (refines dflash)
    Variant("dsv4", S.ARCH_DFLASH, lambda v, _n: v("general.architecture") == S.ARCH_DFLASH
            and _int_above_zero(v(S.HC_COUNT.format(arch=S.ARCH_DFLASH))), ("dspark_dsv4",), refines="dflash",
            proof="tensors"),
    Variant("dflash2", S.ARCH_DFLASH, lambda v, n: v("general.architecture") == S.ARCH_DFLASH
            and S.T_SELECTOR_HIDDEN in n, ("dflash2",), refines="dflash"),
    Variant("dflash", S.ARCH_DFLASH, lambda v, _n: v("general.architecture") == S.ARCH_DFLASH, ("dspark", "dflash"),
            checkpoint_drops=(_T2D, _FULL_VOCAB_EMBED, _FULL_VOCAB_HEAD)),
    Variant("eagle3", S.ARCH_EAGLE3, lambda v, _n: v("general.architecture") == S.ARCH_EAGLE3, ("eagle3",),
            checkpoint_drops=(_T2D, _FULL_VOCAB_EMBED)),
)
BY_NAME: dict[str, Variant] = {v.name: v for v in VARIANTS}


def gguf_variant(value: Value, tensor_names: Iterable[str] = ()) -> Variant | None:
    """The first variant of :data:`VARIANTS` whose predicate accepts this file's metadata (``value``: key ->
    value) and tensor names; None for a file no variant loads."""
    names = frozenset(tensor_names)
    return next((v for v in VARIANTS if v.matches(value, names)), None)


def variant_of_family(family: str) -> Variant:
    """The variant a converter family (module name: ``dspark``, ``dflash``, ``eagle3``, ``dspark_dsv4``) writes.

    Example:
        >>> variant_of_family("dspark").name, variant_of_family("dspark_dsv4").name
        ('dflash', 'dsv4')
    """
    for v in VARIANTS:
        if family in v.families:
            return v
    raise KeyError(family)
