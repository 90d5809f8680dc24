"""The GLM-5 MTP family (upstream's ``GlmMoeDsaModel`` in ``conversion/glm.py``, a ``DeepseekV2Model``;
spec/drafts-beyond-dflash.md §1): GLM-5 / 5.1 / 5.2 (``GlmMoeDsaForCausalLM``), GGUF architecture ``glm-dsa``: MLA
attention with DeepSeek's sparse-attention (DSA) indexer.

What upstream's ``--mtp`` file holds for them:

- as for GLM-4.5 (:mod:`.glm`), the NextN layer(s) ``model.layers.{n+i}.*`` (``n`` = ``num_hidden_layers``) keep
  their index, with the embedding, final norm and head (``lm_head`` dropped when ``tie_word_embeddings``); each
  NextN block gets its MLA attention (``q_a_proj`` / ``q_a_layernorm`` / ``q_b_proj``, ``kv_a_proj_with_mqa`` /
  ``kv_a_layernorm``, ``o_proj``; ``kv_b_proj`` split per head into ``attn_k_b`` (the ``qk_nope_head_dim`` rows,
  transposed) and ``attn_v_b`` (the ``v_head_dim`` rows), by the config's ``num_key_value_heads``), the DSA indexer
  (``wq_b``, ``wk``, ``k_norm`` weight and bias, ``weights_proj`` -> ``indexer.proj`` always F32), its norms
  (``post_attention_layernorm`` -> ``ffn_norm``), router, shared and routed experts (stacked) and NextN tensors;
  nothing is added to the norms;
- the header: TextModel's generic block (``block_count = n + nextn``, ``head_count_kv`` 1: MLA as MQA), then
  DeepseekV2's keys (``leading_dense_block_count``, ``vocab_size``, ``q_lora_rank``, ``kv_lora_rank``,
  ``key_length`` = kv_lora_rank + qk_rope_head_dim and ``value_length`` = kv_lora_rank overwriting the head_dim
  values in their place, ``key_length_mla``, ``value_length_mla``, the expert keys, ``rope.dimension_count``,
  ``rope.scaling.yarn_log_multiplier`` with ``mscale_all_dim``), then GLM-DSA's (``rope.dimension_count``
  overwritten with qk_rope_head_dim x ``partial_rotary_factor`` (1.0), ``nextn_predict_layers``, the indexer's
  ``head_count`` / ``key_length`` / ``top_k`` and ``types`` (true = full)).

Upstream reads the config through transformers' ``GlmMoeDsaConfig`` (:func:`config_view`): its class defaults,
``head_dim`` = ``qk_rope_head_dim`` and the default ``indexer_types`` (every layer full unless
``index_topk_freq`` / ``index_skip_topk_offset`` / ``index_topk_pattern`` say otherwise).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from ... import schema as S
from ...errors import ConvertError
from ...hf.checkpoint import Checkpoint
from ...kit.common import base_kvs, mapped_once, tensor_type
from ...kit.hparams import HParams
from ...plan import KV, TensorSpec
from . import glm
from .head import Head
from .specs import NEXTN_ROWS, ExpertGroups, float_ref, layer_spec, target_archs
from .transforms import MlaKvBSplit

#: upstream's model class that exports the GLM-5 NextN layer with ``--mtp``
MTP_CLASSES = ("GlmMoeDsaModel",)
#: HF class -> GGUF arch: every architecture the target table registers to that class
ARCHS: dict[str, str] = target_archs(MTP_CLASSES)
#: a NextN layer's MLA attention (after ``model.layers.{n+i}.``) -> its GGUF name (after ``blk.{n+i}.``), as
#: upstream's ``DeepseekV2Model`` maps it: the same in GLM-4.7-Flash (:mod:`.glm_lite`); ``kv_b_proj`` is split
#: (:data:`KV_B`)
MLA_ATTENTION: dict[str, str] = {
    "input_layernorm.weight": S.L_ATTN_NORM,
    "post_attention_layernorm.weight": S.L_FFN_NORM,
    "self_attn.q_a_proj.weight": S.L_ATTN_Q_A,
    "self_attn.q_a_layernorm.weight": S.L_ATTN_Q_A_NORM,
    "self_attn.q_b_proj.weight": S.L_ATTN_Q_B,
    "self_attn.kv_a_proj_with_mqa.weight": S.L_ATTN_KV_A_MQA,
    "self_attn.kv_a_layernorm.weight": S.L_ATTN_KV_A_NORM,
    "self_attn.o_proj.weight": S.L_ATTN_OUT,
}
#: the DSA indexer of a GLM-5 NextN layer
INDEXER: dict[str, str] = {
    "self_attn.indexer.wq_b.weight": S.L_INDEXER_ATTN_Q_B,
    "self_attn.indexer.wk.weight": S.L_INDEXER_ATTN_K,
    "self_attn.indexer.k_norm.weight": S.L_INDEXER_K_NORM,
    "self_attn.indexer.k_norm.bias": S.L_INDEXER_K_NORM_B,
    "self_attn.indexer.weights_proj.weight": S.L_INDEXER_PROJ,
}
#: a NextN layer's tensor (after ``model.layers.{n+i}.``) -> its GGUF name (after ``blk.{n+i}.``); ``kv_b_proj``
#: is split (:data:`KV_B`), the experts stacked (:data:`glm.EXPERT_STACKS`)
LAYER: dict[str, str] = {**NEXTN_ROWS, **MLA_ATTENTION, **INDEXER, **glm.MLP}
#: ``kv_b_proj`` -> its two halves, in upstream's order
KV_B = "self_attn.kv_b_proj.weight"
KV_B_PARTS: dict[str, str] = {"k": S.L_ATTN_K_B, "v": S.L_ATTN_V_B}


def hf_layer(layer: dict[str, str]) -> list[tuple[str, str]]:
    """(checkpoint pattern, short GGUF name) of every NextN layer tensor of a ``DeepseekV2Model`` class whose layer
    table is ``layer`` (``kv_b_proj``'s halves and the expert stacks added), for :func:`.mtp.hf_names`."""
    return ([(f"model.layers.*.{hf}", name) for hf, name in layer.items()]
            + [(f"model.layers.*.{KV_B}", name) for name in KV_B_PARTS.values()]
            + [(f"model.layers.*.mlp.experts.*.{w}.weight", name) for w, name in glm.EXPERT_STACKS.items()])


#: (checkpoint pattern, short GGUF name) of every NextN layer tensor, for :func:`.mtp.hf_names`
HF_LAYER: list[tuple[str, str]] = hf_layer(LAYER)

#: the configuration classes upstream reads a ``DeepseekV2Model`` MTP family through: the columns of
#: :data:`MLA_CLASS_DEFAULTS`
MLA_CONFIG_CLASSES = ("GlmMoeDsaConfig", "DeepseekV32Config", "Glm4MoeLiteConfig")
#: each class's defaults (transformers 5) for the keys upstream reads, a column per class of
#: :data:`MLA_CONFIG_CLASSES`; None: the class has no such key (``Glm4MoeLiteConfig`` has no indexer)
MLA_CLASS_DEFAULTS: dict[str, tuple[Any, Any, Any]] = {
    #                            GLM-5    DS-V3.2  GLM-4.7-Flash
    "vocab_size":               (154880,  129280,  154880),
    "hidden_size":              (6144,    7168,    2048),
    "intermediate_size":        (12288,   18432,   10240),
    "moe_intermediate_size":    (2048,    2048,    1536),
    "num_hidden_layers":        (78,      61,      47),
    "num_attention_heads":      (64,      128,     20),
    "num_key_value_heads":      (64,      128,     20),
    "n_shared_experts":         (1,       1,       1),
    "n_routed_experts":         (256,     256,     64),
    "routed_scaling_factor":    (2.5,     2.5,     1.8),
    "kv_lora_rank":             (512,     512,     512),
    "q_lora_rank":              (2048,    1536,    768),
    "qk_rope_head_dim":         (64,      64,      64),
    "v_head_dim":               (256,     128,     256),
    "qk_nope_head_dim":         (192,     128,     192),
    "n_group":                  (1,       8,       1),
    "topk_group":               (1,       4,       1),
    "num_experts_per_tok":      (8,       8,       4),
    "norm_topk_prob":           (True,    True,    True),
    "max_position_embeddings":  (202752,  163840,  202752),
    "rms_norm_eps":             (1e-5,    1e-6,    1e-5),
    "tie_word_embeddings":      (False,   False,   False),
    "index_topk":               (2048,    2048,    None),
    "index_head_dim":           (128,     128,     None),
    "index_n_heads":            (32,      64,      None),
    "first_k_dense_replace":    (3,       3,       None),
}


def class_defaults(cls_name: str) -> dict[str, Any]:
    """The defaults of configuration class ``cls_name`` (one of :data:`MLA_CONFIG_CLASSES`), in the table's key
    order, without the keys the class does not have."""
    col = MLA_CONFIG_CLASSES.index(cls_name)
    return {k: row[col] for k, row in MLA_CLASS_DEFAULTS.items() if row[col] is not None}


#: ``GlmMoeDsaConfig``'s class defaults (transformers 5), for the keys upstream reads
CONFIG_DEFAULTS: dict[str, Any] = class_defaults("GlmMoeDsaConfig")


#: the root tensors by checkpoint name, for messages (with :data:`HF_LAYER`)
HF_ROOTS: dict[str, str] = glm.KEPT_ROOTS

def config_view(config: dict[str, Any], where: str, *, defaults: dict[str, Any] | None = None,
                cls_name: str = "GlmMoeDsaConfig", indexer_types: bool = True) -> HParams:
    """The hparams as upstream sees them (``AutoConfig.from_pretrained(...).to_dict()`` of ``cls_name``, whose class
    defaults are ``defaults``: :data:`CONFIG_DEFAULTS` when None): class defaults, ``head_dim`` =
    ``qk_rope_head_dim``, with ``indexer_types`` the default indexer types (GLM-5's class), rope settings in
    ``rope_parameters`` (theta 10000 and type default when absent). A class key set to null is refused: the class
    rejects it and upstream falls back to the raw config.json."""
    hp = HParams(copy.deepcopy(config), where)
    defaults = CONFIG_DEFAULTS if defaults is None else defaults
    nulls = [k for k in defaults if k in hp and hp[k] is None]
    if nulls:
        raise ConvertError(f"{where}: key '{nulls[0]}' is null; transformers' {cls_name} rejects it, and upstream "
                           "then reads config.json without the class's defaults (not reproduced here): give it a value "
                           "or leave it out")
    for k, v in defaults.items():
        hp.setdefault(k, v)
    if hp.get("num_experts") is not None:
        hp["n_routed_experts"] = hp["num_experts"]
    n = hp.u32("num_hidden_layers")
    if indexer_types and hp.get("indexer_types") is None:
        pattern = hp.get("index_topk_pattern")
        if pattern is not None:
            hp["indexer_types"] = ([{"F": "full", "S": "shared"}.get(c, c) for c in pattern]
                                   if isinstance(pattern, str) else list(pattern))
        else:
            freq = max(hp.u32("index_topk_freq", default=1), 1)
            offset = hp.u32("index_skip_topk_offset", default=2)
            hp["indexer_types"] = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(n)]
    hp["head_dim"] = hp["qk_rope_head_dim"]
    class_rope(hp)
    return hp


