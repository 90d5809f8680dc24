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

from ... import schema as S
from ...errors import ConvertError
from ...formats.transforms import Transform
from ...kit.common import (
    BACKBONE_GLOBALS,
    BACKBONE_LAYER,
    NameTable,
    base_kvs,
    finish_plan,
    is_skipped,
    tensor_spec,
)
from ...kit.hparams import HParams
from ...plan import KV, Plan, TensorSpec
from ...roles.convert import INPUT_EMBEDDING, Context, TargetFacts, TargetTensor
from ..dflash.d2t import d2t_spec
from .transforms import Eagle3Permute

#: the method's name (hf2gguf/naming.method_name); default output names start with FILE_PREFIX instead
METHOD_WORD = "EAGLE3"
#: llama.cpp's ``-hf`` finds the file beside its target by this file-name keyword (``common/download.cpp``)
FILE_PREFIX = "eagle3-"
ARCHITECTURES: tuple[str, ...] = ("LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "Eagle3Speculator",
                                  "Eagle3DraftModel", "LlamaForCausalLM")

#: HF -> GGUF names of EAGLE-3 (§4.3): one Llama layer (the shared backbone; ``midlayer.*`` = ``layers.0.*``) whose
#: ``hidden_norm`` normalises the target hidden states, the backbone globals, ``fc`` and its input norm.
NAMES = NameTable(
    layer={**BACKBONE_LAYER, "hidden_norm.weight": S.L_ATTN_NORM_2},
    globals={
        **BACKBONE_GLOBALS,
        "fc.weight": S.T_FC,
        "input_norm.weight": S.T_ENC_NORM,  # norm_before_fc
    },
)

#: a self-contained EAGLE-3 draft takes only the input embedding from the target (its lm_head is its own)
TARGET_TENSORS: tuple[TargetTensor, ...] = (
    INPUT_EMBEDDING,
)
#: the tokenizer always comes from --target-model-dir; --dspark is not for these drafts
TOKENIZER_IN_CHECKPOINT = False
DSPARK_FLAG = False


def hf_names(gguf_name: str) -> tuple[str, ...]:
    """``midlayer.*`` and ``layers.0.*`` for the one layer (both spellings exist in released checkpoints)."""
    names = NAMES.hf_names(gguf_name)
    if gguf_name.startswith("blk."):
        return tuple(alias for n in names for alias in ("midlayer." + n.split(".", 2)[2], n))
    return names


def target_facts(ctx: Context, plan: Plan) -> TargetFacts:
    """The fit facts of an ``eagle3`` file: ``fc`` takes the target hidden states of its (three) target layers;
    the draft has its own rope and no mask token."""
    taps = plan.value(S.EAGLE3_TARGET_LAYERS)
    return TargetFacts(n_taps=len(taps) if isinstance(taps, list) and taps else None)


def bare_name(hf_name: str) -> str:
    """``midlayer.*`` / ``layers.0.*`` / ``model.*`` / ``text_model.*`` names -> bare names (§4.3, §4.4)."""
    name = hf_name.replace("language_model.", "").replace("text_model.", "")
    if name.startswith("model."):
        name = name[len("model."):]
    if name.startswith("midlayer."):
        name = "layers.0." + name[len("midlayer."):]
    return name


