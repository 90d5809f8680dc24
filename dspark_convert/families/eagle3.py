"""EAGLE-3 drafts (SpecForge ``LlamaForCausalLMEagle3``, AngelSlim ``Eagle3LlamaForCausalLM``, speculators
``Eagle3Speculator``, plain Llama configs with ``draft_vocab_size`` and one layer): arch ``eagle3``.

Contract §2.4, §3.4, §4.3, §5.2 (q/k permutation), §5.3 (d2t), §3.7 (files upstream writes but llama.cpp rejects).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from .. import schema as S
from ..check import Finding
from ..errors import ConvertError
from ..plan import KV, Plan, TensorSpec
from ..tokenizer.handlers import target_vocab_kvs
from ..transforms import d2t_absolute
from .common import (
    Context,
    _float,
    _int,
    _positive,
    base_kvs,
    check_vocab_size,
    draft_hparams,
    finish_plan,
    gguf_name,
    is_skipped,
    resolve_outtype,
    rope_dict,
    tensor_spec,
)

ARCHITECTURES = ("LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "Eagle3Speculator", "Eagle3DraftModel", "LlamaForCausalLM")
_GLOBALS = {"norm.weight", "fc.weight", "input_norm.weight", "embed_tokens.weight", "lm_head.weight"}


def bare_name(hf_name: str) -> str:
    """``midlayer.*`` / ``layers.0.*`` / ``model.*`` / ``text_model.*`` names -> bare names (§4.3, §4.4)."""
    name = hf_name.replace("language_model.", "").replace("text_model.", "")
    if name.startswith("model."):
        name = name[len("model."):]
    if name.startswith("midlayer."):
        name = "layers.0." + name[len("midlayer."):]
    return name


def rope_freqs(hp: dict[str, Any], where: str = "config.json") -> np.ndarray:
    """llama3 rope scaling factors per rotation pair (§4.3), evaluated in float32 like upstream."""
    rd = rope_dict(hp)
    dim = hp.get("head_dim") or _int(hp["hidden_size"], "hidden_size", where) // _positive(hp["num_attention_heads"], "num_attention_heads", where)
    base = _float(rd.get("rope_theta", 10000.0), "rope_theta", where)
    factor = _float(rd.get("factor", 8.0), "rope_scaling.factor", where)
    low = _float(rd.get("low_freq_factor", 1.0), "rope_scaling.low_freq_factor", where)
    high = _float(rd.get("high_freq_factor", 4.0), "rope_scaling.high_freq_factor", where)
    old_ctx = _float(rd.get("original_max_position_embeddings", 8192), "rope_scaling.original_max_position_embeddings", where)
    if not (base > 0 and factor > 0 and 0 < low < high and old_ctx > 0):  # the formula divides by each of these
        raise ConvertError(f"{where}: llama3 rope scaling needs rope_theta > 0, factor > 0, 0 < low_freq_factor < "
                           f"high_freq_factor and original_max_position_embeddings > 0; found {base}, {factor}, {low}, "
                           f"{high}, {old_ctx}")
    freqs = (1.0 / (np.float32(base) ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))).astype(np.float32)
    out = []
    for f in freqs:
        wavelen = np.float32(2 * math.pi) / f
        if wavelen < old_ctx / high:
            out.append(np.float32(1.0))
        elif wavelen > old_ctx / low:
            out.append(np.float32(factor))
        else:
            smooth = (np.float32(old_ctx) / wavelen - np.float32(low)) / np.float32(high - low)
            out.append(np.float32(1.0) / ((np.float32(1.0) - smooth) / np.float32(factor) + smooth))
    return np.array(out, dtype=np.float32)


def is_eagle3(hp: dict[str, Any]) -> bool:
    """Upstream's switch (§3.4): ``draft_vocab_size`` present and exactly one hidden layer."""
    return "draft_vocab_size" in hp and hp.get("num_hidden_layers") == 1


def _target_int(ctx: Context, key: str) -> int:
    cfg = {**ctx.target_config, **(ctx.target_config.get("text_config") or {})}
    v = cfg.get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        raise ConvertError(f"{ctx.target_dir / 'config.json'}: key '{key}' is {v!r}, expected an integer (EAGLE-3 needs it)")
    return v


