"""Converting, inspecting and checking (also against a target) never import torch (it costs seconds and hundreds of MB; only verify needs it).

Each check runs in a fresh interpreter, because this test session itself may have imported torch already.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import quants

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"

LIBRARY = """
import json, sys
from dspark_convert import convert
from dspark_convert.inspect import inspect_gguf
draft, target, out = sys.argv[1:4]
r = convert(draft, target, out, outtype=sys.argv[4])
info = inspect_gguf(out)
print(json.dumps({"bytes": r.bytes_written, "torch": "torch" in sys.modules,
                  "heavy": sorted(m for m in ("torch", "transformers", "safetensors.torch") if m in sys.modules)}))
"""

CLI = """
import json, sys
from dspark_convert.cli import app
draft, target, out = sys.argv[1:4]
for args in (["hf2gguf", draft, "-t", target, "-o", out, "--outtype", sys.argv[4], "--json"], ["inspect", out, "--json"],
             ["check", out, "--target", target, "--json"]):
    try:
        app(args, standalone_mode=False)
    except SystemExit as e:
        assert not e.code, e.code
print(json.dumps({"torch": "torch" in sys.modules}))
"""


def _run(code: str, *args: str) -> dict:
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("draft", "outtype"), [("dspark-qwen3", "q8_0"), ("eagle3-angelslim", "f16")])
def test_convert_and_inspect_do_not_import_torch(tmp_path: Path, draft: str, outtype: str) -> None:
    out = tmp_path / "draft.gguf"
    r = _run(LIBRARY, str(FIX / draft), str(FIX / "target-qwen3"), str(out), outtype)
    assert r["bytes"] == out.stat().st_size > 0
    assert r["torch"] is False and r["heavy"] == []


def test_cli_convert_and_inspect_do_not_import_torch(tmp_path: Path) -> None:
    out = tmp_path / "draft.gguf"
    r = _run(CLI, str(FIX / "dflash-zlab"), str(FIX / "target-qwen3"), str(out), "bf16")
    assert out.stat().st_size > 0
    assert r == {"torch": False}


def test_dsv4_conversion_does_not_import_torch(tmp_path: Path) -> None:
    """The DeepSeek-V4 DSpark path (FP8 dequant, MXFP4 repack, own tokenizer, check) is numpy only."""
    sys.path.insert(0, str(FIX))
    try:
        import dsv4
    finally:
        sys.path.remove(str(FIX))
    ck = dsv4.write_checkpoint(tmp_path / "dsv4", dsv4.Dims(hidden=128, stages=1, experts=2, moe=32, head_dim=64,
                                                            q_lora=64, o_lora=32), tokenizer_dir=FIX / "target-qwen3")
    out = tmp_path / "draft.gguf"
    r = _run(LIBRARY.replace("convert(draft, target, out", "convert(draft, None, out"), str(ck), "-", str(out), "auto")
    assert r["bytes"] == out.stat().st_size > 0
    assert r["torch"] is False and r["heavy"] == []


def test_storage_rounding_is_torch_free() -> None:
    """The rounding both verify paths share (reference.storage.round_values) and the DeepSeek-V4 tensor checks
    import and round without torch: numpy and gguf-py only."""
    code = """
import json, sys
import numpy as np
from dspark_convert.variants.dsv4 import tensors as dsv4_tensors
from dspark_convert.reference.storage import round_values
x = np.array([[1.00390625, 1 / 3] * 16], np.float32)
print(json.dumps({"bf16": round_values(x, "BF16")[0, :2].tolist(), "q8": round_values(x, "Q8_0")[0, :2].tolist(),
                  "torch": "torch" in sys.modules, "module": hasattr(dsv4_tensors, "check_tensor")}))
"""
    r = _run(code)
    x = np.array([[1.00390625, 1 / 3] * 16], np.float32)
    assert r["bf16"] == [1.0, 0.333984375]                              # ties to even
    assert r["q8"] == quants.dequantize(quants.quantize(x, QT.Q8_0), QT.Q8_0)[0, :2].tolist()
    assert r["torch"] is False and r["module"] is True