def class_rope(hp: HParams) -> None:
    """``rope_parameters`` as a transformers 5 config class leaves it in ``to_dict()``: kept when the config has
    it, else built from the legacy ``rope_scaling`` (``type`` -> ``rope_type``), with ``rope_type`` default, the
    top-level ``rope_theta`` (10000 when absent) and ``partial_rotary_factor``."""
    params = hp.get("rope_parameters")
    if not isinstance(params, dict):
        scaling = hp.get("rope_scaling")
        params = dict(scaling) if isinstance(scaling, dict) else {}
        if "type" in params and "rope_type" not in params:
            params["rope_type"] = params.pop("type")
        params.setdefault("rope_type", "default")
        params.setdefault("rope_theta", hp.get("rope_theta", 10000.0))
        if "partial_rotary_factor" in hp:
            params.setdefault("partial_rotary_factor", hp["partial_rotary_factor"])
        hp["rope_parameters"] = params


# ---------------------------------------------------------------------------------------------- hparams
@dataclass(frozen=True)
class MlaMtp(glm.GlmMtp):
    """The config values a ``DeepseekV2Model`` class's file needs, validated: GLM-4.5's counts and the MLA sizes."""

    heads_kv: int     # num_key_value_heads: the heads kv_b_proj is split into
    nope: int         # qk_nope_head_dim
    v: int            # v_head_dim
    kv_lora: int      # kv_lora_rank


