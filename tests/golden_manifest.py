"""The manifest of a GGUF file (the form of ``tests/golden/manifests-b11434/``), read with our own reader.

A manifest holds every KV (GGUF type and value; for arrays the count, the sha256 of the values and, up to 16 items,
the values; for strings over 200 characters the length and sha256), the KV order, and every tensor (type name, ggml
shape, sha256 of its bytes) in file order. gguf-py's ``GGUFReader`` needs ~20 s per file with a 129k-token
vocabulary; :func:`describe` gives the same manifest in well under a second, so the whole golden set fits in CI.
:func:`describe_with_gguf_reader` is the slow, independent reading, and
``tests/conversion/test_golden.py::test_fast_describe_equals_gguf_reader`` proves the two equal once.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFValueType as VT

from dspark_convert.gguffile.reader import read_gguf

COMPARED_GENERAL = {"general.architecture", "general.type", "general.file_type", "general.quantization_version",
                    "general.alignment"}
_NP = {VT.UINT8: np.uint8, VT.INT8: np.int8, VT.UINT16: np.uint16, VT.INT16: np.int16, VT.UINT32: np.uint32,
       VT.INT32: np.int32, VT.FLOAT32: np.float32, VT.BOOL: np.bool_, VT.UINT64: np.uint64, VT.INT64: np.int64,
       VT.FLOAT64: np.float64}


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def describe(path: Path) -> dict[str, Any]:
    """The manifest of ``path``: KVs (type, value or count + sha256), KV order, tensors (type, ne, sha256)."""
    f = read_gguf(path)
    kv: dict[str, Any] = {}
    for name, r in f.kvs.items():
        if r.type == VT.ARRAY:
            vals = r.value
            if r.sub_type == VT.STRING:
                blob = json.dumps(vals, ensure_ascii=False).encode("utf-8", "surrogateescape")
            else:
                arr = np.array(vals, dtype=_NP[r.sub_type])
                blob, vals = arr.tobytes(), arr.tolist()
            entry = {"type": f"ARRAY[{r.sub_type.name}]", "count": len(vals), "sha256": _sha(blob)}
            if len(vals) <= 16:
                entry["value"] = vals
            kv[name] = entry
        elif r.type == VT.STRING:
            s = r.value
            kv[name] = {"type": "STRING", "value": s} if len(s) <= 200 else {
                "type": "STRING", "len": len(s), "sha256": _sha(s.encode("utf-8", "surrogateescape"))}
        else:
            kv[name] = {"type": r.type.name, "value": np.array([r.value], dtype=_NP[r.type]).tolist()[0]}
    tensors = [{"name": t.name, "type": t.type_name, "ne": list(t.ne), "sha256": _sha(bytes(f.tensor_bytes(t.name)))}
               for t in f.tensors]
    f.close()
    return {"kv": kv, "kv_order": list(kv), "tensors": tensors}


def describe_with_gguf_reader(path: Path) -> dict[str, Any]:
    """The manifest of ``path`` read by gguf-py's ``GGUFReader`` (an independent reader; slow on large vocabularies)."""
    from gguf import GGUFReader

    r = GGUFReader(path)
    kv: dict[str, Any] = {}
    for name, field in r.fields.items():
        if name.startswith("GGUF."):  # the header fields the reader exposes as KVs
            continue
        parts = [field.parts[i] for i in field.data]
        vt = field.types[0]
        if vt == VT.ARRAY:
            sub = field.types[1]
            if sub == VT.STRING:
                vals: list[Any] = [bytes(p).decode("utf-8", "surrogateescape") for p in parts]
                blob = json.dumps(vals, ensure_ascii=False).encode("utf-8", "surrogateescape")
            else:
                arr = np.concatenate(parts) if parts else np.zeros(0, dtype=_NP[sub])
                vals, blob = arr.tolist(), arr.tobytes()
            kv[name] = {"type": f"ARRAY[{sub.name}]", "count": len(parts), "sha256": _sha(blob)}
            if len(parts) <= 16:
                kv[name]["value"] = vals
        elif vt == VT.STRING:
            text = bytes(parts[0]).decode("utf-8", "surrogateescape")
            kv[name] = {"type": "STRING", "value": text} if len(text) <= 200 else {
                "type": "STRING", "len": len(text), "sha256": _sha(text.encode("utf-8", "surrogateescape"))}
        else:
            kv[name] = {"type": vt.name, "value": parts[0].tolist()[0]}
    tensors = [{"name": t.name, "type": t.tensor_type.name, "ne": [int(x) for x in t.shape],
                "sha256": _sha(np.ascontiguousarray(t.data).tobytes())} for t in r.tensors]
    return {"kv": kv, "kv_order": list(kv), "tensors": tensors}


