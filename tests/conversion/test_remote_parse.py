"""One parser for local and remote files: a growing byte source parses exactly like the whole mapped file.

Mutated files (the fuzz corpus of test_fuzz_reader) are parsed once from disk and once through a
RecordParser whose buffer starts with a few bytes and grows by small windows, as a remote read does: the
outcome (the inspect document, or the error line) must be identical. With a header limit, a file either
parses identically or is refused with the limit line, having fetched no more than the limit. Reference parsing
(hf://, ORG/REPO/file.gguf, Hub URLs) is checked here too. No network.
"""

from __future__ import annotations

import random
import struct
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from gguf_samples import write_sample
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dspark_convert.errors import ConvertError, GGUFFormatError
from dspark_convert.gguffile.reader import GGUFFile, parse_gguf, read_gguf
from dspark_convert.gguffile.records import RecordParser
from dspark_convert.gguffile.refs import HubFile, classify_ref, parse_hub_ref
from dspark_convert.inspect import describe_gguf

FUZZ = settings(max_examples=600, deadline=timedelta(seconds=2), derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])
BIG = [2**31, 2**32 - 1, 2**32, 2**60, 2**63 - 1, 2**63, 2**64 - 1]


class Growing:
    """An in-memory stand-in for the HTTP reader: a prefix that grows by ``window`` bytes (at least)."""

    def __init__(self, data: bytes, window: int, cap: int | None = None) -> None:
        self.data, self.window = data, window
        self.cap = len(data) if cap is None else min(cap, len(data))  # the reader never fetches past the limit
        self.buf = bytearray(data[: min(window, self.cap)])
        self.fetched = len(self.buf)

    def grow(self, end: int) -> bytearray:
        assert end <= len(self.data)
        stop = min(max(end, len(self.buf) + self.window), self.cap)
        self.fetched += stop - len(self.buf)
        self.buf += self.data[len(self.buf) : stop]
        return self.buf


def parse_growing(data: bytes, window: int, name: str) -> tuple[GGUFFile, Growing]:
    g = Growing(data, window)
    return parse_gguf(RecordParser(g.buf, len(data), name, grow=g.grow), name), g


def outcome(fn: Any) -> tuple[str, Any]:
    try:
        f = fn()
    except GGUFFormatError as e:
        return "error", str(e)
    info = describe_gguf(f, full_arrays=True)
    info.pop("file")
    return "ok", info


class Seed(tuple):  # type: ignore[type-arg]
    def __repr__(self) -> str:  # hypothesis prints the fixture of a failing example: not 2 KB of bytes
        return "<seed file>"


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, int, Path]:
    p = write_sample(tmp_path_factory.mktemp("grow") / "seed.gguf")
    with read_gguf(p) as f:
        header_end = f.header_end
    return Seed((p.read_bytes(), header_end, p.with_name("mutant.gguf")))


def mutate(data: bytes, header_end: int, seed: int) -> bytes:
    rnd = random.Random(seed)
    out = bytearray(data)
    kind = rnd.choice(["flip", "truncate", "overwrite", "mixed"])
    if kind in ("flip", "mixed"):
        for _ in range(rnd.randint(1, 6)):
            out[rnd.randrange(header_end)] = rnd.randrange(256)
    if kind in ("overwrite", "mixed"):
        value = rnd.choice(BIG) if rnd.random() < 0.7 else rnd.randrange(2**64)
        at = rnd.randrange(header_end - 8)
        out[at : at + 8] = struct.pack("<Q", value)
    if kind in ("truncate", "mixed"):
        del out[rnd.randrange(len(out)) :]
    return bytes(out)


def test_valid_file_parses_identically_and_fetches_only_the_header(seed: tuple[bytes, int, Path]) -> None:
    data, header_end, path = seed
    path.write_bytes(data)
    for window in (1, 7, 64, 4096):
        kind, local = outcome(lambda: read_gguf(path))
        f, g = parse_growing(data, window, str(path))
        assert kind == "ok" and outcome(lambda f=f: f) == ("ok", local)
        assert f.header_end == header_end
        # the header plus at most one window, never the whole file
        assert header_end <= g.fetched <= min(header_end + window, len(data))


@FUZZ
@given(st.integers(0, 2**64 - 1), st.sampled_from([1, 5, 32, 256]))
def test_mutants_parse_like_local(seed: tuple[bytes, int, Path], n: int, window: int) -> None:
    data, header_end, path = seed
    mutant = mutate(data, header_end, n)
    path.write_bytes(mutant)
    local = outcome(lambda: read_gguf(path))
    if len(mutant) < 24:
        return  # too short for a header: both readers refuse it before parsing (tested in test_remote)
    remote = outcome(lambda: parse_growing(mutant, window, str(path))[0])
    assert remote == local


