"""A header key of the wrong type must not crash ``check --target``: the fit rules read every value defensively.

Found by rewriting each key of converted drafts with values of other types (a string block count, an array
``tokenizer.ggml.pre``) and running ``check``, ``inspect``, ``diff``, ``upgrade`` and ``check --target`` on the
result: the loader rules reported the bad key, but two fit rules raised TypeError (a traceback, exit 1) instead of
giving their verdict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf as GQ
import pytest
from test_mtp_gguf import write_target
from typer.testing import CliRunner

from dspark_convert import check_file
from dspark_convert.cli import app
from dspark_convert.fit import check_fit
from dspark_convert.mtp.run import extract

VT = GQ.GGUFValueType


def rewrite_kv(src: Path, dst: Path, key: str, value: Any, vtype: GQ.GGUFValueType,
               sub: GQ.GGUFValueType | None = None) -> Path:
    """``src`` with ``key`` set to ``value`` of ``vtype`` (added last when ``src`` lacks it; every other key and
    tensor as they are), gguf-py's writer."""
    r = GQ.GGUFReader(src)
    arch = str(bytes(r.fields["general.architecture"].parts[-1]), "utf-8")
    w = GQ.GGUFWriter(dst, arch)
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue
        if f.name == key:
            w.add_key_value(key, value, vtype, sub_type=sub)
            continue
        t = f.types[0]
        if t == VT.ARRAY:
            st = f.types[1]
            items = [bytes(f.parts[i]).decode() if st == VT.STRING else f.parts[i].tolist()[0] for i in f.data]
            w.add_key_value(f.name, items, t, sub_type=st)
        elif t == VT.STRING:
            w.add_key_value(f.name, bytes(f.parts[f.data[0]]).decode(), t)
        else:
            w.add_key_value(f.name, f.parts[f.data[0]].tolist()[0], t)
    if key not in r.fields:
        w.add_key_value(key, value, vtype, sub_type=sub)
    for t in r.tensors:
        w.add_tensor(t.name, t.data, raw_shape=t.data.shape, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    """(an MTP sidecar that passes ``check``, its full target)."""
    full = write_target(tmp_path / "Tiny-Q4_K_M.gguf", loadable=True)
    side = tmp_path / "mtp-Tiny.gguf"
    extract(full, side)
    assert [f for f in check_file(side) if f.level == "error"] == []
    return side, full


@pytest.mark.parametrize(("key", "value", "vtype", "sub", "rule"), [
    ("qwen35.block_count", "4", VT.STRING, None, "mtp-spec-type"),
    ("tokenizer.ggml.pre", [1, 2, 3], VT.ARRAY, VT.UINT32, "mtp-header"),
])
def test_a_key_of_another_type_gives_verdicts_not_a_crash(pair: tuple[Path, Path], tmp_path: Path, key: str,
                                                          value: Any, vtype: GQ.GGUFValueType,
                                                          sub: GQ.GGUFValueType | None, rule: str) -> None:
    side, full = pair
    bad = rewrite_kv(side, tmp_path / "mtp-bad.gguf", key, value, vtype, sub)
    errors = [f for f in check_file(bad) if f.level == "error"]
    assert (errors[0].subject, errors[0].rule) == (key, "key-type"), errors  # the loader rules name the key first
    report = check_fit(bad, full)  # raised TypeError before
    assert not report.ok and rule in {r.id for r in report.results}
    report = check_fit(full, bad)  # the bad file as the target: every rule still gives its verdict
    assert rule in {r.id for r in report.results}
    res = CliRunner().invoke(app, ["check", str(bad), "--target", str(full)])
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output and key in res.output
