#!/usr/bin/env python3
"""Every outtype of every release-size draft family against a durable copy of its own output, on 1 and 2 cores.

Families (synthetic values at the published dimensions, written by the family benchmarks' own input makers):

- ``dspark-4b``: the DSpark 4B draft with the real Qwen3 tokenizer (bench_inputs.py);
- ``dflash2``: DFlash2 ``z-lab/Qwen3.8-27B-DFlash2`` (bench_new_drafts.make_dflash2; a Qwen3 target folder of
  its dimensions with the Qwen3 tokenizer);
- ``mimo``: MiMo-style DFlash, hidden 4096, the target's embedding and head patched in (bench_new_drafts.make_mimo;
  the target tensors count as read in the copy too);
- ``nvfp4``: the Nemotron-3.5 NVFP4 W4A16 DSpark draft, 6 layers (bench_nvfp4.make_draft, converted with
  ``match_upstream``): its NVFP4 linears are repacked whatever the outtype, which sets the other tensors' type;
- ``gemma4``: Gemma4 DSpark ``dspark_gemma4_12b_block7`` with the Gemma 3 tokenizer (bench_gemma4_dspark.make).

For each family, outtype and core count, bench_threads.bench runs the durable copy (read the bytes the conversion
reads, write the output's size, fsync, rename, fsync the folder), the conversion with one thread and the default
conversion (one thread per usable core) interleaved (with ``--numpy-forms`` also the default conversion with
``DSPARK_CONVERT_KERNELS=0``: the numpy forms of the compiled kernels), ``--runs`` times, each in a fresh process pinned to the first
N cores, warm page cache, cached tokenizer block. Printed per row: median wall and spread, ``x copy`` (the median of
each run's ratio to the copy next to it), CPU seconds, peak RSS (the child's VmHWM), output size, cores, and the
load average before and after each family. A family's inputs are deleted before the next one is written.

usage: python benchmarks/bench_outtypes.py [--families dspark-4b,dflash2,mimo,nvfp4,gemma4]
                                           [--outtypes bf16,f16,q8_0,f32] [--cores 1,2] [--runs 3]
                                           [--numpy-forms] [--workdir DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_convert as bc  # noqa: E402  (this folder first on the path)
import bench_threads as bt  # noqa: E402

FAMILIES = ("dspark-4b", "dflash2", "mimo", "nvfp4", "gemma4")


def _target_like(base: Path, folder: Path, **cfg: object) -> Path:
    """A target folder: ``base``'s tokenizer files and ``base``'s config with ``cfg`` set (no weights)."""
    folder.mkdir(parents=True, exist_ok=True)
    for f in base.iterdir():
        if f.name.startswith("tokenizer"):
            shutil.copy(f, folder / f.name)
    config = json.loads((base / "config.json").read_text())
    config.update(cfg)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def make_family(name: str, root: Path) -> tuple[Path, Path, dict, str]:
    """(draft, target, extra conversion options, description) of one family's release-size inputs under ``root``."""
    import bench_inputs

    if name == "dspark-4b":
        draft, target, size = bench_inputs.make_inputs(root, ["dspark-4b"], tokenizer="qwen3")["dspark-4b"]
        return draft, target, {}, f"DSpark 4B draft, Qwen3 tokenizer, {size / 2**30:.2f} GiB"
    tokenizer = "deepseek" if name == "nvfp4" else "qwen3"  # NVFP4: vocabulary 129,280, DeepSeek-V4's tokenizer
    qwen_target = root / "base-target"  # a target folder with the real tokenizer, for its tokenizer files
    bench_inputs.write_target(qwen_target, bench_inputs.with_tokenizer(bench_inputs.MODELS["dspark-4b"], tokenizer),
                              tokenizer)
    if name == "dflash2":
        import bench_new_drafts as nd

        label = nd.make_dflash2(root / "dflash2", 1)
        cfg = json.loads((root / "dflash2" / "config.json").read_text())
        target = _target_like(qwen_target, root / "dflash2-target", hidden_size=cfg["hidden_size"],
                              num_hidden_layers=64, vocab_size=cfg["vocab_size"],
                              num_attention_heads=cfg["num_attention_heads"],
                              num_key_value_heads=cfg["num_key_value_heads"], head_dim=cfg.get("head_dim", 128))
        return root / "dflash2", target, {}, label
    if name == "mimo":
        import bench_new_drafts as nd

        label = nd.make_mimo(root / "mimo", qwen_target, 1)
        return root / "mimo", root / "mimo-target", {}, label
    if name == "nvfp4":
        import bench_nvfp4 as nv

        n = nv.make_draft(root / "nvfp4", 6)
        target = nv.target_for(qwen_target, root)
        return root / "nvfp4", target, {"match_upstream": True}, f"NVFP4 W4A16 DSpark, 6 layers, {n / 2**30:.2f} GiB"
    if name == "gemma4":
        import bench_gemma4_dspark as g4

        label = g4.make(root / "gemma4", root / "gemma4-target", g4.tokenizer_dir(None), 1)
        return root / "gemma4", root / "gemma4-target", {}, label
    raise SystemExit(f"unknown family {name!r}: expected one of {', '.join(FAMILIES)}")


