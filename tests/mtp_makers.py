"""Tiny target checkpoints with MTP (NextN) layers, and upstream llama.cpp b11434's conversions of them.

Each maker writes a Hugging Face folder (``config.json``, ``model.safetensors``, the fixture Qwen3 tokenizer)
of one MTP family, deterministically from a seed: the trunk is a transformers model built from a tiny config
(random init, stored bf16), the MTP tensors are added in the checkpoint's own layout (``mtp.*`` for the Qwen
families and Nemotron-H, ``model.layers.{n}.*`` for GLM-4.5, GLM-4.7-Flash and GLM-5). DeepSeek-V4's are written with
fixtures/dsv4.py's blocks as the released checkpoint stores them (FP8 + tile scales, FP4 experts, sharded), the MTP
layer ``mtp.0.*`` in its own shard(s). :func:`upstream_convert` runs upstream's
``convert_hf_to_gguf.py`` (full, ``--mtp``, ``--no-mtp``) on it; the tokenizer's pre-tokenizer hash is in no upstream
table, so, as tests/llama/target.py does, ``get_vocab_base_pre`` falls back to ``qwen2``; and a ``model_type`` transformers 5 has a config class for but b11434's
pinned transformers 4.57.6 has not (``mimo_v2_flash``) is read from config.json raw, as upstream does there.

``python tests/mtp_makers.py OUT`` writes every checkpoint and its upstream conversions under ``OUT`` and the
oracle manifests ``tests/data/mtp/<family>-<outtype>-<mode>.json`` (``--manifests``); ``--only FAMILY``,
``--outtype T`` and ``--mode full|mtp|nomtp`` (each repeatable) narrow it. The GLM-4.5 sidecar manifests of
tests/variants/test_mtp_glm.py are made with ``python tests/mtp_makers.py OUT --only glm4moe --only glm4moe-wide --only glm4vmoe
--outtype bf16 --outtype f16 --outtype f32 --outtype q8_0 --mode mtp --manifests``; the GLM-5 ones of
tests/variants/test_mtp_glm5.py with ``--only glm-dsa --only glm-dsa-wide --only glm-dsa-yarn`` and the same outtypes and
mode; the GLM-4.7-Flash ones of tests/variants/test_mtp_glm_lite.py with ``--only glm4-lite --only glm4-lite-wide --only
glm4-lite-yarn`` and the same outtypes and mode; the Nemotron-H ones of tests/variants/test_mtp_nemotron.py with ``--only nemotron_h_moe --only
nemotron_h_moe-wide`` and the same outtypes and mode; the DeepSeek-V4 ones of tests/variants/test_mtp_deepseek4.py with
``--only deepseek4 --only deepseek4-wide``, the MiMo-V2 ones of tests/variants/test_mtp_mimo2.py with ``--only mimo2 --only
mimo2-fused --only mimo2-pro``, both with the same outtypes and mode.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER = ROOT / "fixtures" / "target-qwen3"
MANIFESTS = ROOT / "tests" / "data" / "mtp"
TREE = Path(os.environ.get("DSPARK_LLAMA_TREE", Path.home() / ".cache/dspark-convert/llama-server-b11434/src/llama.cpp"))
VOCAB = 1024
H = 64

#: upstream's converter with one change: an unknown pre-tokenizer hash falls back to ``qwen2`` (the fixture
#: tokenizer's regex); argv: TREE, then the converter's own arguments
_BOOT = r"""
import runpy, sys
src = sys.argv[1]
del sys.argv[1:2]
sys.path[:0] = [src + "/gguf-py", src]
import conversion.base as base
_orig = base.TextModel.get_vocab_base_pre
def _pre(self, tokenizer):
    try:
        return _orig(self, tokenizer)
    except NotImplementedError:
        return "qwen2"
base.TextModel.get_vocab_base_pre = _pre
# b11434 pins transformers 4.57.6, which has no config class for these model types: upstream reads config.json raw
_RAW = {"mimo_v2_flash"}
_auto = base.AutoConfig.from_pretrained
def _from_pretrained(path, *a, **k):
    import json, pathlib
    cfg = pathlib.Path(path) / "config.json"
    if cfg.is_file() and json.loads(cfg.read_text()).get("model_type") in _RAW:
        raise ValueError("no config class in transformers 4.57.6")
    return _auto(path, *a, **k)
base.AutoConfig.from_pretrained = _from_pretrained
# DeepSeek-V3.2's set_vocab asserts AutoTokenizer(...).add_bos_token, which transformers 5 reports false for every
# byte-level tokenizer.json; dspark-convert converts such a target when tokenizer_config.json says add_bos_token true
# (the assertion's intent, with an upstream-stops note): the oracle takes the same vocab path after the check
import conversion.deepseek as _ds
_ds.DeepseekV32Model.set_vocab = lambda self: self._set_vocab_gpt2()
sys.argv[0] = src + "/convert_hf_to_gguf.py"
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _tokenizer_files(out: Path, renames: dict[str, str] | None = None) -> None:
    """The fixture Qwen3 tokenizer; ``renames`` gives added tokens other contents (GLM's converter looks its
    special tokens up by name)."""
    for name in ("tokenizer.json", "tokenizer_config.json"):
        text = (TOKENIZER / name).read_text(encoding="utf-8")
        for old, new in (renames or {}).items():
            text = text.replace(json.dumps(old), json.dumps(new))
        (out / name).write_text(text, encoding="utf-8")


#: GLM's special tokens, on added tokens the fixture tokenizer does not use otherwise
GLM_TOKENS = {"<tool_response>": "[gMASK]", "</tool_response>": "<|user|>", "<|file_sep|>": "<|observation|>"}


def _save(out: Path, config: dict[str, Any], tensors: dict[str, Any], renames: dict[str, str] | None = None,
          dtype: str = "bfloat16") -> Path:
    """``config.json``, every tensor as ``dtype`` (a torch dtype name: ``bfloat16``, ``float16``, ``float32``) in
    ``model.safetensors`` (``config["torch_dtype"]`` set to it), the fixture tokenizer."""
    import torch
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    config = {**config, "torch_dtype": dtype}
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    save_file({k: v.to(getattr(torch, dtype)).contiguous() for k, v in sorted(tensors.items())},
              str(out / "model.safetensors"), metadata={"format": "pt"})
    _tokenizer_files(out, renames)
    return out


def _trunk(config_cls: Any, model_cls: Any, cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    import torch

    torch.manual_seed(seed)
    conf = config_cls(**cfg)
    model = model_cls(conf)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.05)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _noise(t: Any, seed: int) -> Any:
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randn(t.shape, generator=g) * 0.05


def _per_expert(state: dict[str, Any]) -> dict[str, Any]:
    """transformers' fused expert stacks (``….experts.gate_up_proj`` [E, 2I, H], ``….experts.up_proj`` /
    ``down_proj`` [E, out, in]) as the released checkpoints store them: one ``….experts.{e}.X.weight`` per expert."""
    out: dict[str, Any] = {}
    for k, v in state.items():
        head, _, last = k.rpartition(".")
        if head.endswith(".experts") and last in ("gate_up_proj", "up_proj", "down_proj") and v.dim() == 3:
            for e in range(v.shape[0]):
                if last == "gate_up_proj":
                    g, u = v[e].chunk(2, dim=0)
                    out[f"{head}.{e}.gate_proj.weight"], out[f"{head}.{e}.up_proj.weight"] = g.clone(), u.clone()
                else:
                    out[f"{head}.{e}.{last}.weight"] = v[e].clone()
        else:
            out[k] = v
    return out


@dataclass(frozen=True)
class QwenDims:
    """The dimensions of a tiny Qwen3.5 / Qwen3-Next checkpoint; the defaults are the committed manifests'.
    ``full_interval``: every ``full_interval``-th trunk layer is full attention, the others linear (the last trunk
    layer must be a full one: the MTP layers are shaped like it). ``lin``: (linear key heads, linear value heads,
    linear key head dim, linear value head dim). ``rope``: extra ``rope_parameters`` (e.g. YaRN's)."""

    hidden: int = H
    layers: int = 4
    full_interval: int = 4
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    ff: int = 128
    lin: tuple[int, int, int, int] = (2, 4, 16, 16)
    mtp_layers: int = 1
    tie: bool = False
    rotary: float = 0.25
    rope: tuple[tuple[str, Any], ...] = ()
    dtype: str = "bfloat16"

    def layer_types(self) -> list[str]:
        types = ["full_attention" if (i + 1) % self.full_interval == 0 else "linear_attention"
                 for i in range(self.layers)]
        if types[-1] != "full_attention":
            raise ValueError(f"{self}: the last trunk layer must be full attention")
        return types


def _qwen_common(d: QwenDims) -> dict[str, Any]:
    lk, lv, lkd, lvd = d.lin
    return {"vocab_size": VOCAB, "hidden_size": d.hidden, "intermediate_size": d.ff, "num_hidden_layers": d.layers,
            "num_attention_heads": d.heads, "num_key_value_heads": d.kv_heads, "head_dim": d.head_dim,
            "linear_conv_kernel_dim": 4, "linear_key_head_dim": lkd, "linear_value_head_dim": lvd,
            "linear_num_key_heads": lk, "linear_num_value_heads": lv, "layer_types": d.layer_types(),
            "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "tie_word_embeddings": d.tie,
            "bos_token_id": 990, "eos_token_id": 992,
            "rope_parameters": {"rope_theta": 10000000.0, "partial_rotary_factor": d.rotary, "rope_type": "default",
                                **dict(d.rope)}}