def read_hparams(arch: str, hp: HParams, names: list[str], where: str) -> MlaMtp:
    """The layer counts (as :func:`glm.read_hparams` checks them) and the MLA sizes ``kv_b_proj`` is split by."""
    g = glm.read_hparams(arch, hp, names, where)
    return MlaMtp(arch, hp, g.n, g.nextn, g.experts,
                  hp.positive("num_key_value_heads"),
                  hp.u32("qk_nope_head_dim"),
                  hp.u32("v_head_dim"),
                  hp.positive("kv_lora_rank", default=512))


def deepseek2_kvs(g: MlaMtp, file_type: int, where: str, rope_dim: int) -> tuple[list[KV], list[KV]]:
    """The header upstream's ``DeepseekV2Model.set_gguf_parameters`` writes: TextModel's generic block (ending with
    ``general.file_type``; ``block_count`` = trunk + NextN layers, ``head_count_kv`` 1, ``rms_norm_eps`` 1e-6 when
    absent) and DeepseekV2's keys, ``rope.dimension_count`` = ``rope_dim`` (a subclass's later value, written in
    DeepseekV2's place), ending with ``rope.scaling.yarn_log_multiplier`` (0.1 x ``mscale_all_dim``, when the rope
    parameters have it). A key written again keeps its first place and takes the new value, as ``finish_plan``
    does."""
    hp, a = g.hp, {"arch": g.arch}
    generic = {**hp, "num_hidden_layers": g.n + g.nextn, "num_key_value_heads": 1}
    generic.setdefault("rms_norm_eps", 1e-6)
    if generic["rms_norm_eps"] is None:
        generic["rms_norm_eps"] = 1e-6
    base = base_kvs(g.arch, generic, file_type, where)
    glm.insert_expert_groups(base, g.arch, hp, where)

    def u32(tpl: str, v: Any, k: str) -> KV:
        return KV(tpl.format(**a), VT.UINT32, hp.u32(k, v))

    rope = hp.u32("qk_rope_head_dim")
    fam: list[KV] = []
    dense = hp.get("first_k_dense_replace")
    if dense is None:
        dense = hp["num_hidden_layers"] if hp.get("n_routed_experts") is None else 0
    fam.append(u32(S.LEADING_DENSE_BLOCK_COUNT, dense, "first_k_dense_replace"))
    fam.append(u32(S.VOCAB_SIZE, hp.get("vocab_size"), "vocab_size"))
    if hp.get("q_lora_rank") is not None:
        fam.append(u32(S.Q_LORA_RANK, hp["q_lora_rank"], "q_lora_rank"))
    fam.append(u32(S.KV_LORA_RANK, g.kv_lora, "kv_lora_rank"))
    fam.append(u32(S.KEY_LENGTH, g.kv_lora + rope, "kv_lora_rank"))
    fam.append(u32(S.VALUE_LENGTH, g.kv_lora, "kv_lora_rank"))
    fam.append(u32(S.KEY_LENGTH_MLA, g.nope + rope, "qk_nope_head_dim"))
    fam.append(u32(S.VALUE_LENGTH_MLA, g.v, "v_head_dim"))
    fam.append(u32(S.EXPERT_FEED_FORWARD_LENGTH, hp.find(("moe_intermediate_size", "intermediate_size"),
                                                         required=True), "moe_intermediate_size"))
    if hp.get("n_routed_experts") is not None:
        fam.append(u32(S.EXPERT_COUNT, hp["n_routed_experts"], "n_routed_experts"))
    fam.append(u32(S.EXPERT_SHARED_COUNT, hp.get("n_shared_experts", 0), "n_shared_experts"))
    if hp.get("routed_scaling_factor") is not None:
        fam.append(KV(S.EXPERT_WEIGHTS_SCALE.format(**a), VT.FLOAT32,
                      hp.number("routed_scaling_factor")))
    topk_norm = hp.get("norm_topk_prob")
    if topk_norm is not None and topk_norm:
        if not isinstance(topk_norm, bool):
            raise ConvertError(f"{where}: key 'norm_topk_prob' is {topk_norm!r}, expected true or false")
        fam.append(KV(S.EXPERT_WEIGHTS_NORM.format(**a), VT.BOOL, True))
    fam.append(u32(S.ROPE_DIMENSION_COUNT, rope_dim, "qk_rope_head_dim"))
    rd = hp.rope()
    if rd.get("mscale_all_dim") is not None:
        fam.append(KV(S.ROPE_SCALING_YARN_LOG_MUL.format(**a), VT.FLOAT32,
                      0.1 * hp.number("mscale_all_dim", rd["mscale_all_dim"])))
    return base, fam


