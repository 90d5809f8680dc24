"""The draft blocks llama-server b11434 logs with ``-v``, read back for the three-way check (test tier).

llama.cpp b11434 logs one line per draft candidate (``common/speculative.cpp``)::

    - seq_id 0, draft candidate   0, pos   3:    390 (   0.140) 'ast'

(candidates 0..2 per block position, candidate 0 is the drafted token; a chained draft's lines carry a
``spec <func>:`` prefix), and after each block the slot logs ``generate_draft: id=<anchor>, #tokens=<context
length>, ...``. A draft type whose loop logs no candidates leaves blocks with only those counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_CANDIDATE = re.compile(r"draft candidate\s+(\d+), pos\s+(\d+):\s+(-?\d+) \(\s*([-0-9.naif]+)\)")
_GENERATED = re.compile(r"generate_draft: id=(-?\d+), #tokens=(\d+), #draft=(\d+)")
#: logged before the accepted tokens are emitted (the ``accepted k/n draft tokens`` line after them is missing for
#: the block that ends the request): ``ids.size`` = accepted + 1
_ACCEPTED = re.compile(r"add accepted tokens: sampled=(-?\d+), ids\.size=(\d+), n_draft=(\d+)")


@dataclass
class DraftBlock:
    """One draft as llama-server logged it: the tokens drafted (candidate 0 of each position, in order), their
    probabilities, the anchor (the target's last sampled token) and the context length (``#tokens``) before it;
    ``n_draft`` (``#draft``: the tokens sent for verification) and ``n_accepted`` (how many of them the target
    accepted, from the slot's ``add accepted tokens: ..., ids.size=k+1`` line). A draft whose loop logs no
    candidates (a selector lattice walked silently) has blocks with no ``tokens``, only the counts."""

    tokens: list[int] = field(default_factory=list)
    probs: list[float] = field(default_factory=list)
    anchor: int | None = None
    n_context: int | None = None
    n_draft: int | None = None
    n_accepted: int | None = None


def parse_drafts(log: str) -> list[DraftBlock]:
    """Every draft block in a llama-server ``-v`` log, in order.

    A block is the run of candidate-0 lines up to the next ``generate_draft`` line (which names its anchor and
    context length); a position that does not grow also starts a new block (a draft without that line).

    Example:
        >>> log = ("D - seq_id 0, draft candidate   0, pos   0:    815 (   0.367) 'a'\\n"
        ...        "D - seq_id 0, draft candidate   1, pos   0:     68 (   0.085) 'b'\\n"
        ...        "D - seq_id 0, draft candidate   0, pos   1:    437 (   0.167) 'c'\\n"
        ...        "D slot handle_last_: id  0 | task 0 | generate_draft: id=95, #tokens=8, #draft=2, pos_next=8\\n")
        >>> b = parse_drafts(log)[0]
        >>> b.tokens, b.anchor, b.n_context
        ([815, 437], 95, 8)
    """
    blocks: list[DraftBlock] = []
    cur = DraftBlock()
    last_pos = -1
    for line in log.splitlines():
        m = _CANDIDATE.search(line)
        if m:
            k, pos, tok = int(m.group(1)), int(m.group(2)), int(m.group(3))
            if k != 0:
                continue
            if pos <= last_pos and cur.tokens:
                blocks.append(cur)
                cur = DraftBlock()
            cur.tokens.append(tok)
            try:
                cur.probs.append(float(m.group(4)))
            except ValueError:
                cur.probs.append(float("nan"))
            last_pos = pos
            continue
        g = _GENERATED.search(line)
        if g:
            cur.anchor, cur.n_context, cur.n_draft = int(g.group(1)), int(g.group(2)), int(g.group(3))
            blocks.append(cur)
            cur, last_pos = DraftBlock(), -1
            continue
        a = _ACCEPTED.search(line)
        if a and blocks and blocks[-1].n_accepted is None and not cur.tokens:
            blocks[-1].n_accepted = int(a.group(2)) - 1
    if cur.tokens:
        blocks.append(cur)
    return blocks
