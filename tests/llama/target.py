"""The tiny target as a GGUF llama-server can load, made by upstream's own converter (an independent writer).

The fixture targets' pre-tokenizer hash is in no upstream table (fixtures/README.md), so upstream's
``get_vocab_base_pre`` would refuse them; :func:`convert_target` runs ``convert_hf_to_gguf.py`` in a subprocess
with that one function falling back to a named pre-tokenizer (default ``qwen2``, the regex the fixture tokenizer
uses). Nothing else of upstream is changed. The draft ships in the same tokenizer, so llama.cpp's draft/target
vocabulary check applies as usual. Prompts are sent as token ids, so tokenization never enters a comparison.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from dspark_convert.errors import ConvertError

_BOOT = r"""
import runpy, sys
src, pre = sys.argv[1], sys.argv[2]
del sys.argv[1:3]
sys.path[:0] = [src + "/gguf-py", src]
import conversion.base as base
_orig = base.TextModel.get_vocab_base_pre
def _pre(self, tokenizer):
    try:
        return _orig(self, tokenizer)
    except NotImplementedError:
        return pre
base.TextModel.get_vocab_base_pre = _pre
sys.argv[0] = src + "/convert_hf_to_gguf.py"
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def convert_target(source: Path, target_dir: Path, out: Path, outtype: str = "f32", pre: str = "qwen2",
                   python: str = sys.executable, timeout: float = 300.0, extra: Sequence[str] = ()) -> Path:
    """``convert_hf_to_gguf.py TARGET --outtype OUTTYPE --outfile OUT [EXTRA...]`` from the llama.cpp tree ``source``
    (``extra``: more converter options, e.g. ``--no-mtp`` for a Qwen3.5 target without MTP layers).

    Needs torch in ``python``'s environment (upstream's converter imports it). Raises ConvertError with the end
    of upstream's output when it fails.
    """
    cmd = [python, "-c", _BOOT, str(source), pre, str(target_dir), "--outtype", outtype, "--outfile", str(out), *extra]
    env = {**os.environ, "PYTHONPATH": f"{source}/gguf-py", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if p.returncode != 0 or not out.is_file():
        raise ConvertError(f"{target_dir}: upstream convert_hf_to_gguf.py failed (exit {p.returncode}): "
                           f"{(p.stderr or p.stdout).strip()[-800:]}")
    return out