def eagle3_head_kvs(ctx: Context, raw: dict[str, Any]) -> list[KV]:
    """The four keys written right after general.architecture (§2.4)."""
    n_tgt = _target_int(ctx, "num_hidden_layers")
    ids = raw.get("eagle_aux_hidden_state_layer_ids")
    if isinstance(ids, list) and ids:
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise ConvertError(f"{ctx.where}: eagle_aux_hidden_state_layer_ids is {ids!r}, expected integers")
        taps = list(ids)
    else:
        taps = [2, n_tgt // 2, n_tgt - 3]
    if len(taps) != 3:
        raise ConvertError(f"{ctx.where}: eagle_aux_hidden_state_layer_ids has {len(taps)} entries; llama.cpp needs exactly 3")
    bad = [t for t in taps if t < 0 or t > n_tgt]
    if bad:
        source = "'eagle_aux_hidden_state_layer_ids'" if isinstance(ids, list) and ids else f"the default taps {taps}"
        ctx.findings.append(Finding("error", "eagle_aux_hidden_state_layer_ids", "target-layers",
                                    f"{ctx.where}: {source} gives target layer {bad[0]}, outside the target's {n_tgt} "
                                    f"layers (valid: 0..{n_tgt})"))
    ths = raw.get("target_hidden_size")
    ths = _target_int(ctx, "hidden_size") if ths is None else _int(ths, "target_hidden_size", ctx.where)
    return [KV(S.EAGLE3_TARGET_LAYERS, VT.ARRAY, taps, VT.INT32),
            KV(S.EAGLE3_TARGET_HIDDEN_SIZE, VT.UINT32, int(ths)),
            KV(S.EAGLE3_NORM_BEFORE_RESIDUAL, VT.BOOL, bool(raw.get("norm_before_residual", False))),
            KV(S.EAGLE3_NORM_BEFORE_FC, VT.BOOL, bool(raw.get("norm_before_fc", False)))]


def build_plan(ctx: Context) -> Plan:
    """Plan for an EAGLE-3 draft."""
    raw = ctx.draft.config
    where = ctx.where
    hp = draft_hparams(raw, where)
    if not is_eagle3(hp):
        found = f"num_hidden_layers {hp.get('num_hidden_layers')!r}" + ("" if "draft_vocab_size" in hp else " and no 'draft_vocab_size'")
        raise ConvertError(f"{where}: a Llama model but not an EAGLE-3 draft (needs 'draft_vocab_size' and "
                           f"num_hidden_layers 1, found {found}); plain Llama models are not drafts")
    outtype = resolve_outtype(ctx.options.outtype, ctx.draft)
    out, file_type = S.OUTTYPES[outtype]
    head = eagle3_head_kvs(ctx, raw)
    n_head = _positive(hp.get("num_attention_heads"), "num_attention_heads", where)
    n_kv = _positive(hp.get("num_key_value_heads") or n_head, "num_key_value_heads", where)
    hd = _positive(hp["head_dim"], "head_dim", where) if hp.get("head_dim") else _int(hp.get("hidden_size"), "hidden_size", where) // n_head
    norm_before_fc = bool(raw.get("norm_before_fc", False))

    tensors: list[TensorSpec] = []
    notes = [f"outtype {outtype}", "q/k rows permuted to interleaved pairs (llama rope)"]
    if str(rope_dict(hp).get("rope_type", "")).lower() == "llama3":
        data = rope_freqs(hp, where)
        tensors.append(TensorSpec(S.T_ROPE_FREQS, data.shape, QT.F32, origin="generated", data=data))
        notes.append("rope_freqs.weight generated for llama3 rope scaling")
    d2t = None
    for hf in ctx.draft.names:
        if is_skipped(hf):
            continue
        bare = bare_name(hf)
        if bare == "t2d":
            continue
        if bare == "d2t":
            d2t = hf
            continue
        file = ctx.draft.ref(hf).file
        name = gguf_name(bare) if (bare.startswith("layers.0.") or bare in _GLOBALS) else None
        if name is None:
            raise ConvertError(f"{file}: tensor '{hf}' has no GGUF name in the eagle3 layout")
        if bare == "input_norm.weight" and not norm_before_fc:
            raise ConvertError(f"{file}: tensor '{hf}' is present but config norm_before_fc is not true; "
                               "llama.cpp would reject the file (set norm_before_fc: true if the draft uses it)")
        transform: str | None = None
        args: tuple[int, ...] = ()
        if bare.endswith(("self_attn.q_proj.weight", "self_attn.q_proj.bias")):
            transform, args = "eagle3_permute", (n_head, n_head)
        elif bare.endswith(("self_attn.k_proj.weight", "self_attn.k_proj.bias")):
            transform, args = "eagle3_permute", (n_head, n_kv)
        tensors.append(tensor_spec(ctx.draft, hf, name, out, transform=transform, transform_args=args))
    if norm_before_fc and not any(t.name == S.T_ENC_NORM for t in tensors):
        raise ConvertError(f"{ctx.draft.path}: config norm_before_fc is true but the checkpoint has no 'input_norm.weight'")
    if d2t is not None:
        ref = ctx.draft.ref(d2t)
        if ref.dtype == "BOOL":
            raise ConvertError(f"{ref.file}: tensor '{d2t}' has dtype BOOL, expected integer offsets")
        values = d2t_absolute(ctx.draft.read(d2t), _target_int(ctx, "vocab_size"), what=f"{ref.file}: tensor '{d2t}'")
        tensors.append(TensorSpec(S.T_D2T, values.shape, QT.I64, source=d2t, source_dtype=ref.dtype, data=values))
    if hp.get("vocab_size") is None:
        raise ConvertError(f"{where}: key 'vocab_size' is missing, expected the target's vocabulary size")
    check_vocab_size(hp["vocab_size"], "vocab_size", where)
    family = [KV(S.VOCAB_SIZE.format(arch=S.ARCH_EAGLE3), VT.UINT32, int(hp["vocab_size"])),
              KV(S.ROPE_DIMENSION_COUNT.format(arch=S.ARCH_EAGLE3), VT.UINT32, int(hd))]
    vocab = target_vocab_kvs(ctx.target_dir, hp.get("vocab_size"), "llama")
    return finish_plan(S.ARCH_EAGLE3, head, base_kvs(S.ARCH_EAGLE3, hp, file_type, where), family, vocab, [], tensors, notes)
