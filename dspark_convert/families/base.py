"""The family contract: what a conversion hands a family (:class:`Context`) and what a family module provides
(:class:`Family`).

A family module (``families/dspark.py``, ``dflash.py``, ``eagle3.py``) is a plain module implementing
:class:`Family`: module-level constants and functions, no class to subclass. ``families/__init__.py`` lists the
modules and asks them, in order, which one converts a checkpoint; mypy checks every listed module against
:class:`Family` (see the ``TYPE_CHECKING`` block there). docs/adding-a-family.md walks through a new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gguf import GGMLQuantizationType as QT

from .. import schema as S
from ..checkpoint import Checkpoint, Select
from ..plan import Plan


@dataclass
class ConvertOptions:
    """What the user asked for, beyond the two folders."""

    outtype: str = "auto"
    embed_from_target: bool = False  # write the target's token_embd (and output) into the draft
    dspark: bool = False  # upstream's --dspark (DeepSeek-V4 DSpark); refused for families it does not select
    allow_nonfinite: bool = False
    metadata_override: Path | None = None
    model_name: str | None = None


@dataclass
class Context:
    """Everything a family needs to build a plan.

    ``outtype`` is resolved once, before the family runs (``auto`` already decided from the draft's dtypes);
    ``out_type`` / ``file_type`` are its GGML type and its ``general.file_type``. A family that writes another
    ``general.file_type`` whatever the outtype (DeepSeek-V4's FP8 experts are Q8_0 in any file) passes its own
    value to ``common.base_kvs``; the outtype still names the file.
    """

    draft: Checkpoint
    target_dir: Path
    target_config: dict[str, Any]
    options: ConvertOptions
    outtype: str = "f16"

    @property
    def where(self) -> str:
        return str(self.draft.path / "config.json")

    @property
    def out_type(self) -> QT:
        return S.OUTTYPES[self.outtype][0]

    @property
    def file_type(self) -> int:
        return S.OUTTYPES[self.outtype][1]


@dataclass(frozen=True)
class TargetTensor:
    """A tensor that a self-contained draft (``--with-target-embeddings``) takes from the target checkpoint.

    It is added when the draft has none of ``unless`` (its own copy, or a tensor that makes it unnecessary),
    from the first of ``candidates`` the target holds; ``what`` and ``shown`` word the error when it has none.
    """

    name: str  # GGUF name
    candidates: tuple[str, ...]  # HF names in the target checkpoint, first match wins
    unless: tuple[str, ...]  # GGUF names whose presence in the draft makes the tensor unnecessary
    what: str  # "input embedding tensor"
    shown: tuple[str, ...]  # the candidate names quoted in the error message


class Family(Protocol):
    """What every module under ``families/`` provides (module-level names; mypy checks the modules)."""

    #: ``architectures[0]`` values of the draft configs this family converts
    ARCHITECTURES: tuple[str, ...]
    #: what ``--with-target-embeddings`` takes from the target, in file order (before ``d2t``)
    TARGET_TENSORS: tuple[TargetTensor, ...]
    #: the checkpoint may carry its own tokenizer (a draft stored inside its target): without
    #: ``--target-model-dir`` the tokenizer is read from the checkpoint
    TOKENIZER_IN_CHECKPOINT: bool
    #: upstream's ``--dspark`` flag selects this family (the flag is refused for the others)
    DSPARK_FLAG: bool

    def claims(self, config: dict[str, Any], tensor_names: list[str]) -> bool:
        """True for a checkpoint this family converts although its ``architectures[0]`` is not in
        ``ARCHITECTURES`` (a draft stored inside a target checkpoint, recognised by its tensor names). May raise
        ConvertError (worded without the file name, which ``family_for`` adds) for a checkpoint of this family's
        kind that cannot be converted (a DeepSeek-V4 checkpoint without a draft)."""
        ...

    def draft_tensors(self, config: dict[str, Any]) -> Select | None:
        """The tensors of the draft checkpoint the plan reads (None: all): only their shards are opened or
        downloaded."""
        ...

    def build_plan(self, ctx: Context) -> Plan:
        """The plan of the GGUF file (KVs and tensors in file order; general.* metadata is added by the caller)."""
        ...

    def hf_names(self, gguf_name: str) -> tuple[str, ...]:
        """The HF names that become ``gguf_name`` (for messages about a missing tensor); () when none."""
        ...
