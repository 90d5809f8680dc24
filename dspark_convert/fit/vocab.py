"""The vocabulary facts llama.cpp derives from a GGUF's ``tokenizer.*`` keys, as its compatibility rule sees them.

``common_speculative_are_compatible()`` (llama.cpp ``common/speculative.cpp``) compares the *loaded* vocabularies,
not the keys: a missing ``add_bos_token`` or ``bos_token_id`` takes the default that ``llama_vocab::impl::load()``
(``src/llama-vocab.cpp``) sets for the tokenizer model and pre-tokenizer, and a special id outside the vocabulary is
dropped ("bad special token") in favour of that default. :func:`vocab_facts` replays those steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import schema as S

#: ``tokenizer.ggml.model`` -> llama.cpp vocab type (llama_vocab::impl::load)
VOCAB_TYPES: dict[str, str] = {"no_vocab": "NONE", "none": "NONE", "llama": "SPM", "gpt2": "BPE", "bert": "WPM",
                               "t5": "UGM", "rwkv": "RWKV", "plamo2": "PLAMO2"}
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
    pre = kvs.get(S.TOKENIZER_PRE)
    bos, eos = DEFAULT_IDS.get(vtype, (None, None))
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
