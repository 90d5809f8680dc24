"""The tokenizer-block cache: keyed by content and settings, in the user cache folder, atomic under concurrent
runs, ignored when damaged, bypassed by ``--no-cache``; a hit gives the same bytes and the same warnings."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_tokenizer_fast import block
from test_vocab import make_target
from typer.testing import CliRunner

from dspark_convert import convert
from dspark_convert.cli import app
from dspark_convert.errors import ConvertError
from dspark_convert.gguffile.packed import PackedStrings
from dspark_convert.notes import collecting
from dspark_convert.plan import KV
from dspark_convert.tokenizer import cache, handlers

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"


class Counter:
    """Counts the handler runs (a cache hit runs none)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        real = handlers.HANDLERS["gpt2"]

        def counted(*a: object) -> None:
            self.n += 1
            real(*a)  # type: ignore[arg-type]

        monkeypatch.setitem(handlers.HANDLERS, "gpt2", counted)


def entries(folder: Path) -> list[Path]:
    return sorted((folder / "tokenizer").glob("*.bin"))


def kvs(target: Path, n: int | None = None, handler: str = "gpt2") -> list[KV]:
    return handlers.target_vocab_kvs(target, n, handler, cache=True)


def test_hit_gives_the_same_block_and_skips_the_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      _private_tokenizer_cache: Path) -> None:
    target = make_target(tmp_path / "t", tok_config={"chat_template": "{{ x }}", "bos_token": "<|im_start|>"})
    runs = Counter(monkeypatch)
    first = kvs(target, 300)
    assert runs.n == 1 and len(entries(_private_tokenizer_cache)) == 1
    second = kvs(target, 300)
    assert runs.n == 1  # taken from the cache
    assert block(second) == block(first) == block(handlers.target_vocab_kvs(target, 300, "gpt2"))
    assert [(k.name, k.type, k.sub_type) for k in second] == [(k.name, k.type, k.sub_type) for k in first]
    tokens = next(k.value for k in second if k.name == "tokenizer.ggml.tokens")
    assert isinstance(tokens, PackedStrings) and tokens[259] == "<|endoftext|>"