def _untie(state: dict[str, Any], d: QwenDims) -> dict[str, Any]:
    """A tied checkpoint stores no ``lm_head.weight`` (transformers' state dict has it as the embedding's alias)."""
    return {k: v for k, v in state.items() if not (d.tie and k == "lm_head.weight")}


def _split_mtp_experts(mtp: dict[str, Any]) -> dict[str, Any]:
    """``mtp`` with its fused expert stacks (``mtp.layers.{i}.mlp.experts.gate_up_proj`` [E, 2I, H] / ``down_proj``)
    stored one expert at a time (``….experts.{e}.{gate,up,down}_proj.weight``, the released layout)."""
    out: dict[str, Any] = {}
    for k, v in mtp.items():
        layer = k.split(".")[2]
        if ".mlp.experts." in k and k.endswith("gate_up_proj"):
            for e in range(v.shape[0]):
                g, u = v[e].chunk(2, dim=0)
                out[f"mtp.layers.{layer}.mlp.experts.{e}.gate_proj.weight"] = g.clone()
                out[f"mtp.layers.{layer}.mlp.experts.{e}.up_proj.weight"] = u.clone()
        elif ".mlp.experts." in k and k.endswith("down_proj"):
            for e in range(v.shape[0]):
                out[f"mtp.layers.{layer}.mlp.experts.{e}.down_proj.weight"] = v[e].clone()
        else:
            out[k] = v
    return out


def _qwen_mtp(state: dict[str, Any], n: int, full_layer: int, seed: int, prefix: str = "model.layers",
              mtp_prefix: str = "mtp", hidden: int = H, layers: int = 1) -> dict[str, Any]:
    """``mtp.*`` in the Qwen layout: fc, the two pre-fc norms, norm, and ``layers`` decoder layers shaped like trunk
    layer ``full_layer`` (a full-attention layer)."""
    out: dict[str, Any] = {}
    src = f"{prefix}.{full_layer}."
    for i in range(layers):
        for k, v in state.items():
            if k.startswith(src):
                out[f"{mtp_prefix}.layers.{i}.{k[len(src):]}"] = _noise(v, seed + len(out))
    import torch

    out[f"{mtp_prefix}.fc.weight"] = _noise(torch.empty(hidden, 2 * hidden), seed + 101)
    for i, name in enumerate(("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm")):
        out[f"{mtp_prefix}.{name}.weight"] = _noise(torch.empty(hidden), seed + 200 + i)
    return out


#: M-RoPE sections that fit the tiny rotary width (head_dim 16 x 0.25 = 4 dims, 2 pairs); upstream's default
#: [11, 11, 10] is for 64 and makes llama.cpp abort (GGML_ASSERT(sect_dims <= ne0))
MROPE = {"mrope_section": [1, 1, 0], "mrope_interleaved": True}


def make_qwen35_dense(out: Path, seed: int = 0, dims: QwenDims = QwenDims(),
                      mrope: dict[str, Any] | None = None) -> Path:
    """``Qwen3_5ForCausalLM``: by default 4 trunk layers (3 linear-attention, 1 full) + 1 MTP layer (``dims``: other
    shapes; ``mrope``: the M-RoPE keys, default :data:`MROPE`)."""
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    cfg = _qwen_common(dims)
    cfg["rope_parameters"] = {**cfg["rope_parameters"], **(MROPE if mrope is None else mrope)}
    state = _trunk(Qwen3_5TextConfig, Qwen3_5ForCausalLM, cfg, seed)
    state.update(_qwen_mtp(state, dims.layers, dims.layers - 1, seed, hidden=dims.hidden, layers=dims.mtp_layers))
    config = {**cfg, "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text",
              "mtp_num_hidden_layers": dims.mtp_layers}
    return _save(out, config, _untie(state, dims), dtype=dims.dtype)


def make_qwen35_moe(out: Path, seed: int = 1, dims: QwenDims = QwenDims(), *, experts: int = 4, topk: int = 2,
                    moe_ff: int = 32, shared_ff: int = 32, mrope: dict[str, Any] | None = None,
                    per_expert_mtp: bool = True) -> Path:
    """``Qwen3_5MoeForCausalLM``: by default 4 trunk layers with fused experts (transformers' layout), an MTP layer
    whose 4 experts are stored one by one (the released 397B layout; ``per_expert_mtp=False``: fused as the trunk's)."""
    from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig

    cfg = {**_qwen_common(dims), "num_experts": experts, "num_experts_per_tok": topk, "moe_intermediate_size": moe_ff,
           "shared_expert_intermediate_size": shared_ff}
    cfg["rope_parameters"] = {**cfg["rope_parameters"], **(MROPE if mrope is None else mrope)}
    state = _trunk(Qwen3_5MoeTextConfig, Qwen3_5MoeForCausalLM, cfg, seed)
    mtp = _qwen_mtp(state, dims.layers, dims.layers - 1, seed, hidden=dims.hidden, layers=dims.mtp_layers)
    state.update(_split_mtp_experts(mtp) if per_expert_mtp else mtp)
    config = {**cfg, "architectures": ["Qwen3_5MoeForCausalLM"], "model_type": "qwen3_5_moe_text",
              "mtp_num_hidden_layers": dims.mtp_layers}
    return _save(out, config, _untie(state, dims), dtype=dims.dtype)


#: M-RoPE sections for a rotary width of 16 (head_dim 64 x 0.25)
MROPE16 = {"mrope_section": [3, 3, 2], "mrope_interleaved": True}


def make_qwen35_f16(out: Path, seed: int = 103) -> Path:
    """A Qwen3.5 dense checkpoint stored F16 (upstream adds the norms' 1 in float16, rounded to half) with tied
    embeddings (no ``lm_head``): hidden 320, 4 trunk layers, 5 heads of 64, 1 KV head, an MLP width of 384."""
    return make_qwen35_dense(out, seed, QwenDims(hidden=320, heads=5, kv_heads=1, head_dim=64, ff=384, tie=True,
                                                 dtype="float16"), MROPE16)


def make_qwen35_moe_f16_fused(out: Path, seed: int = 113) -> Path:
    """A Qwen3.5 MoE checkpoint stored F16, tied, its MTP experts fused as transformers stores them
    (``mlp.experts.gate_up_proj`` / ``down_proj``): hidden 192, 2 trunk layers (linear, full), 8 experts (top 4) of
    width 48 (not a multiple of 32: the down stack falls back to F16 under q8_0), a shared width of 64."""
    return make_qwen35_moe(out, seed, QwenDims(hidden=192, layers=2, full_interval=2, head_dim=32, tie=True,
                                               dtype="float16"), experts=8, topk=4, moe_ff=48, shared_ff=64,
                           mrope={"mrope_section": [2, 1, 1], "mrope_interleaved": True}, per_expert_mtp=False)


def make_qwen3_next(out: Path, seed: int = 2, dims: QwenDims = QwenDims(), *, experts: int = 4, topk: int = 2,
                    moe_ff: int = 32, shared_ff: int = 32, per_expert_mtp: bool = False) -> Path:
    """``Qwen3NextForCausalLM``: no ``mtp_num_hidden_layers`` in the config (upstream counts ``mtp.layers.{i}``); the
    MTP experts fused as transformers stores them (``per_expert_mtp``: one by one, as the release does)."""
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM

    cfg = {**_qwen_common(dims), "num_experts": experts, "num_experts_per_tok": topk, "moe_intermediate_size": moe_ff,
           "shared_expert_intermediate_size": shared_ff, "full_attention_interval": dims.full_interval,
           "decoder_sparse_step": 1, "mlp_only_layers": []}
    state = _trunk(Qwen3NextConfig, Qwen3NextForCausalLM, cfg, seed)
    mtp = _qwen_mtp(state, dims.layers, dims.layers - 1, seed, hidden=dims.hidden, layers=dims.mtp_layers)
    state.update(_split_mtp_experts(mtp) if per_expert_mtp else mtp)
    config = {**cfg, "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next"}
    return _save(out, config, _untie(state, dims), dtype=dims.dtype)


def make_glm4_moe(out: Path, seed: int = 3, *, hidden: int = H, layers: int = 2, experts: int = 4, moe_ff: int = 32,
                  shared: int = 1, heads: int = 4, kv_heads: int = 2, head_dim: int = 16, qk_norm: bool = False,
                  rotary: float = 0.5, groups: tuple[int, int] = (1, 1), scale: float = 1.0, norm_topk: bool = True,
                  vl: bool = False, topk: int = 2, ff: int = 128, nextn: int = 1, first_dense: int = 1,
                  rope: dict[str, Any] | None = None, dtype: str = "bfloat16") -> Path:
    """``Glm4MoeForCausalLM``: ``layers`` trunk layers (the first ``first_dense`` dense, the others MoE) + ``nextn``
    NextN layers ``model.layers.{layers + i}.*``; the defaults are the checkpoint of the committed manifests
    ``glm4moe-*``. ``vl``: the same weights as ``Glm4vMoeForConditionalGeneration`` stores its text model
    (``model.language_model.*`` names, the text config under ``text_config``). ``rope``: extra ``rope_parameters``
    (e.g. YaRN's); ``dtype``: the stored dtype."""
    from transformers import Glm4MoeConfig, Glm4MoeForCausalLM

    rope_p = {"rope_theta": 1000000.0, "rope_type": "default", "partial_rotary_factor": rotary, **(rope or {})}
    cfg = {"vocab_size": VOCAB, "hidden_size": hidden, "intermediate_size": ff, "num_hidden_layers": layers + nextn,
           "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
           "partial_rotary_factor": rotary, "n_routed_experts": experts, "n_shared_experts": shared,
           "num_experts_per_tok": topk, "moe_intermediate_size": moe_ff, "first_k_dense_replace": first_dense,
           "n_group": groups[0], "topk_group": groups[1], "norm_topk_prob": norm_topk,
           "routed_scaling_factor": scale, "use_qk_norm": qk_norm, "attention_bias": True,
           "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "bos_token_id": 990,
           "eos_token_id": 992, "rope_parameters": rope_p}
    # the last layers become the NextN layers
    state = _per_expert(_trunk(Glm4MoeConfig, Glm4MoeForCausalLM, cfg, seed))
    import torch

    for i in range(nextn):
        for name, shape in (("eh_proj.weight", (hidden, 2 * hidden)), ("enorm.weight", (hidden,)),
                            ("hnorm.weight", (hidden,)), ("shared_head.norm.weight", (hidden,)),
                            ("embed_tokens.weight", (VOCAB, hidden)), ("shared_head.head.weight", (VOCAB, hidden))):
            state[f"model.layers.{layers + i}.{name}"] = _noise(torch.empty(shape), seed + len(name) + 1000 * i)
    config = {**cfg, "num_hidden_layers": layers, "num_nextn_predict_layers": nextn,
              "architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe"}
    if vl:
        state = {(k.replace("model.", "model.language_model.", 1) if k.startswith("model.") else k): v
                 for k, v in state.items()}
        text = {k: v for k, v in config.items() if k not in ("architectures", "torch_dtype")}
        config = {"architectures": ["Glm4vMoeForConditionalGeneration"], "model_type": "glm4v_moe",
                  "text_config": {**text, "model_type": "glm4v_moe_text"}, "tie_word_embeddings": False}
    return _save(out, config, state, GLM_TOKENS, dtype)


