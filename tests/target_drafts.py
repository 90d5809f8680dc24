"""Drafts on the targets of ``target_kit`` (Qwen3.5/3.6, Ling-3, GLM, Muse-Glimmer, Laguna, and one or more per
custom vocab method: Qwen2, Qwen2-VL, DeepSeek, DeepSeek-V3, Gemma 1-3, PanGu, Phi-3, InternLM, Arctic, Xverse,
ChatGLM, HunYuan, Grok, MPT, Jamba, DeciLM, Mamba, OpenELM, MiniMax-01, Kimi, PLaMo, RWKV) and
upstream b11434's output for each, as manifests in ``tests/data/oracle-b11434-targets/``.

Each case is (draft kind, draft options, target name). The drafts are small (hidden 64 = the targets' hidden size,
2 layers) but carry the target's full vocabulary where a draft tensor has one (DSpark Markov heads, DFlash2
codebooks). Regenerate the manifests with upstream's converter (it needs torch and transformers):

    python tests/target_drafts.py OUT --oracle LLAMA_CPP_TREE [--only CASE,CASE]

Example:
    >>> CASES["dflash-ling3"][2], NO_ORACLE["dflash-qwen3-moe"][2]
    ('ling3', 'qwen3-moe')
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from draft_kit import Maker, Tensor, save_safetensors

HERE = Path(__file__).resolve().parent
ORACLE = HERE / "data" / "oracle-b11434-targets"
H, NH, NKV, HD, FF = 64, 4, 2, 16, 128
OUTTYPES_ALL = ("bf16", "f16", "f32", "q8_0")


def _layers(m: Maker, n: int, hidden: int = H, heads: int = NH, kv: int = NKV, head_dim: int = HD,
            ff: int = FF) -> dict[str, Tensor]:
    t: dict[str, Tensor] = {}
    q, k = heads * head_dim, kv * head_dim
    for i in range(n):
        p = f"layers.{i}."
        t.update({p + "input_layernorm.weight": m.norm(hidden), p + "post_attention_layernorm.weight": m.norm(hidden),
                  p + "self_attn.q_proj.weight": m.t(q, hidden), p + "self_attn.k_proj.weight": m.t(k, hidden),
                  p + "self_attn.v_proj.weight": m.t(k, hidden), p + "self_attn.o_proj.weight": m.t(hidden, q),
                  p + "self_attn.q_norm.weight": m.norm(head_dim), p + "self_attn.k_norm.weight": m.norm(head_dim),
                  p + "mlp.gate_proj.weight": m.t(ff, hidden), p + "mlp.up_proj.weight": m.t(ff, hidden),
                  p + "mlp.down_proj.weight": m.t(hidden, ff)})
    return t


#: the dimensions a maker takes as keywords (defaults: the committed cases' H, 2 layers, NH x HD, NKV, FF, BF16)
DIM_DEFAULTS: dict[str, Any] = {"hidden": H, "layers": 2, "heads": NH, "kv": NKV, "head_dim": HD, "ff": FF,
                                "dtype": "BF16"}


def _dims(extra: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the maker dimensions popped from ``extra`` over :data:`DIM_DEFAULTS`, their config keys)."""
    d = {k: extra.pop(k, v) for k, v in DIM_DEFAULTS.items()}
    keys = {"hidden_size": d["hidden"], "num_attention_heads": d["heads"], "num_key_value_heads": d["kv"],
            "head_dim": d["head_dim"], "intermediate_size": d["ff"],
            "torch_dtype": {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[d["dtype"]]}
    return d, {k: v for k, v in keys.items() if k not in extra}


def _body(m: Maker, d: dict[str, Any], taps: list[int]) -> dict[str, Tensor]:
    h = d["hidden"]
    return {"fc.weight": m.t(h, len(taps) * h), "hidden_norm.weight": m.norm(h), "norm.weight": m.norm(h),
            **_layers(m, d["layers"], h, d["heads"], d["kv"], d["head_dim"], d["ff"])}


def _config(arch: str, layers: int, vocab: int, **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {
        "architectures": [arch], "model_type": "qwen3", "hidden_size": H, "intermediate_size": FF,
        "num_attention_heads": NH, "num_key_value_heads": NKV, "head_dim": HD, "num_hidden_layers": layers,
        "rms_norm_eps": 1e-6, "vocab_size": vocab, "max_position_embeddings": 32768, "hidden_act": "silu",
        "torch_dtype": "bfloat16", "tie_word_embeddings": False, "rope_theta": 10000000.0,
        "layer_types": ["full_attention"] * layers,
    }
    c.update(extra)
    return c


def dflash(out: Path, vocab: int, mask: int, taps: list[int], seed: int, **extra: Any) -> Path:
    """A z-lab style DFlash draft (no embeddings, no head: both come from the target); ``extra``: config keys and
    the :data:`DIM_DEFAULTS` keywords."""
    d, keys = _dims(extra)
    cfg = _config("DFlashDraftModel", d["layers"], vocab, **keys,
                  **{"dflash_config": {"mask_token_id": mask, "target_layer_ids": taps}, "block_size": 16,
                     "num_target_layers": len(taps), **extra})
    return _save(out, cfg, _body(Maker(seed, d["dtype"]), d, taps))


def dspark(out: Path, vocab: int, mask: int, taps: list[int], seed: int, rank: int = 4, confidence: bool = True,
           draft_vocab: int | None = None, **extra: Any) -> Path:
    """A DSpark draft (Markov head over the whole vocabulary, confidence head unless ``confidence`` is false; rank 0:
    no Markov head), no embeddings of its own; ``extra``: config keys and the :data:`DIM_DEFAULTS` keywords. With
    ``draft_vocab``: vLLM speculators' layout instead (``DSparkSpeculator``, the layer config nested in
    ``transformer_layer_config``, 1-based ``aux_hidden_state_layer_ids``, the draft's own ``embed_tokens``, a head and
    ``markov_w2`` of ``draft_vocab`` rows, ``d2t`` / ``t2d`` when that is less than ``vocab``)."""
    import numpy as np

    d, keys = _dims(extra)
    dsp = {"block_size": 7, "mask_token_id": mask, "target_layer_ids": taps, "num_target_layers": len(taps),
           "markov_rank": rank, "markov_head_type": "vanilla", "enable_confidence_head": confidence,
           "confidence_head_with_markov": True}
    if draft_vocab is None:
        cfg = _config("Qwen3DSparkModel", d["layers"], vocab, **keys, **{**dsp, **extra})
    else:
        layer = _config("Qwen3DSparkModel", d["layers"], vocab, **keys)
        layer.pop("architectures")
        dsp.pop("target_layer_ids")
        dsp.pop("num_target_layers")
        cfg = {"architectures": ["DSparkSpeculator"], "speculators_model_type": "dspark",
               "speculators_version": "0.3.0",
               "transformer_layer_config": layer, **dsp, "aux_hidden_state_layer_ids": [i + 1 for i in taps],
               "sample_from_anchor": True, "draft_vocab_size": draft_vocab, "target_hidden_size": d["hidden"],
               "speculators_config": {"algorithm": "dspark", "verifier": {"name_or_path": "target",
                                                                          "architectures": ["Qwen3ForCausalLM"]}},
               **extra}
    m = Maker(seed, d["dtype"])
    h, vd = d["hidden"], draft_vocab or vocab
    t = {"fc.weight": m.t(h, len(taps) * h), "hidden_norm.weight": m.norm(h), "norm.weight": m.norm(h)}
    if rank:
        t.update({"markov_head.markov_w1.weight": m.t(vocab, rank), "markov_head.markov_w2.weight": m.t(vd, rank)})
    if confidence:
        t.update({"confidence_head.proj.weight": m.t(1, h + rank), "confidence_head.proj.bias": m.t(1)})
    t.update(_layers(m, d["layers"], h, d["heads"], d["kv"], d["head_dim"], d["ff"]))
    if draft_vocab is not None:
        t.update({"embed_tokens.weight": m.t(vocab, h), "lm_head.weight": m.t(vd, h)})
        if vd < vocab:
            ids = np.sort(m.rng.choice(vocab, size=vd, replace=False)).astype(np.int64)
            t2d = np.zeros(vocab, dtype=np.bool_)
            t2d[ids] = True
            t.update({"d2t": ("I64", ids - np.arange(vd, dtype=np.int64)), "t2d": ("BOOL", t2d)})
    return _save(out, cfg, t)


def dflash2(out: Path, vocab: int, mask: int, taps: list[int], seed: int, rank: int = 8, kernel: int = 2,
            group: int = 16, top_k: int = 4, block: int = 8, **extra: Any) -> Path:
    """A DFlash2 draft (causal convolutions, candidate selector over the whole vocabulary); ``extra``: config keys
    and the :data:`DIM_DEFAULTS` keywords."""
    d, keys = _dims(extra)
    cfg = _config("DFlash2DraftModel", d["layers"], vocab, **keys,
                  **{"num_target_layers": len(taps),
                     "dflash_config": {"block_size": block, "conv_kernel_size": kernel, "conv_group_size": group,
                                       "selector_rank": rank, "selector_top_k": top_k, "mask_token_id": mask,
                                       "target_layer_ids": taps}, **extra})
    m = Maker(seed, d["dtype"])
    h = d["hidden"]
    t = _body(m, d, taps)
    for i in range(d["layers"]):
        for mod in ("attention_conv", "mlp_conv"):
            t[f"layers.{i}.{mod}.base_kernel"] = m.t(2, kernel, h, scale=0.5)
            t[f"layers.{i}.{mod}.kernel_projection.weight"] = m.t(2 * kernel * h // group, h)
    t["candidate_selector.predecessor_codebook"] = m.t(vocab, rank)
    t["candidate_selector.successor_codebook"] = m.t(vocab, rank)
    t["candidate_selector.hidden_projection.weight"] = m.t(rank, h)
    return _save(out, cfg, t)


def eagle3(out: Path, vocab: int, taps: list[int], seed: int, draft_vocab: int = 500, target_hidden: int | None = None,
           speculators: bool = False, **extra: Any) -> Path:
    """An EAGLE-3 draft: one mid layer whose q/k/v read [embedding, hidden] (2 x hidden), ``fc`` from ``len(taps)``
    target states of ``target_hidden`` (default: the draft's hidden), a reduced head of ``draft_vocab`` rows with
    ``d2t`` / ``t2d``. SpecForge layout (``LlamaForCausalLMEagle3``, ``midlayer.*``), or with ``speculators``
    vLLM speculators' (``Eagle3Speculator``, ``layers.0.*`` and the draft's own ``embed_tokens``, 1-based aux ids);
    ``extra``: config keys (of the layer config) and the :data:`DIM_DEFAULTS` keywords (``layers`` unused)."""
    import numpy as np

    d, keys = _dims(extra)
    h, th, q, k = d["hidden"], target_hidden or d["hidden"], d["heads"] * d["head_dim"], d["kv"] * d["head_dim"]
    m = Maker(seed, d["dtype"])
    ids = np.sort(m.rng.choice(vocab, size=draft_vocab, replace=False)).astype(np.int64)
    t2d = np.zeros(vocab, dtype=np.bool_)
    t2d[ids] = True
    p = "layers.0." if speculators else "midlayer."
    t = {"fc.weight": m.t(h, len(taps) * th), p + "hidden_norm.weight": m.norm(h), "norm.weight": m.norm(h),
         "lm_head.weight": m.t(draft_vocab, h), "d2t": ("I64", ids - np.arange(draft_vocab, dtype=np.int64)),
         "t2d": ("BOOL", t2d), p + "input_layernorm.weight": m.norm(h),
         p + "post_attention_layernorm.weight": m.norm(h),
         p + "self_attn.q_proj.weight": m.t(q, 2 * h), p + "self_attn.k_proj.weight": m.t(k, 2 * h),
         p + "self_attn.v_proj.weight": m.t(k, 2 * h), p + "self_attn.o_proj.weight": m.t(h, q),
         p + "mlp.gate_proj.weight": m.t(d["ff"], h), p + "mlp.up_proj.weight": m.t(d["ff"], h),
         p + "mlp.down_proj.weight": m.t(h, d["ff"])}
    layer = {**_config("LlamaForCausalLMEagle3", 1, vocab, **keys), "model_type": "llama", "rope_scaling": None,
             "bos_token_id": 0, "eos_token_id": 1}
    layer.pop("layer_types")
    if speculators:
        t["embed_tokens.weight"] = m.t(vocab, h)
        layer.pop("architectures")
        cfg = {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
               "speculators_version": "0.3.0", "transformer_layer_config": {**layer, **extra},
               "draft_vocab_size": draft_vocab, "target_hidden_size": th,
               "norm_before_residual": True, "eagle_aux_hidden_state_layer_ids": [i + 1 for i in taps],
               "speculators_config": {"algorithm": "eagle3", "verifier": {"name_or_path": "target",
                                                                          "architectures": ["Qwen3ForCausalLM"]}}}
    else:
        cfg = {**layer, "draft_vocab_size": draft_vocab, **({"target_hidden_size": th} if th != h else {}),
               "eagle_config": {"eagle_aux_hidden_state_layer_ids": taps, "use_aux_hidden_state": True}, **extra}
    return _save(out, cfg, t)


def _save(out: Path, cfg: dict[str, Any], tensors: dict[str, Tensor]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=1), encoding="utf-8")
    save_safetensors(out / "model.safetensors", tensors)
    return out


QV, QMASK = 248320, 248077  # Qwen3.5 vocab_size and the first unused id after the added tokens
DV, DMASK = 129280, 128799

#: case -> (draft maker, its kwargs, target name, outtypes compared)
CASES: dict[str, tuple[Any, dict[str, Any], str, tuple[str, ...]]] = {
    # Qwen3.5/3.6: nested text_config, M-RoPE sections, the draft's own SWA / partial rotary / causal rules
    "dflash-qwen35": (dflash, dict(vocab=QV, mask=QMASK, taps=[1, 3, 5], seed=3201, use_sliding_window=True,
                                   sliding_window=64, max_window_layers=0,
                                   layer_types=["sliding_attention", "full_attention"]), "qwen35", OUTTYPES_ALL),
    "dspark-qwen35": (dspark, dict(vocab=QV, mask=QMASK, taps=[0, 4, 6], seed=3202), "qwen35", OUTTYPES_ALL),
    "dflash2-qwen35": (dflash2, dict(vocab=QV, mask=QMASK, taps=[1, 2, 6], seed=3203), "qwen35", ("bf16", "q8_0")),
    "dflash-qwen35-causal": (dflash, dict(vocab=QV, mask=QMASK, taps=[1, 3], seed=3204, is_causal=True,
                                          rope_parameters={"rope_theta": 10000000.0, "rope_type": "default",
                                                           "partial_rotary_factor": 0.5}), "qwen35-causal", ("bf16",)),
    "dspark-qwen35-moe": (dspark, dict(vocab=QV, mask=QMASK, taps=[0, 1, 2], seed=3205), "qwen35-moe", ("bf16",)),
    "dflash2-qwen35-moe-causal": (dflash2, dict(vocab=QV, mask=QMASK, taps=[2, 5, 9], seed=3206),
                                  "qwen35-moe-causal", ("bf16",)),
    # Ling-3 (gpt2), GLM (_set_vocab_glm), Muse-Glimmer (eot <|eot|>), Laguna (template, eot from the draft)
    "dspark-ling3": (dspark, dict(vocab=QV, mask=QMASK, taps=[1, 3, 4], seed=3207), "ling3", ("bf16", "q8_0")),
    "dflash-glm4-moe": (dflash, dict(vocab=QV, mask=QMASK, taps=[1, 2, 4], seed=3208), "glm4-moe", ("bf16",)),
    "dspark-glm5-next": (dspark, dict(vocab=QV, mask=QMASK, taps=[0, 2, 4], seed=3209), "glm5-next", ("bf16",)),
    "dflash-muse": (dflash, dict(vocab=QV, mask=QMASK, taps=[1, 3, 4], seed=3210), "muse", ("bf16",)),
    "dflash-laguna": (dflash, dict(vocab=QV, mask=QMASK, taps=[1, 3, 4], seed=3211, eos_token_id=[248044, 248046],
                                   bos_token_id=248044), "laguna", ("bf16",)),
    # the other "byte-level BPE + named ids" and SentencePiece methods
    "dflash-glm4": (dflash, dict(vocab=QV, mask=QMASK, taps=[1, 2, 4], seed=3213), "glm4", ("bf16",)),
    "dspark-solar-open": (dspark, dict(vocab=QV, mask=QMASK, taps=[0, 2, 4], seed=3214), "solar-open", ("bf16",)),
    "dflash-dots3": (dflash, dict(vocab=QV, mask=QMASK, taps=[1, 3, 4], seed=3215), "dots3", ("bf16",)),
    "dflash-exaone4": (dflash, dict(vocab=QV, mask=QMASK, taps=[0, 1, 5], seed=3216), "exaone4", ("bf16",)),
    "dflash2-llada": (dflash2, dict(vocab=QV, mask=QMASK, taps=[1, 2, 3], seed=3217), "llada", ("bf16",)),
    "dflash-dream": (dflash, dict(vocab=QV, mask=QMASK, taps=[1, 3, 4], seed=3222), "dream", ("bf16",)),
    "dspark-stablelm": (dspark, dict(vocab=QV, mask=QMASK, taps=[0, 3, 4], seed=3223), "stablelm", ("bf16",)),
    "dspark-minicpm": (dspark, dict(vocab=512, mask=3, taps=[0, 2, 4], seed=3219), "minicpm", ("bf16", "f32")),
    "dflash-ernie45": (dflash, dict(vocab=512, mask=3, taps=[1, 3, 4], seed=3220), "ernie45", ("bf16",)),
    "dflash-nemotron": (dflash, dict(vocab=512, mask=3, taps=[1, 2, 3], seed=3221), "nemotron", ("bf16",)),
    # custom vocab methods: SentencePiece variants (InternLM2/3, Arctic), LlamaHfVocab (Jamba, Deci, Xverse),
    # fallbacks (MPT, Grok, Mamba, OpenELM), byte-level BPE with named ids (ChatGLM, HunYuan)
    "dflash-internlm2": (dflash, dict(vocab=512, mask=3, taps=[1, 3, 4], seed=3230), "internlm2", ("bf16",)),
    "dspark-internlm3": (dspark, dict(vocab=512, mask=3, taps=[0, 2, 4], seed=3231), "internlm3", ("bf16",)),
    "dflash2-arctic": (dflash2, dict(vocab=512, mask=3, taps=[1, 2, 3], seed=3232), "arctic", ("bf16",)),
    "dflash-jamba": (dflash, dict(vocab=512, mask=3, taps=[1, 3, 4], seed=3233), "jamba", ("bf16",)),
    "dspark-jamba-hf": (dspark, dict(vocab=512, mask=3, taps=[0, 2, 4], seed=3234), "jamba-hf", ("bf16",)),
    "dflash-deci": (dflash, dict(vocab=512, mask=3, taps=[1, 2, 4], seed=3235), "deci", ("bf16",)),
    "dspark-xverse": (dspark, dict(vocab=512, mask=3, taps=[0, 3, 4], seed=3236), "xverse", ("bf16",)),
    "dflash-mpt-spm": (dflash, dict(vocab=512, mask=3, taps=[1, 3, 4], seed=3237), "mpt-spm", ("bf16",)),
    "dflash-mpt-unknown-hash": (dflash, dict(vocab=1024, mask=3, taps=[1, 2, 4], seed=3254), "mpt-unknown-hash",
                                ("bf16",)),
    "dspark-mpt": (dspark, dict(vocab=QV, mask=QMASK, taps=[0, 2, 4], seed=3238), "mpt", ("bf16",)),
    "dflash-grok": (dflash, dict(vocab=QV, mask=QMASK, taps=[1, 3, 4], seed=3239), "grok", ("bf16",)),
    "dspark-grok-spm": (dspark, dict(vocab=512, mask=3, taps=[0, 2, 4], seed=3240), "grok-spm", ("bf16",)),
    "dflash-openelm": (dflash, dict(vocab=512, mask=3, taps=[1, 2, 3], seed=3241), "openelm", ("bf16",)),
    "dflash-mamba": (dflash, dict(vocab=QV, mask=QMASK, taps=[1, 3, 4], seed=3242), "mamba", ("bf16",)),
    "dflash-mamba2-spm": (dflash, dict(vocab=500, mask=3, taps=[1, 3, 4], seed=3243), "mamba2-spm", ("bf16",)),
    "dflash-chatglm": (dflash, dict(vocab=QV, mask=QMASK, taps=[1, 2, 4], seed=3244), "chatglm", ("bf16",)),
    "dspark-hunyuan": (dspark, dict(vocab=QV, mask=QMASK, taps=[0, 2, 4], seed=3245), "hunyuan", ("bf16",)),
    "dflash-hunyuan-pad": (dflash, dict(vocab=QV, mask=QMASK, taps=[1, 2, 4], seed=3255), "hunyuan-pad", ("bf16",)),
    "dflash-deci-bpe": (dflash, dict(vocab=128256, mask=1020, taps=[1, 3, 4], seed=3256), "deci-bpe", ("bf16",)),
    # tiktoken vocabularies behind remote tokenizer code: Qwen-1, HunYuan-MoE, Kimi-Linear's tiktoken.model
    "dflash-qwen1": (dflash, dict(vocab=151936, mask=151851, taps=[1, 3, 4], seed=3257), "qwen1", ("bf16",)),
    "dspark-hunyuan-moe": (dspark, dict(vocab=128167, mask=127962, taps=[0, 2, 4], seed=3258), "hunyuan-moe",
                           ("bf16",)),
    "dspark-kimi-tiktoken": (dspark, dict(vocab=140288, mask=140270, taps=[0, 2, 4], seed=3259), "kimi-tiktoken",
                             ("bf16",)),
    # MiniMax-01 (template file), Kimi-Linear / Kimi-K3 (eos from the draft), PLaMo 2/3, RWKV world and hybrids
    "dflash-minimax": (dflash, dict(vocab=QV, mask=QMASK, taps=[1, 3, 4], seed=3246), "minimax", ("bf16",)),
    "dspark-kimi-linear": (dspark, dict(vocab=QV, mask=QMASK, taps=[0, 2, 4], seed=3247), "kimi-linear", ("bf16",)),
    "dflash-kimi-k3": (dflash, dict(vocab=QV, mask=QMASK, taps=[1, 2, 4], seed=3248, eos_token_id=248044),
                       "kimi-k3", ("bf16",)),
    "dflash-plamo2": (dflash, dict(vocab=520, mask=3, taps=[1, 3, 4], seed=3249), "plamo2", ("bf16",)),
    "dspark-plamo3": (dspark, dict(vocab=512, mask=3, taps=[0, 2, 4], seed=3250), "plamo3", ("bf16",)),
    "dflash-rwkv7": (dflash, dict(vocab=512, mask=3, taps=[1, 3, 4], seed=3251), "rwkv7", ("bf16",)),
    "dflash2-rwkv6qwen2": (dflash2, dict(vocab=512, mask=3, taps=[1, 2, 3], seed=3252), "rwkv6qwen2", ("bf16",)),
    "dflash-arwkv7": (dflash, dict(vocab=QV, mask=QMASK, taps=[1, 3, 4], seed=3253), "arwkv7", ("bf16",)),
    # DFlash and DFlash2 on Ling-3; one draft on each family of tests/llama/families.py
    "dflash-ling3": (dflash, dict(vocab=QV, mask=QMASK, taps=[0, 2, 4], seed=3224), "ling3", ("bf16", "q8_0")),
    "dflash-ling3-last": (dflash, dict(vocab=QV, mask=QMASK, taps=[1, 3, 5], seed=3233), "ling3", ("bf16",)),
    "dflash2-ling3": (dflash2, dict(vocab=QV, mask=QMASK, taps=[1, 3, 4], seed=3225), "ling3", ("bf16",)),
    "dflash2-llama3": (dflash2, dict(vocab=QV, mask=QMASK, taps=[1, 2, 4], seed=3226), "llama3", ("bf16",)),
    "dspark-qwen3-next": (dspark, dict(vocab=QV, mask=QMASK, taps=[1, 3, 6], seed=3227), "qwen3-next", ("bf16",)),
    "dflash-gpt-oss": (dflash, dict(vocab=QV, mask=QMASK, taps=[0, 2, 4], seed=3228), "gpt-oss", ("bf16",)),
    "dspark-minimax-m2": (dspark, dict(vocab=QV, mask=QMASK, taps=[1, 3, 4], seed=3229), "minimax-m2", ("bf16",)),
    "dflash-lfm2": (dflash, dict(vocab=QV, mask=QMASK, taps=[1, 2, 4], seed=3230), "lfm2", ("bf16",)),
    "dflash-nemotron-h": (dflash, dict(vocab=QV, mask=QMASK, taps=[0, 2, 5], seed=3231), "nemotron-h", ("bf16",)),
    "dflash-gemma4": (dflash, dict(vocab=302, mask=4, taps=[1, 2, 4], seed=3234), "gemma4", ("bf16",)),
    "dflash-qwen4exp": (dflash, dict(vocab=QV, mask=QMASK, taps=[0, 1, 2], seed=3255), "qwen4exp", ("bf16",)),
    "dflash-deepseek4": (dflash, dict(vocab=QV, mask=QMASK, taps=[0, 1, 3], seed=3256), "deepseek4", ("bf16",)),
    "dspark-mimo2": (dspark, dict(vocab=QV, mask=QMASK, taps=[0, 1], seed=3257), "mimo2", ("bf16",)),
    "dflash2-nanbeige": (dflash2, dict(vocab=QV, mask=QMASK, taps=[1, 2, 4], seed=3258), "nanbeige", ("bf16",)),
    # Qwen2 / Qwen2-VL / DeepSeek / DeepSeek-V3 / Gemma 1-3 / PanGu / Phi-3 vocab methods
    "dflash-qwen2": (dflash, dict(vocab=QV, mask=QMASK, taps=[1, 3, 4], seed=3260), "qwen2", ("bf16",)),
    "dspark-qwen25-vl": (dspark, dict(vocab=512, mask=3, taps=[0, 2, 4], seed=3261), "qwen25-vl", ("bf16",)),
    "dflash2-deepseek": (dflash2, dict(vocab=512, mask=3, taps=[1, 2, 3], seed=3262), "deepseek", ("bf16",)),
    "dspark-deepseek-v3": (dspark, dict(vocab=DV, mask=DMASK, taps=[0, 2, 4], seed=3263), "deepseek-v3",
                           ("bf16", "q8_0")),
    "dflash-gemma": (dflash, dict(vocab=512, mask=3, taps=[1, 3, 4], seed=3264), "gemma", ("bf16",)),
    "dspark-gemma2": (dspark, dict(vocab=512, mask=3, taps=[0, 2, 4], seed=3265), "gemma2", ("bf16",)),
    "dflash-gemma3-spm": (dflash, dict(vocab=512, mask=3, taps=[1, 2, 4], seed=3266), "gemma3-spm", ("bf16",)),
    "dflash-pangu": (dflash, dict(vocab=512, mask=3, taps=[1, 3, 4], seed=3267), "pangu", ("bf16",)),
    "dspark-phi3": (dspark, dict(vocab=520, mask=3, taps=[0, 2, 4], seed=3268), "phi3", ("bf16",)),
}

#: cases whose generated target's tokenizer hash upstream's table cannot hold (a stand-in vocabulary): case -> the
#: pre-tokenizer name the oracle run (tests/oracle_shim.py) and the comparison give that hash
HASH_STAND_INS: dict[str, str] = {"dflash-deci-bpe": "qwen2", "dspark-hunyuan-moe": "hunyuan",
                                  "dspark-kimi-tiktoken": "kimi-k2"}

#: cases upstream b11434 cannot convert (no oracle): the target's set_vocab stops on a draft (test_targets.py's
#: Qwen3-MoE test); case -> (draft maker, its kwargs, target name)
NO_ORACLE: dict[str, tuple[Any, dict[str, Any], str]] = {
    "dflash-qwen3-moe": (dflash, dict(vocab=QV, mask=QMASK, taps=[1, 2, 4], seed=3232), "qwen3-moe"),
}


def make_case(out: Path, case: str, targets: Path) -> tuple[Path, Path]:
    """(draft folder, target folder) of ``case``; targets are made once under ``targets``."""
    from target_kit import make_target

    maker, kwargs, target = CASES[case][:3] if case in CASES else NO_ORACLE[case]
    t = targets / target
    if not (t / "config.json").is_file():
        make_target(targets, target)
    return maker(out / case, **kwargs), t


def _shimmed_manifest(tree: Path, draft: Path, target: Path, out: Path, case: str, outtype: str, pre: str) -> None:
    """:func:`golden_manifest.write_upstream_manifest` through tests/oracle_shim.py (``pre`` for the unknown hash)."""
    import os
    import subprocess

    from golden_manifest import describe

    gguf = out / f"{case}.{outtype}.gguf"
    subprocess.run([sys.executable, str(HERE / "oracle_shim.py"), str(tree), pre, "--", str(draft),
                    "--target-model-dir", str(target), "--outtype", outtype, "--outfile", str(gguf)], check=True,
                   capture_output=True, env={**os.environ, "PYTHONPATH": str(tree / "gguf-py")})
    (ORACLE / f"{case}.{outtype}.json").write_text(json.dumps(describe(gguf), indent=1) + "\n")


def main(argv: list[str]) -> int:
    """``target_drafts.py OUT --oracle TREE [--only A,B]``: make each case, convert with upstream, store manifests."""
    out, tree = Path(argv[0]), Path(argv[argv.index("--oracle") + 1])
    sys.path.insert(0, str(HERE))
    from golden_manifest import write_upstream_manifest

    ORACLE.mkdir(parents=True, exist_ok=True)
    only = argv[argv.index("--only") + 1].split(",") if "--only" in argv else None
    for case in [c for c in CASES if only is None or c in only]:
        draft, target = make_case(out, case, out / "targets")
        for outtype in CASES[case][3]:
            if case in HASH_STAND_INS:
                _shimmed_manifest(tree, draft, target, out, case, outtype, HASH_STAND_INS[case])
            else:
                write_upstream_manifest(tree, draft, target, out, case, outtype, ORACLE)
            print(case, outtype, "ok", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
