"""``verify`` on DeepSeek-V4 DSpark files: every tensor against the checkpoint (torch dequantization as upstream,
gguf-py rounding), the model keys against the config, and a plain note that no DSV4 reference forward exists;
defects in the file (a changed expert byte, a changed Q8_0 block, a missing tensor, a wrong key) fail by name."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from dsv4_support import TOKENIZER, dsv4
from typer.testing import CliRunner

from dspark_convert import convert
from dspark_convert.cli import app
from dspark_convert.gguffile.reader import read_gguf
from dspark_convert.hf.checkpoint import Checkpoint

pytest.importorskip("torch", reason="verify needs torch (the test extra)")
from dspark_convert.verify import verify  # noqa: E402

DIMS = dsv4.Dims(hidden=160, stages=2, experts=3, moe=64, hc=2, head_dim=80, heads=3, o_groups=3, q_lora=100,
                 o_lora=64)


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("dsv4v")
    ck = dsv4.write_checkpoint(d / "ck", DIMS, dsv4.Layout(mtp_split="size", mtp_shards=3), seed=7,
                               tokenizer_dir=TOKENIZER)
    convert(ck, None, d / "good.gguf")
    return ck, d / "good.gguf"


def _flip(src: Path, dst: Path, tensor: str, offset: int) -> None:
    shutil.copy(src, dst)
    f = read_gguf(dst)
    t = f.tensor(tensor)
    pos = t.offset + offset
    f.close()
    with open(dst, "r+b") as fh:
        fh.seek(pos)
        b = fh.read(1)[0]
        fh.seek(pos)
        fh.write(bytes([b ^ 0x22]))


def test_good_file_passes_tensor_by_tensor(converted: tuple[Path, Path]) -> None:
    ck, good = converted
    r = verify(good, ck, None)
    f = read_gguf(good)
    assert r.passed and r.family == "dspark_dsv4"
    tensors, accounting = r.outputs, r.accounting
    assert [o.name for o in tensors] == [t.name for t in f.tensors]
    assert all(o.grade == "exact" for o in tensors)
    # tensor accounting: every GGUF tensor compared, every mtp.* checkpoint tensor a source of one
    n_ck = len([n for n in Checkpoint(ck, need_config=False).names if n.startswith("mtp.")])
    assert accounting is not None and accounting.name == "tensor accounting" and accounting.passed and accounting.grade == "complete"
    assert r.tensors["counts"] == {
        "gguf": {"total": len(f.tensors), "read_by_forward": 0, "compared": len(f.tensors), "dropped": 0, "unaccounted": 0},
        "checkpoint": {"total": n_ck, "read_by_forward": 0, "compared": n_ck, "dropped": 0, "unaccounted": 0}}
    assert any("reference forward" in n and "not implemented yet" in n for n in r.notes)
    assert {m.key for m in r.metadata} >= {"dflash.block_count", "dflash.expert_count", "dflash.hyper_connection.count"}
    assert all(m.passed for m in r.metadata)
    assert all(o.max_abs == 0 for o in tensors)  # exact mode: against the checkpoint as the GGUF stores it
    # quality (information): Q8_0 tensors differ from the unrounded checkpoint values, MXFP4 and F32 do not
    q8 = {t.name for t in f.tensors if t.type_name == "Q8_0"}
    assert [o.name for o in r.quality] == [o.name for o in tensors]
    assert all(o.max_abs and o.max_abs > 0 for o in r.quality if o.name in q8)
    assert all(o.max_abs == 0 for o in r.quality if o.name.endswith("_exps.weight") or "hc_" in o.name)


@pytest.mark.parametrize(("tensor", "offset"), [("blk.1.ffn_down_exps.weight", 40), ("blk.0.attn_q_b.weight", 5),
                                                ("markov_w2.weight", 2)])
def test_a_changed_byte_fails_that_tensor_only(converted: tuple[Path, Path], tmp_path: Path, tensor: str,
                                               offset: int) -> None:
    ck, good = converted
    bad = tmp_path / "bad.gguf"
    _flip(good, bad, tensor, offset)
    r = verify(bad, ck, None)
    assert not r.passed
    assert [o.name for o in r.outputs if not o.passed] == [tensor]
    failed = next(o for o in r.outputs if not o.passed)
    assert failed.grade == "differs" and "values differ; first: element" in failed.detail


def test_cli_exit_codes(converted: tuple[Path, Path], tmp_path: Path) -> None:
    ck, good = converted
    runner = CliRunner()
    ok = runner.invoke(app, ["verify", str(good), "--hf", str(ck)], env={"COLUMNS": "200"})
    assert ok.exit_code == 0 and "not implemented yet" in ok.stdout and "PASS" in ok.stdout
    bad = tmp_path / "bad.gguf"
    _flip(good, bad, "blk.0.ffn_gate_exps.weight", 100)
    r = runner.invoke(app, ["verify", str(bad), "--hf", str(ck)], env={"COLUMNS": "200"})
    assert r.exit_code == 1 and "blk.0.ffn_gate_exps.weight" in r.stdout and "FAIL" in r.stdout


def test_checkpoint_from_another_seed_fails_every_tensor(converted: tuple[Path, Path],
                                                                         tmp_path: Path) -> None:
    ck, good = converted
    other = dsv4.write_checkpoint(tmp_path / "other", DIMS, dsv4.Layout(), seed=8, tokenizer_dir=TOKENIZER)
    r = verify(good, other, None)
    assert not r.passed
    tensors = r.outputs
    assert all(not o.passed for o in tensors)             # every tensor differs
    assert r.accounting is not None and r.accounting.passed   # same names: every tensor accounted for
    assert all(m.passed for m in r.metadata)              # same config
    assert np.isfinite([o.max_abs for o in tensors]).all() and all(o.max_abs for o in tensors)


def test_a_stray_mtp_name_is_no_traceback(converted: tuple[Path, Path], tmp_path: Path) -> None:
    """A checkpoint with an ``mtp.*`` name that is not ``mtp.<stage>.<name>``: verify still compares every tensor
    and counts the stages from the well-formed names; the stray name reached no GGUF tensor, so the tensor
    accounting fails naming it (issue 20: before, the report passed)."""
    from dsv4_support import edit_checkpoint

    ck, good = converted
    odd = tmp_path / "odd"
    shutil.copytree(ck, odd)
    edit_checkpoint(odd, lambda t: t.__setitem__("mtp.extra", ("F32", np.zeros(4, np.float32))))
    r = verify(good, odd, None)
    assert r.hparams["stages"] == 2 and not r.passed
    assert [o.name for o in r.outputs if not o.passed] == [] and all(m.passed for m in r.metadata)
    assert r.accounting is not None and not r.accounting.passed and "checkpoint mtp.extra" in r.accounting.detail
    assert r.tensors["unaccounted"] == {"gguf": [], "checkpoint": ["mtp.extra"]}
    assert r.first_divergence is not None and r.first_divergence["component"] == "tensor accounting"
    assert next(m for m in r.metadata if m.key == "dflash.block_count").passed
