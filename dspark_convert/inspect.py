"""``inspect``: describe a GGUF file as a stable, JSON-able dict (schema in ``docs/inspect.md``).

Only the header is parsed; tensor data is read only for ``stats=True``, streamed in chunks, so a multi-GB
file is described in milliseconds. A Hub file or URL is described from its header alone, fetched with HTTP
range requests (:func:`~dspark_convert.gguffile.source.open_gguf_source`); its ``source`` says how. Long arrays (tokens, merges) are summarised by their first
:data:`ARRAY_PREVIEW` items, their count and the sha256 of their stored bytes unless ``full_arrays``.
"""

from __future__ import annotations

import hashlib
import math
import os
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from .errors import ConvertError
from .gguf_constants import VT
from .gguffile.options import RemoteOptions
from .gguffile.reader import GGUFFile, ReaderKV
from .gguffile.source import open_gguf_source

if TYPE_CHECKING:
    import numpy as np

from .schema import (
    ADD_TOKEN_KEYS,
    SPECIAL_TOKEN_KEYS,
    TOKENIZER_CHAT_TEMPLATE,
    TOKENIZER_MERGES,
    TOKENIZER_MODEL,
    TOKENIZER_PRE,
    TOKENIZER_SCORES,
    TOKENIZER_TOKEN_TYPE,
    TOKENIZER_TOKENS,
)

SCHEMA = "dspark-convert/inspect/1"
ARRAY_PREVIEW = 16  # array items shown unless full_arrays


def clean_text(s: str) -> str:
    """``s`` with undecodable bytes (kept as surrogates by the reader) shown as U+FFFD, so it prints and dumps."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def kv_entry(f: GGUFFile, kv: ReaderKV, full_arrays: bool = False) -> dict[str, Any]:
    """The JSON entry of one KV: type, offset, value (arrays: count, sha256, maybe truncated value)."""
    entry: dict[str, Any] = {"type": kv.describe(), "offset": kv.offset}
    if kv.type != VT.ARRAY:
        entry["value"] = _clean(kv.value)
        return entry
    assert kv.count is not None
    entry["count"] = kv.count
    entry["sha256"] = hashlib.sha256(f.raw_value(kv.name)).hexdigest()
    if full_arrays or kv.count <= ARRAY_PREVIEW:
        entry["value"] = _clean(kv.value)
        entry["truncated"] = False
    else:
        entry["value"] = _clean(f.array_head(kv.name, ARRAY_PREVIEW))
        entry["truncated"] = True
    return entry


def tokenizer_summary(f: GGUFFile) -> dict[str, Any] | None:
    """Model, pre-tokenizer, counts and special tokens (id and text), or None when there is no tokenizer."""
    if not any(name.startswith("tokenizer.") for name in f.kvs):
        return None

    def count(key: str) -> int | None:
        kv = f.kvs.get(key)
        return kv.count if kv is not None else None

    def scalar(key: str) -> Any:  # arrays where a scalar belongs are ignored, never decoded
        kv = f.kvs.get(key)
        return kv.value if kv is not None and kv.type != VT.ARRAY else None

    specials: dict[str, int] = {}
    for kind, key in SPECIAL_TOKEN_KEYS.items():
        v = scalar(key) if key else None
        if isinstance(v, int) and not isinstance(v, bool):
            specials[kind] = v
    texts = f.string_items(TOKENIZER_TOKENS, set(specials.values())) if TOKENIZER_TOKENS in f.kvs else {}
    model, pre = scalar(TOKENIZER_MODEL), scalar(TOKENIZER_PRE)
    return {
        "model": clean_text(model) if isinstance(model, str) else None,
        "pre": clean_text(pre) if isinstance(pre, str) else None,
        "n_tokens": count(TOKENIZER_TOKENS),
        "n_merges": count(TOKENIZER_MERGES),
        "has_scores": TOKENIZER_SCORES in f.kvs,
        "has_token_type": TOKENIZER_TOKEN_TYPE in f.kvs,
        "special": {k: {"id": i, "token": clean_text(texts[i]) if i in texts else None} for k, i in specials.items()},
        "add": {k: _clean(scalar(key)) for k, key in ADD_TOKEN_KEYS.items() if key in f.kvs},
        "chat_template": TOKENIZER_CHAT_TEMPLATE in f.kvs,
    }


class RunningStats:
    """Streaming count/min/max/mean/variance of the finite values, plus NaN and Inf counts.

    Chunks are merged with Chan's parallel formula, so the result does not depend on the chunk size.

    Example:
        >>> import numpy as np
        >>> s = RunningStats(); s.update(np.array([1.0, 3.0, np.nan])); s.update(np.array([5.0]))
        >>> s.result()["mean"], s.result()["nan"]
        (3.0, 1)
    """

    def __init__(self) -> None:
        self.n, self.mean, self.m2 = 0, 0.0, 0.0
        self.min, self.max = math.inf, -math.inf
        self.nan = self.inf = 0

    def update(self, chunk: np.ndarray) -> None:
        import numpy as np  # only --stats reads data: the header views never import numpy

        x = np.asarray(chunk, dtype=np.float64).reshape(-1)
        finite = np.isfinite(x)
        if not finite.all():
            self.nan += int(np.isnan(x).sum())
            self.inf += int(np.isinf(x).sum())
            x = x[finite]
        if x.size == 0:
            return
        n_b, mean_b = x.size, float(x.mean())
        m2_b = float(((x - mean_b) ** 2).sum())
        n = self.n + n_b
        delta = mean_b - self.mean
        self.mean += delta * n_b / n
        self.m2 += m2_b + delta * delta * self.n * n_b / n
        self.n = n
        self.min, self.max = min(self.min, float(x.min())), max(self.max, float(x.max()))

    @property
    def var(self) -> float:
        """Population variance of the finite values (0 when there are none)."""
        return self.m2 / self.n if self.n else 0.0

    def result(self) -> dict[str, Any]:
        if not self.n:
            return {"min": None, "max": None, "mean": None, "std": None, "nan": self.nan, "inf": self.inf}
        return {"min": self.min, "max": self.max, "mean": self.mean, "std": math.sqrt(self.var),
                "nan": self.nan, "inf": self.inf}


def tensor_stats(f: GGUFFile, name: str) -> dict[str, Any]:
    """min/max/mean/std/nan/inf of a tensor's (dequantized) values, streamed by chunks."""
    s = RunningStats()
    for chunk in f.iter_chunks(name):
        s.update(chunk)
    return s.result()