def header_kvs(g: MlaMtp, file_type: int, where: str, *, partial_rotary: bool = True) -> tuple[list[KV], list[KV]]:
    """The target's own header, as upstream's classes write it: DeepseekV2's (:func:`deepseek2_kvs`, with
    ``rope.dimension_count`` = qk_rope_head_dim x ``partial_rotary_factor`` (1.0 when absent, or without
    ``partial_rotary``: DeepSeek-V3.2), then GLM-DSA's ``nextn_predict_layers`` and the indexer's ``head_count`` /
    ``key_length`` / ``top_k``, and ``types`` when the view has ``indexer_types``."""
    hp, a = g.hp, {"arch": g.arch}
    factor = hp.number("partial_rotary_factor", hp.rope().get("partial_rotary_factor", 1.0)) if partial_rotary else 1
    base, fam = deepseek2_kvs(g, file_type, where, int(hp.u32("qk_rope_head_dim") * factor))

    def u32(tpl: str, v: Any, k: str) -> KV:
        return KV(tpl.format(**a), VT.UINT32, hp.u32(k, v))

    fam.append(u32(S.NEXTN_PREDICT_LAYERS, g.nextn, "num_nextn_predict_layers"))
    fam.append(u32(S.INDEXER_HEAD_COUNT, hp.get("index_n_heads"), "index_n_heads"))
    fam.append(u32(S.INDEXER_KEY_LENGTH, hp.get("index_head_dim"), "index_head_dim"))
    fam.append(u32(S.INDEXER_TOP_K, hp.get("index_topk"), "index_topk"))
    types = hp.get("indexer_types")
    if types is not None:
        if not isinstance(types, list):
            raise ConvertError(f"{where}: key 'indexer_types' is {types!r}, expected a list of \"full\" / \"shared\"")
        fam.append(KV(S.INDEXER_TYPES.format(**a), VT.ARRAY, [t == "full" for t in types], VT.BOOL))
    return base, fam


