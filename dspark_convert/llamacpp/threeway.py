"""The three-way check: the tokens llama.cpp drafts equal the tokens our numpy reference drafts from the same inputs.

The three parties are the target (its tap features, from the numpy target forward :mod:`..reference.target_np`),
llama.cpp (its ``-v`` log of every draft candidate, :func:`.server.parse_drafts`) and our draft reference
(each variant's ``numpy_forward`` on the GGUF). For each draft block
llama-server logged, with context length ``T`` and anchor ``a``, the reference gets the target's features of the
first ``T`` tokens and ``a``, and proposes a block; the two proposals are compared position by position.

``runtime_head=False`` (the default here) makes the reference score with the head the draft was trained with
(the file's ``output``, else the target's lm_head). A file llama.cpp runs with another head (a full-vocab DSpark
without ``output``: llama.cpp scores with ``token_embd``) then disagrees from the first block position on, which
is the point: the check catches files that load, stay lossless and draft badly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ConvertError
from ..reference import TargetWeights, open_gguf
from ..reference.target_np import TargetModel, tap_features, target_forward
from ..variants.dflash.numpy_forward import BlockCase, dflash_forward
from ..variants.eagle3.numpy_forward import Eagle3Case, eagle3_forward
from ..verify_checks import TIE_STD_FRACTION
from .server import DraftBlock

#: a differing position is a near-tie when the reference's margin between its choice and llama.cpp's is at most
#: this fraction of the row's logit standard deviation (as verify's argmax checks: verify_checks.TIE_STD_FRACTION)
TIE_FRACTION = TIE_STD_FRACTION


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

    def _diffs(self) -> list[int]:
        n = min(len(self.llama), len(self.reference))
        return [i for i in range(n) if self.llama[i] != self.reference[i]] + list(range(n, len(self.llama)))

    def near_tie(self, i: int) -> bool:
        return i < len(self.margins) and self.margins[i] <= TIE_FRACTION * self.scales[i]

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
        same = sum(sum(a == b for a, b in zip(c.llama, c.reference, strict=False)) for c in self.blocks)
        ties = sum(sum(c.near_tie(i) for i in c._diffs()) for c in self.blocks)
        return same, ties, sum(len(c.llama) for c in self.blocks)

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
        tok = lambda xs: str(xs[i]) if i < len(xs) else "(none)"  # noqa: E731
        return (f"{self.draft.name}: first difference in block {bad.index} (context {bad.n_context}, anchor "
                f"{bad.anchor}) at position {i}: llama.cpp drafted {tok(bad.llama)}, the reference "
                f"{tok(bad.reference)}; {counts}")


@dataclass
class RefBlock:
    """The reference's proposal for one block: chosen target ids and, per position, the scores it chose from
    (draft vocabulary) and the draft id of each target id (``d2t`` inverse; identity for a full vocabulary)."""

    tokens: list[int]
    scores: np.ndarray
    draft_id: dict[int, int] | None


def _margins(ref: RefBlock, llama: list[int]) -> tuple[list[float], list[float]]:
    margins, scales = [], []
    for i, z in enumerate(ref.scores[:len(llama)]):
        t = llama[i]
        d = t if ref.draft_id is None else ref.draft_id.get(t, -1)
        margins.append(float("inf") if not 0 <= d < z.size else float(z.max() - z[d]))
        scales.append(float(np.std(z)))
    return margins, scales


def reference_drafts(draft: Path, target_dir: Path, sequence: Sequence[int], blocks: Sequence[DraftBlock], *,
                     runtime_head: bool = False, target: TargetModel | None = None) -> list[RefBlock]:
    """The reference's proposal for each logged block, from the target's features over ``sequence`` (prompt then
    generated tokens); chains (DSpark's Markov head, EAGLE-3's feedback) are fed llama.cpp's previous choices, so
    positions stay comparable after a near-tie. A block whose anchor is not ``sequence[n_context]`` raises ConvertError (the log and the
    sequence do not belong together)."""
    g = open_gguf(draft)
    arch = g.value("general.architecture")
    layers_key = {"dflash": "dflash.target_layers", "eagle3": "eagle3.target_layers"}.get(str(arch))
    if layers_key is None:
        raise ConvertError(f"{draft}: general.architecture {arch!r}: the three-way check covers dflash and eagle3")
    out = target_forward(target or TargetModel(target_dir), sequence)
    feats = tap_features(out, [int(x) for x in g.value(layers_key)])
    seq = np.asarray(sequence, dtype=np.int64)
    for b in blocks:
        if b.n_context is None or b.anchor is None or b.n_context >= seq.size or int(seq[b.n_context]) != b.anchor:
            raise ConvertError(f"{draft}: logged draft (context {b.n_context}, anchor {b.anchor}) does not match the "
                               "completed sequence")
    tw = TargetWeights(target_dir)
    d2t = g.ints("d2t") if g.has("d2t") else None
    inv = None if d2t is None else {int(t): i for i, t in enumerate(d2t)}
    if arch == "dflash":
        cases = [BlockCase(feats[:b.n_context], int(b.anchor or 0),
                           prev_tokens=np.asarray([b.anchor, *b.tokens[:-1]], dtype=np.int64)) for b in blocks]
        outs = dflash_forward(g, tw, cases, runtime_head=runtime_head)
        return [RefBlock(o.tokens.tolist(), o.markov_logits if o.markov_logits is not None else o.logits, inv)
                for o in outs]
    e_cases = [Eagle3Case(feats[:b.n_context], seq[1:int(b.n_context or 0) + 1], steps=len(b.tokens),
                          forced_tokens=np.asarray(b.tokens, dtype=np.int64)) for b in blocks]
    return [RefBlock(o.tokens.tolist(), o.logits, inv) for o in eagle3_forward(g, tw, e_cases)]


def three_way(draft: Path, target_dir: Path, prompt: Sequence[int], generated: Sequence[int],
              blocks: Sequence[DraftBlock], *, runtime_head: bool = False, max_blocks: int | None = None) -> ThreeWay:
    """Compare llama.cpp's logged ``blocks`` with the reference's proposals (see the module docstring)."""
    chosen = list(blocks)[:max_blocks] if max_blocks else list(blocks)
    refs = reference_drafts(draft, target_dir, list(prompt) + list(generated), chosen, runtime_head=runtime_head)
    res = ThreeWay(draft)
    for i, (b, r) in enumerate(zip(chosen, refs, strict=True)):
        margins, scales = _margins(r, list(b.tokens))
        res.blocks.append(BlockComparison(i, int(b.n_context or 0), int(b.anchor or 0), list(b.tokens), r.tokens,
                                          margins, scales))
    return res