@FUZZ
@given(st.integers(0, 2**64 - 1), st.integers(24, 2000))
def test_header_limit_refuses_with_one_line_and_fetches_at_most_the_limit(seed: tuple[bytes, int, Path], n: int,
                                                                           limit: int) -> None:
    data, header_end, path = seed
    mutant = mutate(data, header_end, n)
    if len(mutant) < 24:
        return
    path.write_bytes(mutant)
    local = outcome(lambda: read_gguf(path))
    g = Growing(mutant, 16, limit)
    try:
        f = parse_gguf(RecordParser(g.buf, len(mutant), str(path), grow=g.grow, limit=limit), str(path))
    except GGUFFormatError as e:
        msg = str(e)
        if "limit for remote files" in msg:
            assert g.fetched <= limit and "\n" not in msg and msg.startswith(f"{path}: ")
        else:  # a header within the limit fails exactly as locally
            assert local == ("error", msg)
        return
    assert f.header_end <= limit and outcome(lambda: f) == local


@pytest.mark.parametrize(("ref", "expected"), [
    ("hf://org/repo/f.gguf", HubFile("org/repo", "f.gguf")),
    ("hf://org/repo/sub/dir/f.Q8_0.gguf@v1.2", HubFile("org/repo", "sub/dir/f.Q8_0.gguf", "v1.2")),
    ("hf://org/repo/f.gguf@refs/pr/3", HubFile("org/repo", "f.gguf", "refs/pr/3")),
    ("hf://org/repo@dev/f.gguf", HubFile("org/repo", "f.gguf", "dev")),
    ("hf://org/repo@refs/pr/12/a/f.gguf", HubFile("org/repo", "a/f.gguf", "refs/pr/12")),
    ("hf://datasets/org/repo/f.gguf", HubFile("org/repo", "f.gguf", None, "dataset")),
    ("hf://org/repo/name@v2.bin", HubFile("org/repo", "name@v2.bin")),  # '@' after a non-.gguf name: a file name
    ("org/repo/f.gguf", HubFile("org/repo", "f.gguf")),
    ("org/repo/f.gguf@main", HubFile("org/repo", "f.gguf", "main")),
    ("https://huggingface.co/org/repo/resolve/main/f.gguf?download=true", HubFile("org/repo", "f.gguf", "main")),
    ("https://huggingface.co/org/repo/blob/refs%2Fpr%2F3/d/f.gguf", HubFile("org/repo", "d/f.gguf", "refs/pr/3")),
    ("https://huggingface.co/org/repo/blob/refs/pr/3/f.gguf", HubFile("org/repo", "f.gguf", "refs/pr/3")),
    ("https://hf.co/datasets/org/repo/resolve/abc/f.gguf", HubFile("org/repo", "f.gguf", "abc", "dataset")),
    ("https://example.com/org/repo/resolve/main/f.gguf", "https://example.com/org/repo/resolve/main/f.gguf"),
    ("http://127.0.0.1:8080/f.gguf", "http://127.0.0.1:8080/f.gguf"),
    ("f.gguf", Path("f.gguf")),
    ("./org/repo/f.gguf", Path("org/repo/f.gguf")),
    ("org/repo/notes.txt", Path("org/repo/notes.txt")),  # not a .gguf: a local path (that does not exist)
])
def test_classify_ref(ref: str, expected: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert classify_ref(ref) == expected


def test_classify_ref_local_wins_and_hf_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org").mkdir()  # a local folder "org": org/repo/f.gguf is a (missing) local path, not the Hub
    assert classify_ref("org/repo/f.gguf") == Path("org/repo/f.gguf")
    (tmp_path / "org" / "repo").mkdir()
    (tmp_path / "org" / "repo" / "x.gguf").write_bytes(b"")
    assert classify_ref("org/repo/x.gguf") == Path("org/repo/x.gguf")
    assert classify_ref(tmp_path / "x.gguf") == tmp_path / "x.gguf"
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9/")
    assert classify_ref("http://127.0.0.1:9/a/b/resolve/v1/f.gguf") == HubFile("a/b", "f.gguf", "v1")
    assert HubFile("a/b", "f.gguf", "v1", "dataset").display == "hf://datasets/a/b/f.gguf@v1"


@pytest.mark.parametrize("ref", ["hf://org", "hf://org/repo", "hf://org/repo/", "hf://org/repo/../x.gguf",
                                 "hf://-org/repo/x.gguf", "hf://org/repo/a//x.gguf", "hf://org/repo@/x.gguf"])
def test_bad_hub_refs_are_one_line(ref: str) -> None:
    with pytest.raises(ConvertError) as e:
        parse_hub_ref(ref[len("hf://"):], ref)
    assert str(e.value).startswith(f"{ref}: not a Hub file reference") and "\n" not in str(e.value)
