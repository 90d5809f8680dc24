"""Vocabularies kept in their own file formats: PLaMo's ``tokenizer.jsonl`` and the RWKV world list.

Each reader returns what upstream b11434's method writes, in its order (``_set_vocab_plamo``,
``_set_vocab_rwkv_world``), and stops with one line where upstream would stop.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from ..errors import ConvertError
from ..hf.checkpoint import read_json
from ..schema import TokenType

PLAMO_FILE = "tokenizer.jsonl"
RWKV_WORLD_FILE = "rwkv_vocab_v20230424.txt"

#: tokenizer_config.json keys PLaMo resolves to ids (by the first token with that text), in upstream's order
PLAMO_SPECIALS = ("bos", "eos", "pad", "sep", "unk")
_PLAMO_TYPES = {"UNKNOWN": TokenType.UNKNOWN, "CONTROL": TokenType.CONTROL, "BYTE": TokenType.BYTE}


def _text_lines(path: Path, what: str) -> list[str]:
    """The file's lines as Python's text mode reads them (universal newlines, UTF-8)."""
    if not path.is_file():
        raise ConvertError(f"{path}: file not found ({what})")
    try:
        with open(path, encoding="utf-8") as f:
            return f.readlines()
    except UnicodeDecodeError as e:
        raise ConvertError(f"{path}: not UTF-8 ({e.reason} at byte {e.start:,})") from None


def plamo_vocab(target_dir: Path, n_vocab: int | None) -> tuple[list[str], list[float], list[int], dict[str, int],
                                                                  dict[str, Any]]:
    """Tokens, scores, types of ``tokenizer.jsonl`` (padded with ``[PAD1]``.. to the draft's vocab_size, never cut),
    the special ids tokenizer_config.json names (type -> id) and the tokenizer_config itself."""
    path = target_dir / PLAMO_FILE
    lines = _text_lines(path, "a PLaMo target needs it")
    config_path = target_dir / "tokenizer_config.json"
    if not config_path.is_file():
        raise ConvertError(f"{config_path}: file not found (llama.cpp's PLaMo vocab method reads it)")
    config = read_json(config_path)
    if not isinstance(config, dict):
        raise ConvertError(f"{config_path}: top level is not an object")
    if n_vocab is None:
        raise ConvertError("draft config.json: no vocab_size (llama.cpp's PLaMo vocab method pads to it)")
    tokens: list[str] = []
    scores: list[float] = []
    types: list[int] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            text, score = entry[0], float(entry[1])
        except (ValueError, TypeError, IndexError, KeyError):
            raise ConvertError(f"{path}: line {number} is not a [token, score, type, ...] list") from None
        if not isinstance(text, str):
            raise ConvertError(f"{path}: line {number}: token {text!r} is not a string")
        kind = entry[2] if len(entry) > 2 else "NORMAL"
        ttype = _PLAMO_TYPES.get(kind) if isinstance(kind, str) else None
        if ttype is None:
            ttype = TokenType.CONTROL if text.startswith("<|plamo:") and text.endswith("|>") else TokenType.NORMAL
        tokens.append(text)
        scores.append(score)
        types.append(ttype)
    for i in range(1, n_vocab - len(tokens) + 1):
        tokens.append(f"[PAD{i}]")
        scores.append(-1000.0)
        types.append(TokenType.UNUSED)
    ids: dict[str, int] = {}
    for typ in PLAMO_SPECIALS:
        content = config.get(f"{typ}_token")
        if content is None:
            continue
        if not isinstance(content, str) or content not in tokens:
            raise ConvertError(f"{config_path}: {typ}_token {content!r} is not a token of {PLAMO_FILE} (llama.cpp's "
                               "PLaMo vocab method stops on it)")
        ids[typ] = tokens.index(content)
    return tokens, scores, types, ids, config


def rwkv_world_tokens(target_dir: Path, n_vocab: int | None) -> tuple[list[str], list[int]]:
    """Tokens and types of the RWKV world list: ``<s>`` (CONTROL), then each line's token (a Python str or bytes
    literal) written as its bytes' ``repr`` body, padded with ``[PAD{id}]`` to the draft's vocab_size (65536)."""
    path = target_dir / RWKV_WORLD_FILE
    lines = _text_lines(path, "an RWKV world target needs it")
    tokens = ["<s>"]
    types = [TokenType.CONTROL]
    for number, line in enumerate(lines, 1):
        parts = line.split(" ")
        try:
            if len(parts) < 3:
                raise ValueError("fewer than three fields")
            token = ast.literal_eval(" ".join(parts[1:-1]))
            length = int(parts[-1])
            token = token.encode("utf-8") if isinstance(token, str) else token
            if not isinstance(token, bytes) or len(token) != length:
                raise ValueError("not a string or bytes literal of the stated length")
        except (ValueError, SyntaxError, MemoryError, RecursionError) as e:
            raise ConvertError(f"{path}: line {number} is not 'ID LITERAL LENGTH' ({e})") from None
        tokens.append(repr(token)[2:-1])
        types.append(TokenType.NORMAL)
    n = 65536 if n_vocab is None else n_vocab
    if n < len(tokens):
        raise ConvertError(f"{path}: {len(tokens)} tokens do not fit the draft vocab_size {n} (llama.cpp's RWKV world "
                           "vocab method stops)")
    for i in range(len(tokens), n):
        tokens.append(f"[PAD{i}]")
        types.append(TokenType.UNUSED)
    return tokens, types