def make_glm4_moe_wide(out: Path, seed: int = 5) -> Path:
    """A second GLM-4.5 shape: hidden 96, 3 trunk layers, 8 experts in 2 groups, an expert width of 48 (not a
    multiple of 32: the expert and shared-expert down projections fall back to F16 under q8_0), q/k norms, a quarter
    of the head rotated, routed_scaling_factor 2.5, norm_topk_prob false."""
    return make_glm4_moe(out, seed, hidden=96, layers=3, experts=8, moe_ff=48, heads=6, kv_heads=2, head_dim=16,
                         qk_norm=True, rotary=0.25, groups=(2, 1), scale=2.5, norm_topk=False)


def make_glm4v_moe(out: Path, seed: int = 6) -> Path:
    """``Glm4vMoeForConditionalGeneration``'s text model (no vision tower: upstream's text conversion drops it)."""
    return make_glm4_moe(out, seed, vl=True)


def make_glm5(out: Path, seed: int = 7, *, hidden: int = H, layers: int = 2, heads: int = 4, q_lora: int = 48,
              kv_lora: int = 32, rope: int = 16, nope: int = 32, v_dim: int = 32, experts: int = 4, moe_ff: int = 32,
              shared: int = 1, groups: tuple[int, int] = (1, 1), scale: float = 2.5, norm_topk: bool = True,
              index: tuple[int, int, int] = (4, 64, 8), indexer_types: list[str] | None = None,
              rope_parameters: dict[str, Any] | None = None, drop: tuple[str, ...] = (), topk: int = 2,
              ff: int = 128, nextn: int = 1, dtype: str = "bfloat16") -> Path:
    """``GlmMoeDsaForCausalLM`` (GLM-5, GGUF ``glm-dsa``): MLA attention (q/kv LoRA, ``kv_b_proj``) with the DSA
    indexer, ``layers`` trunk layers (the first dense) + the NextN layer ``model.layers.{layers}.*``; ``index`` is
    (``index_n_heads``, ``index_head_dim``, ``index_topk``). ``num_key_value_heads`` is the head count, as in the
    released config (upstream splits ``kv_b_proj`` by it). Without ``indexer_types`` the config has none (GLM-5 /
    5.1: transformers' default, every layer ``full``). ``drop``: config keys left out (the model and upstream then
    take ``GlmMoeDsaConfig``'s defaults). ``nextn``: NextN layers ``model.layers.{layers + i}.*``; ``dtype``: the
    stored dtype."""
    from transformers import GlmMoeDsaConfig, GlmMoeDsaForCausalLM

    rope_p = rope_parameters or {"rope_theta": 1000000.0, "rope_type": "default"}
    cfg: dict[str, Any] = {
        "vocab_size": VOCAB, "hidden_size": hidden, "intermediate_size": ff, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": heads, "q_lora_rank": q_lora, "kv_lora_rank": kv_lora,
        "qk_rope_head_dim": rope, "qk_nope_head_dim": nope, "v_head_dim": v_dim, "head_dim": rope,
        "n_routed_experts": experts, "n_shared_experts": shared, "num_experts_per_tok": topk,
        "moe_intermediate_size": moe_ff, "first_k_dense_replace": 1, "n_group": groups[0], "topk_group": groups[1],
        "norm_topk_prob": norm_topk, "routed_scaling_factor": scale, "index_n_heads": index[0],
        "index_head_dim": index[1], "index_topk": index[2], "attention_bias": False, "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "bos_token_id": 990, "eos_token_id": 992,
        "rope_parameters": rope_p}
    if indexer_types is not None:
        cfg["indexer_types"] = indexer_types
    cfg = {k: v for k, v in cfg.items() if k not in drop}
    # the model is built with ``nextn`` more layers (sparse), which become the NextN layers
    model_cfg = {**cfg, "num_hidden_layers": layers + nextn,
                 "mlp_layer_types": ["dense"] + ["sparse"] * (layers + nextn - 1),
                 "indexer_types": [*(indexer_types or ["full"] * layers), *["full"] * nextn]}
    state = _per_expert(_trunk(GlmMoeDsaConfig, GlmMoeDsaForCausalLM, model_cfg, seed))
    import torch

    for i in range(nextn):
        for name, shape in (("eh_proj.weight", (hidden, 2 * hidden)), ("enorm.weight", (hidden,)),
                            ("hnorm.weight", (hidden,)), ("shared_head.norm.weight", (hidden,)),
                            ("embed_tokens.weight", (VOCAB, hidden)), ("shared_head.head.weight", (VOCAB, hidden))):
            state[f"model.layers.{layers + i}.{name}"] = _noise(torch.empty(shape), seed + len(name) + 1000 * i)
    config = {**cfg, "num_nextn_predict_layers": nextn, "architectures": ["GlmMoeDsaForCausalLM"],
              "model_type": "glm_moe_dsa"}
    return _save(out, config, state, GLM_TOKENS, dtype)


def make_glm5_wide(out: Path, seed: int = 8) -> Path:
    """A second GLM-5 shape (GLM-5.2 style): hidden 96, 3 trunk layers, 6 heads, kv_lora_rank 48 and
    qk_nope_head_dim 24 (not multiples of 32: ``attn_v_b`` / ``attn_k_b`` fall back to F16 under q8_0), 8 experts in
    2 groups with 2 shared experts of width 48, routed_scaling_factor 1.5, norm_topk_prob false, 8 indexer heads, explicit ``indexer_types``
    (full, shared, full), rope theta 500000."""
    return make_glm5(out, seed, hidden=96, layers=3, heads=6, q_lora=64, kv_lora=48, rope=16, nope=24, v_dim=32,
                     experts=8, moe_ff=48, shared=2, groups=(2, 1), scale=1.5, norm_topk=False, index=(8, 64, 16),
                     indexer_types=["full", "shared", "full"],
                     rope_parameters={"rope_theta": 500000.0, "rope_type": "default"})


def make_glm5_yarn(out: Path, seed: int = 9) -> Path:
    """A third GLM-5 config: YaRN rope scaling with ``mscale_all_dim`` (``rope.scaling.*`` and
    ``rope.scaling.yarn_log_multiplier``) and a config without ``head_dim``, ``rms_norm_eps``, ``n_group`` /
    ``topk_group``, ``norm_topk_prob``, ``routed_scaling_factor`` and ``max_position_embeddings`` (transformers'
    class defaults)."""
    return make_glm5(out, seed, rope_parameters={
        "rope_theta": 1000000.0, "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024,
        "mscale_all_dim": 1.0, "mscale": 1.0, "beta_fast": 32.0, "beta_slow": 1.0},
        drop=("head_dim", "rms_norm_eps", "n_group", "topk_group", "norm_topk_prob", "routed_scaling_factor",
              "max_position_embeddings"))


