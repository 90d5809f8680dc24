"""Fuzz: mutated valid GGUF files either parse or raise GGUFFormatError, never anything else, never hang.

Mutations target the header region (where parsing happens): byte flips, truncation, and 8-byte huge values
written over or inserted into the file (counts, lengths, dims, offsets). 2,000 files per reader function,
derandomized so CI runs are reproducible.
"""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from gguf_samples import write_sample
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dspark_convert.errors import GGUFFormatError
from dspark_convert.gguffile.reader import read_gguf
from dspark_convert.inspect import inspect_gguf

EXAMPLES = 2000
FUZZ = settings(max_examples=EXAMPLES, deadline=timedelta(seconds=2), derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])
SEEDS = st.integers(0, 2**64 - 1)
BIG = [2**31, 2**32 - 1, 2**32, 2**60, 2**63 - 1, 2**63, 2**64 - 1]


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, int, Path]:
    p = write_sample(tmp_path_factory.mktemp("fuzz") / "seed.gguf")
    f = read_gguf(p)
    header_end = f.data_offset
    f.close()
    return p.read_bytes(), header_end, p.with_name("mutant.gguf")


def mutate(data: bytes, header_end: int, seed: int) -> bytes:
    """One mutation of ``data`` chosen by ``seed``; positions fall in the header region, where every count and
    length lives. (Hypothesis draws only the seed: drawing each byte through it costs ~10x the parse.)"""
    rnd = random.Random(seed)
    out = bytearray(data)
    kind = rnd.choice(["flip", "truncate", "overwrite", "insert", "mixed"])
    if kind in ("flip", "mixed"):
        for _ in range(rnd.randint(1, 6)):
            out[rnd.randrange(header_end)] = rnd.randrange(256)
    if kind in ("overwrite", "insert", "mixed"):
        value = rnd.choice(BIG) if rnd.random() < 0.7 else rnd.randrange(2**64)
        at = rnd.randrange(header_end - 8)
        out[at : at + (8 if kind != "insert" else 0)] = struct.pack("<Q", value)
    if kind in ("truncate", "mixed"):
        del out[rnd.randrange(len(out)) :]
    return bytes(out)


class _Target:
    """The file that receives each mutant: rewritten in place (open with O_TRUNC costs ~3 ms on some disks)."""

    def __init__(self, path: Path):
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)

    def write(self, data: bytes) -> Path:
        os.pwrite(self.fd, data, 0)
        os.ftruncate(self.fd, len(data))
        return self.path


@pytest.fixture(scope="module")
def target(seed: tuple[bytes, int, Path]) -> Iterator[_Target]:
    t = _Target(seed[2])
    yield t
    os.close(t.fd)


def _exercise(path: Path) -> None:
    """read_gguf, then every lazy value and every tensor's bytes."""
    with read_gguf(path) as f:
        for kv in f.kvs.values():
            _ = kv.value
        for t in f.tensors:
            try:
                f.tensor_bytes(t.name)
            except GGUFFormatError as e:
                assert "unknown" in str(e)


def test_fuzz_read_gguf(seed: tuple[bytes, int, Path], target: _Target) -> None:
    data, header_end, _ = seed

    @FUZZ
    @given(SEEDS)
    def check(seed: int) -> None:
        path = target.write(mutate(data, header_end, seed))
        try:
            _exercise(path)
        except GGUFFormatError as e:
            assert "\n" not in str(e) and str(e).startswith(str(path))

    check()


def test_fuzz_inspect_gguf(seed: tuple[bytes, int, Path], target: _Target) -> None:
    data, header_end, _ = seed

    @FUZZ
    @given(SEEDS)
    def check(seed: int) -> None:
        path = target.write(mutate(data, header_end, seed))
        try:
            info = inspect_gguf(path, stats=True, full_arrays=True)
        except GGUFFormatError as e:
            assert "\n" not in str(e)
        else:
            assert info["tensor_count"] == len(info["tensors"])

    check()
