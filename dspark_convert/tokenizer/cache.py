"""A per-target cache of the finished tokenizer block (the ``tokenizer.*`` KVs), in the user's cache folder.

Converting several drafts or outtypes against one target is the normal workflow, and the tokenizer block is the
same every time. An entry is keyed by:

- the content (sha256) of every file the tokenizer handlers read from the target folder (tokenizer.json,
  tokenizer_config.json, config.json, tokenizer.model, added_tokens.json, merges.txt, chat templates,
  generation_config.json, PLaMo's tokenizer.jsonl, the RWKV world list, the tiktoken rank files);
- the folder's path (warnings name it), the handler and the draft ``vocab_size``;
- this package's version, the upstream release whose rules the block follows (``schema.UPSTREAM_REFERENCE``), a
  fingerprint of the code and data that build the block, and the versions of ``tokenizers`` and ``sentencepiece``.

Entries are written to a temporary file and renamed into place (atomic: concurrent runs each write a complete
entry, a reader never sees half of one), carry a sha256 of their content (a damaged or truncated entry is
ignored and rewritten), and replay the notes (:mod:`dspark_convert.notes`) their computation made, naming the
target folder (and its files) as the replaying run names it, not as the run that stored them did. Folder: ``$DSPARK_CONVERT_CACHE_DIR``,
else ``$XDG_CACHE_HOME/dspark-convert``, else the platform's user cache folder (``~/.cache/dspark-convert`` on
Linux). The newest :data:`MAX_ENTRIES` entries are kept.

Example:
    >>> kvs = cached_vocab_kvs(Path("target"), 151936, "qwen", compute)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
import struct
import sys
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from gguf import GGUFValueType as VT

from ..errors import ConvertError
from ..gguffile.packed import PackedStrings
from ..hf.checkpoint import MAX_JSON_BYTES
from ..hf.members import MAX_TEXT_BYTES, member_dir, member_file
from ..notes import collecting, note
from ..plan import KV
from ..safeio import open_regular
from ..units import size_text

log = logging.getLogger(__name__)

FORMAT = 2  # 2: notes name the target folder relative to it (replayed as the current run names it)
MAGIC = b"DSPKTOK" + bytes([FORMAT])
MAX_ENTRIES = 32
#: files of a target folder that the tokenizer handlers may read
TOKENIZER_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "tokenizer.model", "added_tokens.json",
                   "merges.txt", "chat_template.jinja", "chat_template.json", "generation_config.json",
                   "tokenizer.jsonl", "rwkv_vocab_v20230424.txt", "tokenizer.model.v3", "qwen.tiktoken",
                   "hy.tiktoken", "tiktoken.model")
#: how numeric arrays are kept: exactly as the Python values they were (float32 arrays as doubles)
_NUMERIC = {VT.UINT8: "q", VT.INT8: "q", VT.UINT16: "q", VT.INT16: "q", VT.UINT32: "q", VT.INT32: "q",
            VT.UINT64: "Q", VT.INT64: "q", VT.FLOAT32: "d", VT.FLOAT64: "d", VT.BOOL: "?"}


def cache_dir() -> Path:
    """Where entries live (see the module docstring)."""
    env = os.environ.get("DSPARK_CONVERT_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "dspark-convert"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "dspark-convert"
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "dspark-convert" / "Cache"
    return Path.home() / ".cache" / "dspark-convert"


@lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    """sha256 of the sources and data that build a tokenizer block, and of the library versions they use."""
    from importlib.metadata import PackageNotFoundError, version

    from .. import __version__

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "-"

    from ..schema import UPSTREAM_REFERENCE

    pkg = Path(__file__).resolve().parents[1]
    # The upstream release whose rules the block follows is part of the key: entries made under another
    # reference's rules (e.g. 749f688's add flags) are never replayed.
    h = hashlib.sha256(f"{FORMAT} {__version__} {UPSTREAM_REFERENCE} {installed('tokenizers')} "
                       f"{installed('sentencepiece')}".encode())
    files = sorted((pkg / "tokenizer").glob("*.py")) + sorted((pkg / "tokenizer" / "data").glob("*"))
    files += [*sorted((pkg / "schema").glob("*.py")), pkg / "plan.py", pkg / "gguffile" / "packed.py"]
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def require_regular_tokenizer_files(target_dir: Path) -> None:
    """Refuse (one line) a tokenizer file of ``target_dir`` that is not a member of the folder (``hf.members``: a
    regular file, no symlink out of the folder or the Hub cache's ``blobs/``, e.g. ``chat_template.jinja ->
    /proc/self/environ``) or that is larger than its limit: every file the tokenizer step or the cache key may
    read, checked before any of them is read."""
    target_dir = Path(target_dir)
    names = [*TOKENIZER_FILES, "vocab.json"]
    extras = target_dir / "additional_chat_templates"
    if extras.is_dir():
        member_dir(target_dir, extras.name)
        names += [f"{extras.name}/{p.name}" for p in sorted(extras.glob("*.jinja"))]
    for name in names:
        path = member_file(target_dir, name)
        limit = MAX_TEXT_BYTES if name.endswith((".jinja", ".txt")) else MAX_JSON_BYTES
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if size > limit:
            raise ConvertError(f"{path}: {size_text(size)}, larger than the limit of {size_text(limit)} for a tokenizer file")


def block_key(target_dir: Path, vocab_size: int | None, handler: str) -> str:
    """The cache key of a target's tokenizer block (hex sha256); reads every tokenizer file once."""
    target_dir = Path(target_dir)
    h = hashlib.sha256(json.dumps([_code_fingerprint(), os.path.abspath(target_dir), handler, vocab_size]).encode())
    extra = sorted(p.name for p in (target_dir / "additional_chat_templates").glob("*.jinja"))
    for name in [*TOKENIZER_FILES, *(f"additional_chat_templates/{n}" for n in extra)]:
        path = target_dir / name
        h.update(b"\0" + name.encode() + b"\0")
        if path.is_dir():
            h.update(b"folder")
            continue
        try:
            with open_regular(path) as f:  # a FIFO or /dev/zero here would hang or never end the digest
                h.update(hashlib.file_digest(f, "sha256").digest() if hasattr(hashlib, "file_digest")
                         else hashlib.sha256(f.read()).digest())
        except FileNotFoundError:
            h.update(b"absent")
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------- entry format
def encode_entry(kvs: list[KV], notes: list[tuple[str, str, str]]) -> bytes:
    """An entry: MAGIC, sha256 of the rest, u64 length of a JSON header, the header, the array blobs."""
    blobs: list[bytes] = []
    offset = 0
    items = []
    for kv in kvs:
        item: dict[str, Any] = {"name": kv.name, "type": int(kv.type)}
        if kv.type == VT.ARRAY:
            assert kv.sub_type is not None
            item["sub_type"] = int(kv.sub_type)
            if isinstance(kv.value, PackedStrings):
                blob = kv.value.blob
            elif kv.sub_type == VT.STRING:
                blob = PackedStrings.pack(kv.value).blob
            else:
                blob = struct.pack(f"<{len(kv.value)}{_NUMERIC[kv.sub_type]}", *kv.value)
            item["blob"] = [offset, len(blob), len(kv.value)]
            blobs.append(blob)
            offset += len(blob)
        else:
            item["value"] = kv.value
        items.append(item)
    header = json.dumps({"kvs": items, "notes": notes}, ensure_ascii=False).encode("utf-8")
    body = struct.pack("<Q", len(header)) + header + b"".join(blobs)
    return MAGIC + hashlib.sha256(body).digest() + body