def test_key_follows_content_and_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          _private_tokenizer_cache: Path) -> None:
    target = make_target(tmp_path / "t")
    runs = Counter(monkeypatch)
    kvs(target)
    os.utime(target / "tokenizer.json", (1, 1))  # a new date, the same content: still a hit
    kvs(target)
    assert runs.n == 1
    kvs(target, 300)  # another draft vocab_size
    assert runs.n == 2
    (target / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_start|>"}), encoding="utf-8")
    eos = next(k.value for k in kvs(target, 300) if k.name == "tokenizer.ggml.eos_token_id")
    assert (runs.n, eos) == (3, 260)
    (target / "chat_template.jinja").write_text("T", encoding="utf-8")
    assert next(k.value for k in kvs(target, 300) if k.name == "tokenizer.chat_template") == "T"
    copy = tmp_path / "copy"  # the same files elsewhere: warnings name the folder, so another entry
    shutil.copytree(target, copy)
    kvs(copy, 300)
    assert runs.n == 5 and len(entries(_private_tokenizer_cache)) == 5
    assert cache.block_key(target, 300, "gpt2") != cache.block_key(target, 300, "qwen")


def test_notes_are_replayed(tmp_path: Path) -> None:
    target = make_target(tmp_path / "t")  # its chkhsh is not in llama.cpp's table: a note
    with collecting() as first:
        kvs(target)
    with collecting() as second:
        kvs(target)  # from the cache
    assert [n.rule for n in first] == ["pre-tokenizer-by-regex", "no-tokenizer-config"] and second == first
    assert all(n.message.startswith(str(target)) for n in first)


@pytest.mark.parametrize("first_cwd, second", [("parent", "absolute"), ("parent", "inside"), ("inside", "parent")])
def test_replayed_notes_name_the_folder_as_this_run_gives_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              first_cwd: str, second: str) -> None:
    """Issue 24 bug 3: a hit replayed the first run's relative path (``note: t/tokenizer.json: ...`` printed from
    another working folder). The replayed note names the folder exactly as this run's target argument does."""
    target = make_target(tmp_path / "t")
    forms = {"parent": (tmp_path, Path("t")), "inside": (target, Path(".")), "absolute": (tmp_path / "elsewhere", target)}
    # both notes name a path in the folder: the pre-tokenizer one (its tokenizer.json), the missing tokenizer_config.json
    (tmp_path / "elsewhere").mkdir()
    cwd, given = forms[first_cwd]
    monkeypatch.chdir(cwd)
    with collecting() as first:
        kvs(given)
    assert first[0].message.startswith(f"{given / 'tokenizer.json'}: chkhsh ")
    cwd, given = forms[second] if second != "parent" else forms["parent"]
    monkeypatch.chdir(cwd)
    with collecting() as fresh_notes:
        handlers.target_vocab_kvs(given, None, "gpt2", cache=False)
    with collecting() as replayed:
        kvs(given)  # from the cache
    assert len(entries(cache.cache_dir())) == 1
    assert replayed == fresh_notes and replayed[0].message.startswith(f"{given / 'tokenizer.json'}: chkhsh ")
    assert replayed[1].message.startswith(f"{given / 'tokenizer_config.json'}: no such file")


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty", "other-format"])
def test_damaged_entries_are_ignored_and_rewritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   _private_tokenizer_cache: Path, damage: str) -> None:
    target = make_target(tmp_path / "t")
    want = block(kvs(target))
    (path,) = entries(_private_tokenizer_cache)
    data = path.read_bytes()
    bad = {"truncate": data[: len(data) // 2], "flip": data[:-5] + bytes([data[-5] ^ 1]) + data[-4:],
           "garbage": os.urandom(len(data)), "empty": b"", "other-format": b"DSPKTOK\x09" + data[8:]}[damage]
    path.write_bytes(bad)
    runs = Counter(monkeypatch)
    assert block(kvs(target)) == want and runs.n == 1  # recomputed
    assert path.read_bytes() == data  # and rewritten whole
    assert block(kvs(target)) == want and runs.n == 1


def test_cache_folder_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSPARK_CONVERT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "dspark-convert"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/is/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    if sys.platform.startswith("linux"):
        assert cache.cache_dir() == tmp_path / "home" / ".cache" / "dspark-convert"
    monkeypatch.setenv("DSPARK_CONVERT_CACHE_DIR", str(tmp_path / "own"))
    assert cache.cache_dir() == tmp_path / "own"


def test_unwritable_cache_costs_only_the_computation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv("DSPARK_CONVERT_CACHE_DIR", str(blocker))  # cache folder cannot be made
    target = make_target(tmp_path / "t")
    assert block(kvs(target)) == block(handlers.target_vocab_kvs(target, None, "gpt2"))
    assert blocker.read_text(encoding="utf-8") == "not a folder"


def test_errors_are_not_cached(tmp_path: Path, _private_tokenizer_cache: Path) -> None:
    target = make_target(tmp_path / "t")
    for _ in range(2):
        with pytest.raises(ConvertError, match="does not fit the draft vocab_size 100"):
            kvs(target, 100)
    assert entries(_private_tokenizer_cache) == []


def test_a_failed_write_leaves_no_entry_and_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               _private_tokenizer_cache: Path) -> None:
    def no_rename(*a: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(cache.os, "replace", no_rename)
    target = make_target(tmp_path / "t")
    kvs(target)
    assert list((_private_tokenizer_cache / "tokenizer").iterdir()) == []


def _worker(args: tuple[str, str, int]) -> bytes:
    target, folder, rounds = args
    os.environ["DSPARK_CONVERT_CACHE_DIR"] = folder
    out = b""
    for _ in range(rounds):
        out = block(handlers.target_vocab_kvs(Path(target), 300, "gpt2", cache=True))
        for p in (Path(folder) / "tokenizer").glob("*.bin"):  # every entry a reader can see is whole
            assert cache.decode_entry(p.read_bytes()) is not None
    return out


def test_concurrent_runs(tmp_path: Path, _private_tokenizer_cache: Path) -> None:
    target = make_target(tmp_path / "t")
    want = block(handlers.target_vocab_kvs(target, 300, "gpt2"))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        got = pool.map(_worker, [(str(target), str(_private_tokenizer_cache), 6)] * 8)
    assert got == [want] * 8
    names = [p.name for p in (_private_tokenizer_cache / "tokenizer").iterdir()]
    assert len(names) == 1 and names[0].endswith(".bin")  # one entry, no temporary file left behind


def test_prune_keeps_the_newest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                _private_tokenizer_cache: Path) -> None:
    monkeypatch.setattr(cache, "MAX_ENTRIES", 2)
    target = make_target(tmp_path / "t")
    for n in (300, 301, 302):
        kvs(target, n)
    assert len(entries(_private_tokenizer_cache)) == 2
    assert cache.block_key(target, 300, "gpt2") not in {p.stem for p in entries(_private_tokenizer_cache)}