def bench_family(name: str, outtypes: list[str], cores: list[int], runs: int, root: Path, work: Path,
                 numpy_forms: bool = False) -> list[dict]:
    fam = root / name
    fam.mkdir(parents=True, exist_ok=True)
    draft, target, extra, label = make_family(name, fam)
    print(f"## {name}: {label}; load average {os.getloadavg()[0]:.2f}", flush=True)
    cache = work / "cache"
    rows: list[dict] = []
    orig_run = bt.run

    def run(spec: dict, cache_dir: Path, inputs: list[Path]) -> dict:  # the family's conversion options
        return orig_run({**spec, **extra} if spec["op"] == "convert" else spec, cache_dir, inputs)

    bt.run = run
    try:
        for outtype in outtypes:
            for c in cores:
                new = bt.bench(draft, target, outtype, c, runs, work, cache, numpy_forms=numpy_forms)
                for r in new:
                    r["family"] = name
                rows += new
                print(*table(new).splitlines()[2:], sep="\n", flush=True)
                for f in work.glob("*.gguf"):
                    f.unlink()
                (work / "copy.bin").unlink(missing_ok=True)
    finally:
        bt.run = orig_run
        shutil.rmtree(fam)
    print(f"## {name}: load average at end {os.getloadavg()[0]:.2f}", flush=True)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| family | outtype | cores | run | wall s | spread s | x copy | CPU s (user) | peak RSS MiB | output MB |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        x = f"{r['x_copy']:.2f}" if r["x_copy"] is not None else ""
        lines.append(f"| {r.get('family', '')} | {r['outtype']} | {r['cores']} | {r['mode']} | {r['wall']:.2f} | "
                     f"{r['spread'][0]:.2f}-{r['spread'][1]:.2f} | {x} | {r['cpu']:.2f} ({r['user']:.2f}) | "
                     f"{r['rss_mib']:.0f} | "
                     f"{r['mb_out']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--outtypes", default="bf16,f16,q8_0,f32")
    ap.add_argument("--cores", default="1,2", help="core counts to pin the conversions to")
    ap.add_argument("--runs", type=int, default=3, help="runs per operation (medians reported)")
    ap.add_argument("--workdir", type=Path, help="folder for the inputs (each family's deleted after its rows)")
    ap.add_argument("--json", type=Path, help="also write the rows and the machine description to this file")
    ap.add_argument("--numpy-forms", action="store_true", help="also time the numpy forms (DSPARK_CONVERT_KERNELS=0)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        print(json.dumps(bt._worker(json.loads(a.worker))))
        return 0
    usable = len(os.sched_getaffinity(0))
    cores = [c for c in (int(x) for x in a.cores.split(",") if x) if c <= usable]
    outtypes = [o for o in a.outtypes.split(",") if o]
    print(f"# {bc.machine()}; load average at start {os.getloadavg()[0]:.2f}", flush=True)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-outtypes-", dir=a.workdir) as tmp:
        root = Path(tmp)
        work = root / "work"
        work.mkdir()
        for name in (f for f in a.families.split(",") if f):
            rows += bench_family(name, outtypes, cores, a.runs, root, work, a.numpy_forms)
    print(f"# load average at end {os.getloadavg()[0]:.2f}")
    print(table(rows))
    if a.json:
        a.json.write_text(json.dumps({"machine": bc.machine(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
