#!/usr/bin/env python3
"""Parity with upstream llama.cpp b11434 beyond the public golden sample: N/M variants byte-identical.

Each variant is a public golden input (``../shared/golden/make_inputs.py``: hidden 32, the 129,280-token
DeepSeek-V4 tokenizer, an untied Qwen3 target) edited the way one b11434 behaviour needs: ``dflash_config``
block size / causal flag / ``use_swa``, partial rotary factor and value scale, top-level target layer ids on a
sharded draft, attention sinks, an interleaved-RoPE DFlash draft, a DSpark without confidence head, an M-RoPE
target, a tied target. Upstream's converter (``--upstream``: the b11434 tree; needs torch and transformers, so
this runs outside CI) and ours (``--match-upstream``; and our default, which must equal upstream's bytes where the
target is tied or the draft keeps no embedding) convert each at ``--outtypes``; the two files are compared like
the golden suite does (every KV, KV order, every tensor's type, shape and bytes, tensor order; informational
``general.*`` aside). With ``--n-inputs DIR`` (``make_inputs_b11434.py DIR``) the shared ``n-*`` cases of the
families converted here are compared with ``manifests-b11434`` as well.

usage: python benchmarks/bench_upstream_parity.py --upstream LLAMA_CPP_TREE [--golden ../shared/golden]
           [--outtypes bf16,q8_0] [--only NAME,...] [--n-inputs DIR] [--python PYTHON]
Prints one line per variant and outtype, then ``N/M identical``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from golden_manifest import compare, describe  # noqa: E402  (the golden suite's fast describer)

from dspark_convert import convert  # noqa: E402

Edit = Callable[[Path, Path], None]  # (draft folder, target folder) -> None, edits in place


def _config(folder: Path, **changes: Any) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))


def _dflash_config(folder: Path, **changes: Any) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    cfg["dflash_config"] = {**cfg.get("dflash_config", {}), **changes}
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))


def _add_tensor(path: Path, name: str, values: np.ndarray) -> None:
    """Append an F32 tensor to a safetensors file (header rewritten, data appended)."""
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    raw = np.ascontiguousarray(values, np.float32).tobytes()
    header[name] = {"dtype": "F32", "shape": list(values.shape), "data_offsets": [len(data), len(data) + len(raw)]}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + data + raw)


def _drop_tensors(path: Path, names: set[str]) -> None:
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header, data = json.loads(blob[8:8 + n]), blob[8 + n:]
    out, parts, off = {}, [], 0
    for k, v in header.items():
        if k == "__metadata__":
            out[k] = v
            continue
        if k in names:
            continue
        a, b = v["data_offsets"]
        parts.append(data[a:b])
        out[k] = {**v, "data_offsets": [off, off + b - a]}
        off += b - a
    h = json.dumps(out, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(parts))


def _no_nested_taps(d: Path, t: Path) -> None:
    cfg = json.loads((d / "config.json").read_text())
    taps = cfg["dflash_config"].pop("target_layer_ids")
    cfg["target_layer_ids"] = taps
    (d / "config.json").write_text(json.dumps(cfg, indent=2))


def _mrope_target(d: Path, t: Path) -> None:
    cfg = json.loads((t / "config.json").read_text())
    cfg["rope_parameters"] = {**cfg["rope_parameters"], "mrope_section": [2, 1, 1]}
    (t / "config.json").write_text(json.dumps(cfg, indent=2))


#: name -> (public layout it starts from, edit)
VARIANTS: dict[str, tuple[str, Edit]] = {
    "zlab-block-nested": ("dflash-zlab", lambda d, t: (_config(d, block_size=9), _dflash_config(d, block_size=5))[0]),
    "zlab-causal-nested": ("dflash-zlab", lambda d, t: _dflash_config(d, causal=True)),
    "zlab-not-causal": ("dflash-zlab", lambda d, t: _config(d, is_causal=False)),
    "zlab-use-swa": ("dflash-zlab", lambda d, t: _dflash_config(d, use_swa=True, swa_window_size=24)),
    "zlab-partial-rope-vscale": ("dflash-zlab", lambda d, t: (
        _config(d, rope_parameters={"rope_theta": 1e6, "rope_type": "default", "partial_rotary_factor": 0.5}),
        _dflash_config(d, attention_value_scale=0.5))[0]),
    "zlab-interleaved": ("dflash-zlab", lambda d, t: _config(d, rope_is_neox_style=False)),
    "zlab-sinks": ("dflash-zlab", lambda d, t: [_add_tensor(d / "model.safetensors", f"layers.{i}.self_attn.sinks",
                                                             np.linspace(-1, 1, 4)) for i in (0, 1)] and None),
    "swa-sharded-top-level-taps": ("dflash-zlab-swa", _no_nested_taps),
    "deepspec-no-confidence": ("dspark-deepspec", lambda d, t: _drop_tensors(
        d / "model.safetensors", {"confidence_head.proj.weight", "confidence_head.proj.bias"})),
    "deepspec-mrope-target": ("dspark-deepspec", _mrope_target),
    "deepspec-tied-target": ("dspark-deepspec", lambda d, t: _config(t, tie_word_embeddings=True)),
    "specforge-block-nested": ("dspark-specforge", lambda d, t: _dflash_config(d, block_size=4)),
}
#: the shared n-* cases converted by the families here (group, case)
N_CASES = [("qwen3", "n-dflash-swa-cfg"), ("qwen3", "n-dspark-conf"), ("qwen3", "n-dspark-noconf"),
           ("qwen3", "n-dspark-sinks"), ("qwen3", "n-dspark-interleaved-b"), ("gemma3", "n-dflash-gemma-target")]


def upstream(tree: Path, python: str, draft: Path, target: Path, outtype: str, out: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree / "gguf-py")}
    p = subprocess.run([python, str(tree / "convert_hf_to_gguf.py"), str(draft), "--target-model-dir", str(target),
                        "--outtype", outtype, "--outfile", str(out)], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"upstream failed: {p.stderr.strip()[-600:]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--upstream", type=Path, required=True)
    ap.add_argument("--golden", type=Path, default=ROOT.parent / "shared" / "golden")
    ap.add_argument("--outtypes", default="bf16,q8_0")
    ap.add_argument("--only", default="")
    ap.add_argument("--n-inputs", type=Path, default=None)
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args(argv)
    outtypes = a.outtypes.split(",")
    names = a.only.split(",") if a.only else list(VARIANTS)
    same = total = 0
    with tempfile.TemporaryDirectory(prefix="upstream-parity-") as tmp_s:
        tmp = Path(tmp_s)
        subprocess.run([a.python, str(a.golden / "make_inputs.py"), str(tmp / "in")], check=True, capture_output=True)
        for name in names:
            layout, edit = VARIANTS[name]
            d, t = tmp / name / "draft", tmp / name / "target"
            shutil.copytree(tmp / "in" / layout, d)
            shutil.copytree(tmp / "in" / "target", t)
            edit(d, t)
            for outtype in outtypes:
                ref, ours, dflt = (tmp / name / f"{k}.{outtype}.gguf" for k in ("up", "ours", "default"))
                total += 1
                try:
                    upstream(a.upstream, a.python, d, t, outtype, ref)
                    convert(d, t, ours, outtype=outtype, match_upstream=True)
                    convert(d, t, dflt, outtype=outtype)
                    expected = describe(ref)
                    diffs = compare(ours, expected)
                    head_added = [x["name"] for x in describe(dflt)["tensors"]] != [x["name"] for x in expected["tensors"]]
                except Exception as e:  # noqa: BLE001  (a failed variant is reported, the run goes on)
                    diffs, head_added = [f"{type(e).__name__}: {e}"], False
                same += not diffs
                extra = " (default adds output.weight)" if head_added and not diffs else ""
                print(f"{name} {outtype}: {'identical' if not diffs else 'DIFFERENT ' + '; '.join(diffs[:3])}{extra}",
                      flush=True)
        if a.n_inputs is not None:
            for group, case in N_CASES:
                for outtype in outtypes:
                    total += 1
                    out = tmp / f"{case}.{outtype}.gguf"
                    try:
                        convert(a.n_inputs / group / case, a.n_inputs / group / "target", out, outtype=outtype,
                                match_upstream=True)
                        manifest = json.loads((a.golden / "manifests-b11434" / f"{case}.{outtype}.json").read_text())
                        diffs = compare(out, manifest)
                    except Exception as e:  # noqa: BLE001
                        diffs = [f"{type(e).__name__}: {e}"]
                    same += not diffs
                    print(f"{case} {outtype}: {'identical' if not diffs else 'DIFFERENT ' + '; '.join(diffs[:3])}",
                          flush=True)
    print(f"{same}/{total} identical to upstream llama.cpp b11434")
    return 0


if __name__ == "__main__":
    sys.exit(main())
