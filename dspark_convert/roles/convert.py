"""The ``convert`` role's contract: what a conversion hands a family (:class:`Context`) and what a family module
provides (:class:`Family`).

A family module (``variants/<variant>/<family>.py``) is a plain module
implementing :class:`Family`: module-level constants and functions, no class to subclass. Its variant's row in
:data:`dspark_convert.registry.VARIANTS` lists it; :func:`dspark_convert.registry.families.family_for` asks the
listed modules which one converts a checkpoint, and ``tests/variants/test_variants.py`` checks every listed module against
:class:`Family`. docs/adding-a-family.md walks through a new one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from gguf import GGMLQuantizationType as QT

from .. import schema as S
from ..findings import Finding
from ..hf.checkpoint import EMBED_NAMES, OUTPUT_NAMES, Checkpoint, Select
from ..plan import KV, Plan


@dataclass
class ConvertOptions:
    """What the user asked for, beyond the two folders."""

    outtype: str = "auto"
    embed_from_target: bool = False  # write the target's token_embd (and output) into the draft
    #: upstream's flags given (the keywords of ``registry.words.UPSTREAM_FLAGS``), refused for the families they do
    #: not select
    upstream_flags: frozenset[str] = frozenset()
    allow_nonfinite: bool = False
    metadata_override: Path | None = None
    model_name: str | None = None
    tokenizer_cache: bool = True  # take / keep the target's tokenizer block in the user's cache folder
    ignore_target_mismatch: bool = False  # fit errors (wrong target) become warnings
    architecture: str | None = None  # --architecture: convert as this architectures value
    match_upstream: bool = False  # --match-upstream: upstream b11434's bytes, even where its layout drafts wrongly


@dataclass
class Context:
    """Everything a family needs to build a plan.

    ``outtype`` is resolved once, before the family runs (``auto`` already decided from the draft's dtypes);
    ``out_type`` / ``file_type`` are its GGML type and its ``general.file_type``. A family that writes another
    ``general.file_type`` whatever the outtype (FP8 experts stored as Q8_0 in any file) passes its own
    value to ``common.base_kvs``; the outtype still names the file.

    ``findings`` collects the fit findings a family meets while planning (a target layer beyond the target:
    rule ``target-layers``); the conversion reports them with the other fit checks (``fit/conversion.py``).

    ``target_tensors`` lists what the family's plan takes from the target checkpoint (the output head of a draft
    that keeps its own embedding on an untied target, ``lineage.choose_head_layout``); the conversion opens
    the target's weights for them and adds them, as for ``--with-target-embeddings``.

    :meth:`target_vocab` is the one way a family reads the tokenizer block it writes.
    """

    draft: Checkpoint
    target_dir: Path
    target_config: dict[str, Any]
    options: ConvertOptions = field(default_factory=ConvertOptions)  # default: none beyond the two folders
    outtype: str = "f16"
    findings: list[Finding] = field(default_factory=list)
    target_tensors: list[TargetTensor] = field(default_factory=list)
    #: what this file holds that upstream b11434's converter does not write (by design; --match-upstream drops it)
    differs_from_upstream: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return str(self.draft.path / "config.json")

    def err(self, subject: str, rule: str, msg: str) -> None:
        """Add an error to :attr:`findings` (fit rule ``rule``, about ``subject``)."""
        self.findings.append(Finding("error", subject, rule, msg))

    def warn(self, subject: str, rule: str, msg: str) -> None:
        """Add a warning to :attr:`findings` (fit rule ``rule``, about ``subject``)."""
        self.findings.append(Finding("warning", subject, rule, msg))

    def target_vocab(self, vocab_size: int | None, handler: str | None, *, folder: Path | None = None,
                     draft: Mapping[str, Any] | None = None) -> list[KV]:
        """The tokenizer KVs of ``folder`` (default: the target folder) in upstream's order, padded to the draft's
        ``vocab_size`` (None: the tokenizer's own size), written by the vocab handler ``handler`` (None: the
        folder's own); ``draft`` is the draft's config or hparams, which some handlers read. The user's tokenizer
        cache is used as :attr:`ConvertOptions.tokenizer_cache` says.
        Raises ConvertError naming the file for a tokenizer that cannot be read."""
        from ..tokenizer.handlers import target_vocab_kvs

        return target_vocab_kvs(self.target_dir if folder is None else folder, vocab_size, handler,
                                cache=self.options.tokenizer_cache, draft=draft)

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


#: the target's input embedding, taken unless the draft holds its own (the first tensor a self-contained draft takes)
INPUT_EMBEDDING = TargetTensor(S.T_TOKEN_EMBD, EMBED_NAMES, unless=(S.T_TOKEN_EMBD,), what="input embedding tensor",
                               shown=EMBED_NAMES[:2])
#: the target's output head (a tied target's: its embedding), taken unless the draft holds its own head or a reduced
#: vocabulary (``d2t``: the draft's head scores its own tokens)
OUTPUT_HEAD = TargetTensor(S.T_OUTPUT, OUTPUT_NAMES + EMBED_NAMES, unless=(S.T_OUTPUT, S.T_D2T), what="output head",
                           shown=OUTPUT_NAMES[:1])


@dataclass(frozen=True)
class TargetFacts:
    """What a family's planned file says about the target model the draft was trained for.

    The conversion-time fit checks (``fit/conversion.py``) compare these with the target given, so a family
    plugs into them through :meth:`Family.target_facts` without any change in ``fit/``. The vocabulary and
    ``d2t`` checks need nothing from the family: they read the planned token list and ``d2t`` tensor.
    """

    #: target hidden states concatenated into ``fc``'s input (its width is n_taps x the target hidden size);
    #: None: the draft has no such ``fc`` (no hidden-size check)
    n_taps: int | None = None
    #: the draft attends at the target's positions with the target's rope (a block draft): its rope theta
    #: and scaling must be the target's (``target-rope`` warning)
    shares_rope: bool = False
    #: checkpoint tensors holding a learned mask embedding, dropped because a GGUF cannot hold them (the name
    #: table's ``mask_embedding``; ``mask-embedding`` warning)
    mask_embedding: tuple[str, ...] = ()
    #: the checkpoint's ``mask_embedding.pt`` was written into the GGUF (a MiMo-style draft: the target's embedding
    #: with the mask row replaced), so the file is no dropped mask embedding
    mask_file_written: bool = False


class Family(Protocol):
    """What every family module provides (module-level names; ``tests/variants/test_variants.py`` checks the modules).

    For each upstream converter flag of ``registry.words.UPSTREAM_FLAGS``, a family module may also hold the flag's
    ``attribute`` (a bool, default False): True when the flag selects this family (it is refused for the others).

    Two functions are optional, for a family whose checkpoint is not simply its draft (a draft stored inside a
    target checkpoint); the conversion asks them through :func:`family_claims` and :func:`family_draft_tensors`:

    * ``claims(config, tensor_names) -> bool``: true for a checkpoint this family converts although its
      ``architectures[0]`` is not in ``ARCHITECTURES`` (recognised by its tensor names). May raise ConvertError
      (worded without the file name, which ``family_for`` adds) for a checkpoint of this family's kind that cannot
      be converted (a target checkpoint without a draft). Without it the family is chosen by ``ARCHITECTURES`` only.
    * ``draft_tensors(config) -> Select | None``: the tensors of the checkpoint the plan reads (None: all); only
      their shards are opened or downloaded. Without it every tensor is read.
    """

    #: ``architectures[0]`` values of the draft configs this family converts
    ARCHITECTURES: tuple[str, ...]
    #: what ``--with-target-embeddings`` takes from the target, in file order (before ``d2t``)
    TARGET_TENSORS: tuple[TargetTensor, ...]
    #: the checkpoint may carry its own tokenizer (a draft stored inside its target): without
    #: ``--target-model-dir`` the tokenizer is read from the checkpoint
    TOKENIZER_IN_CHECKPOINT: bool

    def build_plan(self, ctx: Context) -> Plan:
        """The plan of the GGUF file (KVs and tensors in file order; general.* metadata is added by the caller)."""
        ...

    def hf_names(self, gguf_name: str) -> tuple[str, ...]:
        """The HF names that become ``gguf_name`` (for messages about a missing tensor); () when none."""
        ...

    def target_facts(self, ctx: Context, plan: Plan) -> TargetFacts:
        """What the planned file says about the draft's target (taps, rope, dropped mask embedding), for the
        conversion-time fit checks."""
        ...


def family_claims(family: Family, config: dict[str, Any], tensor_names: list[str]) -> bool:
    """The family's optional ``claims(config, tensor_names)`` (see :class:`Family`); False for a family without
    one (chosen by its ``ARCHITECTURES`` only). A ConvertError it raises passes through."""
    claims = getattr(family, "claims", None)
    return claims is not None and bool(claims(config, tensor_names))


def family_draft_tensors(family: Family, config: dict[str, Any]) -> Select | None:
    """The family's optional ``draft_tensors(config)`` (see :class:`Family`): the tensors its plan reads; None
    (all) for a family without one (its checkpoint is the draft)."""
    draft_tensors = getattr(family, "draft_tensors", None)
    return None if draft_tensors is None else draft_tensors(config)
