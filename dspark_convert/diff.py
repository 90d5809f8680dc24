"""``diff A B``: what differs between two GGUF files (schema in ``docs/inspect.md``).

KVs are compared by GGUF type and stored bytes; tensors by type, shape and bytes. For tensors present in both
files whose bytes differ, the values are dequantized and streamed chunk by chunk in lockstep to get the max
absolute difference and NMSE = MSE / Var(a) (the llama.cpp ``check-nmse.py`` grading: < 1e-2 passes).

Files read over HTTP (Hub files, URLs) have only their header: then metadata and tensor infos (name, type,
shape) are compared, tensor data is not, and the result says so (``tensor_data_compared``, ``note``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Sequence
from fnmatch import fnmatchcase
from typing import Any

import numpy as np

from .errors import ConvertError
from .gguffile.options import RemoteOptions
from .gguffile.reader import GGUFFile, ReaderTensor
from .gguffile.source import open_gguf_source
from .inspect import RunningStats, kv_entry

SCHEMA = "dspark-convert/diff/1"
_BYTES_CHUNK = 1 << 24  # bytes compared at a time
MAX_DECODED = 1 << 22  # longer arrays get no first_difference: decoding them as lists could exhaust memory


def _ignored(name: str, ignore: Sequence[str]) -> bool:
    return any(fnmatchcase(name, pat) for pat in ignore)


def _first_difference(a: list[Any], b: list[Any]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y and not (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)):
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _diff_kvs(fa: GGUFFile, fb: GGUFFile, ignore: Sequence[str]) -> dict[str, Any]:
    names_a = [n for n in fa.kvs if not _ignored(n, ignore)]
    names_b = [n for n in fb.kvs if not _ignored(n, ignore)]
    set_a, set_b = set(names_a), set(names_b)
    changed = []
    for name in names_a:
        if name not in set_b:
            continue
        ka, kb = fa.kvs[name], fb.kvs[name]
        if (ka.type, ka.sub_type) == (kb.type, kb.sub_type) and fa.raw_value(name) == fb.raw_value(name):
            continue
        entry: dict[str, Any] = {"name": name, "a": kv_entry(fa, ka), "b": kv_entry(fb, kb)}
        if ka.sub_type == kb.sub_type and ka.count is not None and kb.count is not None and \
                max(ka.count, kb.count) <= MAX_DECODED:
            entry["first_difference"] = _first_difference(ka.value, kb.value)
        changed.append(entry)
    common = set_a & set_b
    return {
        "added": [{"name": n, **kv_entry(fb, fb.kvs[n])} for n in names_b if n not in set_a],
        "removed": [{"name": n, **kv_entry(fa, fa.kvs[n])} for n in names_a if n not in set_b],
        "changed": changed,
        "order_changed": [n for n in names_a if n in common] != [n for n in names_b if n in common],
    }


def _bytes_equal(fa: GGUFFile, fb: GGUFFile, ta: ReaderTensor, tb: ReaderTensor) -> bool:
    if ta.nbytes is None or ta.nbytes != tb.nbytes:
        return False
    ra, rb = fa.tensor_bytes(ta.name), fb.tensor_bytes(tb.name)
    return all(np.array_equal(ra[i : i + _BYTES_CHUNK], rb[i : i + _BYTES_CHUNK])
               for i in range(0, ta.nbytes, _BYTES_CHUNK))


def _lockstep(ia: Iterator[np.ndarray], ib: Iterator[np.ndarray]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Pair two chunk streams of the same total length whose chunk sizes may differ (other block sizes)."""
    ra, rb = np.empty(0), np.empty(0)
    while True:
        # both streams are advanced (a first) before either end is checked, as a chunk read may raise
        na = next(ia, None) if ra.size == 0 else ra
        nb = next(ib, None) if rb.size == 0 else rb
        if na is None or nb is None:
            return
        ra, rb = na, nb
        n = min(ra.size, rb.size)
        yield ra[:n], rb[:n]
        ra, rb = ra[n:], rb[n:]


def value_diff(a_chunks: Iterable[np.ndarray], b_chunks: Iterable[np.ndarray]) -> dict[str, Any]:
    """max |a-b|, MSE and NMSE = MSE / Var(a) over the finite pairs, plus the count of non-finite mismatches.

    NaN == NaN and inf == inf of the same sign count as equal. NMSE is inf when Var(a) is 0 and MSE is not.

    Example:
        >>> d = value_diff([np.array([1.0, 2.0, 3.0])], [np.array([1.0, 2.0, 3.5])])
        >>> d["max_abs_diff"], round(d["nmse"], 4)
        (0.5, 0.125)
    """
    ref, sq, n, max_abs, bad = RunningStats(), 0.0, 0, 0.0, 0
    for ca, cb in _lockstep(iter(a_chunks), iter(b_chunks)):
        a, b = ca.astype(np.float64, copy=False), cb.astype(np.float64, copy=False)
        ref.update(a)
        finite = np.isfinite(a) & np.isfinite(b)
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        bad += int((~same & ~finite).sum())
        d = a[finite] - b[finite]
        if d.size:
            max_abs = max(max_abs, float(np.abs(d).max()))
            sq += float((d * d).sum())
            n += d.size
    mse = sq / n if n else 0.0
    var = ref.var
    nmse = mse / var if var > 0 else (0.0 if mse == 0 else math.inf)
    return {"max_abs_diff": max_abs, "mse": mse, "nmse": nmse, "nonfinite_mismatch": bad}


