#!/usr/bin/env python3
"""Mutated tokenizer.json documents read by the compiled tokenizer kernels and by their numpy forms: the two must
give the same tokens, merge items and refusals, and neither may crash the process.

Each run makes a small BPE vocabulary and merges of awkward strings (quotes, backslashes, spaces, ``],``, UTF-8,
controls), writes it compact or pretty-printed, applies 1-3 byte edits (insert, delete, replace with bytes that
matter to the grammar), picks a piece size (7 bytes to 1 MiB), then reads the vocabulary
(``tokscan.vocab_spans``) and the merges (``tokscan.merge_pairs``) both ways. Prints the number of runs and of
differences (and the first few); exits 1 on any difference. Run it under a memory limit, e.g.
``ulimit -v 8000000``.

usage: python scripts/fuzz_tokenizer_reader.py [--seed N] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import random

import numpy as np

from dspark_convert.formats import native
from dspark_convert.tokenizer import tokjson, tokscan

PIECES = ["a", "b", "c", "\u00e9", '"', "\\", "\n", " ", "],", "{", "}", "x" * 9, "\u2581", "\u00e9\u00e9", "[", ":",
          "0", "\t"]
EDIT_BYTES = list(b' ,:"\\[]{}0a\n\xff\x01\x80\xc3\t9')


def document(rnd: random.Random) -> tuple[list[str], bytes]:
    vocab = list(dict.fromkeys("".join(rnd.choice(PIECES) for _ in range(rnd.randrange(1, 4))) for _ in range(60)))
    merges = []
    for _ in range(40):
        a, b = rnd.choice(vocab), rnd.choice(vocab)
        merges.append([a, b])
        if a + b not in vocab:
            vocab.append(a + b)
    doc = {"model": {"type": "BPE", "vocab": {v: i for i, v in enumerate(vocab)}, "merges": merges}}
    return vocab, json.dumps(doc, indent=rnd.choice([None, 0, 2]), ensure_ascii=rnd.random() < 0.3).encode()


def mutate(rnd: random.Random, raw: bytes) -> bytes:
    out = bytearray(raw)
    for _ in range(rnd.randrange(1, 4)):
        pos, op, byte = rnd.randrange(len(out)), rnd.random(), rnd.choice(EDIT_BYTES)
        if op < 0.4:
            out[pos:pos] = bytes([byte])
        elif op < 0.7:
            del out[pos]
        else:
            out[pos] = byte
    return bytes(out)


def outcome(raw: bytes, vocab: list[str]) -> object:
    try:
        lay = tokjson.locate(raw)
        spans = tokscan.vocab_spans(lay)
        tokens = None if spans is None else tokscan.span_list(*spans)
        index = tokscan.VocabIndex(*tokscan.joined([v.encode() for v in vocab]))
        merged = tokscan.merge_pairs(lay, index, np.zeros(0, dtype=np.int64))
        return tokens, None if merged is None else merged[:2]
    except tokjson.NotFast:
        return "NotFast"
    except ValueError as e:
        return "ValueError", str(e)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runs", type=int, default=3000)
    a = ap.parse_args()
    if not native.built():
        raise SystemExit("fuzz_tokenizer_reader: the compiled kernels are not built (pip install -e .)")
    rnd = random.Random(a.seed)
    differences = 0
    for run in range(a.runs):
        vocab, base = document(rnd)
        raw = mutate(rnd, base)
        tokscan.CHUNK = rnd.choice([7, 31, 97, 1 << 20])
        os.environ.pop(native.ENV, None)
        compiled = outcome(raw, vocab)
        os.environ[native.ENV] = "0"
        numpy_form = outcome(raw, vocab)
        os.environ.pop(native.ENV, None)
        if compiled != numpy_form:
            differences += 1
            if differences <= 5:
                print(f"run {run}: {raw[:200]!r}\n  compiled {str(compiled)[:300]}\n  numpy    {str(numpy_form)[:300]}")
    print(f"runs {a.runs}, differences {differences}")
    return 1 if differences else 0


if __name__ == "__main__":
    raise SystemExit(main())