def make_glm4_lite(out: Path, seed: int = 14, *, hidden: int = H, layers: int = 2, heads: int = 4,
                   q_lora: int | None = 48, kv_lora: int = 32, rope: int = 16, nope: int = 32, v_dim: int = 32,
                   experts: int = 4, moe_ff: int = 32, shared: int = 1, groups: tuple[int, int] = (1, 1), scale: float = 1.8,
                   norm_topk: bool = True, first_dense: int | None = 1, rope_theta: float | None = 1000000.0,
                   rope_scaling: dict[str, Any] | None = None, drop: tuple[str, ...] = (), topk: int = 2,
                   ff: int = 128, nextn: int = 1, tie: bool = False, dtype: str = "bfloat16") -> Path:
    """``Glm4MoeLiteForCausalLM`` (GLM-4.7-Flash, GGUF ``deepseek2``): MLA attention (q/kv LoRA, ``kv_b_proj``)
    without an indexer, ``layers`` trunk layers (the first ``first_dense`` dense, every one MoE when it is None) + the
    NextN layer(s) ``model.layers.{layers + i}.*`` (``nextn``). The config is spelled as the released one (top-level ``rope_theta``, ``rope_scaling`` null unless
    given, ``partial_rotary_factor`` 1.0, ``first_k_dense_replace`` (left out when None), ``topk_method``);
    ``num_key_value_heads`` is the head count. ``drop``: config keys left out (the model and upstream then take
    ``Glm4MoeLiteConfig``'s defaults). ``tie``: ``tie_word_embeddings`` true and no ``lm_head.weight`` stored;
    ``dtype``: the stored dtype."""
    from transformers import Glm4MoeLiteConfig, Glm4MoeLiteForCausalLM

    cfg: dict[str, Any] = {
        "vocab_size": VOCAB, "hidden_size": hidden, "intermediate_size": ff, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": heads, "q_lora_rank": q_lora, "kv_lora_rank": kv_lora,
        "qk_rope_head_dim": rope, "qk_nope_head_dim": nope, "v_head_dim": v_dim, "n_routed_experts": experts,
        "n_shared_experts": shared, "num_experts_per_tok": topk, "moe_intermediate_size": moe_ff,
        "first_k_dense_replace": first_dense, "n_group": groups[0], "topk_group": groups[1],
        "norm_topk_prob": norm_topk, "routed_scaling_factor": scale, "topk_method": "noaux_tc",
        "attention_bias": False, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": tie,
        "bos_token_id": 990, "eos_token_id": 992, "partial_rotary_factor": 1.0, "rope_theta": rope_theta,
        "rope_scaling": rope_scaling}
    cfg = {k: v for k, v in cfg.items() if k not in drop and not (k in ("first_k_dense_replace", "rope_theta")
                                                                    and v is None)}
    model_cfg = {k: v for k, v in cfg.items() if k not in ("first_k_dense_replace", "topk_method")}
    # the model is built with ``nextn`` more layers (sparse), which become the NextN layers
    # without first_k_dense_replace upstream writes leading_dense_block_count 0: every trunk layer is then MoE
    dense = first_dense or 0
    model_cfg.update({"num_hidden_layers": layers + nextn,
                      "mlp_layer_types": ["dense"] * dense + ["sparse"] * (layers + nextn - dense)})
    state = _per_expert(_trunk(Glm4MoeLiteConfig, Glm4MoeLiteForCausalLM, model_cfg, seed))
    if tie:
        state.pop("lm_head.weight", None)
    import torch

    for i in range(nextn):
        for name, shape in (("eh_proj.weight", (hidden, 2 * hidden)), ("enorm.weight", (hidden,)),
                            ("hnorm.weight", (hidden,)), ("shared_head.norm.weight", (hidden,)),
                            ("embed_tokens.weight", (VOCAB, hidden)), ("shared_head.head.weight", (VOCAB, hidden))):
            state[f"model.layers.{layers + i}.{name}"] = _noise(torch.empty(shape), seed + len(name) + 1000 * i)
    config = {**cfg, "num_nextn_predict_layers": nextn, "architectures": ["Glm4MoeLiteForCausalLM"],
              "model_type": "glm4_moe_lite"}
    return _save(out, config, state, GLM_TOKENS, dtype)


def make_glm4_lite_wide(out: Path, seed: int = 15) -> Path:
    """A second GLM-4.7-Flash shape: hidden 96, 3 trunk layers, 6 heads, kv_lora_rank 48 and qk_nope_head_dim 24
    (not multiples of 32: ``attn_v_b`` / ``attn_k_b`` fall back to F16 under q8_0), 8 experts in 2 groups with 2
    shared experts of width 48, routed_scaling_factor 2.5, norm_topk_prob false, tied embeddings (no
    ``lm_head.weight``), no ``first_k_dense_replace`` (leading_dense_block_count 0: every trunk layer MoE)."""
    return make_glm4_lite(out, seed, hidden=96, layers=3, heads=6, q_lora=64, kv_lora=48, rope=16, nope=24, v_dim=32,
                          experts=8, moe_ff=48, shared=2, groups=(2, 1), scale=2.5, norm_topk=False, first_dense=None,
                          rope_theta=500000.0, tie=True)


def make_glm4_lite_yarn(out: Path, seed: int = 16) -> Path:
    """A third GLM-4.7-Flash config: legacy ``rope_scaling`` YaRN with ``mscale_all_dim`` (``rope.scaling.*`` and
    ``rope.scaling.yarn_log_multiplier``) and a config without ``rope_theta``, ``rms_norm_eps``, ``n_group`` /
    ``topk_group``, ``norm_topk_prob``, ``routed_scaling_factor`` and ``max_position_embeddings`` (transformers'
    class defaults)."""
    return make_glm4_lite(out, seed, rope_theta=None, rope_scaling={
        "type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024, "mscale_all_dim": 1.0,
        "mscale": 1.0, "beta_fast": 32.0, "beta_slow": 1.0},
        drop=("rms_norm_eps", "n_group", "topk_group", "norm_topk_prob", "routed_scaling_factor",
              "max_position_embeddings"))


def make_nemotron_h(out: Path, seed: int = 4, *, hidden: int = H, pattern: str = "M*E", heads: int = 4,
                    kv_heads: int = 2, head_dim: int = 16, mamba_heads: int = 4, mamba_head_dim: int = 16,
                    state: int = 16, ssm_groups: int = 2, experts: int = 4, moe_ff: int = 32, shared_ff: int = 32,
                    groups: tuple[int, int] = (1, 1), scale: float = 1.0, norm_topk: bool = True,
                    latent: int | None = None, attention_bias: bool = False, eps: float = 1e-5, topk: int = 2,
                    ff: int = 128, dtype: str = "bfloat16") -> Path:
    """``NemotronHForCausalLM`` (MoE): layers of ``pattern`` (``M`` Mamba2, ``*`` attention, ``E`` MoE) + the two MTP
    halves ``mtp.layers.0`` (fusion + attention, shaped like the first ``*`` layer) and ``mtp.layers.1`` (MoE + final
    norm, shaped like the first ``E`` layer); the defaults are the checkpoint of the committed manifests
    ``nemotron_h_moe-*``. ``latent``: Nemotron 3 Super's latent MoE (``moe_latent_size``, the ``fc1/fc2_latent_proj``
    projections); ``attention_bias``: q/k/v/o biases on the head's attention (transformers' trunk has none);
    ``dtype``: the stored dtype."""
    from transformers import NemotronHConfig, NemotronHForCausalLM

    cfg = {"vocab_size": VOCAB, "hidden_size": hidden, "intermediate_size": ff, "num_hidden_layers": len(pattern),
           "hybrid_override_pattern": pattern, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
           "head_dim": head_dim, "mamba_num_heads": mamba_heads, "mamba_head_dim": mamba_head_dim,
           "ssm_state_size": state, "n_groups": ssm_groups, "conv_kernel": 4, "mamba_hidden_act": "silu",
           "chunk_size": 16, "n_routed_experts": experts, "n_shared_experts": 1, "num_experts_per_tok": topk,
           "moe_intermediate_size": moe_ff, "moe_shared_expert_intermediate_size": shared_ff, "n_group": groups[0],
           "topk_group": groups[1], "norm_topk_prob": norm_topk, "routed_scaling_factor": scale,
           "max_position_embeddings": 4096, "layer_norm_epsilon": eps, "tie_word_embeddings": False,
           "bos_token_id": 990, "eos_token_id": 992, "mlp_hidden_act": "relu2"}
    if latent is not None:
        cfg["moe_latent_size"] = latent
    if attention_bias:
        cfg["attention_bias"] = True
    state_dict = _per_expert(_trunk(NemotronHConfig, NemotronHForCausalLM, cfg, seed))
    state_dict = {("backbone." + k[len("model."):] if k.startswith("model.") else k): v for k, v in state_dict.items()}
    import torch

    attn, moe = f"backbone.layers.{pattern.index('*')}.", f"backbone.layers.{pattern.index('E')}."
    mtp: dict[str, Any] = {}
    for name, shape in (("enorm.weight", (hidden,)), ("hnorm.weight", (hidden,)),
                        ("eh_proj.weight", (hidden, 2 * hidden))):
        mtp[f"mtp.layers.0.{name}"] = torch.empty(shape)
    for k, v in state_dict.items():
        if k.startswith(attn):  # the attention layer
            mtp["mtp.layers.0." + k[len(attn):]] = v
        elif k.startswith(moe):  # the MoE layer
            mtp["mtp.layers.1." + k[len(moe):]] = v
    mtp["mtp.layers.1.final_layernorm.weight"] = torch.empty(hidden)
    if attention_bias:  # transformers' NemotronH attention has no biases: the head's are added here
        for proj, rows in (("q", heads * head_dim), ("k", kv_heads * head_dim), ("v", kv_heads * head_dim),
                           ("o", hidden)):
            mtp[f"mtp.layers.0.mixer.{proj}_proj.bias"] = torch.empty(rows)
    state_dict.update({k: _noise(v, seed + i) for i, (k, v) in enumerate(sorted(mtp.items()))})
    config = {**cfg, "num_nextn_predict_layers": 1, "architectures": ["NemotronHForCausalLM"],
              "model_type": "nemotron_h"}
    return _save(out, config, state_dict, dtype=dtype)


