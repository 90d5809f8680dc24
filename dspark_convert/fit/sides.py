"""One side of a draft/target pair, read for the fit rules: a GGUF file (header only, plus the draft's small ``d2t``)
or a Hugging Face target folder / repo id (its ``config.json`` and the tokenizer KVs the converter would write).

Example:
    >>> t = open_target("fixtures/target-qwen3")  # doctest: +SKIP
    >>> t.kind, t.hp["embedding_length"], len(t.tokens)  # doctest: +SKIP
    ('hf', 64, 1024)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

from gguf import GGUFValueType as VT

from .. import schema as S
from ..errors import ConvertError
from ..gguffile.options import RemoteOptions
from ..gguffile.packed import PackedStrings
from ..gguffile.reader import GGUFFile, plan_from_file, safe_text
from ..gguffile.records import RecordParser
from ..gguffile.source import is_remote_ref, open_gguf_source
from ..plan import Plan
from ..variants import base_variant

#: unscoped keys a side keeps (tokenizer keys, draft keys); ``{arch}.*`` ones go to :attr:`Side.hp`
KEYS = (S.TOKENIZER_MODEL, S.TOKENIZER_PRE, S.TOKENIZER_CHAT_TEMPLATE, S.GENERAL_NAME, *S.DRAFT_TARGET_KEYS,
        S.SPECIAL_TOKEN_KEYS["bos"], S.SPECIAL_TOKEN_KEYS["eos"], S.TOKENIZER_MASK_ID, S.ADD_TOKEN_KEYS["bos"],
        S.ADD_TOKEN_KEYS["eos"])
#: :attr:`Side.hp` name -> ``{arch}.*`` key template
HP_KEYS = {"embedding_length": S.EMBEDDING_LENGTH, "block_count": S.BLOCK_COUNT, "context_length": S.CONTEXT_LENGTH,
           "rope_freq_base": S.ROPE_FREQ_BASE, "rope_scaling_type": S.ROPE_SCALING_TYPE,
           "rope_scaling_factor": S.ROPE_SCALING_FACTOR, "rope_scaling_orig_ctx": S.ROPE_SCALING_ORIG_CTX,
           "rope_dimension_sections": S.ROPE_DIMENSION_SECTIONS}


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

    @property
    def family(self) -> str:
        """The word fit's rules are keyed by: the base variant's (:func:`.variants.base_variant` of the arch; its
        ``fit.family_word(tensors)`` when it has one, else its name), or the arch of anything else."""
        v = base_variant(self.arch)
        if v is None:
            return self.arch
        word = getattr(v.role("fit"), "family_word", None) if v.has_role("fit") else None
        return str(word(self.tensors)) if word is not None else v.name


def _no_tokens(where: str) -> ConvertError:
    return ConvertError(f"{where}: key '{S.TOKENIZER_TOKENS}' is missing or not a string array; a side without a "
                        "vocabulary cannot be checked")


def _gguf_tokens(f: GGUFFile) -> Tokens:
    kv = f.kvs.get(S.TOKENIZER_TOKENS)
    if kv is None or kv.type != VT.ARRAY or kv.sub_type != VT.STRING or kv.count is None:
        raise _no_tokens(str(f.path))
    return Tokens(kv.count, raw=bytes(f.raw_value(S.TOKENIZER_TOKENS)), values=kv.value if kv.loaded else None)


def side_from_gguf(path: str | os.PathLike[str], *, draft: bool = True, remote: RemoteOptions | None = None) -> Side:
    """A GGUF side from its header: a local path, a Hub reference (``hf://...``) or a URL (header fetched with range
    requests, :func:`~dspark_convert.gguffile.source.open_gguf_source`). A ``draft`` side also gets its whole header
    as a plan (for the loader rules) and the range of its ``d2t`` tensor (the only tensor data read, and only from
    a local file).

    Only the header is mapped: a 20 GB target costs the time to walk its KV and tensor-info records.
    """
    with open_gguf_source(path, remote) as f:
        where = str(path) if is_remote_ref(path) else str(f.path)
        header_only = bool(getattr(f, "header_only", False))
        arch = f.arch or ""
        plan = plan_from_file(f) if draft or _has_mtp_path(arch) else None  # an MTP target: its header rules
        tokens = _gguf_tokens(f)
        kvs = {k: f.kvs[k].value for k in KEYS if k in f.kvs}
        hp = {name: f.value(tpl.format(arch=arch)) for name, tpl in HP_KEYS.items()}
        tensors = {t.name: t.ne for t in f.tensors}
        d2t_range = None
        if draft and S.T_D2T in tensors and not header_only:
            t = f.tensor(S.T_D2T)
            if t.type_name != "I64":
                raise ConvertError(f"{where}: tensor '{S.T_D2T}' has type {t.type_name}, expected I64")
            values = f.tensor_array(S.T_D2T)
            if values.size:
                d2t_range = (int(values.min()), int(values.max()))
    tied = None if draft or not ({"output.weight", "token_embd.weight"} & tensors.keys()) else "output.weight" not in tensors
    return Side(where, "gguf", arch, tokens, kvs, hp, tensors, d2t_range, plan, header_only, tied)


def side_from_hf(spec: str) -> Side:
    """A Hugging Face target (folder or repo id): the sizes from ``config.json`` and the tokenizer KVs that
    ``hf2gguf`` (and upstream's converter) would write for it, padded to the config's ``vocab_size``."""
    from ..hf.checkpoint import load_json
    from ..hf.hub import resolve_target
    from ..tokenizer.handlers import target_vocab_kvs, vocab_handler_for_target
    from ..variants.families import refuse_draft_as_target
    from ..variants.kit.hparams import normalize_hparams, rope_dict

    resolved = resolve_target(spec)
    folder = resolved.path
    where = str(folder / "config.json")
    config = load_json(folder / "config.json")
    refuse_draft_as_target(config, folder, "--target")
    hp_raw = normalize_hparams(config, where)
    vocab_size = hp_raw.get("vocab_size")
    vocab_size = vocab_size if isinstance(vocab_size, int) and not isinstance(vocab_size, bool) and vocab_size > 0 else None
    kv_list = target_vocab_kvs(folder, vocab_size, vocab_handler_for_target(folder))
    all_kvs = {kv.name: kv.value for kv in kv_list}
    token_list = all_kvs.get(S.TOKENIZER_TOKENS)
    if isinstance(token_list, PackedStrings):  # the fast tokenizer path: already in GGUF encoding
        tokens = Tokens(len(token_list), raw=token_list.blob)
    elif isinstance(token_list, list):
        tokens = Tokens.from_list(token_list)
    else:
        raise _no_tokens(str(folder))
    kvs = {k: all_kvs[k] for k in KEYS if k in all_kvs}
    rope = rope_dict(hp_raw)
    rope_type = rope.get("rope_type")
    hp = {"embedding_length": hp_raw.get("hidden_size"), "block_count": hp_raw.get("num_hidden_layers"),
          "context_length": hp_raw.get("max_position_embeddings"), "rope_freq_base": rope.get("rope_theta"),
          "rope_scaling_type": None if rope_type in (None, "default") else rope_type,
          "rope_scaling_factor": rope.get("factor"), "rope_scaling_orig_ctx": rope.get("original_max_position_embeddings")}
    model_type = hp_raw.get("model_type")
    arch = model_type if isinstance(model_type, str) else "hf"
    tie = config.get("tie_word_embeddings", (config.get("text_config") or {}).get("tie_word_embeddings"))
    return Side(resolved.label, "hf", arch, tokens, kvs, hp, tied=tie if isinstance(tie, bool) else None, config=config)


def _has_mtp_path(arch: str) -> bool:
    from ..variants.nextn import nextn_arch

    return nextn_arch(arch) is not None


def _not_a_draft(side: Side) -> Side:
    """A target GGUF, refused when it is a draft (its arch is a draft architecture)."""
    if base_variant(side.arch) is not None:
        raise ConvertError(f"{side.source}: is a draft GGUF (general.architecture '{side.arch}'), not a target "
                           "model; pass the target model the draft was made for as --target")
    return side


def open_target(spec: str | os.PathLike[str], remote: RemoteOptions | None = None) -> Side:
    """TARGET as the user gave it: an existing file, an ``hf://`` reference or a URL is a GGUF (any size, header
    only); a folder or an ``org/name[@rev]`` repo id is a Hugging Face target."""
    text = str(spec)
    path = Path(text).expanduser()
    if path.is_file():
        return _not_a_draft(side_from_gguf(path, draft=False))
    if not path.is_dir() and is_remote_ref(text):
        return _not_a_draft(side_from_gguf(text, draft=False, remote=remote))
    if path.is_dir():
        return side_from_hf(text)
    if text.lower().endswith(".gguf"):
        raise ConvertError(f"{safe_text(text, 200)}: no such file (expected a target GGUF, a target model folder or a "
                           "Hugging Face repo id)")
    return side_from_hf(text)
