"""Default output names and -o templates (dspark_convert.hf2gguf.naming)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dspark_convert.errors import ConvertError
from dspark_convert.hf2gguf.naming import default_output_name, encoding_name, expand_output_template, method_name


@pytest.mark.parametrize(("family", "outtype", "target", "draft", "size", "expected"), [
    # With a target: base name, size and version from the target, method from the draft family.
    ("dspark", "bf16", "Qwen/Qwen3-8B", "deepseek-ai/dspark_qwen3_8b_block7", "1.1M", "Qwen3-8B-DSpark-BF16.gguf"),
    ("dspark", "q8_0", "Qwen/Qwen3-4B@main", None, None, "Qwen3-4B-DSpark-Q8_0.gguf"),
    ("dflash", "f16", f"Qwen/Qwen3-8B@{'a' * 40}", None, None, "Qwen3-8B-DFlash-F16.gguf"),
    ("eagle3", "f32", "meta-llama/Llama-3.1-8B-Instruct", None, None, "Llama-3.1-8B-Instruct-EAGLE3-F32.gguf"),
    ("eagle3", "bf16", "mistralai/Mistral-7B-Instruct-v0.3", None, None,
     "Mistral-7B-Instruct-EAGLE3-v0.3-BF16.gguf"),
    ("dspark", "bf16", "Qwen/Qwen3-30B-A3B", None, None, "Qwen3-30B-A3B-DSpark-BF16.gguf"),
    ("dspark", "bf16", "deepseek-ai/DeepSeek-V4-Flash", None, None, "DeepSeek-V4-Flash-DSpark-BF16.gguf"),
    ("dflash", "bf16", "/models/gemma-4-12b-it", None, None, "gemma-4-12B-it-DFlash-BF16.gguf"),
    ("dflash", "bf16", "/models/target/", None, "22K", "target-DFlash-BF16.gguf"),
    # No target name: from the draft's name; its own size label when the name has none; method not repeated.
    ("dspark", "bf16", None, "deepseek-ai/dspark_qwen3_8b_block7", "1.1M", "dspark_qwen3_8b_block7-1.1M-BF16.gguf"),
    ("dflash", "f16", None, "z-lab/Qwen3-8B-DFlash-b16", "1.1B", "Qwen3-8B-DFlash-b16-F16.gguf"),
    ("eagle3", "bf16", None, "/ckpt/llama31-drafter", "31K", "llama31-drafter-31K-EAGLE3-BF16.gguf"),
    ("eagle3", "bf16", None, "/ckpt/sglang-EAGLE3-Llama-3.1", "31K", "sglang-EAGLE3-Llama-31K-3.1-BF16.gguf"),
    # Nothing known but the family.
    ("dflash", "f32", None, None, "22K", "DFlash-22K-F32.gguf"),
    ("dspark", "bf16", None, None, None, "DSpark-BF16.gguf"),
    # Odd characters never reach the file name.
    ("dspark", "bf16", None, "/ckpt/my draft (v2)", None, "my-draft-v2-DSpark-BF16.gguf"),
])
def test_default_output_name(family: str, outtype: str, target: str | None, draft: str | None, size: str | None,
                             expected: str) -> None:
    assert default_output_name(family=family, outtype=outtype, target_name=target, draft_name=draft,
                               size_label=size) == expected


def test_default_name_from_dot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "Qwen3-4B").mkdir()
    monkeypatch.chdir(tmp_path / "Qwen3-4B")
    assert default_output_name(family="dspark", outtype="bf16", target_name=".", draft_name=None,
                               size_label=None) == "Qwen3-4B-DSpark-BF16.gguf"


def test_method_and_encoding() -> None:
    assert [method_name(f) for f in ("dspark", "DFlash", "eagle-3", "eagle_3", "mtp")] == [
        "DSpark", "DFlash", "EAGLE3", "EAGLE3", "mtp"]
    assert [encoding_name(t) for t in ("f32", "F16", "bf16", "q8_0")] == ["F32", "F16", "BF16", "Q8_0"]
    with pytest.raises(ValueError, match="'auto' must be resolved"):
        encoding_name("auto")
    with pytest.raises(ConvertError) as e:
        encoding_name("b f16")
    assert str(e.value) == "outtype 'b f16': expected a type name such as f32, f16, bf16 or q8_0"


@pytest.mark.parametrize(("template", "outtype", "expected"), [
    ("Qwen3-8B-DSpark-{ftype}.gguf", "bf16", "Qwen3-8B-DSpark-BF16.gguf"),
    ("out/draft.{outtype}.gguf", "bf16", "out/draft.bf16.gguf"),
    ("{FTYPE}-{OUTTYPE}-{ftype}-{outtype}.gguf", "q8_0", "Q8_0-Q8_0-Q8_0-q8_0.gguf"),
    ("draft-{outtype}.gguf", "F16", "draft-f16.gguf"),
    ("plain.gguf", "f32", "plain.gguf"),
    ("odd{name.gguf", "f32", "odd{name.gguf"),
    ("odd}name-{ftype}.gguf", "f32", "odd}name-F32.gguf"),
])
def test_expand_output_template(template: str, outtype: str, expected: str) -> None:
    assert expand_output_template(template, outtype=outtype) == expected


@pytest.mark.parametrize("template", ["draft-{ftpye}.gguf", "draft-{}.gguf", "draft-{0}.gguf", "x-{Ftype}.gguf"])
def test_unknown_placeholder_rejected(template: str) -> None:
    with pytest.raises(ConvertError) as e:
        expand_output_template(template, outtype="bf16")
    key = template[template.index("{") + 1:template.index("}")]
    assert str(e.value) == f"-o {template}: unknown placeholder {{{key}}}; use {{ftype}} (BF16) or {{outtype}} (bf16)"


def test_template_needs_resolved_outtype() -> None:
    with pytest.raises(ValueError, match="'auto' must be resolved"):
        expand_output_template("x-{ftype}.gguf", outtype="auto")