# ---------------------------------------------------------------------------------------------- tensors
def gguf_name(name: str, layer: dict[str, str] = LAYER) -> str | None:
    """The GGUF name of one read checkpoint tensor by the ``layer`` table (None: an expert, ``kv_b_proj`` (split),
    or unmapped)."""
    return glm.gguf_name(name, layer)


def _kv_b(ck: Checkpoint, g: MlaMtp, src: str, bid: int, out: QT) -> list[TensorSpec]:
    """``attn_k_b`` ``(heads, kv_lora_rank, nope)`` and ``attn_v_b`` ``(heads, v, kv_lora_rank)`` from one
    ``kv_b_proj``, whose rows must be ``num_key_value_heads x (nope + v)`` (upstream asserts it)."""
    ref = float_ref(ck, src)
    width = g.nope + g.v
    if len(ref.shape) != 2 or ref.shape[0] != g.heads_kv * width:
        raise ConvertError(f"{ref.file}: tensor '{src}' has shape {list(ref.shape)}; upstream splits it into "
                           f"num_key_value_heads {g.heads_kv} x (qk_nope_head_dim {g.nope} + v_head_dim {g.v}) = "
                           f"{g.heads_kv * width} rows (its assert fails otherwise)")
    rank = ref.shape[1]
    p = S.LAYER_PREFIX.format(bid=bid)
    specs = []
    for part, shape in (("k", (g.heads_kv, rank, g.nope)), ("v", (g.heads_kv, g.v, rank))):
        name = p + KV_B_PARTS[part]
        specs.append(TensorSpec(name=name, shape=shape, ggml_type=tensor_type(name, shape, out), sources=(src,),
                                transform=MlaKvBSplit(part, g.heads_kv, g.nope, g.v), source_dtype=ref.dtype))
    return specs