def rope_freqs(hp: HParams, where: str = "config.json") -> np.ndarray:
    """llama3 rope scaling factors per rotation pair (§4.3), evaluated in float32 like upstream."""
    rd = hp.rope()
    dim = hp.get("head_dim") or (hp.u32("hidden_size")
                                 // hp.positive("num_attention_heads"))
    base = hp.number("rope_theta", rd.get("rope_theta", 10000.0))
    factor = hp.number("rope_scaling.factor", rd.get("factor", 8.0))
    low = hp.number("rope_scaling.low_freq_factor", rd.get("low_freq_factor", 1.0))
    high = hp.number("rope_scaling.high_freq_factor", rd.get("high_freq_factor", 4.0))
    old_ctx = hp.number("rope_scaling.original_max_position_embeddings", rd.get("original_max_position_embeddings", 8192))
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


def is_eagle3(hp: HParams) -> bool:
    """Upstream's switch (§3.4): ``draft_vocab_size`` present and exactly one hidden layer."""
    return "draft_vocab_size" in hp and hp.get("num_hidden_layers") == 1


def _target_int(ctx: Context, key: str) -> int:
    """An integer of the target config (or its text_config) that EAGLE-3 needs."""
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
        ctx.err("eagle_aux_hidden_state_layer_ids", "target-layers", f"{ctx.where}: {source} gives target layer "
                f"{bad[0]}, outside the target's {n_tgt} layers (valid: 0..{n_tgt})")
    ths = raw.get("target_hidden_size")
    ths = _target_int(ctx, "hidden_size") if ths is None else HParams(raw, ctx.where).u32("target_hidden_size")
    return [KV(S.EAGLE3_TARGET_LAYERS, VT.ARRAY, taps, VT.INT32),
            KV(S.EAGLE3_TARGET_HIDDEN_SIZE, VT.UINT32, int(ths)),
            KV(S.EAGLE3_NORM_BEFORE_RESIDUAL, VT.BOOL, bool(raw.get("norm_before_residual", False))),
            KV(S.EAGLE3_NORM_BEFORE_FC, VT.BOOL, bool(raw.get("norm_before_fc", False)))]


def build_plan(ctx: Context) -> Plan:
    """Plan for an EAGLE-3 draft."""
    raw = ctx.draft.config
    where = ctx.where
    hp = HParams.draft(raw, where)
    if not is_eagle3(hp):
        found = f"num_hidden_layers {hp.get('num_hidden_layers')!r}" + ("" if "draft_vocab_size" in hp else " and no 'draft_vocab_size'")
        raise ConvertError(f"{where}: a Llama model but not an EAGLE-3 draft (needs 'draft_vocab_size' and "
                           f"num_hidden_layers 1, found {found}); plain Llama models are not drafts")
    head = eagle3_head_kvs(ctx, raw)
    n_head = hp.positive("num_attention_heads")
    n_kv = hp.positive("num_key_value_heads", hp.get("num_key_value_heads") or n_head)
    hd = (hp.positive("head_dim") if hp.get("head_dim")
          else hp.u32("hidden_size") // n_head)
    norm_before_fc = bool(raw.get("norm_before_fc", False))

    tensors = _rope_freqs_tensor(hp, where)
    notes = ["q/k rows permuted to interleaved pairs (llama rope)"]
    if tensors:
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
        if bare == "input_norm.weight" and not norm_before_fc:
            raise ConvertError(f"{ctx.draft.ref(hf).file}: tensor '{hf}' is present but config norm_before_fc is not "
                               "true; llama.cpp would reject the file (set norm_before_fc: true if the draft uses it)")
        tensors.append(tensor_spec(ctx.draft, hf, _gguf_name(ctx, hf, bare), ctx.out_type,
                                   transform=_qk_permute(bare, n_head, n_kv)))
    if norm_before_fc and not any(t.name == S.T_ENC_NORM for t in tensors):
        raise ConvertError(f"{ctx.draft.path}: config norm_before_fc is true but the checkpoint has no 'input_norm.weight'")
    if d2t is not None:
        tensors.append(d2t_spec(ctx.draft, d2t, _target_int(ctx, "vocab_size")))
    vocab_size = hp.vocab_size("vocab_size", required=True)
    family = [KV(S.VOCAB_SIZE.format(arch=S.ARCH_EAGLE3), VT.UINT32, vocab_size),
              KV(S.ROPE_DIMENSION_COUNT.format(arch=S.ARCH_EAGLE3), VT.UINT32, int(hd))]
    vocab = ctx.target_vocab(vocab_size, "llama")
    return finish_plan(S.ARCH_EAGLE3, head, base_kvs(S.ARCH_EAGLE3, hp, ctx.file_type, where), family, vocab, [],
                       tensors, notes)


def _rope_freqs_tensor(hp: HParams, where: str) -> list[TensorSpec]:
    """``rope_freqs.weight``, generated for llama3 rope scaling (§4.3); nothing otherwise."""
    if str(hp.rope().get("rope_type", "")).lower() != "llama3":
        return []
    data = rope_freqs(hp, where)
    return [TensorSpec(S.T_ROPE_FREQS, data.shape, QT.F32, origin="generated", data=data)]


def _gguf_name(ctx: Context, hf: str, bare: str) -> str:
    """The GGUF name of a draft tensor: layer 0 and the five EAGLE-3 globals only."""
    name = NAMES.gguf_name(bare) if bare.startswith("layers.0.") or bare in NAMES.globals else None
    if name is None:
        raise ConvertError(f"{ctx.draft.ref(hf).file}: tensor '{hf}' has no GGUF name in the eagle3 layout")
    return name


def _qk_permute(bare: str, n_head: int, n_kv: int) -> Transform | None:
    """llama.cpp's q/k permutation for Llama rope (§5.2): q with n_head groups, k with n_head_kv."""
    if bare.endswith(("self_attn.q_proj.weight", "self_attn.q_proj.bias")):
        return Eagle3Permute(n_head, n_head)
    if bare.endswith(("self_attn.k_proj.weight", "self_attn.k_proj.bias")):
        return Eagle3Permute(n_head, n_kv)
    return None