def _by_type(f: GGUFFile) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for t in f.tensors:
        e = out.setdefault(t.type_name, {"tensors": 0, "n_elements": 0, "nbytes": 0})
        e["tensors"] += 1
        e["n_elements"] += t.n_elements
        e["nbytes"] = None if t.nbytes is None or e["nbytes"] is None else e["nbytes"] + t.nbytes
    return out


def _spec_type(f: GGUFFile) -> dict[str, Any] | None:
    """The ``--spec-type`` llama-server needs (:mod:`.registry.spectype`); None for a file that is not a draft."""
    from .registry.spectype import spec_type_of

    st = spec_type_of(f.value, [t.name for t in f.tensors])
    return st.to_dict() if st.spec_type is not None else None


def _hf_name(f: GGUFFile) -> dict[str, Any] | None:
    """Whether llama-server's ``-hf`` finds the draft under its file name (:func:`.registry.spectype.hub_name`);
    None for a file that is not a draft."""
    from .registry.spectype import hub_name, spec_type_of

    st = spec_type_of(f.value, [t.name for t in f.tensors])
    return hub_name(os.fspath(f.path), st.spec_type).to_dict() if st.spec_type is not None else None


def _mtp(f: GGUFFile) -> dict[str, Any] | None:
    """What a target file with an MTP path is (full, sidecar, trunk) and how llama-server runs it
    (:mod:`.variants.nextn`); None for any other arch."""
    from .variants.nextn import layout, nextn_arch

    row = nextn_arch(f.arch)
    if row is None:
        return None
    lay = layout(row, f.value, [t.name for t in f.tensors])
    serve = {"full": "llama-server -m FILE --spec-type draft-mtp (its own MTP blocks); mtp-extract cuts the sidecar",
             "sidecar": "llama-server -m TARGET.gguf -md FILE --spec-type draft-mtp",
             "trunk": "llama-server -m FILE [-md mtp-SIDECAR.gguf --spec-type draft-mtp]",
             "empty": "nothing to run"}[lay.kind]
    if row.no_graph and lay.kind in ("full", "sidecar"):
        serve = f"cannot draft: {row.no_graph}"
    return {"kind": lay.kind, "block_count": lay.block_count, "trunk_blocks": lay.n,
            "nextn_predict_layers": lay.nextn, "serve": serve}


