"""The DeepSeek-V3.2 MTP family (upstream's ``DeepseekV32Model`` in ``conversion/deepseek.py``, a
``DeepseekV2Model``; spec/drafts-beyond-dflash.md §1): ``DeepseekV32ForCausalLM`` (DeepSeek-V3.2 / V3.2-Exp), GGUF
architecture ``deepseek32``: MLA attention with the DSA indexer, as GLM-5 (:mod:`.glm_dsa`), whose tables, tensor
plan and header this module reuses.

What upstream's ``--mtp`` file holds for them, where it differs from GLM-5's:

- the same tensors (the NextN layer(s) ``model.layers.{n+i}.*`` with their index, ``kv_b_proj`` split into
  ``attn_k_b`` / ``attn_v_b``, the indexer, the expert stacks, the embedding, final norm and head; ``lm_head``
  dropped when ``tie_word_embeddings``). A released checkpoint stores its linear weights as block-scaled FP8
  (``quant_method: fp8``, ``weight_block_size [128, 128]``); the shared reader (``specs.adopt_fp8``) hands them to
  this module as float32, dequantized as upstream does before the split and the stacking;
- the header: DeepseekV2's keys as GLM-5 has them, but ``rope.dimension_count`` is ``qk_rope_head_dim`` (no
  ``partial_rotary_factor``) and there is no ``attention.indexer.types``; the config is read as transformers'
  ``DeepseekV32Config`` gives it (its class defaults, ``head_dim`` = ``qk_rope_head_dim``);
- the tokenizer: byte-level BPE after upstream's ``add_bos_token`` assertion (the target table's
  ``gpt2_assert_bos`` handler).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gguf import GGMLQuantizationType as QT

from ...hf.checkpoint import Checkpoint
from ...kit.hparams import HParams
from . import glm, glm_dsa
from .head import Head
from .specs import target_archs

#: upstream's model class that exports the DeepSeek-V3.2 NextN layer with ``--mtp``
MTP_CLASSES = ("DeepseekV32Model",)
#: HF class -> GGUF arch: every architecture the target table registers to that class
ARCHS: dict[str, str] = target_archs(MTP_CLASSES)
#: the checkpoint names of the NextN layer tensors (GLM-5's: the same MLA, indexer and MoE layout)
HF_LAYER = glm_dsa.HF_LAYER
#: the root tensors by checkpoint name, for messages
HF_ROOTS: dict[str, str] = glm.KEPT_ROOTS
#: ``DeepseekV32Config``'s class defaults (transformers 5), for the keys upstream reads
CONFIG_DEFAULTS: dict[str, Any] = glm_dsa.class_defaults("DeepseekV32Config")


def config_view(config: dict[str, Any], where: str) -> HParams:
    """The hparams as upstream sees them (``AutoConfig.from_pretrained(...).to_dict()`` of ``DeepseekV32Config``):
    class defaults, ``head_dim`` = ``qk_rope_head_dim``, rope settings in ``rope_parameters``; a config's own
    ``indexer_types`` is not read (upstream's class writes no indexer types)."""
    hp = glm_dsa.config_view(config, where, defaults=CONFIG_DEFAULTS, cls_name="DeepseekV32Config",
                             indexer_types=False)
    hp.pop("indexer_types", None)
    return hp


def reads(config: dict[str, Any]) -> Callable[[str], bool]:
    """As GLM-4.5: the layers from ``num_hidden_layers`` on (their FP8 scales included), the embedding, the final
    norm and the head."""
    return glm.reads(config)


def sidecar(hf_arch: str, hp: HParams, ck: Checkpoint, out: QT, file_type: int, where: str) -> Head:
    """The sidecar of a ``DeepseekV32Model`` checkpoint: header, tensors and the layer counts."""
    view = config_view(hp, where)
    g = glm_dsa.read_hparams(ARCHS[hf_arch], view, ck.names, where)
    tensors = glm_dsa.plan_tensors(ck, g, out)
    return g.head(glm_dsa.header_kvs(g, file_type, where, partial_rotary=False), tensors)
