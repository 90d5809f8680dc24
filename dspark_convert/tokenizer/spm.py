"""tokenizer.model targets: the SentencePiece token list of upstream ``_create_vocab_sentencepiece``.

Contract §2.5.3: every id starts as ``[PAD{id}]`` / -10000.0 / UNUSED; SentencePiece pieces fill their ids with
their score and type; ``added_tokens.json`` and ``tokenizer_config.json`` ``added_tokens_decoder`` entries then
override ids below ``N`` with score -1000.0. Phi-3 targets use their own variant (:func:`phi3_token_list`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ConvertError, clip
from ..hf.checkpoint import load_json_if_present, read_json
from ..notes import note
from ..schema import TokenType
from .special import looks_special


def _load_processor(path: Path) -> Any:
    from sentencepiece import SentencePieceProcessor

    sp = SentencePieceProcessor()
    try:
        sp.LoadFromFile(str(path))
    except (OSError, RuntimeError, UnicodeDecodeError) as e:
        # SentencePiece's message quotes the bad piece's bytes; where they are not UTF-8, its binding cannot decode it
        why = e.object.decode("utf-8", "backslashreplace") if isinstance(e, UnicodeDecodeError) else str(e)
        raise ConvertError(f"{path}: not a readable SentencePiece model ({clip(why.splitlines()[0], 200)})") from None
    return sp


def _pieces(sp: Any, model: Path, ids: list[int]) -> list[str]:
    """The pieces of ``ids``; a piece that is not UTF-8 (SentencePiece stores bytes) is refused in one line naming
    its id."""
    try:
        return list(sp.id_to_piece(ids)) if ids else []
    except UnicodeDecodeError:
        pass
    for i in ids:
        try:
            sp.id_to_piece(i)
        except UnicodeDecodeError as e:
            raise ConvertError(f"{model}: piece {i} is not valid UTF-8 ({clip(repr(e.object), 80)})") from None
    raise ConvertError(f"{model}: a piece is not valid UTF-8")  # the batch call failed where no single one does


def _model_of(target_dir: Path, needs: str, n_vocab: int | None) -> tuple[Path, Any, int, int]:
    """``target_dir/tokenizer.model`` (refused in one line naming ``needs`` when absent), its processor, its piece
    count and the draft's vocabulary size ``n`` (``n_vocab``, else the piece count)."""
    model = target_dir / "tokenizer.model"
    if not model.is_file():
        raise ConvertError(f"{model}: file not found ({needs} needs it)")
    sp = _load_processor(model)
    size = sp.vocab_size()
    return model, sp, size, n_vocab if n_vocab is not None else size


def _spm_pieces(sp: Any, model: Path, n: int) -> tuple[list[str], list[float], list[int]]:
    """Pieces, scores and types of the first ``min(n, sp size)`` ids of ``model``, padded with [PAD{id}] up to
    ``n``."""
    size = sp.vocab_size()
    ids = list(range(min(n, size)))
    if size > n:
        note("tokenizer.ggml.tokens", "vocab-truncated",
             f"tokenizer.model has {size} pieces; ids from {n} on are dropped (draft vocab_size {n})")
    # The batch calls keep a 256k-piece model under a second.
    pieces = _pieces(sp, model, ids)
    scores = [float(s) for s in sp.get_score(ids)] if ids else []
    flags = [sp.is_unknown(ids), sp.is_control(ids), sp.is_unused(ids), sp.is_byte(ids)] if ids else [[]] * 4
    order = (TokenType.UNKNOWN, TokenType.CONTROL, TokenType.UNUSED, TokenType.BYTE)
    types = []
    for i in range(len(ids)):
        t = TokenType.NORMAL
        for kind, flag in zip(order, flags, strict=True):  # first that applies, in upstream's elif order
            if flag[i]:
                t = kind
                break
        types.append(t)
    pad = range(len(ids), n)
    return pieces + [f"[PAD{i}]" for i in pad], scores + [-10000.0] * len(pad), types + [TokenType.UNUSED] * len(pad)