def compare(path: Path, expected: dict[str, Any]) -> list[str]:
    """Differences between ``path`` and a manifest, order included; informational general.* keys ignored."""
    got = describe(path)

    def keep(k: str) -> bool:
        return not k.startswith("general.") or k in COMPARED_GENERAL

    diffs = []
    ek = {k: v for k, v in expected["kv"].items() if keep(k)}
    gk = {k: v for k, v in got["kv"].items() if keep(k)}
    for k in sorted(set(ek) | set(gk)):
        if ek.get(k) != gk.get(k):
            diffs.append(f"key {k}: expected {json.dumps(ek.get(k))[:160]} got {json.dumps(gk.get(k))[:160]}")
    if [k for k in expected["kv_order"] if keep(k)] != [k for k in got["kv_order"] if keep(k)]:
        diffs.append("KV order differs")
    if expected["tensors"] != got["tensors"]:
        et = {t["name"]: t for t in expected["tensors"]}
        for t in got["tensors"]:
            if et.get(t["name"]) != t:
                diffs.append(f"tensor {t['name']}: expected {et.get(t['name'])} got {t}")
        if [t["name"] for t in expected["tensors"]] != [t["name"] for t in got["tensors"]]:
            diffs.append("tensor order differs")
    return diffs


def parity(draft: Path, target: Path, manifests: Path, stem: str, tmp: Path,
           outtypes: tuple[str, ...], *, match_upstream: bool = False) -> dict[str, list[str]]:
    """Convert ``draft`` at each outtype and compare with ``manifests/<stem>.<outtype>.json``: outtype -> the first
    differences (empty when every file is identical). Each conversion must end without an error finding and pass
    ``check``. ``match_upstream``: convert with ``--match-upstream`` (upstream's layout where the default adds the
    target's head)."""
    from dspark_convert import convert
    from dspark_convert.check import check_file, errors

    failures = {}
    for outtype in outtypes:
        out = tmp / f"{stem}.{outtype}.gguf"
        r = convert(draft, target, out, outtype=outtype, match_upstream=match_upstream)
        assert [str(f) for f in r.findings if f.level == "error"] == []
        diffs = compare(out, json.loads((manifests / f"{stem}.{outtype}.json").read_text()))
        if diffs:
            failures[outtype] = diffs[:5]
        assert errors(check_file(out)) == []
    return failures


def write_upstream_manifest(tree: Path, draft: Path, target: Path, out: Path, stem: str, outtype: str,
                            oracle: Path, dspark: bool = False) -> None:
    """Convert ``draft`` with upstream's converter (``tree``: the llama.cpp source tree) at ``outtype`` into ``out``
    (with ``--dspark``: a DeepSeek-V4 checkpoint's DSpark draft) and store its manifest as
    ``oracle/<stem>.<outtype>.json`` (the generators' ``main``)."""
    import os
    import subprocess
    import sys

    gguf = out / f"{stem}.{outtype}.gguf"
    subprocess.run([sys.executable, str(tree / "convert_hf_to_gguf.py"), str(draft), "--target-model-dir", str(target),
                    "--outtype", outtype, "--outfile", str(gguf), *(["--dspark"] if dspark else [])], check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(tree / "gguf-py")})
    (oracle / f"{stem}.{outtype}.json").write_text(json.dumps(describe(gguf), indent=1) + "\n")
