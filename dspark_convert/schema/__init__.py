"""The single table of GGUF names and types used by dspark-convert (data only, no logic).

The PyPI ``gguf`` package (0.19.0) does not know the ``dflash`` / ``eagle3`` architectures, so this package owns
every arch string, metadata key (with its GGUF value type) and tensor name that our files contain. It is the
GGUF side only: the HF -> GGUF name tables belong to the family modules (``variants/<v>/<family>.py``: ``NAMES``). The converter
spells GGUF names only through this package; the reference forwards (``reference/*``) and ``verify`` spell them
again on purpose, so that a wrong name here cannot hide behind the same wrong name there. Facts come from
``spec/gguf-contract.md`` (written against llama.cpp master @749f688) and ``spec/upstream-b11434.md`` (what changed
up to the release the converter matches, :data:`UPSTREAM_REFERENCE`).

One module per concept (gguf-py ``constants.py`` style), all re-exported here, so ``from .. import schema as S`` and
``from dspark_convert.schema import X`` read every name:

- ``core.py``: the upstream reference, ``general.*`` keys, the generic ``{arch}.*`` templates, tokenizer keys and
  token types, the backbone's tensor names, outtypes, source dtypes;
- ``dflash.py``: the ``dflash`` arch, ``dflash.*`` keys, ``fc`` / encoder norm / Markov / confidence / ``d2t``
  tensors, its loader's tensor rows;
- ``eagle3.py``: the ``eagle3`` arch, ``eagle3.*`` keys, ``attn_norm_2`` / ``rope_freqs``, its loader's rows;
- ``dsv4.py``: the DeepSeek-V4 DSpark keys, tensor names, source dtypes and fixed file type;
- ``dflash2.py``: DFlash2's conv and selector keys and tensor names;
- ``gemma4.py``: Gemma4 DSpark's keys and tensor names;
- ``vocab_methods.py``: upstream's target vocab methods and the tokenizer handler reproducing each.
- ``gemma4_assistant.py``: the ``gemma4-assistant`` arch, its keys and projection tensors.
- ``mtp.py``: the MTP sidecars' target architectures, their ``nextn`` / SSM / MoE keys and NextN tensor names;
- ``section.py``: how a module types its keys (one ``_KEY_TYPES`` table; an array key's row is ``ArrayOf`` its
  element types).

The tables that several of them fill (``KEY_TYPES`` and ``ARRAY_ELEMENT_TYPES``, both from the modules'
``_KEY_TYPES``; ``SAFETENSORS_DTYPES``, the ``LOADER_LAYER_TENSORS`` rows by arch, the by-arch sets and maps) are
merged below, each module's rows in a fixed order (check iterates some of them: the order is part of the output).

Example:
    >>> KEY_TYPES[DFLASH_BLOCK_SIZE].name, list(LOADER_LAYER_TENSORS) == list(DRAFT_ARCHES)
    ('UINT32', True)
"""

from __future__ import annotations

from collections.abc import Mapping as _Mapping
from typing import TypeVar as _TypeVar

from ..gguf_constants import VT
from . import core as _core
from . import dflash as _dflash
from . import dflash2 as _dflash2
from . import dsv4 as _dsv4
from . import eagle3 as _eagle3
from . import gemma4 as _gemma4
from . import gemma4_assistant as _gemma4_assistant
from . import mtp as _mtp
from . import section as _section
from .core import *  # noqa: F403
from .dflash import *  # noqa: F403
from .dflash2 import *  # noqa: F403
from .dsv4 import *  # noqa: F403
from .eagle3 import *  # noqa: F403
from .gemma4 import *  # noqa: F403
from .gemma4_assistant import *  # noqa: F403
from .mtp import *  # noqa: F403
from .vocab_methods import *  # noqa: F403

_K = _TypeVar("_K")
_V = _TypeVar("_V")


def _merged(*parts: _Mapping[_K, _V]) -> dict[_K, _V]:
    """One table from the modules' rows, in the order given; a key two modules both list (with the same value: the
    assert says so) keeps its first place."""
    out: dict[_K, _V] = {}
    for part in parts:
        for k, v in part.items():
            assert out.get(k, v) == v, f"schema: two values for {k!r}"
            out.setdefault(k, v)
    return out


# ---------------------------------------------------------------------------------------------- architectures
#: the draft architectures (their loaders' layer rules are the LOADER_LAYER_TENSORS rows below)
DRAFT_ARCHES = (_dflash.ARCH_DFLASH, _eagle3.ARCH_EAGLE3, _gemma4_assistant.ARCH_GEMMA4_ASSISTANT)
#: every architecture a file we write may have: the drafts', then the targets' whose MTP sidecars we write
ARCHES = (*DRAFT_ARCHES, *_mtp.MTP_ARCHES)

