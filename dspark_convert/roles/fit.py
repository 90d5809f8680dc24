"""The ``fit`` role's contract: what a variant's ``variants/<v>/fit.py`` builds on.

A fit module may hold (each optional):

- ``ARCH_RULES``: :class:`Rule` rows for the drafts of its GGUF arch (read from the arch's base variant), run by
  ``check --target`` (``dspark_convert.fit``) after the vocabulary rules;
- ``family_word(tensors) -> str``: the word a draft of its arch is keyed by in :attr:`Rule.families` (default: the
  variant's name);
- ``target_facts(ctx, plan)``: the facts a conversion checks against the target (``hf2gguf``).

A rule is a function of a :class:`Pair` (both :class:`Side` s and their vocabularies as llama.cpp loads them:
:func:`vocab_facts`, which replays ``llama_vocab::impl::load()``, ``src/llama-vocab.cpp``) returning an
:class:`Outcome`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from gguf import GGUFValueType as VT

from .. import schema as S
from ..gguffile.records import RecordParser
from ..plan import Plan, as_int

#: ``tokenizer.ggml.model`` -> llama.cpp vocab type (llama_vocab::impl::load)
VOCAB_TYPES: dict[str, str] = {"no_vocab": "NONE", "none": "NONE", "llama": "SPM", "gpt2": "BPE", "bert": "WPM",
                               "t5": "UGM", "rwkv": "RWKV", "plamo2": "PLAMO2", "gemma4": "BPE"}
#: tokenizer models of BPE type loaded with their own defaults: no default BOS / EOS id, a fixed pre-tokenizer
#: (llama_vocab::impl::load, b11434: ``tokenizer_model == "gemma4"``)
BPE_OWN_DEFAULTS: dict[str, str] = {"gemma4": "gemma4"}
#: vocab type -> default (BOS, EOS) ids before the GGUF keys are read (None: LLAMA_TOKEN_NULL)
DEFAULT_IDS: dict[str, tuple[int | None, int | None]] = {
    "NONE": (None, None), "SPM": (1, 2), "WPM": (101, None), "BPE": (11, 11), "UGM": (None, 1),
    "RWKV": (None, None), "PLAMO2": (1, 2)}
#: vocab type -> default (add_bos, add_eos) before the GGUF keys are read; BPE depends on the pre-tokenizer
DEFAULT_ADD: dict[str, tuple[bool, bool]] = {"SPM": (True, False), "WPM": (True, False), "UGM": (False, True),
                                             "RWKV": (False, False)}
#: BPE pre-tokenizers for which llama.cpp sets add_bos = true by default
BPE_ADD_BOS_PRES = frozenset({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                              "jina-v5-nano", "tekken", "chameleon"})
#: BPE pre-tokenizers for which llama.cpp clears the default BOS id
BPE_NO_BOS_PRES = frozenset({"glm4", "chatglm-bpe"})


@dataclass(frozen=True)
class VocabFacts:
    """One side's vocabulary as llama.cpp loads it. ``*_from`` says where a value came from: ``key`` or ``default``."""

    model: str | None
    type: str
    n_tokens: int
    add_bos: bool
    add_bos_from: str
    bos: int | None
    add_eos: bool
    add_eos_from: str
    eos: int | None

    def describe(self, which: str, tokens: Sequence[str]) -> str:
        """``add_bos=true (key), bos=1 '<s>'`` for ``which`` in ``bos`` / ``eos``."""
        add, src, tid = ((self.add_bos, self.add_bos_from, self.bos) if which == "bos"
                         else (self.add_eos, self.add_eos_from, self.eos))
        text = f" {tokens[tid]!r}" if tid is not None and 0 <= tid < len(tokens) else ""
        shown = "none" if tid is None else f"{tid}{text}"
        return f"add_{which}={'true' if add else 'false'} ({src}), {which}={shown}"