def _tensor_row(t: ReaderTensor) -> dict[str, Any]:
    return {"name": t.name, "type": t.type_name, "shape": list(t.shape), "nbytes": t.nbytes}


def _diff_tensors(fa: GGUFFile, fb: GGUFFile, ignore: Sequence[str], stats: bool, data: bool) -> dict[str, Any]:
    names_a = [t.name for t in fa.tensors if not _ignored(t.name, ignore)]
    names_b = [t.name for t in fb.tensors if not _ignored(t.name, ignore)]
    set_a, set_b = set(names_a), set(names_b)
    changed, identical = [], 0
    for name in names_a:
        if name not in set_b:
            continue
        ta, tb = fa.tensor(name), fb.tensor(name)
        same_layout = (ta.ggml_type, ta.ne) == (tb.ggml_type, tb.ne)
        if not data:  # header-only (remote) files: the infos are all there is to compare
            if same_layout:
                identical += 1
            else:
                changed.append({"name": name, "a": _tensor_row(ta), "b": _tensor_row(tb), "bytes_equal": None})
            continue
        if ta.nbytes is None or tb.nbytes is None:
            # Unknown types cannot be read, so they cannot be shown equal: reported, conservatively.
            changed.append({"name": name, "a": _tensor_row(ta), "b": _tensor_row(tb), "bytes_equal": None,
                            "note": "unknown GGML type: data not compared"})
            continue
        if same_layout and _bytes_equal(fa, fb, ta, tb):
            identical += 1
            continue
        entry: dict[str, Any] = {"name": name, "a": _tensor_row(ta), "b": _tensor_row(tb), "bytes_equal": False}
        if stats and ta.shape == tb.shape:
            try:
                entry.update(value_diff(fa.iter_chunks(name), fb.iter_chunks(name)))
            except ConvertError as e:  # no dequantizer for this type in gguf
                entry["note"] = str(e)
        changed.append(entry)
    common = set_a & set_b
    return {
        "added": [_tensor_row(fb.tensor(n)) for n in names_b if n not in set_a],
        "removed": [_tensor_row(fa.tensor(n)) for n in names_a if n not in set_b],
        "changed": changed,
        "identical": identical,
        "order_changed": [n for n in names_a if n in common] != [n for n in names_b if n in common],
    }


def diff_files(fa: GGUFFile, fb: GGUFFile, *, ignore: Sequence[str] = (), tensor_stats: bool = True,
               ignore_order: bool = False) -> dict[str, Any]:
    """:func:`diff_gguf` on two already opened files."""
    header = {k: {"a": getattr(fa, k), "b": getattr(fb, k)} for k in ("version", "alignment")
              if getattr(fa, k) != getattr(fb, k)}
    kvs = _diff_kvs(fa, fb, ignore)
    data = not (fa.header_only or fb.header_only)
    tensors = _diff_tensors(fa, fb, ignore, tensor_stats, data)
    differs = bool(header) or any(kvs[k] or tensors[k] for k in ("added", "removed", "changed"))
    if not ignore_order:
        differs = differs or kvs["order_changed"] or tensors["order_changed"]
    out: dict[str, Any] = {"schema": SCHEMA, "a": os.fspath(fa.path), "b": os.fspath(fb.path), "equal": not differs,
                           "tensor_data_compared": data}
    if fa.source is not None or fb.source is not None:
        out["source"] = {k: f.source.to_dict() if f.source is not None else None for k, f in (("a", fa), ("b", fb))}
    if not data:
        which = " and ".join(k for k, f in (("A", fa), ("B", fb)) if f.header_only)
        out["note"] = (f"tensor data was not compared: {which} read header-only over HTTP; metadata and tensor "
                       f"infos (name, type, shape) were compared")
    return {**out, "header": header, "kvs": kvs, "tensors": tensors}


def diff_gguf(a: str | os.PathLike[str], b: str | os.PathLike[str], *, ignore: Sequence[str] = (),
              tensor_stats: bool = True, ignore_order: bool = False,
              remote: RemoteOptions | None = None) -> dict[str, Any]:
    """Compare two GGUF files; ``result["equal"]`` is True when nothing (outside ``ignore`` globs) differs.

    Differences: header version/alignment, KVs added/removed/changed (type or value), tensors added/removed/
    changed (type, shape or bytes; with ``tensor_stats``: max abs diff and NMSE of the dequantized values),
    and the order of common KVs and tensors (unless ``ignore_order``). ``a`` and ``b`` may be Hub files or URLs
    (header only: tensor data is then not compared, ``identical`` counts tensors of the same type and shape).

    Example:
        >>> r = diff_gguf("ours.gguf", "upstream.gguf", ignore=["general.name"])  # doctest: +SKIP
        >>> r["equal"], [c["name"] for c in r["tensors"]["changed"]]  # doctest: +SKIP
        (False, ['blk.0.attn_q.weight'])
    """
    with open_gguf_source(a, remote) as fa, open_gguf_source(b, remote) as fb:
        return diff_files(fa, fb, ignore=ignore, tensor_stats=tensor_stats, ignore_order=ignore_order)
