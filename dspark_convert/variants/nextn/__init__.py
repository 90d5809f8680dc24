"""Target GGUF files with MTP (NextN) layers: what llama.cpp b11434 knows per architecture.

A target converted in full holds ``n`` trunk blocks and ``nextn`` MTP blocks after them (``block_count = n +
nextn``, ``{arch}.nextn_predict_layers = nextn``). Upstream also writes the two halves on their own: the sidecar
(``convert_hf_to_gguf.py --mtp``: embedding, final norm, head and the MTP blocks, with the full header) and the trunk
(``--no-mtp``: ``block_count = n``, no ``nextn_predict_layers``, per-layer arrays ``n`` long). This module is the
table of architectures whose loader has an MTP path, and the loader's rules for the three kinds of file
(spec: drafts-beyond-dflash.md §1.2, §1.6, §1.8):

- every loader here treats a file as **MTP-only** when ``nextn_predict_layers > 0`` and the first trunk tensor
  (:attr:`NextnArch.trunk_probe`) is missing; its trunk tensors are then not required;
- only some loaders detect a **trunk-only** file that keeps ``nextn_predict_layers`` but lacks
  ``blk.{n}.nextn.eh_proj`` (:attr:`NextnArch.trunk_only`); for the others the MTP tensors stay required, so a
  trunk must drop the key (and ``block_count`` must be ``n``), or the file does not load at all;
- a few architectures carry the key but have no MTP graph (:attr:`NextnArch.no_graph`): their files cannot run a
  draft; one (:attr:`NextnArch.checkpoint_only`) never holds the MTP layers in a full conversion.

Example:
    >>> nextn_arch("qwen35").trunk_only, nextn_arch("glm4moe").trunk_only, nextn_arch("llama") is None
    (False, True, True)
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from ...schema import core as SC
from ...schema import nextn as SN

Value = Callable[[str], Any]


@dataclass(frozen=True)
class NextnArch:
    """What llama.cpp b11434's loader of ``arch`` does with MTP blocks (``src/models/<arch>.cpp``)."""

    arch: str
    #: the trunk tensor whose absence (with ``nextn_predict_layers`` > 0) marks an MTP-only file
    trunk_probe: str = SN.T_TRUNK_PROBE
    #: the loader accepts a trunk that keeps ``nextn_predict_layers`` but lacks ``blk.{n}.nextn.eh_proj``
    trunk_only: bool = False
    #: why the loader cannot run the MTP blocks (None: it can)
    no_graph: str | None = None
    #: why a full conversion never holds the MTP blocks (None: it does)
    checkpoint_only: str | None = None
    #: ``{arch}.``-relative keys (or prefixes ending in ``_``) upstream's ``--mtp`` leaves out of a sidecar
    sidecar_drop_keys: tuple[str, ...] = ()


_ROWS = (
    NextnArch("qwen35"),
    NextnArch("qwen35moe"),
    NextnArch("qwen3next"),
    NextnArch("qwen4exp", trunk_probe="blk.0.hc_attn_norm.weight",
              sidecar_drop_keys=("ple_", "embedding_length_per_layer_input")),
    NextnArch("nemotron_h_moe"),
    NextnArch("glm4moe", trunk_only=True),
    NextnArch("bailingmoe3", trunk_only=True),
    NextnArch("cohere2moe", trunk_only=True),
    NextnArch("deepseek2", trunk_only=True),
    NextnArch("deepseek32", trunk_only=True),
    NextnArch("glm-dsa", trunk_only=True),
    NextnArch("hy_v3", trunk_only=True),
    NextnArch("mimo2", trunk_only=True),
    NextnArch("step35", trunk_only=True),
    NextnArch("glm5-next", no_graph="llama.cpp b11434 has no GLM5-Next NextN graph yet ('NextN graph not "
                                    "implemented yet', src/models/glm5-next.cpp)"),
    NextnArch("dots3note", no_graph="llama.cpp b11434 always skips its MTP tensors ('no MTP graph yet', "
                                    "src/models/dots3note.cpp)"),
    NextnArch("deepseek4", checkpoint_only="DeepSeek-V4 conversions never hold the MTP layers (upstream drops "
                                           "mtp.* unless --mtp): convert the checkpoint with upstream's "
                                           "convert_hf_to_gguf.py --mtp instead"),
)
#: arch -> its row
ARCHS: dict[str, NextnArch] = {r.arch: r for r in _ROWS}


def nextn_arch(arch: str | None) -> NextnArch | None:
    """The row of ``arch``, or None when llama.cpp b11434 has no MTP path for it."""
    return ARCHS.get(arch or "")


def per_layer_keys(arch: str) -> tuple[str, ...]:
    """The keys of ``arch`` whose arrays have one entry per block (see :data:`~dspark_convert.schema.nextn.PER_LAYER_ARRAYS`)."""
    return tuple(f"{arch}.{k}" for k in SN.PER_LAYER_ARRAYS)


def sidecar_drops(arch: str, key: str) -> bool:
    """Whether upstream's ``--mtp`` leaves ``key`` out of a sidecar of ``arch``."""
    row = ARCHS.get(arch)
    if row is None or not key.startswith(arch + "."):
        return False
    rest = key[len(arch) + 1:]
    return any(rest.startswith(d) if d.endswith("_") else rest == d for d in row.sidecar_drop_keys)


def block_of(name: str) -> int | None:
    """The block number of tensor ``name`` (``blk.{i}.…``), None for a root tensor."""
    if not name.startswith(SN.BLOCK_PREFIX):
        return None
    head = name[len(SN.BLOCK_PREFIX):].split(".", 1)[0]
    return int(head) if head.isdecimal() else None


@dataclass(frozen=True)
class Layout:
    """How a file of an MTP architecture is laid out: ``block_count``, ``nextn`` (0 when the key is absent), the
    trunk block count ``n``, and which kind of file the loader sees."""

    arch: str
    block_count: int
    nextn: int
    has_trunk: bool
    has_mtp: bool

    @property
    def n(self) -> int:
        return self.block_count - self.nextn

    @property
    def kind(self) -> str:
        """``full`` (trunk + MTP blocks), ``sidecar`` (MTP-only), ``trunk`` (no MTP blocks) or ``empty``."""
        if self.has_trunk and self.has_mtp:
            return "full"
        if self.has_mtp:
            return "sidecar"
        return "trunk" if self.has_trunk else "empty"


def layout(row: NextnArch, value: Value, tensor_names: Collection[str]) -> Layout:
    """The :class:`Layout` of a file of ``row``'s arch (``value``: key -> value or None)."""
    arch = row.arch
    bc = value(SC.BLOCK_COUNT.format(arch=arch))
    nx = value(SN.NEXTN_PREDICT_LAYERS.format(arch=arch))
    bc = bc if isinstance(bc, int) and not isinstance(bc, bool) else 0
    nx = nx if isinstance(nx, int) and not isinstance(nx, bool) else 0
    n = bc - nx
    has_mtp = nx > 0 and any((b := block_of(t)) is not None and b >= n for t in tensor_names)
    return Layout(arch, bc, nx, row.trunk_probe in tensor_names, has_mtp)