def _uint(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def vocab_facts(kvs: dict[str, Any], tokens: Sequence[str]) -> VocabFacts:
    """llama.cpp's view of the vocabulary described by ``kvs`` (tokenizer keys) with ``tokens`` as its token list.

    Example:
        >>> vocab_facts({"tokenizer.ggml.model": "llama"}, ["<unk>", "<s>", "</s>"]).add_bos
        True
    """
    model = kvs.get(S.TOKENIZER_MODEL)
    vtype = VOCAB_TYPES.get(model, f"unknown '{model}'") if isinstance(model, str) else "missing"
    pre = kvs.get(S.TOKENIZER_PRE) if isinstance(kvs.get(S.TOKENIZER_PRE), str) else None  # (the loader rules flag another type)
    bos, eos = DEFAULT_IDS.get(vtype, (None, None))
    if isinstance(model, str) and model in BPE_OWN_DEFAULTS:
        bos, eos, pre = None, None, BPE_OWN_DEFAULTS[model]
    if vtype == "BPE":
        add_bos, add_eos = pre in BPE_ADD_BOS_PRES, False
        if pre in BPE_NO_BOS_PRES:
            bos = None
    else:
        add_bos, add_eos = DEFAULT_ADD.get(vtype, (False, False))
    n = len(tokens)
    key_bos, key_eos = _uint(kvs.get(S.SPECIAL_TOKEN_KEYS["bos"])), _uint(kvs.get(S.SPECIAL_TOKEN_KEYS["eos"]))
    bos = key_bos if key_bos is not None and key_bos < n else bos  # an id >= n_tokens: "bad special token"
    eos = key_eos if key_eos is not None and key_eos < n else eos
    flags = []
    for which, default in (("bos", add_bos), ("eos", add_eos)):
        value = kvs.get(S.ADD_TOKEN_KEYS[which])
        flags.append((value, "key") if isinstance(value, bool) else (default, "default"))
    (add_bos, bos_from), (add_eos, eos_from) = flags
    return VocabFacts(model if isinstance(model, str) else None, vtype, n, add_bos, bos_from, bos, add_eos, eos_from,
                      eos)


def token_text(tokens: Sequence[str], i: int) -> str:
    """Token ``i``'s text as llama.cpp stores it (an empty token becomes ``[EMPTY_i]``)."""
    return tokens[i] or f"[EMPTY_{i}]"


#: unscoped keys a side keeps (tokenizer keys, draft keys); ``{arch}.*`` ones go to :attr:`Side.hp`
KEYS = (S.TOKENIZER_MODEL, S.TOKENIZER_PRE, S.TOKENIZER_CHAT_TEMPLATE, S.GENERAL_NAME, *S.DRAFT_TARGET_KEYS,
        S.SPECIAL_TOKEN_KEYS["bos"], S.SPECIAL_TOKEN_KEYS["eos"], S.TOKENIZER_MASK_ID, S.ADD_TOKEN_KEYS["bos"],
        S.ADD_TOKEN_KEYS["eos"])


#: :attr:`Side.hp` name -> ``{arch}.*`` key template
HP_KEYS = {"embedding_length": S.EMBEDDING_LENGTH, "block_count": S.BLOCK_COUNT, "context_length": S.CONTEXT_LENGTH,
           "rope_freq_base": S.ROPE_FREQ_BASE, "rope_scaling_type": S.ROPE_SCALING_TYPE,
           "rope_scaling_factor": S.ROPE_SCALING_FACTOR, "rope_scaling_orig_ctx": S.ROPE_SCALING_ORIG_CTX,
           "rope_dimension_sections": S.ROPE_DIMENSION_SECTIONS, "key_length": S.KEY_LENGTH,
           "key_length_swa": S.KEY_LENGTH_SWA}


class Tokens(Sequence[str]):
    """A side's token texts. From a GGUF they stay as the stored bytes until a text is asked for, so two identical
    vocabularies compare as bytes (:meth:`same_prefix`) without decoding 150k strings.

    Example:
        >>> Tokens.from_list(["a", "b"])[1], len(Tokens.from_list(["a", "b"]))
        ('b', 2)
    """

    def __init__(self, count: int, raw: bytes | None = None, values: list[str] | None = None) -> None:
        self.n, self.raw, self._values = count, raw, values
        self._some: dict[int, str] = {}

    @classmethod
    def from_list(cls, values: list[str]) -> Tokens:
        return cls(len(values), values=values)

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if self._values is None and isinstance(i, int) and 0 <= i < self.n:
            if i not in self._some:
                self._some.update(self._parser().string_items(0, self.n, {i}))
            return self._some[i]
        return self.values()[i]

    def _parser(self) -> RecordParser:
        assert self.raw is not None
        return RecordParser(self.raw, len(self.raw), "tokens")

    def values(self) -> list[str]:
        """Every text (decoded once)."""
        if self._values is None:
            self._values = self._parser().decode_array(VT.STRING, self.n, 0)[0]
        return self._values

    def same_prefix(self, other: Tokens) -> bool:
        """True when both lists are stored bytes and the shorter one's bytes begin the longer one's, which proves
        the first ``min(len)`` texts equal; False when that cannot be told this way."""
        if self.raw is None or other.raw is None:
            return False
        short, long = (self, other) if len(self.raw) <= len(other.raw) else (other, self)
        assert short.raw is not None and long.raw is not None
        return short.n <= long.n and long.raw.startswith(short.raw)


def as_ints(v: Any) -> list[int] | None:
    """A list of integers (:func:`~dspark_convert.plan.as_int` each), else None."""
    return list(v) if isinstance(v, list) and all(as_int(x) is not None for x in v) else None


@dataclass
class Side:
    """What the fit rules read from one side.

    ``kvs`` holds the decoded values of :data:`KEYS` that are present; ``hp`` the model sizes under plain names
    (:data:`HP_KEYS`, None when absent); ``tensors`` the ggml ``ne`` of each tensor (GGUF only); ``d2t_range`` the
    smallest and largest ``d2t`` entry of a draft that has one.
    """

    source: str
    kind: str  # "gguf" | "hf"
    arch: str
    tokens: Tokens
    kvs: dict[str, Any] = field(default_factory=dict)
    hp: dict[str, Any] = field(default_factory=dict)
    tensors: dict[str, tuple[int, ...]] = field(default_factory=dict)
    d2t_range: tuple[int, int] | None = None
    plan: Plan | None = None  # a draft's whole header, for the loader rules
    header_only: bool = False  # a remote file: its tensor data (d2t) was not fetched
    tied: bool | None = None  # a target whose output head is its token embedding (None: unknown)
    config: dict[str, Any] = field(default_factory=dict)  # a Hugging Face target's config.json (staleness facts)
    #: the word fit's rules are keyed by (:attr:`Rule.families`): the base variant's of the arch (its fit role's
    #: ``family_word(tensors)`` when it has one, else its name), or the arch of anything else
    family: str = ""

    def ints(self, key: str) -> list[int] | None:
        """The value of KV ``key`` as a list of integers (:func:`as_ints`), None when absent or not one."""
        return as_ints(self.kvs.get(key))



#: a rule for every draft (a :class:`Rule`'s ``families`` when no family word restricts it)
ALL: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Outcome:
    """What one rule found: status, the value on each side, one line, and machine-readable details."""

    status: str  # "pass" | "fail" | "info" | "skip"
    draft: Any
    target: Any
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def verdict(cls, ok: bool, draft: Any, target: Any, message: str, details: dict[str, Any] | None = None) -> Outcome:
        """The outcome of a comparison: ``pass`` when ``ok``, else ``fail``."""
        return cls("pass" if ok else "fail", draft, target, message, {} if details is None else details)


@dataclass
class Pair:
    """Both sides and their vocabularies as llama.cpp loads them (computed once for the vocabulary rules)."""

    draft: Side
    target: Side
    vd: VocabFacts = field(init=False)
    vt: VocabFacts = field(init=False)

    def __post_init__(self) -> None:
        self.vd = vocab_facts(self.draft.kvs, self.draft.tokens)
        self.vt = vocab_facts(self.target.kvs, self.target.tokens)

    def fc_width(self, n_taps: int | None, what: str) -> Outcome:
        """The draft's ``fc`` input width against ``n_taps`` target hidden states (``what``: how the taps are
        called); ``skip`` when a side lacks what it needs."""
        fc = self.draft.tensors.get(S.T_FC)
        h = as_int(self.target.hp.get("embedding_length"))
        if fc is None or not fc or n_taps is None or h is None:
            return Outcome("skip", fc[0] if fc else None, h, "fc.weight, the taps or the target's embedding_length "
                                                             "is missing; nothing to compare")
        want = n_taps * h
        return Outcome.verdict(fc[0] == want, fc[0], want, f"fc.weight input width {fc[0]} "
                               f"{'=' if fc[0] == want else '!='} {n_taps} {what} x target embedding_length {h} = {want}")


@dataclass(frozen=True)
class Rule:
    """One row of the rule table: id, what it compares, its source, the rule, and the draft families it applies to
    (:data:`ALL`, the default: every draft)."""

    id: str
    what: str
    source: str
    fn: Callable[[Pair], Outcome]
    families: frozenset[str] = ALL

    @classmethod
    def target_family(cls, source: str, family: str, arch_prefix: str, draft: str, reads: str) -> Rule:
        """The ``target-family`` row of a draft made for one family of targets: ``pass`` when the target's arch
        begins with ``arch_prefix`` (a ``family`` model), else ``fail``, saying that a ``draft`` reads such a
        target's ``reads``.

        Example:
            >>> Rule.target_family("src", "Gemma 4", "gemma4", "Gemma 4 assistant", "KV cache").what
            'the target is a Gemma 4 model'
        """
        def rule(p: Pair) -> Outcome:
            ok = str(p.target.arch).startswith(arch_prefix)
            return Outcome.verdict(ok, draft, p.target.arch, f"the target is a {family} model" if ok else
                                   f"the target's architecture is {p.target.arch!r}; a {draft} reads a {family} "
                                   f"target's {reads} (expected {arch_prefix})")
        return cls("target-family", f"the target is a {family} model", source, rule)
