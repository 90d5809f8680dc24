"""Header keys of another type or out of range: ``check`` (with or without ``--target``) names them, ``verify`` refuses
the file in one line, and nothing raises anything but a one-line error.

The cases come from rewriting each key of converted drafts with values of other types and ranges (a string block
count, an array ``tokenizer.ggml.pre``, a scalar ``eagle3.target_layers``, a RoPE dimension count beyond the head)
and running ``check``, ``inspect``, ``diff``, ``upgrade``, ``check --target`` and ``verify`` on the result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf as GQ
import pytest
from test_mtp_gguf import write_target
from typer.testing import CliRunner

from dspark_convert import check_file, convert
from dspark_convert.cli import app
from dspark_convert.errors import ConvertError
from dspark_convert.fit import check_fit
from dspark_convert.mtp.run import extract

VT = GQ.GGUFValueType
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def rewrite_kv(src: Path, dst: Path, key: str, value: Any, vtype: GQ.GGUFValueType,
               sub: GQ.GGUFValueType | None = None) -> Path:
    """``src`` with ``key`` set to ``value`` of ``vtype`` (added last when ``src`` lacks it; left out when ``value``
    is None; every other key and tensor as they are), gguf-py's writer."""
    r = GQ.GGUFReader(src)
    arch = str(bytes(r.fields["general.architecture"].parts[-1]), "utf-8")
    w = GQ.GGUFWriter(dst, arch)
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue
        if f.name == key:
            if value is not None:  # None: the key is left out
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
    if key not in r.fields and value is not None:
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


@pytest.fixture(scope="module")
def eagle3_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("eagle3") / "eagle3.gguf"
    convert(FIXTURES / "eagle3-llama", FIXTURES / "target-qwen3", out, outtype="bf16")
    return out


