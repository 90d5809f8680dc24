"""Per family, what llama-server b11434 reports with our converted file: drafted and accepted tokens, acceptance,
and the three-way agreement; plus the full-vocab DSpark head layouts on an untied target.

    python benchmarks/bench_llama_acceptance.py [--outtype bf16] [--n-predict 32]

Needs llama-server (``DSPARK_LLAMA_SERVER`` or the cache folder, docs/llama-server.md) and the llama.cpp tree it
was built from (for upstream's converter, which makes the target GGUF). Two sets of models:

- ``random``: the committed fixtures (tiny random models): acceptance is ~0 whatever the file; the figures show
  that drafting happens and the three-way column whether llama.cpp drafts what the reference drafts;
- ``correlated``: fixtures/correlated.py's constant-token target and, per family, a draft built to predict it:
  the acceptance llama.cpp reports with our file, and the regression's effect (the same DSpark draft in upstream
  b11434's layout, which scores with token_embd, vs ours and 749f688's, which score with the target's head).

The baseline is plain greedy decoding of the same prompt by the same target in the same run (speculative output
must equal it: "lossless").
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dspark_convert.hf2gguf.conversion import convert  # noqa: E402
from dspark_convert.llamacpp.build import find_llama_server, source_tree  # noqa: E402
from dspark_convert.llamacpp.layouts import make_layout  # noqa: E402
from dspark_convert.llamacpp.server import LlamaServer, parse_drafts, spec_for  # noqa: E402
from dspark_convert.llamacpp.target import convert_target  # noqa: E402
from dspark_convert.llamacpp.threeway import three_way  # noqa: E402
from dspark_convert.reference.target_np import TargetModel  # noqa: E402

FIX = ROOT / "fixtures"
TARGET = FIX / "target-qwen3"
sys.path.insert(0, str(ROOT / "fixtures"))
import correlated  # noqa: E402

FAMILIES = {"DSpark": "dspark-qwen3", "DFlash": "dflash-zlab", "EAGLE-3": "eagle3-specforge",
            "DFlash2": "dflash2-zlab", "MiMo DFlash": "dflash-mimo"}
PROMPT = [400, 401, 72, 300, 22, 500, 12, 33]


def run_one(binary: Path, target: Path, draft: Path | None, n_predict: int) -> tuple[list[int], int, int, list]:
    if draft is None:
        with LlamaServer(binary, target) as s:
            c = s.complete(PROMPT, n_predict)
        return c.tokens, 0, 0, []
    st, n_max = spec_for(draft)
    srv = LlamaServer(binary, target, draft=draft, spec_type=st, n_max=n_max, verbose=True)
    try:
        with srv:
            c = srv.complete(PROMPT, n_predict)
            blocks = parse_drafts(srv.log_text())
    finally:
        srv.close()
    return c.tokens, c.draft_n, c.draft_n_accepted, blocks


def table(binary: Path, target_dir: Path, target: Path, rows: list[tuple[str, Path]], n_predict: int) -> None:
    plain, _, _, _ = run_one(binary, target, None, n_predict)
    print(f"{'case':44} {'drafted':>7} {'accepted':>8} {'accept':>7} {'lossless':>8}  three-way")
    for name, f in rows:
        toks, dn, da, blocks = run_one(binary, target, f, n_predict)
        tw = three_way(f, target_dir, PROMPT, toks, blocks)
        same, ties, total = tw.counts
        acc = f"{da / dn:.3f}" if dn else "-"
        bad = next((b for b in tw.blocks if b.first_mismatch is not None), None)
        verdict = "agree" if tw.agree else f"DIFFER (block {bad.index if bad else '?'})"
        print(f"{name:44} {dn:7d} {da:8d} {acc:>7} {str(toks == plain):>8}  {verdict}: {same}/{total} compared "
              f"positions agree, {ties} near-ties")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--outtype", default="bf16", choices=["f32", "bf16", "f16", "q8_0"])
    ap.add_argument("--n-predict", type=int, default=32)
    args = ap.parse_args()
    binary = find_llama_server()
    src = source_tree(binary)
    if binary is None or src is None:
        print("llama-server b11434 or its source tree not found: set DSPARK_LLAMA_SERVER (docs/llama-server.md)")
        return 1
    with tempfile.TemporaryDirectory(prefix="bench-llama-") as tmp:
        t = Path(tmp)
        print(f"llama-server {binary}; prompt {len(PROMPT)} ids; {args.n_predict} greedy tokens; drafts "
              f"{args.outtype}; targets F32 (upstream's converter), untied")
        # ------------------------------------------------------------------ random fixtures
        target = convert_target(src, TARGET, t / "target.f32.gguf")
        rows: list[tuple[str, Path]] = []
        for fam, fx in FAMILIES.items():
            folder = correlated.mimo_draft(t / "dflash-mimo") if fx == "dflash-mimo" else FIX / fx
            res = convert(folder, TARGET, t / f"{fx}.gguf", outtype=args.outtype)
            assert res.path is not None
            rows.append((f"{fam} ({fx}, our default)", res.path))
        m = TargetModel(TARGET)
        for lay in ("749f688", "upstream-b11434", "with-output"):
            rows.append((f"DSpark layout {lay}", make_layout(rows[0][1], t / f"dspark.{lay}.gguf", lay, m.embed,
                                                               m.lm_head)))
        print("\nrandom fixtures (target-qwen3)")
        table(binary, TARGET, target, rows, args.n_predict)
        # ------------------------------------------------------------------ correlated
        ct = correlated.correlated_target(t / "corr" / "target")
        ctarget = convert_target(src, ct, t / "corr-target.f32.gguf")
        crows: list[tuple[str, Path]] = []
        for fam, fx in FAMILIES.items():
            d = correlated.correlated_draft(fx, t / "corr" / fx, ct)
            res = convert(d, ct, t / f"corr-{fx}.gguf", outtype=args.outtype)
            assert res.path is not None
            crows.append((f"{fam} ({fx}, our default)", res.path))
        d = correlated.correlated_draft("dflash2-zlab", t / "corr" / "dflash2-partial", ct, strength=0.85)
        res = convert(d, ct, t / "corr-dflash2-partial.gguf", outtype=args.outtype)
        assert res.path is not None
        crows.append(("DFlash2 (strength 0.85: partial)", res.path))
        cm = TargetModel(ct)
        for lay in ("749f688", "upstream-b11434", "with-output"):
            crows.append((f"DSpark layout {lay}", make_layout(crows[0][1], t / f"corr-dspark.{lay}.gguf", lay,
                                                                cm.embed, cm.lm_head)))
        print(f"\ncorrelated (fixtures/correlated.py: the target always predicts token {correlated.TOKEN})")
        table(binary, ct, ctarget, crows, args.n_predict)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