def make_nemotron_h_wide(out: Path, seed: int = 7) -> Path:
    """A second Nemotron-H shape: hidden 96, 5 trunk layers ``MEM*E``, 6 heads of 24 (head_dim is not hidden / heads:
    upstream's rope.dimension_count is 16 all the same), 3 KV heads, q/k/v/o biases on the head, 8 Mamba heads of 16 in 4
    groups, 8 experts in 2 groups over a latent width of 64 (Nemotron 3 Super's ``moe_latent_size``), an expert width
    of 48 and a shared width of 40 (not multiples of 32: their down projections fall back to F16 under q8_0),
    routed_scaling_factor 2.5, norm_topk_prob false, layer_norm_epsilon 1e-6."""
    return make_nemotron_h(out, seed, hidden=96, pattern="MEM*E", heads=6, kv_heads=3, head_dim=24, mamba_heads=8,
                           mamba_head_dim=16, state=32, ssm_groups=4, experts=8, moe_ff=48, shared_ff=40,
                           groups=(2, 1), scale=2.5, norm_topk=False, latent=64, attention_bias=True, eps=1e-6)


def make_deepseek4(out: Path, seed: int = 10, *, hidden: int = 256, layers: int = 2, heads: int = 4,
                   head_dim: int = 96, rope: int = 32, q_lora: int = 192, o_groups: int = 2, o_lora: int = 96,
                   experts: int = 4, moe: int = 160, hc: int = 4, ratios: tuple[int, ...] | None = None,
                   hash_layers: int = 0, fp8_head: bool = False, mtp_shards: int = 1,
                   routed_scale: float = 1.5, swiglu_limit: float = 10.0, vocab: int = VOCAB) -> Path:
    """``DeepseekV4ForCausalLM`` (GGUF ``deepseek4``) stored as the released checkpoint is: FP8 (F8_E4M3 + an
    F8_E8M0 scale per 128x128 tile) attention and shared-expert weights, FP4 e2m1 routed experts (two codes per I8
    byte + an F8_E8M0 scale per 32), BF16 norms and router, F32 hyper-connection / sink / gate-bias tensors (the
    blocks of fixtures/dsv4.py), ``layers`` trunk layers and one MTP layer ``mtp.0.*``: a DeepSeek-V4 block with
    ``e_proj`` / ``h_proj`` (FP8), ``enorm`` / ``hnorm`` / ``norm`` and its own ``hc_head_{fn,base,scale}``. Shards:
    the embedding with the first trunk layer, the other trunk layers, the head with the final norm and the trunk's
    ``hc_head_*``, then the MTP layer (cut into ``mtp_shards``). ``fp8_head``: ``head.weight`` FP8 with its
    ``head.scale`` (upstream keeps the scale); ``ratios``: ``compress_ratios`` of the trunk layers (the MTP layer's
    is 0; default all 0, whose trunk layers need no compressor); ``vocab``: the embedding and head rows."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "fixtures"))
    import dsv4

    d = dsv4.Dims(hidden=hidden, stages=1, layers=layers, taps=1, heads=heads, head_dim=head_dim, rope_dim=rope,
                  q_lora=q_lora, o_groups=o_groups, o_lora=o_lora, experts=experts, moe=moe, hc=hc, vocab=vocab,
                  swiglu_limit=swiglu_limit, routed_scale=routed_scale, hash_layers=hash_layers)
    lay = dsv4.Layout(arch="DeepseekV4ForCausalLM", draft=False)
    b = dsv4.Builder(d, lay, dsv4.Values(seed))
    p = "mtp.0."
    mtp = b.block(p, None)
    mtp += b.fp8(p + "e_proj", hidden, hidden) + b.fp8(p + "h_proj", hidden, hidden)
    mtp += [b.norm(p + "enorm.weight", hidden), b.norm(p + "hnorm.weight", hidden), b.norm(p + "norm.weight", hidden),
            b.f32(p + "hc_head_fn", (hc, hc * hidden), 0.02), b.f32(p + "hc_head_base", (hc,), 0.1),
            b.f32(p + "hc_head_scale", (1,), 0.1, 0.5)]
    head = b.fp8("head", vocab, hidden) if fp8_head else [b.bf16("head.weight", (vocab, hidden))]
    head += [b.norm("norm.weight", hidden), b.f32("hc_head_fn", (hc, hc * hidden), 0.02),
             b.f32("hc_head_base", (hc,), 0.1), b.f32("hc_head_scale", (1,), 0.1, 0.5)]
    shards = [[b.bf16("embed.weight", (vocab, hidden)), *b.block("layers.0.", None)]]
    shards.append([e for i in range(1, layers) for e in b.block(f"layers.{i}.", None)])
    shards += [head, *dsv4.split_by_size(mtp, mtp_shards)]
    shards = [s for s in shards if s]
    out.mkdir(parents=True, exist_ok=True)
    weight_map: dict[str, str] = {}
    total = 0
    for i, entries in enumerate(shards):
        fn = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        dsv4.write_safetensors(out / fn, entries)
        total += sum(int(np.prod(e[2])) * dsv4.ITEMSIZE[e[1]] for e in entries)
        weight_map.update({e[0]: fn for e in entries})
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    config = dsv4.config(d, lay)
    config.update({"compress_ratios": [*(ratios or (0,) * layers), 0], "num_nextn_predict_layers": 1,
                   "bos_token_id": 990, "eos_token_id": 992})
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    _tokenizer_files(out)
    return out


def make_deepseek4_wide(out: Path, seed: int = 11) -> Path:
    """A second DeepSeek-V4 shape: hidden 384, 3 trunk layers (compress ratios 0, 4, 128 and one hash layer, as
    the released config has them), 3 heads of 128 with rope 64, q_lora_rank 100 (not a multiple of 32: attn_q_b
    falls back to F16), 3 output groups of rank 64, 6 experts of width 96, 2 hyper-connection streams, an FP8 head
    with its scale, routed_scaling_factor 2.5, swiglu_limit 7, the MTP layer cut into two shards."""
    return make_deepseek4(out, seed, hidden=384, layers=3, heads=3, head_dim=128, rope=64, q_lora=100, o_groups=3,
                          o_lora=64, experts=6, moe=96, hc=2, ratios=(0, 4, 128), hash_layers=1, fp8_head=True,
                          mtp_shards=2, routed_scale=2.5, swiglu_limit=7.0)


def _fp8_blocks(w: Any, row_groups: list[tuple[int, int]] | None = None, block: int = 128,
                col_block: int | None = None) -> tuple[Any, Any]:
    """``w`` (float32 ``[rows, cols]``) as a block-scaled FP8 checkpoint stores it: F8_E4M3 codes and one float32
    ``weight_scale_inv`` per ``block x col_block`` tile (amax / 448; ``col_block`` defaults to ``block``).
    ``row_groups`` ((start, stop) row ranges, each tiled from its own start: MiMo-V2.5's per-rank qkv_proj) default
    to the whole matrix."""
    import torch

    rows, cols = w.shape
    col_block = col_block or block
    codes = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
    scales = []
    for a, b in row_groups or [(0, rows)]:
        for r in range(a, b, block):
            r1 = min(r + block, b)
            row = []
            for c in range(0, cols, col_block):
                c1 = min(c + col_block, cols)
                tile = w[r:r1, c:c1]
                s = float(tile.abs().max()) / 448.0 or 1.0
                codes[r:r1, c:c1] = (tile / s).to(torch.float8_e4m3fn)
                row.append(s)
            scales.append(row)
    return codes, torch.tensor(scales, dtype=torch.float32)


def to_fp8(ckpt: Path, block: tuple[int, int] = (128, 128), keep: tuple[str, ...] = ()) -> Path:
    """Rewrite checkpoint folder ``ckpt`` in place as a ``quant_method: fp8`` release stores it (Qwen's and GLM's
    -FP8 checkpoints): every 2-D linear weight (not an embedding, head, norm or a name ending in one of ``keep``)
    as F8_E4M3 codes with a float32 ``weight_scale_inv`` per ``block`` (rows, cols) tile (:func:`_fp8_blocks`);
    ``quantization_config`` declares it (``weight_block_size`` = ``block``)."""
    from safetensors.torch import load_file, save_file

    def linear(name: str, t: Any) -> bool:
        return (t.ndim == 2 and name.endswith(".weight") and not name.endswith(keep)
                and not any(w in name for w in ("norm", "embed", "lm_head", "shared_head.head")))

    for f in sorted(ckpt.glob("*.safetensors")):
        state = load_file(str(f))
        new: dict[str, Any] = {}
        for name, t in state.items():
            if not linear(name, t):
                new[name] = t
                continue
            w = t.float()
            rows, cols = w.shape
            codes, scales = _fp8_blocks(w.reshape(rows, cols), block=block[0]) if block[0] == block[1] else \
                _fp8_rect(w, block)
            new[name], new[name.removesuffix(".weight") + ".weight_scale_inv"] = codes, scales
        save_file(dict(sorted(new.items())), str(f), metadata={"format": "pt"})
    config = json.loads((ckpt / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                     "weight_block_size": list(block)}
    (ckpt / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return ckpt


def _fp8_rect(w: Any, block: tuple[int, int]) -> tuple[Any, Any]:
    """:func:`_fp8_blocks` with ``block`` (rows, cols) tiles that need not be square."""
    import torch

    rows, cols = w.shape
    br, bc = block
    codes = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
    scales = torch.empty(-(-rows // br), -(-cols // bc), dtype=torch.float32)
    for i, r in enumerate(range(0, rows, br)):
        for j, c in enumerate(range(0, cols, bc)):
            tile = w[r:r + br, c:c + bc]
            sc = float(tile.abs().max()) / 448.0 or 1.0
            codes[r:r + br, c:c + bc] = (tile / sc).to(torch.float8_e4m3fn)
            scales[i, j] = sc
    return codes, scales


def to_modelopt_fp8(ckpt: Path, per_channel: bool = False, keep: tuple[str, ...] = (),
                    hf_quant_config: bool = False) -> Path:
    """Rewrite checkpoint folder ``ckpt`` in place as a ModelOpt FP8 export stores it: every 2-D linear weight (as
    :func:`to_fp8` picks them) as F8_E4M3 codes with a float32 ``weight_scale`` (amax / 448: one scalar, or with
    ``per_channel`` one per output row) and a scalar ``input_scale``; ``quant_algo`` FP8 declared in
    ``quantization_config`` (``quant_method`` modelopt) or, with ``hf_quant_config``, only in
    ``hf_quant_config.json`` (producer modelopt)."""
    import torch
    from safetensors.torch import load_file, save_file

    for f in sorted(ckpt.glob("*.safetensors")):
        state = load_file(str(f))
        new: dict[str, Any] = {}
        for name, t in state.items():
            if not (t.ndim == 2 and name.endswith(".weight") and not name.endswith(keep)
                    and not any(w in name for w in ("norm", "embed", "lm_head", "shared_head.head"))):
                new[name] = t
                continue
            w = t.float()
            amax = w.abs().amax(dim=1) if per_channel else w.abs().max().reshape(())
            scale = torch.where(amax > 0, amax / 448.0, torch.ones_like(amax))
            codes = (w / (scale.reshape(-1, 1) if per_channel else scale)).to(torch.float8_e4m3fn)
            base = name.removesuffix(".weight")
            new[name], new[base + ".weight_scale"] = codes, scale.float()
            new[base + ".input_scale"] = torch.tensor(0.03125, dtype=torch.float32)
        save_file(dict(sorted(new.items())), str(f), metadata={"format": "pt"})
    config = json.loads((ckpt / "config.json").read_text())
    algo = {"quant_algo": "FP8", "kv_cache_quant_algo": None, "exclude_modules": ["lm_head"]}
    if hf_quant_config:
        (ckpt / "hf_quant_config.json").write_text(json.dumps({"producer": {"name": "modelopt", "version": "0.37.0"},
                                                               "quantization": algo}, indent=4))
    else:
        config["quantization_config"] = {"quant_method": "modelopt", **algo}
    (ckpt / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return ckpt


def make_nemotron_h_modelopt_fp8(out: Path, seed: int = 25) -> Path:
    """:func:`make_nemotron_h` as a ModelOpt FP8 export (NVIDIA's -FP8 releases): per-tensor scales, declared only in
    ``hf_quant_config.json``, the router kept BF16."""
    return to_modelopt_fp8(make_nemotron_h(out, seed), keep=("gate.weight",), hf_quant_config=True)


def make_qwen35_modelopt_fp8(out: Path, seed: int = 26) -> Path:
    """:func:`make_qwen35_dense` as a ModelOpt FP8 export with per-channel scales (``quantization_config``)."""
    return to_modelopt_fp8(make_qwen35_dense(out, seed), per_channel=True)


def make_qwen35_fp8(out: Path, seed: int = 21) -> Path:
    """:func:`make_qwen35_dense` as Qwen's -FP8 releases store it: 128 x 128 blocks (every linear is one partial
    block at these sizes)."""
    return to_fp8(make_qwen35_dense(out, seed))


def make_qwen35_moe_fp8(out: Path, seed: int = 22) -> Path:
    """:func:`make_qwen35_moe` (per-expert MTP experts) in FP8 with 32 x 16 blocks (several blocks per weight, the
    last ones partial), the routers and the shared expert's gate kept BF16 as Qwen's releases keep them."""
    return to_fp8(make_qwen35_moe(out, seed, moe_ff=40), (32, 16), keep=("mlp.gate.weight", "shared_expert_gate.weight"))


def make_glm4_moe_fp8(out: Path, seed: int = 23) -> Path:
    """:func:`make_glm4_moe` in FP8 with 64 x 32 blocks, the router kept BF16 (GLM-4.5-FP8's layout)."""
    return to_fp8(make_glm4_moe(out, seed), (64, 32), keep=("mlp.gate.weight",))


def make_glm5_fp8(out: Path, seed: int = 24) -> Path:
    """:func:`make_glm5` in FP8 with 16 x 16 blocks (``kv_b_proj`` split after dequantization), the router and the
    indexer's ``weights_proj`` kept BF16."""
    return to_fp8(make_glm5(out, seed), (16, 16), keep=("mlp.gate.weight", "weights_proj.weight"))


def make_mimo2(out: Path, seed: int = 11, *, hidden: int = 256, heads: int = 4, kv_full: int = 1, kv_swa: int = 2,
               head_dim: int = 48, v_dim: int = 32, ff: int = 320, experts: int = 4, moe_ff: int = 64,
               fused_tp: int = 0, sinks: bool = True, value_scale: float | None = 0.707,
               arch: str = "MiMoV2FlashForCausalLM", mxfp4: bool = False, vocab: int = VOCAB) -> Path:
    """MiMo-V2 (``MimoV2Model``, GGUF ``mimo2``) stored as the releases are, in three shards (the embedding; 2 trunk
    layers, a global dense one and a sliding-window MoE one; the 3 MTP layers ``model.mtp.layers.{0,1,2}.*``, the final
    norm and the head), the attention and MLP projections F8_E4M3 with float32 ``weight_scale_inv`` per 128 x 128 tile
    (``quant_method: fp8``), ``o_proj``, ``eh_proj``, the norms, the routers and the sinks BF16. The defaults are
    MiMo-V2-Flash's layout (separate ``q_proj`` / ``k_proj`` / ``v_proj``) at tiny sizes: q / k rows that end in a
    partial tile. ``fused_tp``: MiMo-V2.5's fused ``qkv_proj`` instead, its rows ``[Q_r | K_r | V_r]`` per rank of
    ``fused_tp`` ranks, each rank tiled from its own first row. ``vocab``: the embedding and head rows."""
    import torch

    g = torch.Generator().manual_seed(seed)

    def rnd(*shape: int) -> Any:
        return torch.randn(*shape, generator=g) * 0.05

    tensors: dict[str, Any] = {}
    weight_map: dict[str, str] = {}

    def put(name: str, t: Any, shard: int) -> None:
        tensors[name] = t
        weight_map[name] = f"model-0000{shard}-of-00003.safetensors"

    def fp8(name: str, rows: int, cols: int, shard: int, groups: list[tuple[int, int]] | None = None) -> None:
        codes, scale = _fp8_blocks(rnd(rows, cols), groups)
        put(name + ".weight", codes, shard)
        put(name + ".weight_scale_inv", scale, shard)

    def attention(p: str, kv: int, shard: int, swa: bool) -> None:
        q, k, v = heads * head_dim, kv * head_dim, kv * v_dim
        if fused_tp:
            per = (q + k + v) // fused_tp
            q_r, k_r, v_r = q // fused_tp, k // fused_tp, v // fused_tp
            w = rnd(q + k + v, hidden)
            ranks = [torch.cat([w[r * q_r:(r + 1) * q_r], w[q + r * k_r:q + (r + 1) * k_r],
                                w[q + k + r * v_r:q + k + (r + 1) * v_r]]) for r in range(fused_tp)]
            codes, scale = _fp8_blocks(torch.cat(ranks), [(r * per, (r + 1) * per) for r in range(fused_tp)])
            put(p + "self_attn.qkv_proj.weight", codes, shard)
            put(p + "self_attn.qkv_proj.weight_scale_inv", scale, shard)
        else:
            fp8(p + "self_attn.q_proj", q, hidden, shard)
            fp8(p + "self_attn.k_proj", k, hidden, shard)
            fp8(p + "self_attn.v_proj", v, hidden, shard)
        put(p + "self_attn.o_proj.weight", rnd(hidden, heads * v_dim), shard)
        if swa and sinks:
            put(p + "self_attn.attention_sink_bias", rnd(heads), shard)
        put(p + "input_layernorm.weight", 1 + rnd(hidden), shard)

    def dense(p: str, shard: int) -> None:
        fp8(p + "mlp.gate_proj", ff, hidden, shard)
        fp8(p + "mlp.up_proj", ff, hidden, shard)
        fp8(p + "mlp.down_proj", hidden, ff, shard)

    put("model.embed_tokens.weight", rnd(vocab, hidden), 1)
    attention("model.layers.0.", kv_full, 2, False)
    dense("model.layers.0.", 2)
    put("model.layers.0.post_attention_layernorm.weight", 1 + rnd(hidden), 2)
    attention("model.layers.1.", kv_swa, 2, True)
    put("model.layers.1.post_attention_layernorm.weight", 1 + rnd(hidden), 2)
    put("model.layers.1.mlp.gate.weight", rnd(experts, hidden), 2)
    put("model.layers.1.mlp.gate.e_score_correction_bias", rnd(experts), 2)
    for e in range(experts):
        for proj, (r, c) in (("gate_proj", (moe_ff, hidden)), ("up_proj", (moe_ff, hidden)),
                             ("down_proj", (hidden, moe_ff))):
            if mxfp4:
                name = f"model.layers.1.mlp.experts.{e}.{proj}."
                put(name + "weight", torch.randint(0, 256, (r, c // 2), generator=g, dtype=torch.uint8), 2)
                put(name + "weight_scale", torch.randint(118, 127, (r, c // 32), generator=g, dtype=torch.uint8), 2)
            else:
                fp8(f"model.layers.1.mlp.experts.{e}.{proj}", r, c, 2)
    for i in range(3):
        p = f"model.mtp.layers.{i}."
        put(p + "enorm.weight", 1 + rnd(hidden), 3)
        put(p + "hnorm.weight", 1 + rnd(hidden), 3)
        put(p + "eh_proj.weight", rnd(hidden, 2 * hidden), 3)
        attention(p, kv_swa, 3, True)
        put(p + "pre_mlp_layernorm.weight", 1 + rnd(hidden), 3)
        dense(p, 3)
        put(p + "final_layernorm.weight", 1 + rnd(hidden), 3)
    put("model.norm.weight", 1 + rnd(hidden), 3)
    put("lm_head.weight", rnd(vocab, hidden), 3)

    config: dict[str, Any] = {
        "architectures": [arch], "model_type": "mimo_v2_flash" if arch == "MiMoV2FlashForCausalLM" else "mimo_v2",
        "vocab_size": vocab, "hidden_size": hidden, "intermediate_size": ff, "moe_intermediate_size": moe_ff,
        "num_hidden_layers": 2, "hybrid_layer_pattern": [0, 1], "moe_layer_freq": [0, 1],
        "num_attention_heads": heads, "num_key_value_heads": kv_full, "head_dim": head_dim, "v_head_dim": v_dim,
        "swa_num_attention_heads": heads, "swa_num_key_value_heads": kv_swa, "swa_head_dim": head_dim,
        "swa_v_head_dim": v_dim, "partial_rotary_factor": 0.334, "rope_theta": 5000000, "swa_rope_theta": 10000,
        "sliding_window": 128, "sliding_window_size": 128, "layernorm_epsilon": 1e-5,
        "add_swa_attention_sink_bias": sinks, "add_full_attention_sink_bias": False, "n_routed_experts": experts,
        "num_experts_per_tok": 2, "n_shared_experts": None, "topk_method": "noaux_tc", "scoring_func": "sigmoid",
        "norm_topk_prob": True, "n_group": 1, "topk_group": 1, "routed_scaling_factor": None,
        "max_position_embeddings": 4096, "tie_word_embeddings": False, "attention_bias": False, "hidden_act": "silu",
        "bos_token_id": 990, "eos_token_id": 992, "torch_dtype": "bfloat16",
        "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                "weight_block_size": [128, 128],
                                "ignored_layers": [n[:-len(".weight")] for n in tensors
                                                   if n.endswith(("o_proj.weight", "eh_proj.weight"))]}}
    if value_scale is not None:
        config["attention_value_scale"] = value_scale
    if mxfp4:
        config["quantization_config"].update({"store_dtype": "mxfp4", "mxfp4_block_size": 32})
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    for shard in (1, 2, 3):
        fname = f"model-0000{shard}-of-00003.safetensors"
        part = {k: v.contiguous() if v.dtype in (torch.float8_e4m3fn, torch.float32, torch.uint8) else v.to(torch.bfloat16)
                for k, v in sorted(tensors.items()) if weight_map[k] == fname}
        save_file(part, str(out / fname), metadata={"format": "pt"})
    (out / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 0}, "weight_map": dict(sorted(weight_map.items()))}, indent=2) + "\n")
    _tokenizer_files(out)
    return out


def make_mimo2_fused(out: Path, seed: int = 12) -> Path:
    """A second MiMo-V2 shape, MiMo-V2.5's (``MiMoV2ForCausalLM``): the fused FP8 ``qkv_proj`` sharded over 4
    ranks (per rank 36 + 18 + 6 = 60 rows: a 128-row scale tile per rank, upstream's TP-aware dequant), hidden 192
    (the second column tile partial), 6 heads of 24 (V 8), 2 global / 3 sliding KV heads, an MLP width of 200 (not a
    multiple of 32: the MTP down projections fall back to F16 under q8_0),
    no attention sinks and no ``attention_value_scale``."""
    return make_mimo2(out, seed, hidden=192, heads=6, kv_full=2, kv_swa=3, head_dim=24, v_dim=8, ff=200, experts=8,
                      moe_ff=32, fused_tp=4, sinks=False, value_scale=None, arch="MiMoV2ForCausalLM")


def make_mimo2_pro(out: Path, seed: int = 13) -> Path:
    """MiMo-V2.5-Pro's storage: the fused ``qkv_proj`` over 8 ranks (per rank 18 + 6 + 2 = 26 rows), the trunk's routed
    experts packed MXFP4 (``store_dtype: mxfp4``: upstream's sidecar then declares ``general.file_type``
    MOSTLY_MXFP4_MOE whatever the outtype), hidden 128, 6 heads of 24 (V 8), 2 global / 2 sliding KV heads, an MLP width
    of 96, the sinks."""
    return make_mimo2(out, seed, hidden=128, heads=6, kv_full=2, kv_swa=2, head_dim=24, v_dim=8, ff=96, experts=4,
                      moe_ff=64, fused_tp=8, sinks=True, value_scale=None, arch="MiMoV2ForCausalLM", mxfp4=True)


#: DeepSeek-V3.2's FP8 linears (a released checkpoint stores these F8_E4M3 with a float32 ``weight_scale_inv``); the
#: norms, the router, ``indexer.weights_proj``, ``eh_proj``, the embeddings and the heads stay BF16
_DSV32_FP8 = ("self_attn.q_a_proj.weight", "self_attn.q_b_proj.weight", "self_attn.kv_a_proj_with_mqa.weight",
              "self_attn.kv_b_proj.weight", "self_attn.o_proj.weight", "self_attn.indexer.wq_b.weight",
              "self_attn.indexer.wk.weight", "_proj.weight")


def make_deepseek32(out: Path, seed: int = 14, *, hidden: int = H, layers: int = 2, heads: int = 4, q_lora: int = 48,
                    kv_lora: int = 32, rope: int = 16, nope: int = 32, v_dim: int = 32, experts: int = 4,
                    moe_ff: int = 32, shared: int = 1, groups: tuple[int, int] = (1, 1), scale: float = 2.5,
                    norm_topk: bool = True, index: tuple[int, int, int] = (4, 64, 8), topk: int = 2, ff: int = 128,
                    nextn: int = 1, rope_scaling: dict[str, Any] | None = None, drop: tuple[str, ...] = (),
                    fp8: tuple[int, int] | None = None, tied: bool = False, dtype: str = "bfloat16") -> Path:
    """``DeepseekV32ForCausalLM`` (DeepSeek-V3.2, GGUF ``deepseek32``): MLA attention with the DSA indexer as GLM-5's
    maker, ``layers`` trunk layers (the first dense) + ``nextn`` NextN layers ``model.layers.{layers + i}.*``, the
    released config's keys (``scoring_func`` sigmoid, ``topk_method`` noaux_tc, ``rope_theta`` beside
    ``rope_scaling``; ``drop``: keys left out, for ``DeepseekV32Config``'s defaults). ``fp8``: stored as the release
    is, the linears F8_E4M3 with a float32 ``weight_scale_inv`` per ``fp8`` (rows, columns) block
    (``quantization_config`` ``quant_method: fp8``), ``e_score_correction_bias`` F32, the rest BF16, in three shards
    (the embedding, final norm and head; the trunk layers; the NextN layers); else every tensor ``dtype``. ``tied``: ``tie_word_embeddings`` true (``lm_head`` still stored).
    The tokenizer says ``add_bos_token: true``, as DeepSeek's does."""
    from transformers import DeepseekV32Config, DeepseekV32ForCausalLM

    cfg: dict[str, Any] = {
        "vocab_size": VOCAB, "hidden_size": hidden, "intermediate_size": ff, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": heads, "q_lora_rank": q_lora, "kv_lora_rank": kv_lora,
        "qk_rope_head_dim": rope, "qk_nope_head_dim": nope, "v_head_dim": v_dim, "n_routed_experts": experts,
        "n_shared_experts": shared, "num_experts_per_tok": topk, "moe_intermediate_size": moe_ff,
        "first_k_dense_replace": 1, "n_group": groups[0], "topk_group": groups[1], "norm_topk_prob": norm_topk,
        "routed_scaling_factor": scale, "index_n_heads": index[0], "index_head_dim": index[1],
        "index_topk": index[2], "attention_bias": False, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": tied, "bos_token_id": 990, "eos_token_id": 992, "scoring_func": "sigmoid",
        "topk_method": "noaux_tc", "rope_theta": 10000.0, "hidden_act": "silu"}
    if rope_scaling is not None:
        cfg["rope_scaling"] = rope_scaling
    cfg = {k: v for k, v in cfg.items() if k not in drop}
    model_cfg = {k: v for k, v in cfg.items() if k not in ("scoring_func", "topk_method", "rope_scaling",
                                                           "rope_theta")}
    model_cfg.update({"num_hidden_layers": layers + nextn, "tie_word_embeddings": False,
                      "mlp_layer_types": ["dense"] + ["sparse"] * (layers + nextn - 1)})
    state = _per_expert(_trunk(DeepseekV32Config, DeepseekV32ForCausalLM, model_cfg, seed))
    import torch

    for i in range(nextn):
        for name, shape in (("eh_proj.weight", (hidden, 2 * hidden)), ("enorm.weight", (hidden,)),
                            ("hnorm.weight", (hidden,)), ("shared_head.norm.weight", (hidden,)),
                            ("embed_tokens.weight", (VOCAB, hidden)), ("shared_head.head.weight", (VOCAB, hidden))):
            state[f"model.layers.{layers + i}.{name}"] = _noise(torch.empty(shape), seed + len(name) + 1000 * i)
    config = {**cfg, "num_nextn_predict_layers": nextn, "architectures": ["DeepseekV32ForCausalLM"],
              "model_type": "deepseek_v32"}
    if fp8 is None:
        _save(out, config, state, dtype=dtype)
    else:
        from safetensors.torch import save_file

        config.update({"torch_dtype": "bfloat16", "quantization_config": {
            "activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "scale_fmt": "ue8m0",
            "weight_block_size": list(fp8)}})
        tensors: dict[str, Any] = {}
        for k, v in state.items():
            if ".layers." in k and k.endswith(_DSV32_FP8) and not k.endswith(("eh_proj.weight", "weights_proj.weight")):
                codes, scales = _fp8_blocks(v.float(), None, fp8[0], fp8[1])
                tensors[k], tensors[k.removesuffix(".weight") + ".weight_scale_inv"] = codes, scales
            elif k.endswith("e_score_correction_bias"):
                tensors[k] = v.float()
            else:
                tensors[k] = v.to(torch.bfloat16)
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        nextn_layers = tuple(f"model.layers.{layers + i}." for i in range(nextn))
        shard = {k: f"model-0000{3 if k.startswith(nextn_layers) else 2 if '.layers.' in k else 1}-of-00003"
                    ".safetensors" for k in tensors}
        for fname in sorted(set(shard.values())):
            save_file({k: v.contiguous() for k, v in sorted(tensors.items()) if shard[k] == fname},
                      str(out / fname), metadata={"format": "pt"})
        (out / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {"total_size": 0}, "weight_map": dict(sorted(shard.items()))}, indent=2) + "\n")
        _tokenizer_files(out)
    tc = json.loads((out / "tokenizer_config.json").read_text())
    (out / "tokenizer_config.json").write_text(json.dumps({**tc, "add_bos_token": True}, indent=2) + "\n")
    return out


def make_deepseek32_wide(out: Path, seed: int = 15) -> Path:
    """A second DeepSeek-V3.2 shape: hidden 96, 3 trunk layers, 6 heads, kv_lora_rank 48 and qk_nope_head_dim 24 (not
    multiples of 32: ``attn_v_b`` / ``attn_k_b`` F16 under q8_0), 8 experts in 2 groups with 2 shared experts of width
    48, routed_scaling_factor 1.5, norm_topk_prob false, 8 indexer heads, YaRN rope scaling with ``mscale_all_dim``
    (``rope.scaling.yarn_log_multiplier``), tied embeddings, stored F16."""
    return make_deepseek32(out, seed, hidden=96, layers=3, heads=6, q_lora=64, kv_lora=48, rope=16, nope=24,
                           v_dim=32, experts=8, moe_ff=48, shared=2, groups=(2, 1), scale=1.5, norm_topk=False,
                           index=(8, 64, 16), tied=True, dtype="float16", rope_scaling={
                               "type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024,
                               "mscale": 1.0, "mscale_all_dim": 1.0, "beta_fast": 32, "beta_slow": 1})


def make_deepseek32_fp8(out: Path, seed: int = 16) -> Path:
    """DeepSeek-V3.2 stored as the release is: FP8 linears with 128 x 128 block scales, the NextN layer in its own
    shard; hidden 192 (a partial column block), kv_b_proj of 4 x (32 + 32) = 256 rows (two row blocks), 16 experts of
    width 64, a config without ``rms_norm_eps``, ``n_group`` / ``topk_group`` and ``max_position_embeddings``
    (``DeepseekV32Config``'s defaults: 8 groups, 4 used)."""
    return make_deepseek32(out, seed, hidden=192, layers=2, q_lora=96, kv_lora=64, experts=16, moe_ff=64,
                           fp8=(128, 128), drop=("rms_norm_eps", "n_group", "topk_group", "max_position_embeddings"))


def make_deepseek32_fp8_nextn2(out: Path, seed: int = 17) -> Path:
    """FP8 with 32 x 64 blocks (several blocks in every weight, partial ones at the edges: q_lora_rank 40) and two
    NextN layers (upstream writes both; llama.cpp's deepseek32 MTP graph runs one)."""
    return make_deepseek32(out, seed, hidden=128, layers=2, q_lora=40, kv_lora=32, experts=4, moe_ff=48,
                           fp8=(32, 64), nextn=2)


#: family -> (maker, the checkpoint folder's name)
MAKERS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "qwen35": (make_qwen35_dense, "Qwen3.5-Tiny"),
    # a folder name with a size: upstream's name heuristic writes size_label 350K for the full file, and for the
    # sidecar (181K parameters) turns the size into general.finetune '350k'
    "qwen35-sized": (make_qwen35_dense, "Qwen3.5-Tiny-350K"),
    "qwen35moe": (make_qwen35_moe, "Qwen3.5-MoE-Tiny"),
    "qwen3next": (make_qwen3_next, "Qwen3-Next-Tiny"),
    "qwen35-f16": (make_qwen35_f16, "Qwen3.5-F16-Tiny"),
    "qwen35moe-f16-fused": (make_qwen35_moe_f16_fused, "Qwen3.5-MoE-F16-Tiny"),
    "glm4moe": (make_glm4_moe, "GLM-4.5-Tiny"),
    "glm4moe-wide": (make_glm4_moe_wide, "GLM-4.5-Wide-Tiny"),
    "glm4vmoe": (make_glm4v_moe, "GLM-4.5V-Tiny"),
    "nemotron_h_moe": (make_nemotron_h, "Nemotron-H-Tiny"),
    "glm-dsa": (make_glm5, "GLM-5-Tiny"),
    "glm-dsa-wide": (make_glm5_wide, "GLM-5.2-Wide-Tiny"),
    "glm-dsa-yarn": (make_glm5_yarn, "GLM-5-Yarn-Tiny"),
    "glm4-lite": (make_glm4_lite, "GLM-4.7-Flash-Tiny"),
    "glm4-lite-wide": (make_glm4_lite_wide, "GLM-4.7-Flash-Wide-Tiny"),
    "glm4-lite-yarn": (make_glm4_lite_yarn, "GLM-4.7-Flash-Yarn-Tiny"),
    "nemotron_h_moe-wide": (make_nemotron_h_wide, "Nemotron-H-Wide-Tiny"),
    "deepseek4": (make_deepseek4, "DeepSeek-V4-Tiny"),
    "deepseek4-wide": (make_deepseek4_wide, "DeepSeek-V4-Wide-Tiny"),
    "mimo2": (make_mimo2, "MiMo-V2-Flash-Tiny"),
    "mimo2-fused": (make_mimo2_fused, "MiMo-V2.5-Tiny"),
    "mimo2-pro": (make_mimo2_pro, "MiMo-V2.5-Pro-Tiny"),
    "deepseek32": (make_deepseek32, "DeepSeek-V3.2-Tiny"),
    "deepseek32-wide": (make_deepseek32_wide, "DeepSeek-V3.2-Wide-Tiny"),
    "deepseek32-fp8": (make_deepseek32_fp8, "DeepSeek-V3.2-FP8-Tiny"),
    "deepseek32-fp8-nextn2": (make_deepseek32_fp8_nextn2, "DeepSeek-V3.2-FP8-NextN2-Tiny"),
    "qwen35-fp8": (make_qwen35_fp8, "Qwen3.5-FP8-Tiny"),
    "qwen35moe-fp8": (make_qwen35_moe_fp8, "Qwen3.5-MoE-FP8-Tiny"),
    "glm4moe-fp8": (make_glm4_moe_fp8, "GLM-4.5-FP8-Tiny"),
    "glm-dsa-fp8": (make_glm5_fp8, "GLM-5-FP8-Tiny"),
    "nemotron_h_moe-modelopt-fp8": (make_nemotron_h_modelopt_fp8, "Nemotron-H-FP8-Tiny"),
    "qwen35-modelopt-fp8": (make_qwen35_modelopt_fp8, "Qwen3.5-ModelOpt-FP8-Tiny"),
}
#: the conversions: name -> upstream's extra flags
MODES: dict[str, tuple[str, ...]] = {"full": (), "mtp": ("--mtp",), "nomtp": ("--no-mtp",)}


def upstream_convert(ckpt: Path, out: Path, outtype: str, flags: tuple[str, ...] = (), tree: Path = TREE,
                     extra: tuple[str, ...] = (), timeout: float = 600.0) -> Path:
    """``convert_hf_to_gguf.py CKPT --outtype OUTTYPE --outfile OUT FLAGS`` with the b11434 tree's gguf-py."""
    cmd = [sys.executable, "-c", _BOOT, str(tree), str(ckpt), "--outtype", outtype, "--outfile", str(out), *flags,
           *extra]
    env = {**os.environ, "PYTHONPATH": f"{tree}/gguf-py", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    written = out.is_file() or any(out.parent.glob(out.stem + "-00001-of-*.gguf"))  # a split conversion
    if p.returncode != 0 or not written:
        raise RuntimeError(f"{ckpt}: upstream convert failed (exit {p.returncode}): {(p.stderr or p.stdout)[-1500:]}")
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--only", action="append", help="family (repeatable)")
    ap.add_argument("--outtype", action="append", help="bf16, f16, f32, q8_0 (repeatable; default bf16 and q8_0)")
    ap.add_argument("--mode", action="append", choices=sorted(MODES), help="full, mtp, nomtp (repeatable; default all)")
    ap.add_argument("--manifests", action="store_true", help="write the oracle manifests into tests/data/mtp")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests"))
    from golden_manifest import describe

    for fam, (maker, folder) in MAKERS.items():
        if args.only and fam not in args.only:
            continue
        ckpt = maker(args.out / folder)
        for outtype in args.outtype or ["bf16", "q8_0"]:
            for mode, flags in MODES.items():
                if args.mode and mode not in args.mode:
                    continue
                gguf = upstream_convert(ckpt, args.out / f"{folder}-{outtype}-{mode}.gguf", outtype, flags)
                print(gguf)
                if args.manifests:
                    MANIFESTS.mkdir(parents=True, exist_ok=True)
                    (MANIFESTS / f"{fam}-{outtype}-{mode}.json").write_text(
                        json.dumps(describe(gguf), indent=1, sort_keys=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