def spm_token_list(target_dir: Path, n_vocab: int | None) -> tuple[list[str], list[float], list[int]]:
    """Tokens, scores and types for a target with ``tokenizer.model`` (contract §2.5.3).

    Example:
        >>> tokens, scores, types = spm_token_list(Path("gemma-target"), 256000)  # doctest: +SKIP
        >>> tokens[:3], types[:3]  # doctest: +SKIP
        (['<pad>', '<eos>', '<bos>'], [3, 3, 3])
    """
    model = target_dir / "tokenizer.model"
    sp = _load_processor(model)
    n = n_vocab if n_vocab else sp.vocab_size()  # upstream: `find_hparam(...) or tokenizer.vocab_size()`
    tokens, scores, types = _spm_pieces(sp, model, n)
    added = load_json_if_present(target_dir / "added_tokens.json") or {}
    for piece, tid in added.items():
        if not isinstance(tid, int) or not 0 <= tid < n:
            note("tokenizer.ggml.tokens", "token-out-of-range",
                 f"{target_dir / 'added_tokens.json'}: token {piece!r} id {tid!r} is out of range (< {n}), ignored")
            continue
        tokens[tid], scores[tid], types[tid] = piece, -1000.0, TokenType.USER_DEFINED
    config = load_json_if_present(target_dir / "tokenizer_config.json") or {}
    decoder = config.get("added_tokens_decoder") or {}
    for key, data in (decoder.items() if isinstance(decoder, dict) else ()):
        tid = int_key(target_dir / "tokenizer_config.json", key)
        text = data.get("content") if isinstance(data, dict) else None
        if not isinstance(text, str):
            continue
        if tid >= n:
            note("tokenizer.ggml.tokens", "token-out-of-range",
                 f"{target_dir / 'tokenizer_config.json'}: added token {text!r} id {tid} is out of range (< {n}), "
                 "ignored")
            continue
        if data.get("special") or looks_special(text):
            types[tid] = TokenType.CONTROL
        else:
            text = text.replace("\u2581", " ")  # user-defined tokens are stored pre-normalized
            types[tid] = TokenType.USER_DEFINED
        tokens[tid], scores[tid] = text, -1000.0
    return tokens, scores, types


def int_key(path: Path, key: Any) -> int:
    try:
        tid = int(key)
    except (TypeError, ValueError):
        raise ConvertError(f"{path}: added_tokens_decoder key {key!r} is not a token id") from None
    if tid < 0:
        raise ConvertError(f"{path}: added_tokens_decoder key {key!r} is a negative token id")
    return tid


def added_token_entries(target_dir: Path) -> list[tuple[Path, int, Any]]:
    """(file, id, entry) of every added token a target folder declares, in the order upstream applies them: the
    ``added_tokens_decoder`` of ``tokenizer_config.json``, then the ``added_tokens`` of ``tokenizer.json``; an id
    that is not an integer is refused in one line naming the file (:func:`int_key`)."""
    entries: list[tuple[Path, int, Any]] = []
    config_path = target_dir / "tokenizer_config.json"
    decoder = (load_json_if_present(config_path) or {}).get("added_tokens_decoder") or {}
    for key, data in (decoder.items() if isinstance(decoder, dict) else ()):
        entries.append((config_path, int_key(config_path, key), data))
    tj = target_dir / "tokenizer.json"
    if tj.is_file():
        data_tj = read_json(tj)
        for item in (data_tj.get("added_tokens") or []) if isinstance(data_tj, dict) else []:
            if isinstance(item, dict):
                entries.append((tj, int_key(tj, item.get("id")), item))
    return entries