@pytest.fixture(scope="module")
def assistant(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a Gemma 4 assistant GGUF, its checkpoint)."""
    from assistant_drafts import GEMMA_VARIANTS, make_gemma4

    folder = tmp_path_factory.mktemp("assistant")
    draft = make_gemma4(folder, next(iter(GEMMA_VARIANTS)))
    out = folder / "mtp-assistant.gguf"
    convert(draft, None, out, outtype="bf16")
    return out, draft


def test_eagle3_target_layers_as_a_scalar_is_one_finding(eagle3_file: Path, tmp_path: Path) -> None:
    bad = rewrite_kv(eagle3_file, tmp_path / "bad.gguf", "eagle3.target_layers", 0, VT.UINT32)
    found = {(f.subject, f.rule): f.message for f in check_file(bad) if f.level == "error"}
    assert found[("eagle3.target_layers", "key-type")] == "has GGUF type UINT32, expected ARRAY"
    assert found[("eagle3.target_layers", "required-key")] == "must have exactly 3 entries, found the scalar 0"


@pytest.mark.parametrize(("value", "head"), [(2**32 - 1, 8), (7, 8), (10, 8)])
def test_rope_dimensions_beyond_the_head_or_odd_are_an_error(assistant: tuple[Path, Path], tmp_path: Path,
                                                             value: int, head: int) -> None:
    key = "gemma4-assistant.rope.dimension_count_swa"
    bad = rewrite_kv(assistant[0], tmp_path / "bad.gguf", key, value, VT.UINT32)
    errors = [(f.subject, f.rule, f.message) for f in check_file(bad) if f.level == "error"]
    assert errors == [(key, "hparam-value", f"is {value}, expected an even number at most the head size {head} "
                       "(ggml's RoPE asserts n_dims <= head size and n_dims % 2 == 0: llama-server aborts at the "
                       "first decode)")]
    ok = rewrite_kv(assistant[0], tmp_path / "ok.gguf", key, head, VT.UINT32)
    assert [f for f in check_file(ok) if f.level == "error"] == []


def test_verify_refuses_a_file_whose_keys_break_the_loader_rules(assistant: tuple[Path, Path], tmp_path: Path) -> None:
    """rope.dimension_count_swa = 2^32 - 1 once made the numpy forward ask for ~20 GiB; now one line, exit 2."""
    gguf, draft = assistant
    key = "gemma4-assistant.rope.dimension_count_swa"
    bad = rewrite_kv(gguf, tmp_path / "bad.gguf", key, 2**32 - 1, VT.UINT32)
    res = CliRunner().invoke(app, ["verify", str(bad), "--hf", str(draft)])
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert "\n" not in line and f"{bad}: {key}: is 4294967295" in line and "(check reports it as [hparam-value])" in line
    assert CliRunner().invoke(app, ["verify", str(gguf), "--hf", str(draft)]).exit_code == 0


def test_verify_refuses_a_block_count_beyond_the_tensors(tmp_path: Path) -> None:
    """dflash.block_count 2^32 - 1 once sent the numpy forward into a MemoryError; now one line, exit 2."""
    good = tmp_path / "dspark.gguf"
    convert(FIXTURES / "dspark-qwen3", FIXTURES / "target-qwen3", good, outtype="bf16")
    bad = rewrite_kv(good, tmp_path / "bad.gguf", "dflash.block_count", 2**32 - 1, VT.UINT32)
    res = CliRunner().invoke(app, ["verify", str(bad), "--hf", str(FIXTURES / "dspark-qwen3"), "--target-model-dir",
                                   str(FIXTURES / "target-qwen3")])
    assert res.exit_code == 2, res.output
    assert res.output.strip() == (f"error: {bad}: dflash.block_count: is 4294967295, expected an integer in [1, 512] "
                                  "(llama.cpp asserts 0 < block_count <= LLAMA_MAX_LAYERS (512) at load); the forward "
                                  "cannot run on it (check reports it as [hparam-value])")


@pytest.mark.parametrize(("block_count", "nextn", "found"), [
    (512, None, []), (513, None, [("dflash.block_count", "is 513, expected an integer in [1, 512]")]),
    (0, None, [("dflash.block_count", "is 0, expected an integer in [1, 512]")]),
    (1, 1, []), (1, 2, [("dflash.nextn_predict_layers", "is 2, more than block_count 1")]),
])
def test_check_holds_block_count_to_the_loaders_asserts(block_count: int, nextn: int | None, found: list,
                                                         tmp_path: Path) -> None:
    """llama.cpp's loader asserts ``0 < block_count <= LLAMA_MAX_LAYERS (512)`` and ``nextn_predict_layers <=
    block_count`` for every arch (llama-server aborts on a file past them): ``check`` reports both as
    ``hparam-value`` findings, at the limit and one past it."""
    from dspark_convert.check import check_file

    good = tmp_path / "dspark.gguf"
    convert(FIXTURES / "dspark-qwen3", FIXTURES / "target-qwen3", good, outtype="bf16")
    bad = rewrite_kv(good, tmp_path / "bc.gguf", "dflash.block_count", block_count, VT.UINT32)
    if nextn is not None:
        bad = rewrite_kv(bad, tmp_path / "nextn.gguf", "dflash.nextn_predict_layers", nextn, VT.UINT32)
    got = [(f.subject, f.message.split(" (")[0]) for f in check_file(bad) if f.rule == "hparam-value"]
    assert got == found


def drop_kv(src: Path, dst: Path, key: str) -> Path:
    """``src`` without ``key``."""
    return rewrite_kv(src, dst, key, None, VT.STRING)


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(an MTP sidecar GGUF, the Qwen3.5 checkpoint it was cut from)."""
    from mtp_checkpoints import make

    folder = tmp_path_factory.mktemp("mtp")
    ckpt = make(folder, "mtp-qwen35-dense")
    out = folder / "mtp-qwen35.gguf"
    convert(ckpt, None, out, outtype="bf16", mtp=True)
    return out, ckpt


@pytest.mark.parametrize("how", ["missing", "string", "array"])
def test_verify_of_a_sidecar_refuses_a_bad_block_count_in_one_line(sidecar: tuple[Path, Path], tmp_path: Path,
                                                                   how: str) -> None:
    """The MTP sidecar's tensor-by-tensor proof read block_count with int(): KeyError / TypeError before."""
    gguf, ckpt = sidecar
    key = "qwen35.block_count"
    bad = tmp_path / "mtp-bad.gguf"
    if how == "missing":
        drop_kv(gguf, bad, key)
    else:
        rewrite_kv(gguf, bad, key, "5" if how == "string" else [5], VT.STRING if how == "string" else VT.ARRAY,
                   None if how == "string" else VT.UINT32)
    res = CliRunner().invoke(app, ["verify", str(bad), "--hf", str(ckpt)])
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert "\n" not in line and line.startswith(f"error: {bad}: {key}: "), line
    assert line.endswith("[required-key])" if how == "missing" else "[key-type])"), line
    assert CliRunner().invoke(app, ["verify", str(gguf), "--hf", str(ckpt)]).exit_code == 0


