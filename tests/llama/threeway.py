"""The three-way check: the tokens llama.cpp drafts equal the tokens our numpy reference drafts from the same inputs.

The three parties are the target (its tap features, from the numpy target forward :mod:`.target_np`),
llama.cpp (its ``-v`` log of every draft candidate, :func:`.server.parse_drafts`) and our draft reference
(the numpy forward of the file's GGUF variant). For each draft block llama-server logged, with context length
``T`` and anchor ``a``, the reference gets the target's features of the first ``T`` tokens and ``a``, and proposes
a block; the two proposals are compared position by position.

This module knows no variant: which forward runs, on which cases, and how a chain is fed is the variant's
reference module (``tests/llama/refs/<variant>.py``, found by the name of the file's variant; the contract is
:mod:`.refs`). A file of a variant without one is refused, naming the variant.

``runtime_head=False`` (the default here) makes the reference score with the head the draft was trained with
(the file's ``output``, else the target's lm_head). A file llama.cpp runs with another head (a full-vocabulary
draft without ``output`` whose loader duplicates ``token_embd`` as the head: :func:`dspark_convert.check.runtime_head`) then
disagrees from the first block position on, which is the point: the check catches files that load, stay lossless
and draft badly.

A draft whose drafting loop logs no candidates (a selector lattice walked inside llama.cpp, whose tokens go
straight to verification) is known only through verification: the server's ``add accepted tokens`` line
(``ids.size`` = k + 1) says the first ``k`` drafted tokens equal the target's greedy continuation and, when
``k < n``, that token ``k`` does not. The variant's reference then returns its candidates and scores
(``RefBlock.candidates``) and must be accepted for exactly as many tokens; the comparison marks llama.cpp's
unknown token as ``-1`` (``BlockComparison.not_token`` names the token it is known not to be).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dspark_convert import schema as S
from dspark_convert.errors import ConvertError
from dspark_convert.reference import TargetWeights, open_gguf
from dspark_convert.reference.compare import TIE_STD_FRACTION
from dspark_convert.registry import VARIANTS, gguf_variant
from llama.drafts_log import DraftBlock
from llama.refs import DraftInputs, RefBlock, continuation, reference_for
from llama.target_np import TargetModel, tap_features, target_forward

#: a llama.cpp token the log does not show (the rejected position of a draft whose candidates are not logged)
UNKNOWN = -1


@dataclass
class BlockComparison:
    """One draft block: llama.cpp's tokens, the reference's (its chain fed with llama.cpp's previous choices, so
    one near-tie does not shift the rest), and per position the reference's margin of its choice over
    llama.cpp's (0 where they agree)."""

    index: int
    n_context: int
    anchor: int
    llama: list[int]
    reference: list[int]
    margins: list[float] = field(default_factory=list)
    scales: list[float] = field(default_factory=list)
    #: a block known only through verification: llama.cpp's last token is unknown (``-1``) and known not to be
    #: this one (the target's)
    not_token: int | None = None

    def _differs(self, i: int) -> bool:
        if self.llama[i] == UNKNOWN:
            return self.reference[i] == self.not_token
        return self.llama[i] != self.reference[i]

    def _diffs(self) -> list[int]:
        n = min(len(self.llama), len(self.reference))
        return [i for i in range(n) if self._differs(i)] + list(range(n, len(self.llama)))

    def near_tie(self, i: int) -> bool:
        return i < len(self.margins) and self.margins[i] <= TIE_STD_FRACTION * self.scales[i]

    @property
    def first_difference(self) -> int | None:
        """The first position where the tokens differ (near-ties included)."""
        d = self._diffs()
        return d[0] if d else None

    @property
    def first_mismatch(self) -> int | None:
        """The first position where they differ by more than a near-tie."""
        return next((i for i in self._diffs() if not self.near_tie(i)), None)


@dataclass
class ThreeWay:
    """The comparison of every logged draft block (``blocks``) of one run."""

    draft: Path
    blocks: list[BlockComparison] = field(default_factory=list)

    @property
    def agree(self) -> bool:
        """Every position agrees, up to near-ties (and there was at least one block)."""
        return bool(self.blocks) and all(b.first_mismatch is None for b in self.blocks)

    @property
    def counts(self) -> tuple[int, int, int]:
        """(identical positions, near-tie positions, compared positions) over all blocks."""
        total = sum(len(c.llama) for c in self.blocks)
        same = total - sum(len(c._diffs()) for c in self.blocks)
        ties = sum(sum(c.near_tie(i) for i in c._diffs()) for c in self.blocks)
        return same, ties, total

    def summary(self) -> str:
        """One line: agreement, or the first differing block, position and both tokens."""
        if not self.blocks:
            return f"{self.draft.name}: no draft blocks to compare"
        same, ties, total = self.counts
        counts = f"{same}/{total} positions identical, {ties} near-ties"
        bad = next((b for b in self.blocks if b.first_mismatch is not None), None)
        if bad is None:
            return f"{self.draft.name}: llama.cpp drafts what the reference drafts ({len(self.blocks)} blocks; {counts})"
        i = bad.first_mismatch
        assert i is not None
        def tok(xs: list[int]) -> str:
            if i >= len(xs):
                return "(none)"
            return f"a token other than {bad.not_token}" if xs[i] == UNKNOWN else str(xs[i])

        return (f"{self.draft.name}: first difference in block {bad.index} (context {bad.n_context}, anchor "
                f"{bad.anchor}) at position {i}: llama.cpp drafted {tok(bad.llama)}, the reference "
                f"{tok(bad.reference)}; {counts}")