def test_conversions_hit_and_no_cache_bypasses(tmp_path: Path, _private_tokenizer_cache: Path) -> None:
    a = convert(FIX / "dspark-qwen3", FIX / "target-qwen3", tmp_path / "a.gguf", outtype="bf16")
    assert len(entries(_private_tokenizer_cache)) == 1
    b = convert(FIX / "dspark-qwen3", FIX / "target-qwen3", tmp_path / "b.gguf", outtype="bf16")
    assert (tmp_path / "a.gguf").read_bytes() == (tmp_path / "b.gguf").read_bytes() and a.bytes_written == b.bytes_written
    shutil.rmtree(_private_tokenizer_cache / "tokenizer")
    r = CliRunner().invoke(app, ["hf2gguf", str(FIX / "dspark-qwen3"), "-t", str(FIX / "target-qwen3"), "-o",
                                 str(tmp_path / "c.gguf"), "--outtype", "bf16", "--no-cache"])
    assert r.exit_code == 0, r.output
    assert not (_private_tokenizer_cache / "tokenizer").exists()  # neither read nor written
    assert (tmp_path / "c.gguf").read_bytes() == (tmp_path / "a.gguf").read_bytes()
    convert(FIX / "eagle3-angelslim", FIX / "target-qwen3", tmp_path / "e.gguf", outtype="bf16", cache=False)
    assert not (_private_tokenizer_cache / "tokenizer").exists()


def test_default_folder_is_used_by_the_cli(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DSPARK_CONVERT_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    out = tmp_path / "d.gguf"
    p = subprocess.run([sys.executable, "-m", "dspark_convert.cli", "hf2gguf", str(FIX / "dflash-zlab"), "-t",
                        str(FIX / "target-qwen3"), "-o", str(out), "--outtype", "bf16", "--json"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert len(list((tmp_path / "xdg" / "dspark-convert" / "tokenizer").glob("*.bin"))) == 1


def test_key_follows_tokenizer_json_config_json_and_versions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             _private_tokenizer_cache: Path) -> None:
    target = make_target(tmp_path / "t")
    runs = Counter(monkeypatch)
    tokens = lambda: next(k.value for k in kvs(target, 300) if k.name == "tokenizer.ggml.tokens")  # noqa: E731
    assert tokens()[261] == "<think>" and runs.n == 1
    data = json.loads((target / "tokenizer.json").read_text(encoding="utf-8"))
    (think,) = [t for t in data["added_tokens"] if t["content"] == "<think>"]
    think["content"] = "<reason>"  # a new tokenizer.json: a new block, not the cached one
    (target / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    assert tokens()[261] == "<reason>" and runs.n == 2
    (target / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"], "bos_token_id": 259}),
                                        encoding="utf-8")
    tokens()
    assert runs.n == 3
    key = cache.block_key(target, 300, "gpt2")
    import dspark_convert

    try:
        monkeypatch.setattr(dspark_convert, "__version__", "0.0.0-other")
        cache._code_fingerprint.cache_clear()
        other_package = cache.block_key(target, 300, "gpt2")
        monkeypatch.undo()
        monkeypatch.setattr("importlib.metadata.version", lambda name: "9.9.9")  # other tokenizers/sentencepiece
        cache._code_fingerprint.cache_clear()
        other_library = cache.block_key(target, 300, "gpt2")
    finally:
        monkeypatch.undo()
        cache._code_fingerprint.cache_clear()
    assert len({key, other_package, other_library}) == 3 and cache.block_key(target, 300, "gpt2") == key


def test_a_hit_is_what_is_used_and_no_cache_reads_nothing(tmp_path: Path, _private_tokenizer_cache: Path) -> None:
    """A planted (sound but different) entry shows that a conversion takes its block from the cache, and that
    ``--no-cache`` does not read it."""
    target = make_target(tmp_path / "t", tok_config={"eos_token": "<|endoftext|>"}, config={"num_hidden_layers": 36})
    real = handlers.target_vocab_kvs(target, 300, "gpt2")
    planted = [KV(k.name, k.type, PackedStrings.pack(["PLANTED", *list(k.value)[1:]]), k.sub_type)
               if k.name == "tokenizer.ggml.tokens" else k for k in real]
    path = _private_tokenizer_cache / "tokenizer" / f"{cache.block_key(target, 300, 'gpt2')}.bin"
    path.parent.mkdir(parents=True)
    path.write_bytes(cache.encode_entry(planted, []))

    def first_token(use_cache: bool) -> str:
        tokens = next(k.value for k in handlers.target_vocab_kvs(target, 300, "gpt2", cache=use_cache)
                      if k.name == "tokenizer.ggml.tokens")
        return str(tokens[0])

    assert first_token(True) == "PLANTED"
    assert first_token(False) == str(real[[k.name for k in real].index("tokenizer.ggml.tokens")].value[0]) != "PLANTED"
    assert cache.decode_entry(path.read_bytes()) is not None and list(path.parent.iterdir()) == [path]
