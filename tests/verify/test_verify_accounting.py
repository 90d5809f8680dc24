"""verify's tensor accounting for every GGUF variant, on both sides, at every outtype (issue 20): a correct
conversion accounts for every tensor; the same file with an extra tensor no forward reads (and no tensor check
compares), or its checkpoint with a tensor the converter silently ignored, FAILS, naming the tensor, while every
other row still passes. The ``dflash`` cases are ``tests/verify/test_mutations.py``'s (the review's repro); this file
adds ``eagle3``, ``dflash2``, ``gemma4`` and ``dsv4``.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import FIXTURES, TARGET

from dspark_convert import convert
from dspark_convert.gguffile.reader import read_gguf

pytest.importorskip("torch", reason="verify runs the torch reference forward (torch extra)")
from dspark_convert.verify import verify  # noqa: E402

OUTTYPES = ["f32", "f16", "bf16", "q8_0"]
#: tensors no forward of any variant reads: a file carrying them must not pass
EXTRA_GGUF = ("extra_head.weight", "blk.0.attn_extra.weight")


def _failed(report: Any) -> set[str]:
    return {o.name for o in report.outputs if not o.passed} | {f"metadata {m.key}" for m in report.metadata if not m.passed}


def _add_checkpoint_tensor(src: Path, dst: Path, name: str) -> Path:
    """A copy of the checkpoint folder ``src`` whose ``model.safetensors`` holds one more tensor, ``name``."""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst)
    tensors = load_file(str(dst / "model.safetensors"))
    assert name not in tensors
    tensors[name] = torch.ones((8, 4), dtype=torch.float32)
    save_file(tensors, str(dst / "model.safetensors"))
    return dst


def _assert_unaccounted(report: Any, side: str, names: tuple[str, ...], variant: str, *,
                        also: frozenset[str] = frozenset()) -> None:
    """The accounting row fails, naming each of ``names`` on ``side``; no other row fails but ``also``."""
    assert not report.passed and _failed(report) == also, _failed(report)
    row = report.accounting
    assert row is not None and row.name == "tensor accounting" and not row.passed and row.grade == "unaccounted"
    label = "GGUF" if side == "gguf" else "checkpoint"
    assert all(f"{label} {n}" in row.detail for n in names), row.detail
    other = "checkpoint" if side == "gguf" else "gguf"
    assert report.tensors["variant"] == variant
    assert report.tensors["unaccounted"] == {side: list(names), other: []}
    first = report.first_divergence
    assert first is not None and first["component"] == ("tensors" if also else "tensor accounting")


def _accounts_for_everything(report: Any, variant: str) -> None:
    assert report.passed, _failed(report)
    assert report.accounting is not None and report.accounting.passed and report.accounting.grade == "complete"
    assert report.tensors["variant"] == variant and report.tensors["unaccounted"] == {"gguf": [], "checkpoint": []}


# ---------------------------------------------------------------------------------------------- the pairs
@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], tuple[Path, Path, Path | None]]:
    """``pairs(variant, outtype) -> (gguf, checkpoint folder, target or None)``, converted once per module."""
    from dsv4_support import TOKENIZER, dsv4
    from gemma4_drafts import make as make_gemma4

    out = tmp_path_factory.mktemp("accounting")
    cache: dict[tuple[str, str], tuple[Path, Path, Path | None]] = {}

    def get(variant: str, outtype: str) -> tuple[Path, Path, Path | None]:
        if (variant, outtype) in cache:
            return cache[variant, outtype]
        target: Path | None = TARGET
        if variant == "eagle3":
            hf = FIXTURES / "eagle3-speculators"
        elif variant == "dflash2":
            hf = FIXTURES / "dflash2-zlab"
        elif variant == "gemma4":
            hf, target = make_gemma4(out, "v-gemma4-default") if not (out / "v-gemma4-default").is_dir() else (
                out / "v-gemma4-default", out / "v-gemma4-default-target")
        else:
            hf, target = out / "dsv4", None
            if not hf.is_dir():
                dsv4.write_checkpoint(hf, dsv4.Dims(), dsv4.Layout(), seed=3, tokenizer_dir=TOKENIZER)
        gguf = out / f"{variant}.{outtype}.gguf"
        convert(hf, target, gguf, outtype=outtype)
        cache[variant, outtype] = (gguf, hf, target)
        return cache[variant, outtype]

    return get


#: variant -> the outtypes it converts at (a DeepSeek-V4 file's types are the family's at every outtype)
CASES = [(v, t) for v in ("eagle3", "dflash2", "gemma4") for t in OUTTYPES] + [("dsv4", t) for t in ("q8_0", "bf16", "auto")]
#: variant -> a checkpoint tensor its converter would silently ignore (no GGUF tensor, no forward, no rule)
IGNORED = {"eagle3": "layers.0.self_attn.extra_proj.weight", "dflash2": "layers.0.self_attn.extra_proj.weight",
           "gemma4": "model.layers.0.self_attn.extra_proj.weight", "dsv4": "mtp.0.attn.extra_proj.weight"}


def _verify(gguf: Path, hf: Path, target: Path | None) -> Any:
    return verify(gguf, hf, target, context=8, quality=False)


@pytest.mark.parametrize(("variant", "outtype"), CASES)
def test_extra_gguf_tensors_fail_verify_by_name(pairs, tmp_path: Path, variant: str, outtype: str) -> None:
    from test_mutations import add_gguf_tensors

    gguf, hf, target = pairs(variant, outtype)
    good = _verify(gguf, hf, target)
    _accounts_for_everything(good, variant)
    n = len(read_gguf(gguf).tensors)
    bad = _verify(add_gguf_tensors(gguf, tmp_path / "extra.gguf", EXTRA_GGUF), hf, target)
    # a file proved tensor by tensor also fails a row per GGUF tensor without a checkpoint source
    tensor_rows = frozenset({"tensors"} if variant == "dsv4" else ())
    _assert_unaccounted(bad, "gguf", EXTRA_GGUF, variant, also=tensor_rows)
    missing = [o.detail for o in bad.outputs if o.name == "tensors"]
    assert missing == [f"GGUF tensor '{n}' has no source in the checkpoint" for n in EXTRA_GGUF if tensor_rows]
    assert bad.tensors["counts"]["gguf"]["total"] == n + 2
    assert bad.tensors["counts"]["gguf"]["unaccounted"] == 2


@pytest.mark.parametrize(("variant", "outtype"), CASES)
def test_checkpoint_tensor_the_converter_ignored_fails_verify(pairs, tmp_path: Path, variant: str,
                                                              outtype: str) -> None:
    """The GGUF was made from the checkpoint without the tensor, as a converter that silently skips an unknown name
    would make it: the checkpoint side names it."""
    gguf, hf, target = pairs(variant, outtype)
    name = IGNORED[variant]
    if variant == "dsv4":
        from dsv4_support import edit_checkpoint

        odd = tmp_path / "odd"
        shutil.copytree(hf, odd)
        edit_checkpoint(odd, lambda t: t.__setitem__(name, ("F32", np.ones((8, 4), np.float32))))
    else:
        odd = _add_checkpoint_tensor(hf, tmp_path / "odd", name)
    _assert_unaccounted(_verify(gguf, odd, target), "checkpoint", (name,), variant)