def decode_entry(data: bytes) -> tuple[list[KV], list[tuple[str, str, str]]] | None:
    """The KVs and notes of an entry, or None when it is not a sound entry of this format."""
    if len(data) < 48 or data[:8] != MAGIC or hashlib.sha256(memoryview(data)[40:]).digest() != data[8:40]:
        return None
    try:
        n = struct.unpack_from("<Q", data, 40)[0]
        head = json.loads(data[48 : 48 + n])
        base = 48 + n
        kvs = []
        for item in head["kvs"]:
            vt = VT(item["type"])
            if vt != VT.ARRAY:
                kvs.append(KV(item["name"], vt, item["value"]))
                continue
            sub = VT(item["sub_type"])
            off, size, count = item["blob"]
            blob = data[base + off : base + off + size]
            if sub == VT.STRING:
                value: Any = PackedStrings(blob, count)
            else:
                value = list(struct.unpack(f"<{count}{_NUMERIC[sub]}", blob))
            kvs.append(KV(item["name"], vt, value, sub))
        notes = [(str(a), str(b), str(c)) for a, b, c in head["notes"]]
    except (ValueError, KeyError, TypeError, struct.error):
        return None
    return kvs, notes


# ---------------------------------------------------------------------------------------------- the cache
#: marks a stored note whose message began with a path inside the target folder: MARK + relative path + MARK + rest
_MARK = "\x00"


