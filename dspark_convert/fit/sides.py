"""One side of a draft/target pair, read for the fit rules: a GGUF file (header only, plus the draft's small ``d2t``)
or a Hugging Face target folder / repo id (its ``config.json`` and the tokenizer KVs the converter would write).

Example:
    >>> t = open_target("fixtures/target-qwen3")  # doctest: +SKIP
    >>> t.kind, t.hp["embedding_length"], len(t.tokens)  # doctest: +SKIP
    ('hf', 64, 1024)
"""

from __future__ import annotations

import os
from pathlib import Path

from gguf import GGUFValueType as VT

from .. import schema as S
from ..errors import ConvertError
from ..gguffile.options import RemoteOptions
from ..gguffile.packed import PackedStrings
from ..gguffile.reader import GGUFFile, plan_from_file, safe_text
from ..gguffile.refs import is_remote_ref
from ..gguffile.source import open_gguf_source
from ..registry import base_variant
from ..roles.fit import HP_KEYS, KEYS, Side, Tokens


class NoVocabulary(ConvertError):
    """A side without a vocabulary (no ``tokenizer.ggml.tokens``): the fit cannot be checked."""


def _no_tokens(where: str) -> ConvertError:
    return NoVocabulary(f"{where}: key '{S.TOKENIZER_TOKENS}' is missing or not a string array; a side without a "
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
    return _keyed(Side(where, "gguf", arch, tokens, kvs, hp, tensors, d2t_range, plan, header_only, tied))


def side_from_hf(spec: str) -> Side:
    """A Hugging Face target (folder or repo id): the sizes from ``config.json`` and the tokenizer KVs that
    ``hf2gguf`` (and upstream's converter) would write for it, padded to the config's ``vocab_size``."""
    from ..hf.checkpoint import load_json
    from ..hf.hub import resolve_target
    from ..kit.hparams import normalize_hparams, rope_dict, vocab_size_of
    from ..registry.families import refuse_draft_as_target
    from ..tokenizer.handlers import target_vocab_kvs, vocab_handler_for_target

    resolved = resolve_target(spec)
    folder = resolved.path
    where = str(folder / "config.json")
    config = load_json(folder / "config.json")
    refuse_draft_as_target(config, folder, "--target")
    hp_raw = normalize_hparams(config, where)
    vocab_size = vocab_size_of(hp_raw, "vocab_size", where)  # the list is padded to it: bounded
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
    return _keyed(Side(resolved.label, "hf", arch, tokens, kvs, hp, tied=tie if isinstance(tie, bool) else None,
                       config=config))


def _keyed(side: Side) -> Side:
    """``side`` with its :attr:`~dspark_convert.roles.fit.Side.family`: the base variant's word for its arch (its
    ``fit`` role's ``family_word(tensors)`` when it has one, else its name), or the arch of anything else."""
    v = base_variant(side.arch)
    if v is None:
        side.family = side.arch
        return side
    word = getattr(v.role("fit"), "family_word", None) if v.has_role("fit") else None
    side.family = str(word(side.tensors)) if word is not None else v.name
    return side


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
