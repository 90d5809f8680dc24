"""What the command line says about the variants: their drafts' names in help text, and upstream's one command-line
flag that selects a converter class. Plain data on the standard library alone.

The registry (:mod:`dspark_convert.registry`) needs the schema, hence gguf's constants, and ``--help`` must not
load them (``tests/reliability/test_startup_imports.py``). So the words the variants contribute to the help live in this file,
which ``cli`` loads alone (:func:`dspark_convert.cli.variant_words`, as :mod:`dspark_convert.gguf_constants` loads
gguf-py's ``constants.py``); ``hf2gguf`` imports it as usual (the same file: the same words). A new variant adds
its words here next to its ``Variant`` row.

Example:
    >>> UPSTREAM_FLAGS[0].keyword, UPSTREAM_FLAGS[0].attribute, UPSTREAM_FLAGS[1].keyword
    ('dspark', 'DSPARK_FLAG', 'mtp')
"""

from __future__ import annotations

from dataclasses import dataclass

#: the draft kinds the product converts, as the summary names them: the drafts of the variants no other refines
#: (``dflash``, ``gemma4-assistant``, ``eagle3``, the MTP sidecars' target arches), in the registry's order; the
#: refining variants are kinds of these
DRAFT_KINDS: tuple[str, ...] = ("DSpark / DFlash", "Gemma 4 assistant", "EAGLE-3", "MTP sidecar")
#: drafts whose checkpoint carries the tokenizer (stored inside their target's checkpoint, or shipped with the
#: target's tokenizer), so ``--target-model-dir`` is optional: one per family with ``TOKENIZER_IN_CHECKPOINT``
DRAFTS_INSIDE_TARGETS: tuple[str, ...] = ("the DSpark draft inside a DeepSeek-V4 checkpoint", "a Gemma 4 assistant",
                                          "the MTP head inside a target checkpoint (--mtp)")
#: the files those drafts become: ``verify`` needs no target for them
FILES_INSIDE_TARGETS: tuple[str, ...] = ("DeepSeek-V4 DSpark", "Gemma 4 assistant", "MTP sidecar")
#: drafts that propose one token per step, each step fed the last one's output (``eagle3``): ``verify --steps``
CHAINED_DRAFTS: tuple[str, ...] = ("EAGLE-3",)


@dataclass(frozen=True)
class UpstreamFlag:
    """An option of upstream's converter that selects one converter class. It is accepted for the families whose
    module sets ``attribute`` true and refused for the others; it is never needed (the checkpoint's config and
    tensors say which family it is)."""

    option: str  #: the command-line option, as upstream spells it
    attribute: str  #: the family-module attribute (``roles.convert.Family``) that says the family takes it
    selects: str  #: the drafts it selects, for its help
    refusal: str  #: why another draft is refused, after ``<option>: <draft> ``
    #: the family it selects converts only with it (its checkpoints are otherwise target models): ``missing`` says
    #: why, after ``<draft>: ``
    required: bool = False
    missing: str = ""

    @property
    def keyword(self) -> str:
        """The option as a keyword argument of :func:`dspark_convert.convert`."""
        return self.option.lstrip("-").replace("-", "_")

    @property
    def help(self) -> str:
        """The option's help line."""
        if self.required:
            return f"Upstream's flag for {self.selects} (needed: without it the checkpoint is a target model)."
        return f"Upstream's flag for {self.selects} (recognised without it)."


#: upstream's converter flags that select a converter class (the ``dsv4`` variant's, the ``mtp`` variant's)
UPSTREAM_FLAGS: tuple[UpstreamFlag, ...] = (
    UpstreamFlag("--dspark", "DSPARK_FLAG", DRAFTS_INSIDE_TARGETS[0],
                 "is not a DeepSeek-V4 checkpoint with a DSpark draft (the flag selects upstream's DeepSeek-V4 DSpark "
                 "converter; other drafts are recognised by their config)"),
    UpstreamFlag("--mtp", "MTP_FLAG", "the MTP head inside a target checkpoint, written as an MTP sidecar",
                 "is not a target checkpoint whose MTP head is written here (Qwen3.5 / Qwen3.6 / Qwen3-Next, GLM-4.5, "
                 "GLM-5, Nemotron-H, MiMo-V2 and DeepSeek-V4 classes; a DeepSeek-V4 checkpoint with a DSpark draft "
                 "converts without it; see docs/mtp-checkpoint.md)",
                 required=True,
                 missing="is a target model checkpoint with an MTP head; pass --mtp to write the head as an MTP "
                         "sidecar (mtp-<name>.gguf)"),
)
#: the keyword arguments of :func:`dspark_convert.convert` that :data:`UPSTREAM_FLAGS` are
UPSTREAM_KEYWORDS: frozenset[str] = frozenset(flag.keyword for flag in UPSTREAM_FLAGS)