def _portable(message: str, target_dir: Path) -> str:
    """``message`` with a leading path inside ``target_dir`` (``t/tokenizer.json: ...``) made relative to it."""
    head, sep, rest = message.partition(": ")
    if not sep or _MARK in message:
        return message
    root = os.path.abspath(target_dir)
    here = os.path.abspath(head)
    if here != root and not here.startswith(root.rstrip(os.sep) + os.sep):
        return message
    return f"{_MARK}{os.path.relpath(here, root)}{_MARK}{sep}{rest}"


def _replayed(message: str, target_dir: Path) -> str:
    """A stored message with its path named from ``target_dir`` as given now (:func:`_portable` reversed)."""
    if not message.startswith(_MARK):
        return message
    rel, _, rest = message[1:].partition(_MARK)
    return f"{Path(target_dir) if rel == '.' else Path(target_dir) / rel}{rest}"


def cached_vocab_kvs(target_dir: Path, vocab_size: int | None, handler: str,
                     compute: Callable[[], list[KV]]) -> list[KV]:
    """``compute()`` through the cache: a sound entry is returned (its notes made again), else the block is
    computed and stored. Cache trouble (no folder, no space, a damaged entry) only costs the computation."""
    key = block_key(target_dir, vocab_size, handler)
    path = cache_dir() / "tokenizer" / f"{key}.bin"
    try:
        entry = decode_entry(path.read_bytes())
    except OSError:
        entry = None
    if entry is not None:
        kvs, notes = entry
        for subject, rule, message in notes:
            note(subject, rule, _replayed(message, target_dir))
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: kept longest
        return kvs
    with collecting() as made:
        kvs = compute()
    for n in made:  # passed on to the caller's collector (or logged), as without the cache
        note(n.subject, n.rule, n.message)
    try:
        data = encode_entry(kvs, [(n.subject, n.rule, _portable(n.message, target_dir)) for n in made])
    except (TypeError, ValueError, OverflowError, struct.error):  # a value the file cannot hold: check_plan says so
        return kvs
    _store(path, data)
    return kvs


def _store(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file + rename); failures are ignored."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "xb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as e:
        log.debug("tokenizer cache: cannot write %s (%s)", path, e)
        with contextlib.suppress(OSError):
            tmp.unlink()
        return
    _prune(path.parent)


def _prune(folder: Path) -> None:
    """Keep the newest MAX_ENTRIES entries (and drop temporary files a killed run left, after an hour)."""
    with contextlib.suppress(OSError):
        entries = sorted(folder.glob("*.bin"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in entries[MAX_ENTRIES:]:
            old.unlink(missing_ok=True)
        import time

        for tmp in folder.glob(".*.tmp"):
            if tmp.stat().st_mtime < time.time() - 3600:
                tmp.unlink(missing_ok=True)
