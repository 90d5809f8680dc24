"""The tiny target as a GGUF llama-server can load, made by upstream's own converter (an independent writer).

The fixture targets' pre-tokenizer hash is in no upstream table (fixtures/README.md), so upstream's
``get_vocab_base_pre`` would refuse them; :func:`convert_target` runs ``convert_hf_to_gguf.py`` in a subprocess
with that one function falling back to a named pre-tokenizer (default ``qwen2``, the regex the fixture tokenizer
uses). With ``raw_config`` the target's ``config.json`` is read as written, as upstream reads a checkpoint whose
config class is remote code it does not run (a transformers config class would add its defaults: transformers 5's
``NemotronHConfig`` adds ``num_experts_per_tok``, which makes upstream write a dense Nemotron-H as
``nemotron_h_moe``). With ``vocab_of`` = ``(module, class, other)`` the model class ``conversion.<module>.<class>``
writes its vocabulary with ``other``'s ``set_vocab`` (a target whose own method reads a tokenizer only remote code
provides, e.g. HunYuan-MoE's tiktoken one, converted with the byte-level branch of the dense class). Nothing else of
upstream is changed. The draft ships in the same tokenizer, so llama.cpp's draft/target
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
src, pre, raw, vocab = sys.argv[1], sys.argv[2], sys.argv[3] == "raw", sys.argv[4]
del sys.argv[1:5]
sys.path[:0] = [src + "/gguf-py", src]
import conversion.base as base
if vocab != "-":
    import importlib
    module, to, frm = vocab.split(":")
    m = importlib.import_module("conversion." + module)
    getattr(m, to).set_vocab = getattr(m, frm).set_vocab
if raw:
    def _no_config_class(*a, **k):
        raise ValueError("config class not used: config.json is read raw")
    base.AutoConfig.from_pretrained = _no_config_class
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
                   python: str = sys.executable, timeout: float = 300.0, extra: Sequence[str] = (),
                   raw_config: bool = False, vocab_of: tuple[str, str, str] | None = None) -> Path:
    """``convert_hf_to_gguf.py TARGET --outtype OUTTYPE --outfile OUT [EXTRA...]`` from the llama.cpp tree ``source``
    (``extra``: more converter options, e.g. ``--no-mtp`` for a Qwen3.5 target without MTP layers).

    Needs torch in ``python``'s environment (upstream's converter imports it). Raises ConvertError with the end
    of upstream's output when it fails.
    """
    cmd = [python, "-c", _BOOT, str(source), pre, "raw" if raw_config else "class",
           ":".join(vocab_of) if vocab_of else "-", str(target_dir), "--outtype", outtype, "--outfile", str(out),
           *extra]
    env = {**os.environ, "PYTHONPATH": f"{source}/gguf-py", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if p.returncode != 0 or not out.is_file():
        raise ConvertError(f"{target_dir}: upstream convert_hf_to_gguf.py failed (exit {p.returncode}): "
                           f"{(p.stderr or p.stdout).strip()[-800:]}")
    return out