@pytest.mark.parametrize(("maker", "folder", "key", "value", "message"), [
    ("make_deepseek4", "DeepSeek-V4-Tiny", "scoring_func", ["sqrtsoftplus"],
     r"config.json: router score function \['sqrtsoftplus'\] is not one llama.cpp knows \(expected one of "),
    ("make_mimo2", "MiMo-V2-Flash-Tiny", "partial_rotary_factor", float("nan"),
     r"config.json: key 'partial_rotary_factor' is nan, expected a number in \(0, 1\]$"),
])
def test_mtp_configs_of_another_type_are_one_line(tmp_path: Path, maker: str, folder: str, key: str, value: Any,
                                                  message: str) -> None:
    """Found by setting each config.json key of the MTP target generators to values of other types: a list score
    function raised TypeError (unhashable), a NaN rotary fraction ValueError (int(NaN))."""
    import json
    import re

    import mtp_makers

    ckpt = getattr(mtp_makers, maker)(tmp_path / folder)
    cfg = json.loads((ckpt / "config.json").read_text())
    cfg[key] = value
    (ckpt / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "mtp.gguf"
    res = CliRunner().invoke(app, ["hf2gguf", str(ckpt), "--mtp", "-o", str(out)])
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert "\n" not in line and re.search(message, line), line
    assert not out.exists()


#: (config path, value, the line after "<checkpoint>/config.json: ")
ASSISTANT_CONFIG_BREAKS = [
    (("text_config",), "x", "key 'text_config' is 'x', expected a JSON object (the assistant's text config)"),
    (("backbone_hidden_size",), [1, 2], "key 'backbone_hidden_size' is [1, 2], expected an integer"),
    (("backbone_hidden_size",), 100, "key 'backbone_hidden_size' is 100, but pre_projection.weight has 96 columns "
                                     "(2 x backbone_hidden_size)"),
    (("text_config", "num_key_value_heads"), 0, "key 'text_config.num_key_value_heads' is 0, expected a positive "
                                                "integer"),
    (("text_config", "num_key_value_heads"), 3, "the sliding_attention layers' 3 KV heads do not divide "
                                                "num_attention_heads 4"),
    (("text_config", "head_dim"), 2**31, "num_attention_heads 4 x head size 2147483648 of the sliding_attention "
                                         "layers is 8589934592, but model.layers.0.self_attn.q_proj.weight has 32 rows"),
    (("text_config", "layer_types"), "x", "key 'text_config.layer_types' is 'x', expected num_hidden_layers (4) "
                                          "entries of 'sliding_attention' / 'full_attention'"),
    (("text_config", "sliding_window"), [1], "key 'text_config.sliding_window' is [1], expected an integer"),
    (("text_config", "rope_parameters"), "x", "key 'text_config.rope_parameters' is 'x', expected an object of one "
                                              "JSON object per layer type"),
]


@pytest.mark.parametrize(("path", "value", "line"), ASSISTANT_CONFIG_BREAKS,
                         ids=[f"{'.'.join(c[0])}-{c[1]!r}"[:50] for c in ASSISTANT_CONFIG_BREAKS])
def test_verify_reads_the_assistants_config_as_the_converter_does(path: tuple[str, ...], value: Any, line: str,
                                                                   assistant: tuple[Path, Path],
                                                                   tmp_path: Path) -> None:
    """The Gemma 4 assistant's torch side sizes its seeded target cache and embedding rows by the config: a value of
    another type, a zero or non-dividing KV head count, a head size or backbone width its tensors do not have was one
    of 13 distinct tracebacks or MemoryErrors under ``verify`` (the fuzzer's config mode with --verify); now one line
    naming the key."""
    import shutil

    from bad_inputs_kit import set_config_value

    from dspark_convert.verify import verify

    gguf, draft = assistant
    ck = tmp_path / "ck"
    shutil.copytree(draft, ck)
    set_config_value(ck, path, value)
    with pytest.raises(ConvertError) as e:
        verify(gguf, ck, None, context=4, steps=1)
    assert str(e.value) == f"{ck / 'config.json'}: {line}"
