"""GGUF names of target files with MTP (NextN) layers: the keys and tensors the MTP cut reads and writes.

Facts: llama.cpp b11434 ``gguf-py/gguf/constants.py`` (``nextn_predict_layers``, the ``blk.{bid}.nextn.*`` tensors),
``gguf-py/gguf/gguf_writer.py`` (the ``split.*`` keys of ``--split-max-tensors`` files) and the loader
(``src/llama-model.cpp``: ``block_count`` counts the MTP blocks, ``nextn_predict_layers`` how many there are).

Example:
    >>> NEXTN_PREDICT_LAYERS.format(arch="qwen35"), T_NEXTN_EH_PROJ.format(bid=4)
    ('qwen35.nextn_predict_layers', 'blk.4.nextn.eh_proj.weight')
"""

from __future__ import annotations

#: ``NEXTN_PREDICT_LAYERS``: how many MTP blocks follow the trunk (UINT32); absent in a trunk-only (``--no-mtp``) file
from .core import GENERAL_FINETUNE as GENERAL_FINETUNE
from .core import NEXTN_PREDICT_LAYERS as NEXTN_PREDICT_LAYERS

#: the keys gguf-py's split writer adds to every shard (``split.no`` UINT16, ``split.count`` UINT16,
#: ``split.tensors.count`` INT32)
SPLIT_NO = "split.no"
SPLIT_COUNT = "split.count"
SPLIT_TENSORS_COUNT = "split.tensors.count"
SPLIT_KEYS = (SPLIT_NO, SPLIT_COUNT, SPLIT_TENSORS_COUNT)

#: the fusion projection of an MTP block: its presence in the last block is how llama-server auto-detects an MTP
#: draft (``common/speculative.cpp``), its absence in block ``n`` how some loaders detect a trunk-only file
T_NEXTN_EH_PROJ = "blk.{bid}.nextn.eh_proj.weight"
#: the first trunk tensor: its absence (with ``nextn_predict_layers`` > 0) makes the loaders treat a file as MTP-only
T_TRUNK_PROBE = "blk.0.attn_norm.weight"
#: the prefix of every per-block tensor
BLOCK_PREFIX = "blk."

#: root (non-block) tensors an MTP sidecar keeps: the embedding and head the MTP graph reads, the head's NVFP4
#: side tensors, and the generated RoPE factors; every other root tensor belongs to the trunk
SIDECAR_ROOT_TENSORS = ("token_embd.weight", "output_norm.weight", "output.weight", "output.scale",
                        "output.input_scale", "rope_freqs.weight")

#: ``{arch}.``-relative keys whose arrays have one entry per block (``block_count`` long, MTP blocks last): a trunk
#: keeps the first ``n`` entries. ``rope.dimension_sections`` is an INT32[4] and never one of them.
PER_LAYER_ARRAYS = ("attention.head_count", "attention.head_count_kv", "feed_forward_length",
                    "attention.sliding_window_pattern", "attention.recurrent_layers", "swiglu_clamp_exp",
                    "swiglu_clamp_shexp", "attention.compress_ratios", "expert_feed_forward_length")
#: ``{arch}.``-relative arrays that are never per layer, whatever their length (M-RoPE sections: INT32[4])
NOT_PER_LAYER_ARRAYS = ("rope.dimension_sections",)
