"""What a family module of this package hands the ``--mtp`` converter (:mod:`.mtp`): the sidecar's header, tensors
and layer counts. Each family module (:mod:`.qwen`, :mod:`.glm`, :mod:`.glm_dsa`, :mod:`.nemotron`,
:mod:`.deepseek4`, :mod:`.mimo2`) has ``ARCHS`` (HF class -> GGUF arch), ``reads(config)`` (the checkpoint tensors
the file is made of), ``sidecar(...)`` -> :class:`Head`, and ``HF_ROOTS`` / ``HF_LAYER`` (the checkpoint names for
messages). :class:`Counts` is the validated layer / expert counts a family's hparams start from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...kit.hparams import HParams
from ...plan import KV, TensorSpec


@dataclass(frozen=True)
class Head:
    """One sidecar: its GGUF arch, the trunk's layer count ``n``, the MTP layers ``nextn`` (blocks ``n ..
    n + nextn - 1``), TextModel's generic keys (``base``, ending with ``general.file_type``), the class's own keys
    (``fam``), the tensors in upstream's order, the keys the class writes right after ``general.architecture``
    (``lead``: DeepSeek-V4's chat template), and (``differs``) the tensors written on purpose where upstream's
    file has others, with the note saying why (``why``)."""

    arch: str
    n: int
    nextn: int
    base: list[KV]
    fam: list[KV]
    tensors: list[TensorSpec]
    lead: list[KV] = field(default_factory=list)
    differs: tuple[str, ...] = ()
    why: str = ""


@dataclass(frozen=True)
class Counts:
    """The config values a family's tensors and header start from, validated: the GGUF ``arch``, the (text) config
    ``hp``, the trunk's layer count ``n``, the MTP layers ``nextn`` and the routed experts of a MoE block
    (``experts``, 0: none)."""

    arch: str
    hp: HParams
    n: int
    nextn: int
    experts: int

    def head(self, header: tuple[list[KV], list[KV]], tensors: list[TensorSpec]) -> Head:
        """The sidecar of these counts: ``header`` is (TextModel's generic keys, the class's own keys)."""
        base, fam = header
        return Head(self.arch, self.n, self.nextn, base, fam, tensors)