def _walk_margins(ref: RefBlock, llama: list[int], not_token: int | None) -> tuple[list[float], list[float]]:
    assert ref.candidates is not None and ref.row_scales is not None
    margins, scales = [], []
    for i, z in enumerate(ref.scores[:len(llama)]):
        cands = [int(c) for c in ref.candidates[i]]
        t = llama[i]
        if t == UNKNOWN:      # llama.cpp drafted something other than not_token; only a tie can excuse our choosing it
            top2 = np.sort(z)[-2:]
            margins.append(float(top2[1] - top2[0]) if ref.tokens[i] == not_token else 0.0)
        else:
            margins.append(float(z.max() - z[cands.index(t)]) if t in cands else float("inf"))
        scales.append(float(ref.row_scales[i]))
    return margins, scales


def _margins(ref: RefBlock, llama: list[int], not_token: int | None = None) -> tuple[list[float], list[float]]:
    if ref.candidates is not None:
        return _walk_margins(ref, llama, not_token)
    margins, scales = [], []
    for i, z in enumerate(ref.scores[:len(llama)]):
        t = llama[i]
        d = t if ref.draft_id is None else ref.draft_id.get(t, -1)
        margins.append(float("inf") if not 0 <= d < z.size else float(z.max() - z[d]))
        scales.append(float(np.std(z)))
    return margins, scales


def covered() -> tuple[str, ...]:
    """The variants the three-way check covers (those with a reference module), in the registry's order."""
    return tuple(v.name for v in VARIANTS if reference_for(v.name) is not None)


def reference_drafts(draft: Path, target_dir: Path, sequence: Sequence[int], blocks: Sequence[DraftBlock], *,
                     runtime_head: bool = False, target: TargetModel | None = None) -> list[RefBlock]:
    """The reference's proposal for each logged block, from the target's features over ``sequence`` (prompt then
    generated tokens), by the file's variant (its reference module, :mod:`.refs`); chains are fed llama.cpp's
    previous choices, so positions stay comparable after a near-tie. A block whose anchor is not
    ``sequence[n_context]`` raises ConvertError (the log and the sequence do not belong together), and so does a
    file of no variant, or of a variant the check does not cover."""
    g = open_gguf(draft)
    arch = g.value("general.architecture")
    variant = gguf_variant(g.value, [t.name for t in g.file.tensors])
    layers_key = S.TARGET_LAYERS_KEY.get(str(arch))
    role = None if variant is None else reference_for(variant.name)
    if variant is None or role is None:
        what = f"general.architecture {arch!r}" if variant is None else f"a {variant.name} file"
        raise ConvertError(f"{draft}: {what}: the three-way check covers {', '.join(covered())}")
    model = target or TargetModel(target_dir)
    if layers_key is None:        # a draft without taps (a Gemma 4 assistant): its reference reads the target model
        feats = np.zeros((len(sequence), 0), dtype=np.float32)
    else:
        feats = tap_features(target_forward(model, sequence), [int(x) for x in g.value(layers_key)])
    seq = np.asarray(sequence, dtype=np.int64)
    for b in blocks:
        if b.n_context is None or b.anchor is None or b.n_context >= seq.size or int(seq[b.n_context]) != b.anchor:
            raise ConvertError(f"{draft}: logged draft (context {b.n_context}, anchor {b.anchor}) does not match the "
                               "completed sequence")
    tw = TargetWeights(target_dir)
    d2t = g.ints("d2t") if g.has("d2t") else None
    inv = None if d2t is None else {int(t): i for i, t in enumerate(d2t)}
    refs: list[RefBlock] = role.reference_drafts(DraftInputs(g, tw, feats, seq, blocks, inv, runtime_head, model))
    return refs


def _llama_side(seq: np.ndarray, b: DraftBlock) -> tuple[list[int], int | None]:
    """llama.cpp's drafted tokens of a block as far as the log shows them: the candidates it printed, or (a block
    logged without candidates) the accepted prefix of the target's continuation plus :data:`UNKNOWN` for the
    rejected token (not ``not_token``)."""
    if b.tokens or b.n_accepted is None or b.n_draft is None:
        return list(b.tokens), None
    cont = continuation(seq, b)
    k = min(b.n_accepted, len(cont))
    if k < b.n_draft and k < len(cont):
        return cont[:k] + [UNKNOWN], cont[k]
    return cont[:k], None


def three_way(draft: Path, target_dir: Path, prompt: Sequence[int], generated: Sequence[int],
              blocks: Sequence[DraftBlock], *, runtime_head: bool = False, max_blocks: int | None = None) -> ThreeWay:
    """Compare llama.cpp's logged ``blocks`` with the reference's proposals (see the module docstring)."""
    chosen = list(blocks)[:max_blocks] if max_blocks else list(blocks)
    seq = list(prompt) + list(generated)
    refs = reference_drafts(draft, target_dir, seq, chosen, runtime_head=runtime_head)
    res = ThreeWay(draft)
    for i, (b, r) in enumerate(zip(chosen, refs, strict=True)):
        llama, not_token = _llama_side(np.asarray(seq, dtype=np.int64), b)
        margins, scales = _margins(r, llama, not_token)
        res.blocks.append(BlockComparison(i, int(b.n_context or 0), int(b.anchor or 0), llama, r.tokens, margins,
                                          scales, not_token))
    return res