def phi3_token_list(target_dir: Path, n_vocab: int | None) -> tuple[list[str], list[float], list[int]]:
    """Upstream ``Phi3MiniModel.set_vocab`` SentencePiece variant: no range check on added_tokens_decoder ids,
    USER_DEFINED / CONTROL by the ``special`` flag only, and tokenizer.json ``added_tokens`` applied last. A draft
    vocab_size below the piece count, or an added token id beyond it, is refused in one line (upstream stops there
    with IndexError)."""
    model, sp, size, n = _model_of(target_dir, "a Phi-3 target", n_vocab)
    if n < size:
        raise ConvertError(f"{model}: {size} pieces do not fit the draft vocab_size {n} (llama.cpp b11434's Phi-3 "
                           "vocab method stops on this with IndexError)")
    tokens, scores, types = _spm_pieces(sp, model, n)
    added = load_json_if_present(target_dir / "added_tokens.json") or {}
    for piece, tid in added.items():
        if isinstance(tid, int) and 0 <= tid < n:
            tokens[tid], scores[tid], types[tid] = piece, -1000.0, TokenType.USER_DEFINED
    entries = added_token_entries(target_dir)
    for path, tid, data in entries:
        text = data.get("content") if isinstance(data, dict) else None
        if not isinstance(text, str):
            continue
        if tid >= n:
            raise ConvertError(f"{path}: token id {tid} ({text!r}) does not fit the draft vocab_size {n}")
        tokens[tid], scores[tid] = text, -1000.0
        types[tid] = TokenType.CONTROL if data.get("special") else TokenType.USER_DEFINED
    return tokens, scores, types


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _proto_fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of a protobuf message: varints as int, length-delimited as bytes."""
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            size, pos = _varint(buf, pos)
            if pos + size > len(buf):
                raise ValueError("truncated field")
            value, pos = buf[pos:pos + size], pos + size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value, pos = buf[pos:pos + width], pos + width
        else:
            raise ValueError(f"unsupported wire type {wire}")
        out.append((field, wire, value))
    return out


def spm_add_dummy_prefix(model: Path) -> bool:
    """``normalizer_spec.add_dummy_prefix`` of a SentencePiece model file (the proto default, true, when unset)."""
    try:
        top = _proto_fields(model.read_bytes())
        value = True
        for field, wire, spec in top:
            if field == 3 and wire == 2:  # ModelProto.normalizer_spec
                for f, w, v in _proto_fields(spec):
                    if f == 3 and w == 0:  # NormalizerSpec.add_dummy_prefix
                        value = bool(v)
        return value
    except (OSError, ValueError) as e:
        raise ConvertError(f"{model}: not a readable SentencePiece model ({e})") from None


def internlm2_token_list(target_dir: Path, n_vocab: int | None) -> tuple[list[str], list[float], list[int], int | None]:
    """Upstream ``InternLM2Model.set_vocab``'s list: the first ``n`` SentencePiece pieces (``\\x00`` written as
    U+1F409, ``[UNUSED...`` pieces UNUSED), ``added_tokens.json`` appended, then ``tokenizer_config.json``
    ``added_tokens_decoder`` and tokenizer.json ``added_tokens`` set by id (CONTROL when special, else
    USER_DEFINED, score -1000). Also the id of ``<|im_end|>`` among those entries (the chat eos), if any."""
    model, sp, size, n = _model_of(target_dir, "llama.cpp's InternLM2 vocab method", n_vocab)
    if n > size:
        raise ConvertError(f"{model}: has {size} pieces but the draft vocab_size is {n}; llama.cpp's InternLM2 vocab "
                           "method reads a piece for every id and stops")
    tokens, scores, types = _spm_pieces(sp, model, n)
    tokens = ["\U0001F409" if t == "\x00" else t for t in tokens]
    types = [TokenType.UNUSED if t.startswith("[UNUSED") else ty for t, ty in zip(tokens, types, strict=True)]
    added = load_json_if_present(target_dir / "added_tokens.json") or {}
    for piece in added:
        tokens.append(piece)
        scores.append(-1000.0)
        types.append(TokenType.USER_DEFINED)
    chat_eos: int | None = None
    entries = added_token_entries(target_dir)
    for path, tid, data in entries:
        text = data.get("content") if isinstance(data, dict) else None
        if not isinstance(text, str):
            raise ConvertError(f"{path}: added token {tid} has no content string")
        if text == "<|im_end|>":
            chat_eos = tid
        if tid >= len(tokens):
            raise ConvertError(f"{path}: token id {tid} ({text!r}) does not fit the draft vocab_size {len(tokens)} "
                               "(llama.cpp's InternLM2 vocab method stops on it)")
        tokens[tid], scores[tid] = text, -1000.0
        types[tid] = TokenType.CONTROL if data.get("special") else TokenType.USER_DEFINED
    return tokens, scores, types, chat_eos


def arctic_token_list(target_dir: Path, n_vocab: int | None) -> tuple[list[str], list[float], list[int]]:
    """Upstream ``ArcticModel.set_vocab``'s list: SentencePiece pieces over ``[PAD{id}]`` padding, then
    ``tokenizer_config.json`` ``added_tokens_decoder`` entries below ``n``: special ones CONTROL (UNKNOWN for the
    configured ``unk_token``) with score 0, others USER_DEFINED with score -10000."""
    model, sp, size, n = _model_of(target_dir, "llama.cpp's Arctic vocab method", n_vocab)
    if n < size:
        raise ConvertError(f"{model}: has {size} pieces but the draft vocab_size is {n}; llama.cpp's Arctic vocab "
                           "method writes every piece and stops")
    tokens, scores, types = _spm_pieces(sp, model, n)
    path = target_dir / "tokenizer_config.json"
    config = load_json_if_present(path) or {}
    decoder = config.get("added_tokens_decoder")
    for key, data in (decoder.items() if isinstance(decoder, dict) else ()):
        tid = int_key(path, key)
        if tid >= n:
            continue
        text = data.get("content") if isinstance(data, dict) else None
        if not isinstance(text, str):
            raise ConvertError(f"{path}: added token {tid} has no content string")
        ttype, score = TokenType.USER_DEFINED, -10000.0
        if data.get("special"):
            if "unk_token" not in config:
                raise ConvertError(f"{path}: no unk_token (llama.cpp's Arctic vocab method compares special added "
                                   "tokens with it)")
            ttype = TokenType.UNKNOWN if text == config["unk_token"] else TokenType.CONTROL
            score = 0.0
        tokens[tid], types[tid], scores[tid] = text, ttype, score
    return tokens, scores, types
