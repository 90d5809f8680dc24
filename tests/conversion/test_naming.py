"""Default output names and -o templates (dspark_convert.hf2gguf.naming)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dspark_convert.errors import ConvertError
from dspark_convert.hf2gguf.naming import (
    default_output_name,
    encoding_name,
    expand_output_template,
    file_prefix,
    method_name,
)
from dspark_convert.registry.spectype import HF_KEYWORDS, hub_name


@pytest.mark.parametrize(("family", "outtype", "target", "draft", "size", "expected"), [
    # With a target: base name, size and version from the target, method from the draft family.
    ("dspark", "bf16", "Qwen/Qwen3-8B", "deepseek-ai/dspark_qwen3_8b_block7", "1.1M", "dspark-Qwen3-8B-BF16.gguf"),
    ("dspark", "q8_0", "Qwen/Qwen3-4B@main", None, None, "dspark-Qwen3-4B-Q8_0.gguf"),
    ("dflash", "f16", f"Qwen/Qwen3-8B@{'a' * 40}", None, None, "dflash-Qwen3-8B-F16.gguf"),
    ("eagle3", "f32", "meta-llama/Llama-3.1-8B-Instruct", None, None, "eagle3-Llama-3.1-8B-Instruct-F32.gguf"),
    ("eagle3", "bf16", "mistralai/Mistral-7B-Instruct-v0.3", None, None,
     "eagle3-Mistral-7B-Instruct-v0.3-BF16.gguf"),
    ("dspark", "bf16", "Qwen/Qwen3-30B-A3B", None, None, "dspark-Qwen3-30B-A3B-BF16.gguf"),
    ("dspark_dsv4", "bf16", "deepseek-ai/DeepSeek-V4-Flash", None, None, "dspark-DeepSeek-V4-Flash-BF16.gguf"),
    ("dflash", "bf16", "/models/gemma-4-12b-it", None, None, "dflash-gemma-4-12B-it-BF16.gguf"),
    ("dflash", "bf16", "/models/target/", None, "22K", "dflash-target-BF16.gguf"),
    # No target name: from the draft's name; its own size label when the name has none.
    ("dspark", "bf16", None, "deepseek-ai/dspark_qwen3_8b_block7", "1.1M",
     "dspark-dspark_qwen3_8b_block7-1.1M-BF16.gguf"),
    ("dflash", "f16", None, "z-lab/Qwen3-8B-DFlash-b16", "1.1B", "dflash-Qwen3-8B-DFlash-b16-F16.gguf"),
    ("eagle3", "bf16", None, "/ckpt/llama31-drafter", "31K", "eagle3-llama31-drafter-31K-BF16.gguf"),
    ("eagle3", "bf16", None, "/ckpt/sglang-EAGLE3-Llama-3.1", "31K", "eagle3-sglang-EAGLE3-Llama-31K-3.1-BF16.gguf"),
    # Nothing known but the family.
    ("dflash", "f32", None, None, "22K", "dflash-22K-F32.gguf"),
    ("dspark", "bf16", None, None, None, "dspark-BF16.gguf"),
    # Every family starts with its -hf keyword; a name already starting with it does not get it twice.
    ("dflash2", "bf16", "Qwen/Qwen3-8B", None, None, "dflash-Qwen3-8B-BF16.gguf"),
    ("dspark_gemma4", "bf16", "google/gemma-4-31B-it", None, None, "dspark-gemma-4-31B-it-BF16.gguf"),
    ("muse_glimmer", "bf16", "Qwen/Qwen3-8B", None, None, "dflash-Qwen3-8B-BF16.gguf"),
    ("gemma4_assistant", "bf16", "google/gemma-4-E2B-it", None, None, "mtp-gemma-4-E2B-it-BF16.gguf"),
    ("mtp", "bf16", None, "Qwen/Qwen3.5-9B", None, "mtp-Qwen3.5-9B-BF16.gguf"),
    ("dflash", "bf16", None, "/ckpt/dflash-qwen3-8b", "1B", "dflash-qwen3-8B-BF16.gguf"),
    # A family without a keyword (none ships) carries its method word instead.
    ("newfamily", "bf16", "Qwen/Qwen3-8B", None, None, "Qwen3-8B-newfamily-BF16.gguf"),
    # Odd characters never reach the file name.
    ("dspark", "bf16", None, "/ckpt/my draft (v2)", None, "dspark-my-draft-v2-BF16.gguf"),
])
def test_default_output_name(family: str, outtype: str, target: str | None, draft: str | None, size: str | None,
                             expected: str) -> None:
    assert default_output_name(family=family, outtype=outtype, target_name=target, draft_name=draft,
                               size_label=size) == expected


@pytest.mark.parametrize(("family", "spec_type", "expected"), [
    ("dflash", "draft-dspark", "dspark-Qwen3-8B-BF16.gguf"),   # an anchor-first DFlash runs as draft-dspark
    ("dflash", "draft-dflash", "dflash-Qwen3-8B-BF16.gguf"),
    ("dspark", None, "dspark-Qwen3-8B-BF16.gguf"),
])
def test_the_spec_type_picks_the_keyword(family: str, spec_type: str | None, expected: str) -> None:
    assert default_output_name(family=family, outtype="bf16", target_name="Qwen/Qwen3-8B", draft_name=None,
                               size_label=None, spec_type=spec_type) == expected


def test_every_family_is_named_by_the_keyword_of_its_spec_type() -> None:
    """Each family's FILE_PREFIX is the -hf keyword of the --spec-type its fixtures run as, and its default names
    are found by -hf as that type."""
    from fixture_registry import select

    seen = {}
    for f in select():
        if f.is_draft:
            assert f.family is not None and f.spec_type is not None
            seen.setdefault(f.family, set()).add(f.spec_type)
    assert set(seen) == {"dflash", "dspark", "muse_glimmer", "dflash2", "dspark_dsv4", "eagle3", "dspark_gemma4",
                         "gemma4_assistant", "mtp"}
    for family, types in seen.items():
        assert len(types) == 1, (family, types)
        spec = types.pop()
        assert file_prefix(family) == HF_KEYWORDS[spec], family
        name = default_output_name(family=family, outtype="q8_0", target_name="Qwen/Qwen3-8B", draft_name=None,
                                   size_label=None)
        h = hub_name(name, spec)
        assert (h.problem, h.found_as) == (None, spec), name


def test_default_name_from_dot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "Qwen3-4B").mkdir()
    monkeypatch.chdir(tmp_path / "Qwen3-4B")
    assert default_output_name(family="dspark", outtype="bf16", target_name=".", draft_name=None,
                               size_label=None) == "dspark-Qwen3-4B-BF16.gguf"


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
    ("dspark-Qwen3-8B-{ftype}.gguf", "bf16", "dspark-Qwen3-8B-BF16.gguf"),
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


@pytest.mark.parametrize(("draft", "expected"), [
    ("dspark-qwen3", "dspark-target-qwen3-BF16.gguf"),
    ("dflash-deepspec", "dspark-target-qwen3-BF16.gguf"),   # DSpark-family DFlash layout, runs as draft-dspark
    ("dflash-zlab", "dflash-target-qwen3-BF16.gguf"),
    ("dflash2-zlab", "dflash-target-qwen3-BF16.gguf"),
    ("eagle3-specforge", "eagle3-target-qwen3-BF16.gguf"),
])
def test_hf2gguf_names_its_output_for_hf(draft: str, expected: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The default name of a real conversion starts with the -hf keyword of the file's --spec-type."""
    from conftest import FIXTURES, TARGET

    from dspark_convert import convert

    monkeypatch.chdir(tmp_path)
    r = convert(FIXTURES / draft, TARGET, None, outtype="bf16", dry_run=True)
    assert r.spec_type is not None and r.path == Path(expected)
    assert hub_name(str(r.path), r.spec_type["spec_type"]).problem is None