# ---------------------------------------------------------------------------------------------- value types
#: The GGUF value type of every fixed key we write (templates included). Used by the writer and by check.
KEY_TYPES: dict[str, VT] = _section.value_types(_merged(
    _core._KEY_TYPES, _dflash._KEY_TYPES, _eagle3._KEY_TYPES, _core._TOKENIZER_KEY_TYPES, _dsv4._KEY_TYPES,
    _dflash2._KEY_TYPES, _gemma4._KEY_TYPES, _gemma4_assistant._KEY_TYPES, _mtp._KEY_TYPES))

_ARRAYS = _section.element_types(_merged(_dflash._KEY_TYPES, _eagle3._KEY_TYPES, _core._KEY_TYPES, _dsv4._KEY_TYPES,
                                         _gemma4_assistant._KEY_TYPES, _mtp._KEY_TYPES))
#: Element types that the loader accepts for array keys (contract §2.6); the target-layer lists first.
ARRAY_ELEMENT_TYPES: dict[str, tuple[VT, ...]] = {
    k: _ARRAYS[k] for k in (_dflash.DFLASH_TARGET_LAYERS, _eagle3.EAGLE3_TARGET_LAYERS, *_ARRAYS)}

# ---------------------------------------------------------------------------------------------- tensors
#: Per-layer tensors llama.cpp's loader creates (ggml names without the blk.N. prefix), by arch (contract §7).
LOADER_LAYER_TENSORS: dict[str, dict[str, bool]] = {  # name -> required
    _dflash.ARCH_DFLASH: _dflash._LOADER_LAYER_TENSORS,
    _eagle3.ARCH_EAGLE3: _eagle3._LOADER_LAYER_TENSORS,
    _gemma4_assistant.ARCH_GEMMA4_ASSISTANT: {},  # its loader module expects its own layer tensors
}
#: Generic ``{arch}.*`` keys an arch may write as one value per layer (an array of the key's element type)
PER_LAYER_KEYS: dict[str, frozenset[str]] = {
    _gemma4_assistant.ARCH_GEMMA4_ASSISTANT: frozenset({_core.HEAD_COUNT_KV, _core.FEED_FORWARD_LENGTH}),
    _mtp.ARCH_NEMOTRON_H_MOE: frozenset({_core.HEAD_COUNT_KV, _core.FEED_FORWARD_LENGTH}),
    _mtp.ARCH_MIMO2: frozenset({_core.HEAD_COUNT_KV})}
#: Archs whose loader makes ``token_embd`` the output head when ``output`` is absent (``TENSOR_DUPLICATED``,
#: src/models/dflash.cpp load_tensors; b11223+); an ``eagle3`` file without ``output`` scores with the target's head.
EMBD_AS_HEAD_ARCHES = frozenset({_dflash.ARCH_DFLASH})
#: The key listing the target layers whose hidden states feed ``fc``, by arch (contract §2.2, §2.4).
TARGET_LAYERS_KEY: dict[str, str] = {_dflash.ARCH_DFLASH: _dflash.DFLASH_TARGET_LAYERS,
                                     _eagle3.ARCH_EAGLE3: _eagle3.EAGLE3_TARGET_LAYERS}
#: Archs whose llama.cpp implementation reads target layer input ``n_layer`` (the last layer's output) when the
#: draft's taps include ``block_count``; an ``eagle3`` draft takes it from the MTP hidden state instead.
FINAL_LAYER_TAP_ARCHES = frozenset({_dflash.ARCH_DFLASH})
#: The key holding a block draft's block size (tokens per drafted block), by arch: llama.cpp's speculative
#: decoding reads it with ``atoi`` into an int32 and allocates the block's batch from it.
BLOCK_SIZE_KEY: dict[str, str] = {_dflash.ARCH_DFLASH: _dflash.DFLASH_BLOCK_SIZE}
#: The keys in which a draft file describes its target (its taps, the target's hidden size): the variants' fit
#: rules read them from a draft side (``fit/sides.py``).
DRAFT_TARGET_KEYS = (*TARGET_LAYERS_KEY.values(), _eagle3.EAGLE3_TARGET_HIDDEN_SIZE)

# ---------------------------------------------------------------------------------------------- dtypes
#: safetensors dtype string -> (numpy dtype used to read the raw bytes, is a float type)
SAFETENSORS_DTYPES: dict[str, tuple[str, bool]] = _merged(_core._SAFETENSORS_DTYPES, _dsv4._SAFETENSORS_DTYPES)

del _ARRAYS