def describe_gguf(f: GGUFFile, *, full_arrays: bool = False, tensors: bool = True, filter: str | None = None,
                  stats: bool = False) -> dict[str, Any]:
    """:func:`inspect_gguf` on an already opened file."""
    if stats and f.header_only:
        raise ConvertError(f"{f.path}: --stats reads tensor data, which is not fetched from remote files (only the "
                           f"header is); download the file to get statistics")
    match = (lambda name: fnmatchcase(name, filter)) if filter else (lambda name: True)
    info: dict[str, Any] = {
        "schema": SCHEMA,
        "file": os.fspath(f.path),
        **({"source": f.source.to_dict()} if f.source is not None else {}),
        "size": f.file_size,
        "version": f.version,
        "alignment": f.alignment,
        "data_offset": f.data_offset,
        "kv_count": len(f.kvs),
        "tensor_count": len(f.tensors),
        "arch": clean_text(f.arch) if f.arch is not None else None,
        "n_params": sum(t.n_elements for t in f.tensors),
        "tensor_bytes": sum(t.nbytes or 0 for t in f.tensors),
        "by_type": _by_type(f),
        "tokenizer": tokenizer_summary(f),
        "spec_type": _spec_type(f),
        "hf_name": _hf_name(f),
        "mtp": _mtp(f),
        "kvs": {kv.name: kv_entry(f, kv, full_arrays) for kv in f.kvs.values() if match(kv.name)},
        "tensors": None,
    }
    if tensors:
        rows = []
        for t in f.tensors:
            if not match(t.name):
                continue
            row: dict[str, Any] = {
                "name": t.name, "type": t.type_name, "type_id": t.ggml_type, "ne": list(t.ne),
                "shape": list(t.shape), "n_elements": t.n_elements, "nbytes": t.nbytes, "offset": t.offset,
            }
            if stats:
                try:
                    row["stats"] = tensor_stats(f, t.name)
                except ConvertError:  # unknown type or no dequantizer in gguf: null, documented
                    row["stats"] = None
            rows.append(row)
        info["tensors"] = rows
    return info


def inspect_gguf(path: str | os.PathLike[str], *, full_arrays: bool = False, tensors: bool = True,
                 filter: str | None = None, stats: bool = False,
                 remote: RemoteOptions | None = None) -> dict[str, Any]:
    """Describe a GGUF file (header only unless ``stats``) as a JSON-able dict; see ``docs/inspect.md``.

    ``path`` may also be a Hub file (``hf://ORG/REPO/file.gguf[@REV]``) or a URL: its header is fetched with
    range requests (``remote`` tunes them) and the result gets a ``source`` object; ``stats`` is refused there.

    ``filter`` is a glob (``blk.0.*``, ``tokenizer.*``) applied to KV and tensor names; counts and totals
    always cover the whole file. Raises GGUFFormatError for malformed files.

    Example:
        >>> info = inspect_gguf("draft.gguf", filter="blk.0.*")  # doctest: +SKIP
        >>> info["arch"], info["tensors"][0]["shape"]  # doctest: +SKIP
        ('dflash', [4096, 4096])
    """
    with open_gguf_source(path, remote) as f:
        return describe_gguf(f, full_arrays=full_arrays, tensors=tensors, filter=filter, stats=stats)
