"""The GLM-4.7-Flash MTP family (upstream's ``Glm4MoeLiteModel`` in ``conversion/glm.py``, a ``DeepseekV2Model``;
spec/drafts-beyond-dflash.md §1): ``Glm4MoeLiteForCausalLM``, GGUF architecture ``deepseek2``: GLM-5's MLA / MoE NextN
layer (:mod:`.glm_dsa`) without the DSA indexer.

What upstream's ``--mtp`` file holds for them:

- the NextN layer(s) ``model.layers.{n+i}.*`` (``n`` = ``num_hidden_layers``) keep their index, with the embedding,
  final norm and head (``lm_head`` dropped when ``tie_word_embeddings``); each NextN block gets its MLA attention
  (``q_a_proj`` / ``q_a_layernorm`` / ``q_b_proj``, ``kv_a_proj_with_mqa`` / ``kv_a_layernorm``, ``o_proj``;
  ``kv_b_proj`` split per head into ``attn_k_b`` / ``attn_v_b`` by ``num_key_value_heads``), its norms
  (``post_attention_layernorm`` -> ``ffn_norm``), router (F32) with ``exp_probs_b.bias``, shared and routed experts
  (stacked) and NextN tensors, as GLM-5 maps them; nothing is added to the norms;
- the header is DeepseekV2's alone (:func:`.glm_dsa.deepseek2_kvs`: TextModel's generic block with ``block_count = n
  + nextn`` and ``head_count_kv`` 1, then ``leading_dense_block_count`` (0 unless the config sets
  ``first_k_dense_replace``, which ``Glm4MoeLiteConfig`` has no field for), ``vocab_size``, the MLA lengths, the
  expert keys, ``rope.dimension_count`` = ``qk_rope_head_dim`` (no partial-rotary factor), ``yarn_log_multiplier``
  with ``mscale_all_dim``) followed by ``nextn_predict_layers``. No ``expert_gating_func`` is written (unless the
  config names a ``scoring_func``): llama.cpp's ``deepseek2`` loader picks sigmoid for 47 / 48 trunk layers with a
  154880-token vocabulary (GLM-4.7-Flash) and softmax otherwise.

Upstream reads the config through transformers' ``Glm4MoeLiteConfig`` (:func:`config_view`): its class defaults,
``head_dim`` and ``num_local_experts`` as aliases of ``qk_rope_head_dim`` and ``n_routed_experts``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from ... import schema as S
from ...errors import ConvertError
from ...hf.checkpoint import Checkpoint
from ...kit.hparams import HParams
from ...plan import KV
from . import glm, glm_dsa
from .glm_dsa import MlaMtp
from .head import Head
from .specs import NEXTN_ROWS, target_archs

#: upstream's model class that exports the GLM-4.7-Flash NextN layer with ``--mtp``
MTP_CLASSES = ("Glm4MoeLiteModel",)
#: HF class -> GGUF arch: every architecture the target table registers to that class
ARCHS: dict[str, str] = target_archs(MTP_CLASSES)
#: a NextN layer's tensor (after ``model.layers.{n+i}.``) -> its GGUF name (after ``blk.{n+i}.``): GLM-5's rows
#: without the indexer; ``kv_b_proj`` is split, the experts stacked
LAYER: dict[str, str] = {**NEXTN_ROWS, **glm_dsa.MLA_ATTENTION, **glm.MLP}
#: (checkpoint pattern, short GGUF name) of every NextN layer tensor, for :func:`.mtp.hf_names`
HF_LAYER: list[tuple[str, str]] = glm_dsa.hf_layer(LAYER)
#: the root tensors by checkpoint name, for messages (with :data:`HF_LAYER`)
HF_ROOTS: dict[str, str] = glm.KEPT_ROOTS

#: ``Glm4MoeLiteConfig``'s class defaults (transformers 5), for the keys upstream reads; the class rejects null for
#: each of them but ``q_lora_rank``
CONFIG_DEFAULTS: dict[str, Any] = glm_dsa.class_defaults("Glm4MoeLiteConfig")
#: ``Glm4MoeLiteConfig``'s ``attribute_map``: a config key set to the class field it names
ALIASES: dict[str, str] = {"head_dim": "qk_rope_head_dim", "num_local_experts": "n_routed_experts"}


def config_view(config: dict[str, Any], where: str) -> HParams:
    """The hparams as upstream sees them (``AutoConfig.from_pretrained(...).to_dict()`` of ``Glm4MoeLiteConfig``):
    the aliases (``head_dim`` overrides ``qk_rope_head_dim`` wherever it stands; neither alias stays in the dict),
    the class defaults, rope settings in ``rope_parameters``. Refused in one line: a class key set to null (the
    class rejects it and upstream falls back to the raw config.json, not reproduced here) and a null
    ``q_lora_rank`` (upstream then writes ``attn_q`` and no ``q_lora_rank``, which llama.cpp's deepseek2 loader
    requires; its MTP graph asserts ``n_lora_q`` > 0)."""
    hp = HParams(copy.deepcopy(config), where)
    for alias, field in ALIASES.items():
        if alias in hp:
            v = hp.pop(alias)
            if v is None:
                raise ConvertError(f"{where}: key '{alias}' is null; transformers' Glm4MoeLiteConfig sets "
                                   f"{field} from it, which upstream then cannot convert: give it a value or leave "
                                   "it out")
            hp[field] = v
    nulls = [k for k in CONFIG_DEFAULTS if k in hp and hp[k] is None and k != "q_lora_rank"]
    if nulls:
        raise ConvertError(f"{where}: key '{nulls[0]}' is null; transformers' Glm4MoeLiteConfig rejects it, and "
                           "upstream then reads config.json without the class's defaults (not reproduced here): give "
                           "it a value or leave it out")
    if "q_lora_rank" in hp and hp["q_lora_rank"] is None:
        raise ConvertError(f"{where}: key 'q_lora_rank' is null: upstream then writes attn_q without "
                           "attention.q_lora_rank, a sidecar llama.cpp b11434's deepseek2 loader does not load (the "
                           "key is required, and its MTP graph asserts n_lora_q > 0)")
    for k, v in CONFIG_DEFAULTS.items():
        hp.setdefault(k, v)
    glm_dsa.class_rope(hp)
    return hp


def header_kvs(g: MlaMtp, file_type: int, where: str) -> tuple[list[KV], list[KV]]:
    """DeepseekV2's header (:func:`.glm_dsa.deepseek2_kvs`, ``rope.dimension_count`` = ``qk_rope_head_dim``), then
    ``nextn_predict_layers``."""
    base, fam = glm_dsa.deepseek2_kvs(g, file_type, where, g.hp.u32("qk_rope_head_dim"))
    fam.append(KV(S.NEXTN_PREDICT_LAYERS.format(arch=g.arch), VT.UINT32, g.nextn))
    return base, fam


def reads(config: dict[str, Any]) -> Callable[[str], bool]:
    """As GLM-4.5: the layers from ``num_hidden_layers`` on, the embedding, the final norm and the head."""
    return glm.reads(config)


def sidecar(hf_arch: str, hp: HParams, ck: Checkpoint, out: QT, file_type: int, where: str) -> Head:
    """The sidecar of a ``Glm4MoeLiteModel`` checkpoint: header, tensors and the layer counts."""
    view = config_view(hp, where)
    g = glm_dsa.read_hparams(ARCHS[hf_arch], view, ck.names, where)
    tensors = glm_dsa.plan_tensors(ck, g, out, LAYER)
    return g.head(header_kvs(g, file_type, where), tensors)