def plan_tensors(ck: Checkpoint, g: MlaMtp, out: QT, layer: dict[str, str] = LAYER) -> list[TensorSpec]:
    """The file's tensors in upstream's (``DeepseekV2Model``'s) order, named by the ``layer`` table: the read tensors
    in checkpoint order (``kv_b_proj`` -> k_b, v_b; ``lm_head`` dropped when ``tie_word_embeddings`` is true), the
    three expert stacks (down, gate, up) where the ``3 x n_routed_experts``-th expert tensor of their layer
    arrives."""
    specs: list[TensorSpec] = []
    seen: dict[str, str] = {}
    groups = ExpertGroups(3 * g.experts)
    tied = g.hp.get("tie_word_embeddings") is True
    for src in ck.names:
        b = glm.bare(src)
        if tied and b in ("lm_head.weight", "model.lm_head.weight"):
            continue
        stacks = glm.expert_stacks(ck, g.experts, groups, src, out)
        if stacks is not None:
            specs += stacks
            continue
        m = glm.LAYER_RE.fullmatch(b)
        if m is not None and m.group(2) == KV_B:
            specs += _kv_b(ck, g, src, int(m.group(1)), out)
            continue
        name = mapped_once(ck, seen, src, gguf_name(src, layer), f"a {g.arch} MTP head")
        specs.append(layer_spec(ck, src, name, out))
    glm.check_experts(ck, g.experts, groups)
    return specs


def reads(config: dict[str, Any]) -> Callable[[str], bool]:
    """As GLM-4.5: the layers from ``num_hidden_layers`` on, the embedding, the final norm and the head."""
    return glm.reads(config)


def sidecar(hf_arch: str, hp: HParams, ck: Checkpoint, out: QT, file_type: int, where: str) -> Head:
    """The sidecar of a ``GlmMoeDsaModel`` checkpoint: header, tensors and the layer counts."""
    view = config_view(hp, where)
    g = read_hparams(ARCHS[hf_arch], view, ck.names, where)
    tensors = plan_tensors(ck, g, out)
    return g.head(header_kvs(g, file_type, where), tensors)
