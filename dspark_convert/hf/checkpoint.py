"""Lazy, validated access to a Hugging Face checkpoint folder (config.json + safetensors shards).

Knows nothing about GGUF. Tensors are read on demand, one at a time or by row chunks: ``read`` maps them with
``numpy.memmap``, ``read_rows`` (what the converter streams with) reads a chunk into a new array, so a conversion
never holds the whole model in memory, not even as mapped pages. safetensors' own numpy loader cannot represent
BF16 (the dtype of every released draft), so the (tiny, fully specified) safetensors header is parsed and
validated here: BF16 comes back as raw ``uint16`` bits and can be copied byte for byte.
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConvertError, clip
from ..safeio import open_regular, require_regular
from ..schema import SAFETENSORS_DTYPES
from ..units import size_text
from .members import bad_name, lands_inside, member

#: safetensors headers larger than this are refused before they are read (real ones are well under 10 MB).
MAX_HEADER_BYTES = 100 * 1024 * 1024
INDEX_NAME = "model.safetensors.index.json"


#: config sub-dicts that multimodal wrappers nest the text model's config in (upstream merges them into the top
#: level, under the name text_config)
TEXT_CONFIG_KEYS = ("text_config", "llm_config", "lm_config", "language_config", "lfm")
#: where a checkpoint keeps its input embedding and its output head (first match wins); a target without an
#: output head ties it to the embedding
EMBED_NAMES = ("model.embed_tokens.weight", "embed_tokens.weight", "model.language_model.embed_tokens.weight",
               "language_model.model.embed_tokens.weight", "transformer.wte.weight")
OUTPUT_NAMES = ("lm_head.weight", "model.lm_head.weight", "language_model.lm_head.weight", "output.weight")

#: a tensor-name predicate: which tensors of a checkpoint a conversion reads (None: all of them)
Select = Callable[[str], bool]
#: values derived from a stored tensor's raw values: (raw rows, their safetensors dtype, the first row's index) ->
#: float32 rows
Derive = Callable[[np.ndarray, str, int], np.ndarray]


#: the largest JSON file read (a tokenizer.json of a 256k vocabulary is ~20 MB; configs are kilobytes)
MAX_JSON_BYTES = 512 * 1024 * 1024
#: the largest small configuration file read (``hf_quant_config.json``: kilobytes in every real checkpoint)
MAX_CONFIG_BYTES = 16 * 1024 * 1024


def read_json(path: Path, *, in_folder: bool = True, limit: int | None = None) -> Any:
    """Parse the JSON file ``path`` (any JSON value) with one-line errors that name the file.

    This is the package's one JSON file reader (configs, tokenizer files, indexes, metadata overrides). With
    ``in_folder`` (the default: a file of a checkpoint or target folder) the file must be a member of its folder
    (``hf.members``: no symlink leaving the folder or the Hub cache's ``blobs/``); a file the user names on the
    command line (``--metadata``) passes ``in_folder=False``. ``limit``: the most bytes read (default
    :data:`MAX_JSON_BYTES`; a small configuration file such as ``hf_quant_config.json`` passes
    :data:`MAX_CONFIG_BYTES`).

    Example:
        >>> read_json(Path("fixtures/dflash-zlab/config.json"))["architectures"]
        ['DFlashDraftModel']
    """
    if in_folder:
        member(path)
    cap = MAX_JSON_BYTES if limit is None else limit
    try:
        with open_regular(path) as f:
            raw = f.read(cap + 1)
        if len(raw) > cap:
            raise ConvertError(f"{path}: larger than the limit of {size_text(cap)} for {'a JSON file' if limit is None else 'this file'}")
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise ConvertError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConvertError(f"{path}: cannot read ({e})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConvertError(f"{path}: malformed JSON at line {e.lineno} column {e.colno} ({e.msg})") from None
    except RecursionError:
        raise ConvertError(f"{path}: JSON nested too deeply (arrays or objects inside each other past the "
                           "interpreter's recursion limit); expected a flat configuration") from None
    except ValueError as e:  # an integer literal past the interpreter's 4300-digit limit
        raise ConvertError(f"{path}: malformed JSON ({clip(str(e))})") from None
    if _lone_surrogate_escape(text):  # strict UTF-8 holds no surrogate: only a \uXXXX escape can make one
        where = lone_surrogate(doc)
        if where is not None:
            raise ConvertError(f"{path}: the string at {clip(where)} holds a lone surrogate (a \\ud800-\\udfff "
                               "escape outside a pair), which is not Unicode text; expected UTF-8 text")
    return doc


#: a JSON escape of a UTF-16 surrogate after its run of backslashes (a pair decodes to one character; a lone one
#: stays a surrogate)
_SURROGATE_ESCAPE = re.compile(r"(\\+)u[dD]([89abcdefABCDEF])[0-9a-fA-F]{2}")
_LOW_ESCAPE = re.compile(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate_escape(text: str) -> bool:
    """Whether JSON ``text`` holds a ``\\uD800``-``\\uDFFF`` escape that is not half of a high-low pair (what
    :func:`json.loads` leaves as a lone surrogate); only the escapes are looked at."""
    paired_low = -1  # where the low half of the last pair starts
    for m in _SURROGATE_ESCAPE.finditer(text):
        if len(m.group(1)) % 2 == 0:
            continue  # an escaped backslash, then the letter u: text, not an escape
        start = m.end(1) - 1
        if m.group(2).lower() in "89ab":  # a high half: a low escape must follow at once
            if not _LOW_ESCAPE.match(text, m.end()):
                return True
            paired_low = m.end()
        elif start != paired_low:
            return True
    return False


def lone_surrogate(doc: Any) -> str | None:
    """The path (``key.0.key``; ``$`` for the top level) of a string, mapping key or value, holding a lone
    surrogate in the parsed JSON or YAML ``doc`` (mappings, lists, sets and scalars), or None."""
    stack: list[tuple[Any, str]] = [(doc, "$")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return where
        elif isinstance(node, dict):
            for k, v in node.items():
                child = str(k) if where == "$" else f"{where}.{k}"
                if isinstance(k, str) and _SURROGATE.search(k):
                    return child
                stack.append((v, child))
        elif isinstance(node, (list, tuple, set, frozenset)):
            stack.extend((v, str(i) if where == "$" else f"{where}.{i}") for i, v in enumerate(node))
    return None


def load_json(path: Path) -> dict[str, Any]:
    """:func:`read_json` for a file that must hold a JSON object.

    Example:
        >>> load_json(Path("fixtures/dflash-zlab/config.json"))["architectures"]
        ['DFlashDraftModel']
    """
    data = read_json(path)
    if not isinstance(data, dict):
        raise ConvertError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


def read_config(folder: Path, *, required: bool = True) -> dict[str, Any]:
    """The ``config.json`` of checkpoint folder ``folder``, a JSON object (:func:`load_json`); a missing one is one
    line naming the folder, or ``{}`` when not ``required``.

    Example:
        >>> read_config(Path("fixtures/dflash-zlab"))["architectures"], read_config(Path("docs"), required=False)
        (['DFlashDraftModel'], {})
    """
    path = member(Path(folder) / "config.json")
    if not path.is_file():
        if required:
            raise ConvertError(f"{folder}: no config.json (expected a Hugging Face checkpoint folder)")
        return {}
    return load_json(path)


def load_json_if_present(path: Path) -> dict[str, Any] | None:
    """:func:`load_json`, or None when the file does not exist (optional files: tokenizer_config.json, ...)."""
    member(path)
    return load_json(path) if path.is_file() else None


def read_weight_map(index: Path) -> dict[str, Any]:
    """The ``weight_map`` of a ``model.safetensors.index.json`` (tensor name -> shard file name), non-empty."""
    weight_map = load_json(index).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ConvertError(f"{index}: no 'weight_map' object")
    return weight_map


@dataclass(frozen=True)
class TensorRef:
    """Where one tensor lives: file, dtype string, shape and absolute byte range."""

    name: str
    file: Path
    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int

    @property
    def numpy_dtype(self) -> np.dtype:
        return np.dtype(SAFETENSORS_DTYPES[self.dtype][0])

    @property
    def is_float(self) -> bool:
        return SAFETENSORS_DTYPES[self.dtype][1]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def read_safetensors_header(path: Path) -> list[TensorRef]:
    """Parse and validate a safetensors header; return its tensors in header order.

    Refuses (with one line naming the file and tensor): truncated files, oversized or malformed headers, unknown
    dtypes, byte ranges that disagree with the shape, run past the end of the file, or overlap.
    """
    try:
        size = path.stat().st_size
        with open_regular(path) as f:
            head = f.read(8)
            if len(head) < 8:
                raise ConvertError(f"{path}: truncated safetensors file ({size_text(size)}, no header length)")
            if head == b"version " and size < 1024:  # a clone without `git lfs pull`: the most common bad file
                raise ConvertError(f"{path}: a Git LFS pointer ({size_text(size)}), not the weights; run 'git lfs pull' "
                                   "in the clone or download the file again")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES:
                raise ConvertError(f"{path}: safetensors header claims {size_text(n)}, over the limit of {size_text(MAX_HEADER_BYTES)}")
            if 8 + n > size:
                raise ConvertError(f"{path}: truncated safetensors file: header claims {size_text(n)}, the file has {size_text(size - 8)} after its length field")
            raw = f.read(n)
    except OSError as e:
        raise ConvertError(f"{path}: cannot read ({e})") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConvertError(f"{path}: malformed safetensors header ({e})") from None
    if not isinstance(header, dict):
        raise ConvertError(f"{path}: malformed safetensors header (not a JSON object)")
    base = 8 + n
    refs: list[TensorRef] = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        info = info if isinstance(info, dict) else {}
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if not (isinstance(dtype, str) and isinstance(shape, list) and all(_is_int(d) for d in shape)
                and isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)):
            raise ConvertError(f"{path}: tensor '{clip(name)}' has a malformed header entry {json.dumps(info)[:200]} (expected "
                               "a dtype string, a shape list of integers and data_offsets [start, end])")
        shape, (a, b) = tuple(shape), offsets
        if dtype not in SAFETENSORS_DTYPES:
            raise ConvertError(f"{path}: tensor '{clip(name)}' has unsupported dtype {dtype} (expected one of {', '.join(SAFETENSORS_DTYPES)})")
        if any(d < 0 for d in shape):
            raise ConvertError(f"{path}: tensor '{clip(name)}' has a negative dimension {list(shape)}")
        count = math.prod(shape)  # Python ints: a hostile shape cannot overflow into a plausible size
        expected = count * np.dtype(SAFETENSORS_DTYPES[dtype][0]).itemsize
        if b - a != expected or a < 0:
            raise ConvertError(f"{path}: tensor '{clip(name)}' spans bytes [{a:,}, {b:,}) but shape {list(shape)} {dtype} needs {size_text(expected)}")
        if base + b > size:
            raise ConvertError(f"{path}: tensor '{clip(name)}' ends at byte {base + b:,}, past the end of the file, which has {size_text(size)}: truncated download?")
        refs.append(TensorRef(name, path, dtype, shape, base + a, base + b))
    spans = sorted((r.start, r.end, r.name) for r in refs if r.end > r.start)
    for (_, e0, n0), (s1, _, n1) in zip(spans, spans[1:], strict=False):  # sorted: adjacent pairs suffice
        if s1 < e0:
            raise ConvertError(f"{path}: tensors '{clip(n0)}' and '{clip(n1)}' overlap in the file")
    return refs


def tensor_names(folder: Path) -> list[str]:
    """The tensor names of a checkpoint folder without opening its shards where an index lists them.

    From ``model.safetensors.index.json`` when there is one, else from the headers of the ``model*.safetensors``
    files; empty for a pickle checkpoint. Family selection (``families.family_for``) uses these names to
    recognise a draft by its tensors before deciding which shards to read.
    """
    index = folder / INDEX_NAME
    if index.is_file():
        return sorted(read_weight_map(index))
    files = sorted(p for p in folder.iterdir() if p.name.startswith("model") and p.name.endswith(".safetensors"))
    return [r.name for f in files for r in sorted(read_safetensors_header(f), key=lambda r: r.name)]


class Checkpoint:
    """A draft or target checkpoint folder: raw ``config.json`` plus lazily mapped tensors.

    ``names`` lists the tensors in upstream's conversion order (contract §4.5): shard files sorted by name
    (from the index when there is one), and inside each file the tensor names sorted by code point. ``config`` is
    the folder's ``config.json`` when the caller has read it already (it is read here otherwise).

    ``select`` restricts the view to the tensors whose names it accepts. With an index, only the shards that
    the index maps those names to are opened, so the other shards may be absent (a draft stored in 2 of the 46
    shards of a target checkpoint needs only those 2).

    Example:
        >>> ck = Checkpoint(Path("fixtures/dflash-zlab"))
        >>> ck.names[0], ck.ref("fc.weight").dtype
        ('fc.weight', 'BF16')
    """

    def __init__(self, path: Path, *, need_config: bool = True, select: Select | None = None,
                 config: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise ConvertError(f"{self.path}: no such folder")
        if config is None:  # not read by the caller yet
            config = read_config(self.path, required=need_config)
        self.config: dict[str, Any] = config
        self.select = select
        self._refs: dict[str, TensorRef] = {}
        self.names: list[str] = []
        self.files: list[Path] = []
        self._pickle: dict[str, Any] | None = None
        self._maps: dict[Path, np.memmap] = {}
        #: renamed tensors: lookup name -> (the stored tensor's ref, the function its raw values are read through)
        self._renamed: dict[str, tuple[TensorRef, Derive | None]] = {}
        self._index_tensors()

    def _wanted(self, name: str) -> bool:
        return self.select is None or self.select(name)

    # ------------------------------------------------------------------------------------------ discovery
    def _index_tensors(self) -> None:
        index = self.path / INDEX_NAME
        weight_map: dict[str, Any] | None = None
        if index.is_file():
            weight_map = {n: fn for n, fn in read_weight_map(index).items() if self._wanted(n)}
            for k, v in weight_map.items():
                if not isinstance(v, str) or not v:
                    raise ConvertError(f"{index}: weight_map['{clip(k)}'] is {clip(json.dumps(v))}, expected a shard "
                                       "file name (a string)")
            files = sorted(set(weight_map.values()))
            for fn in files:
                if bad_name(fn) is not None or not lands_inside(self.path, self.path / fn):
                    first = next(k for k, v in weight_map.items() if v == fn)
                    raise ConvertError(f"{index}: shard '{clip(fn)}' (holding '{clip(first)}') is outside the checkpoint "
                                       f"folder {self.path}; expected a file name inside it")
                require_regular(self.path / fn)
                if not (self.path / fn).is_file():
                    first = next(k for k, v in weight_map.items() if v == fn)
                    raise ConvertError(f"{index}: shard '{clip(fn)}' (holding '{clip(first)}') is missing from {self.path}")
            self.files = [self.path / fn for fn in files]
        else:
            self.files = sorted(p for p in self.path.iterdir() if p.name.startswith("model") and p.name.endswith(".safetensors"))
            for f in self.files:
                member(f)
        if not self.files:
            if weight_map is None:
                self._index_pickles()
            return
        for f in self.files:
            refs = read_safetensors_header(f)
            for r in sorted(refs, key=lambda r: r.name):
                if not self._wanted(r.name):
                    continue
                if r.name in self._refs:
                    raise ConvertError(f"{self.path}: tensor '{clip(r.name)}' is in two shards ({self._refs[r.name].file.name} and {f.name})")
                self._refs[r.name] = r
                self.names.append(r.name)
        if weight_map is not None:
            for name, fn in weight_map.items():
                ref = self._refs.get(name)
                if ref is None:
                    raise ConvertError(f"{index}: tensor '{clip(name)}' is listed in shard '{clip(fn)}' but no shard holds it")
                if ref.file.name != fn:
                    raise ConvertError(f"{index}: tensor '{clip(name)}' is listed in '{clip(fn)}' but stored in '{ref.file.name}'")
            extra = [n for n in self.names if n not in weight_map]
            if extra:
                raise ConvertError(f"{index}: tensor '{clip(extra[0])}' in {self._refs[extra[0]].file.name} is not in the weight_map")

    def _index_pickles(self) -> None:
        bins = sorted(p for p in self.path.iterdir() if p.name.startswith("pytorch_model") and p.name.endswith(".bin"))
        if not bins:
            return
        for b in bins:
            member(b)
        from .pickles import load_pickle_state_dict  # imports torch; only pickle checkpoints need it

        self._pickle = {}
        for b in bins:
            for name, arr in load_pickle_state_dict(b).items():
                if not self._wanted(name):
                    continue
                if name in self._pickle:
                    raise ConvertError(f"{self.path}: tensor '{clip(name)}' is in two files")
                self._pickle[name] = arr
                self.names.append(name)
                self._refs[name] = TensorRef(name, b, arr.dtype_str, tuple(arr.array.shape), 0, 0)
        self.files = bins

    # ------------------------------------------------------------------------------------------ access
    def __contains__(self, name: str) -> bool:
        return name in self._refs

    def ref(self, name: str) -> TensorRef:
        try:
            return self._refs[name]
        except KeyError:
            raise ConvertError(f"{self.path}: tensor '{clip(name)}' not found in the checkpoint") from None

    def shape(self, name: str) -> tuple[int, ...]:
        return self.ref(name).shape

    def stored_name(self, name: str) -> str:
        """The name tensor ``name`` has in the checkpoint's files (another one where :meth:`rename` renamed it)."""
        got = self._renamed.get(name)
        return name if got is None else got[0].name

    def rename(self, names: dict[str, tuple[str, Derive | None]]) -> None:
        """Read each tensor ``old`` of ``names`` as ``new`` (``names[old] = (new, derive)``), in place.

        The renamed tensors move to the end of :attr:`names`, in their order: upstream's converter renames a
        tensor by removing its entry from its ordered table and adding it again. With ``derive``, reads return
        ``derive(raw values, stored dtype)`` and the tensor's ref has dtype F32. A ``new`` name the checkpoint
        already holds is refused (upstream keeps the old name then; no checkpoint has both).
        """
        moved: list[str] = []
        for old in [n for n in self.names if n in names]:
            new, derive = names[old]
            ref = self._refs.pop(old)
            if new in self._refs:
                raise ConvertError(f"{ref.file}: tensor '{clip(old)}' would be read as '{clip(new)}', which the "
                                   "checkpoint holds too; expected one of them")
            self._refs[new] = replace(ref, name=new, dtype="F32" if derive is not None else ref.dtype)
            self._renamed[new] = (self._renamed.pop(old, (ref, None))[0], derive)
            moved.append(new)
        if moved:
            self.names = [n for n in self.names if n not in names] + moved

    def derive(self, name: str, derive: Derive) -> None:
        """Read tensor ``name`` as ``derive(raw rows, stored dtype, first row)`` (dtype F32) from now on, in its place
        (a block-scaled FP8 weight read as its float32 values: ``derive`` reads the scales it needs)."""
        ref = self.ref(name)
        stored = self._renamed.pop(name, (ref, None))[0]
        self._refs[name] = replace(ref, dtype="F32")
        self._renamed[name] = (stored, derive)

    def hide(self, names: set[str]) -> None:
        """Leave tensors ``names`` out of :attr:`names` (what a :meth:`derive` consumes); they can still be read."""
        self.names = [n for n in self.names if n not in names]

    def _stored(self, name: str) -> tuple[TensorRef, Derive | None]:
        got = self._renamed.get(name)
        return (self.ref(name), None) if got is None else got

    def read(self, name: str, rows: slice | None = None) -> np.ndarray:
        """The tensor's raw values (BF16 as uint16 bits), memory-mapped; ``rows`` selects a slice of axis 0."""
        ref, derive = self._stored(name)
        if self._pickle is not None:
            arr = self._pickle[ref.name].array
        else:
            mm = self._maps.get(ref.file)
            if mm is None:
                mm = self._maps[ref.file] = np.memmap(ref.file, dtype=np.uint8, mode="r")
            flat = mm[ref.start:ref.end].view(ref.numpy_dtype)
            arr = flat.reshape(ref.shape) if ref.shape else flat.reshape(())
        if derive is not None:
            arr = derive(np.asarray(arr), ref.dtype, 0)
        return arr if rows is None else arr[rows]

    def read_rows(self, name: str, start: int, stop: int) -> np.ndarray:
        """Rows ``[start, stop)`` of axis 0 (the whole value for a 0-d tensor) as a new array, read with ``pread``.

        The streaming writer uses this instead of :meth:`read`: pages of a memory map stay resident (and count
        in RSS) until the map is dropped, so reading a whole checkpoint through one would hold the model in
        memory; a plain read keeps only the chunk.

        Example:
            >>> Checkpoint(Path("fixtures/dflash-zlab")).read_rows("fc.weight", 0, 2).shape  # doctest: +SKIP
            (2, 96)
        """
        ref, derive = self._stored(name)
        if self._pickle is not None or not ref.shape:
            arr = self.read(name)
            return np.array(arr if not ref.shape else arr[start:stop])
        if derive is not None:
            return derive(self._read_rows(ref, name, start, stop), ref.dtype, start)
        return self._read_rows(ref, name, start, stop)

    def _read_rows(self, ref: TensorRef, name: str, start: int, stop: int) -> np.ndarray:
        """Rows ``[start, stop)`` of the stored tensor ``ref`` (read as ``name``), with ``pread``."""
        row_bytes = (ref.end - ref.start) // ref.shape[0] if ref.shape[0] else 0
        buf = np.empty((stop - start) * row_bytes, np.uint8)
        done = 0
        with open(ref.file, "rb", buffering=0) as f:
            f.seek(ref.start + start * row_bytes)
            while done < buf.nbytes:
                n = f.readinto(buf.data[done:])  # .data is memoryview(buf), typed for mypy
                if not n:
                    raise ConvertError(f"{ref.file}: file ended while reading tensor '{clip(name)}' (truncated or changed during conversion?)")
                done += n
        return buf.view(ref.numpy_dtype).reshape(stop - start, *ref.shape[1:])

    def close(self) -> None:
        self._maps.clear()
