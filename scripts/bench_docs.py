#!/usr/bin/env python3
"""Regenerate docs/bench.md's example (the output of a real ``dspark-convert bench`` run) and its picture.

    python scripts/bench_docs.py [--families] [-n 32]

Needs llama-server b11434 (``DSPARK_LLAMA_SERVER`` or the cache folder) and the llama.cpp tree it was built from
(upstream's converter makes the target GGUF). Builds, in a temporary folder, fixtures/correlated.py's constant-token
Qwen3 target and its correlated DSpark draft at bf16 and q8_0 and in upstream's untied-head layout
(``hf2gguf --match-upstream``), runs ``dspark-convert bench`` on them with the built-in prompts and ``--plot``, and
writes the command and its output between the ``bench-example`` markers of docs/bench.md and the picture to
docs/bench-example.svg. Nothing in that block is typed by hand.

``--families`` also runs (and prints, for notes) the other correlated drafts: DFlash, DFlash2, EAGLE-3 and MiMo
DFlash on the same target, the Gemma4 DSpark pair (its own Gemma 4 target) and the NVFP4 DSpark pair (its own
target, from the b11434 qwen3 group of tests/make_golden.py).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "fixtures"), str(ROOT / "tests"), str(ROOT / "tests" / "variants")]

import correlated  # noqa: E402
from llama.target import convert_target  # noqa: E402

from dspark_convert.hf2gguf.conversion import convert  # noqa: E402
from dspark_convert.llamacpp.build import find_llama_server, source_tree  # noqa: E402

DOC = ROOT / "docs" / "bench.md"
SVG = ROOT / "docs" / "bench-example.svg"
START, END = "<!-- bench-example:start (scripts/bench_docs.py) -->", "<!-- bench-example:end -->"


def run(cwd: Path, args: list[str]) -> tuple[str, str, int]:
    """``dspark-convert ARGS`` in ``cwd`` (the console script of this environment); (command, stdout, exit code)."""
    exe = Path(sys.executable).with_name("dspark-convert")
    p = subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "120"})
    sys.stderr.write(p.stderr)
    return "dspark-convert " + shlex.join(args), p.stdout, p.returncode


def conv(src: Path, target: Path, out: Path, outtype: str = "bf16", **kw: bool) -> str:
    res = convert(src, target, out, outtype=outtype, **kw)
    assert res.path is not None
    return res.path.name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", action="store_true", help="also run every other correlated draft (printed only)")
    ap.add_argument("-n", type=int, default=32, help="tokens per prompt")
    args = ap.parse_args()
    binary = find_llama_server()
    src = source_tree(binary)
    if binary is None or src is None:
        print("llama-server b11434 or its source tree not found: set DSPARK_LLAMA_SERVER (docs/llama-server.md)")
        return 1
    with tempfile.TemporaryDirectory(prefix="bench-docs-") as tmp:
        t = Path(tmp)
        ct = correlated.correlated_target(t / "hf" / "target")
        convert_target(src, ct, t / "target.f32.gguf")
        d = correlated.correlated_draft("dspark-qwen3", t / "hf" / "dspark", ct)
        names = [conv(d, ct, t / "dspark.bf16.gguf"), conv(d, ct, t / "dspark.q8_0.gguf", "q8_0"),
                 conv(d, ct, t / "dspark.match-upstream.gguf", match_upstream=True)]
        cmd, out, rc = run(t, ["bench", "target.f32.gguf", *names, "-n", str(args.n), "--repeat", "2", "--threads", "1",
                                 "--plot", "acceptance.svg"])
        print(f"$ {cmd}\n{out}(exit {rc})")
        if rc != 0:
            return 1
        SVG.write_text((t / "acceptance.svg").read_text())
        shown = cmd.replace("acceptance.svg", "docs/bench-example.svg")
        block = f"{START}\n```\n$ {shown}\n{out.rstrip()}\n```\n{END}"
        doc = DOC.read_text()
        DOC.write_text(re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, doc, flags=re.S))
        print(f"wrote {DOC.relative_to(ROOT)} and {SVG.relative_to(ROOT)}")
        if args.families:
            families(t, ct, args)
    return 0


def families(t: Path, ct: Path, args: argparse.Namespace) -> None:
    """Every other correlated draft, printed with its command."""
    names = []
    for fam in ("dflash-zlab", "dflash2-zlab", "eagle3-specforge", "dflash-mimo"):
        d = correlated.correlated_draft(fam, t / "hf" / fam, ct)
        names.append(conv(d, ct, t / f"{fam}.bf16.gguf"))
    cmd, out, rc = run(t, ["bench", "target.f32.gguf", *names, "-n", str(args.n), "--threads", "1"])
    print(f"\n$ {cmd}\n{out}(exit {rc})")
    from gemma4_drafts import make as make_gemma4
    from test_gemma4_dspark import _tiny_gemma4_target

    src = source_tree(find_llama_server())
    assert src is not None
    gt = correlated.correlated_gemma4_target(t / "hf" / "g4-target", _tiny_gemma4_target(t / "hf" / "g4-random"))
    convert_target(src, gt, t / "gemma4-target.f32.gguf")
    d, dt = make_gemma4(t / "hf" / "g4", "v-gemma4-f32")
    g = conv(correlated.correlated_gemma4_draft(t / "hf" / "g4-corr", d, gt), dt, t / "gemma4-dspark.bf16.gguf")
    cmd, out, rc = run(t, ["bench", "gemma4-target.f32.gguf", g, "-n", str(args.n), "--threads", "1"])
    print(f"\n$ {cmd}\n{out}(exit {rc})")
    import make_golden

    make_golden.make_b11434(t / "b11434", upto="qwen3")
    nt, nd = correlated.correlated_nvfp4(t / "hf" / "nvfp4", t / "b11434" / "qwen3")
    convert_target(src, nt, t / "nvfp4-target.f32.gguf")
    n = conv(nd, nt, t / "nvfp4-dspark.bf16.gguf")
    cmd, out, rc = run(t, ["bench", "nvfp4-target.f32.gguf", n, "-n", str(args.n), "--threads", "1"])
    print(f"\n$ {cmd}\n{out}(exit {rc})")


if __name__ == "__main__":
    raise SystemExit(main())
