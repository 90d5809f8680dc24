"""general.* metadata (dspark_convert.hf2gguf.metadata): contract §2.7, parity with gguf.Metadata, our extensions."""

from __future__ import annotations

import json
import math
from pathlib import Path

import gguf
import pytest
from conftest import GOLDEN_LAYOUTS, GOLDEN_MANIFESTS
from gguf import GGUFValueType as VT
from gguf.metadata import Metadata

from dspark_convert.errors import ConvertError
from dspark_convert.hf.hub import ResolvedModel
from dspark_convert.hf2gguf.metadata import general_kvs, param_counts, target_base_model
from dspark_convert.plan import KV

README = """---
license:
- apache-2.0
- mit
license_name: custom
license_link: https://example.org/LICENSE
base_model: deepseek-ai/DeepSeek-V3
datasets:
- HuggingFaceH4/ultrachat_200k
tags:
- speculative-decoding
pipeline_tag: text-generation
language:
- en
- zh
author: DeepSeek
description: A draft model
---
# Card
"""
GEN_CONFIG = {"temperature": 0.6, "top_k": 20, "top_p": 0.95, "min_p": 0, "do_sample": True}


def write(folder: Path, files: dict[str, object]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        text = content if isinstance(content, str) else json.dumps(content)
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def as_tuples(kvs: list[KV]) -> list[tuple[str, VT, object]]:
    return [(kv.name, kv.type, kv.value) for kv in kvs]


def upstream(draft: Path, total: int, override: Path | None = None, model_name: str | None = None) -> list:
    """What upstream writes for a local folder: Metadata.load + prepare_metadata's fallbacks + set_gguf_meta_model."""
    md = Metadata.load(override, draft, model_name, total)
    if md.name is None:
        md.name = draft.name
    if md.size_label is None and total > 0:
        md.size_label = gguf.size_label(total, total, 0, 0)
    writer = gguf.GGUFWriter(path=None, arch="dflash")
    md.set_gguf_meta_model(writer)
    return [(k, v.type, v.value) for k, v in writer.kv_data[0].items() if k != "general.architecture"]


# ---------------------------------------------------------------------------------------------- parity


@pytest.mark.parametrize("layout", GOLDEN_LAYOUTS)
def test_golden_name_and_size_label(golden_dir: Path, tmp_path: Path, layout: str) -> None:
    """The golden layouts: upstream's general.name, general.size_label (``4x3.9M`` for DeepSeek-V4's experts) and
    general.sampling.*, from the folder, its generation_config.json and the tensor sizes."""
    data = json.loads((GOLDEN_MANIFESTS / f"{layout}.bf16.json").read_text())
    total = sum(math.prod(t["ne"]) for t in data["tensors"])
    counts = param_counts((t["name"], t["ne"][::-1]) for t in data["tensors"])
    files: dict[str, object] = {"config.json": {"architectures": ["DFlashDraftModel"]}}
    sampling = {k.removeprefix("general.sampling."): v["value"] for k, v in data["kv"].items()
                if k.startswith("general.sampling.")}
    if sampling:  # the DeepSeek-V4 checkpoint carries a generation_config.json (temp, top_p)
        files["generation_config.json"] = {{"temp": "temperature"}.get(k, k): v for k, v in sampling.items()}
    draft = write(tmp_path / layout, files)
    got = {kv.name: (kv.type.name, kv.value) for kv in general_kvs(draft, total_params=total, size_counts=counts)}
    expected = {k: (v["type"], v["value"]) for k, v in data["kv"].items()
                if k.startswith("general.") and k not in ("general.architecture", "general.type",
                                                          "general.file_type", "general.quantization_version")}
    assert got == expected


def test_matches_upstream_metadata_on_a_rich_card(tmp_path: Path) -> None:
    draft = write(tmp_path / "Qwen3-8B-DFlash-b16", {
        "README.md": README, "generation_config.json": GEN_CONFIG,
        "config.json": {"_name_or_path": "z-lab/Qwen3-8B-DFlash-b16"}})
    ours = as_tuples(general_kvs(draft, total_params=1_056_005))
    assert ours == upstream(draft, 1_056_005)
    assert ours == [
        ("general.sampling.top_k", VT.INT32, 20),
        ("general.sampling.top_p", VT.FLOAT32, 0.95),
        ("general.sampling.min_p", VT.FLOAT32, 0.0),
        ("general.sampling.temp", VT.FLOAT32, 0.6),
        ("general.name", VT.STRING, "Qwen3 8B DFlash B16"),
        ("general.author", VT.STRING, "DeepSeek"),
        ("general.organization", VT.STRING, "Z Lab"),
        ("general.finetune", VT.STRING, "8b-DFlash-b16"),
        ("general.basename", VT.STRING, "Qwen3"),
        ("general.description", VT.STRING, "A draft model"),
        ("general.size_label", VT.STRING, "1.1M"),
        ("general.license", VT.STRING, "apache-2.0,mit"),
        ("general.license.name", VT.STRING, "custom"),
        ("general.license.link", VT.STRING, "https://example.org/LICENSE"),
        ("general.base_model.count", VT.UINT32, 1),
        ("general.base_model.0.name", VT.STRING, "DeepSeek V3"),
        ("general.base_model.0.version", VT.STRING, "V3"),
        ("general.base_model.0.organization", VT.STRING, "Deepseek Ai"),
        ("general.base_model.0.repo_url", VT.STRING, "https://huggingface.co/deepseek-ai/DeepSeek-V3"),
        ("general.dataset.count", VT.UINT32, 1),
        ("general.dataset.0.name", VT.STRING, "Ultrachat_200K"),
        ("general.dataset.0.organization", VT.STRING, "HuggingFaceH4"),
        ("general.dataset.0.repo_url", VT.STRING, "https://huggingface.co/HuggingFaceH4/ultrachat_200k"),
        ("general.tags", VT.ARRAY, ["speculative-decoding", "text-generation"]),
        ("general.languages", VT.ARRAY, ["en", "zh"]),
    ]


def test_matches_upstream_with_override_and_model_name(tmp_path: Path) -> None:
    draft = write(tmp_path / "dspark_qwen3_4b_block7", {"config.json": {}, "generation_config.json": GEN_CONFIG})
    override = write(tmp_path, {"meta.json": {"general.author": "me", "general.sampling.top_k": 5,
                                              "general.tags": ["a"], "general.version": "v2",
                                              "general.base_models": [{"name": "Qwen3 4B", "organization": "Qwen"}]}})
    override_file = override / "meta.json"
    assert as_tuples(general_kvs(draft, total_params=2_216_265, metadata_override=override_file)) == \
        upstream(draft, 2_216_265, override_file)
    named = general_kvs(draft, total_params=2_216_265, metadata_override=override_file, model_name="My Draft")
    assert as_tuples(named) == upstream(draft, 2_216_265, override_file, "My Draft")
    assert as_tuples(named)[4:9] == [
        ("general.name", VT.STRING, "My Draft"), ("general.author", VT.STRING, "me"),
        ("general.version", VT.STRING, "v2"), ("general.size_label", VT.STRING, "2.2M"),
        ("general.base_model.count", VT.UINT32, 1)]


@pytest.mark.parametrize(("total", "label"), [(86_464, "86K"), (2_216_265, "2.2M"), (21_728, "22K"),
                                              (4_694_345, "4.7M"), (999, "1.0K"), (1_500_000_000, "1.5B")])
def test_size_label(tmp_path: Path, total: int, label: str) -> None:
    draft = write(tmp_path / "dflash-zlab", {"config.json": {}})
    assert as_tuples(general_kvs(draft, total_params=total)) == [
        ("general.name", VT.STRING, "Dflash Zlab"), ("general.size_label", VT.STRING, label)]


def test_vocab_only_has_no_size_label(tmp_path: Path) -> None:
    draft = write(tmp_path / "dflash-zlab", {"config.json": {}})
    assert as_tuples(general_kvs(draft, total_params=0)) == [("general.name", VT.STRING, "Dflash Zlab")]


# ---------------------------------------------------------------------------------------------- names


def test_name_never_from_dot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    draft = write(tmp_path / "models" / "dspark_qwen3_4b_block7", {"config.json": {}})
    monkeypatch.chdir(draft)
    assert general_kvs(Path("."), total_params=10)[0] == KV("general.name", VT.STRING, "Dspark_Qwen3_4B_Block7")
    monkeypatch.chdir(draft / "..")
    assert general_kvs(Path("dspark_qwen3_4b_block7/."), total_params=10)[0].value == "Dspark_Qwen3_4B_Block7"
    monkeypatch.chdir(draft)
    (draft / "sub").mkdir()
    monkeypatch.chdir(draft / "sub")
    assert general_kvs(Path(".."), total_params=10)[0].value == "Dspark_Qwen3_4B_Block7"


def test_hub_draft_named_after_repo_not_commit(tmp_path: Path) -> None:
    snap = write(tmp_path / "snapshots" / ("ab" * 20), {"config.json": {}})
    kvs = general_kvs(snap, total_params=86_464, repo_id="deepseek-ai/dspark_qwen3_8b_block7")
    assert as_tuples(kvs) == [
        ("general.name", VT.STRING, "Dspark_Qwen3_8B_Block7"),
        ("general.organization", VT.STRING, "Deepseek Ai"),
        ("general.size_label", VT.STRING, "86K"),
        ("general.source.repo_url", VT.STRING, "https://huggingface.co/deepseek-ai/dspark_qwen3_8b_block7")]


# ---------------------------------------------------------------------------------------------- target


def test_base_model_from_hub_target(tmp_path: Path) -> None:
    draft = write(tmp_path / "dflash-zlab", {"config.json": {}})
    target = ResolvedModel(tmp_path / "snap", "Qwen/Qwen3-8B", "main", "ab" * 20)
    assert as_tuples(general_kvs(draft, total_params=86_464, target=target))[2:] == [
        ("general.base_model.count", VT.UINT32, 1),
        ("general.base_model.0.name", VT.STRING, "Qwen3 8B"),
        ("general.base_model.0.organization", VT.STRING, "Qwen"),
        ("general.base_model.0.repo_url", VT.STRING, "https://huggingface.co/Qwen/Qwen3-8B")]


def test_base_model_from_local_target(tmp_path: Path) -> None:
    with_id = write(tmp_path / "t1", {"config.json": {"_name_or_path": "meta-llama/Llama-3.1-8B-Instruct"}})
    assert target_base_model(ResolvedModel(with_id, None, None)) == {
        "name": "Llama 3.1 8B Instruct", "organization": "Meta Llama",
        "repo_url": "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct"}
    with_path = write(tmp_path / "Qwen3-4B", {"config.json": {"_name_or_path": "/data/models/qwen3-4b"}})
    assert target_base_model(ResolvedModel(with_path, None, None)) == {"name": "Qwen3 4B"}
    no_config = write(tmp_path / "mistral-7b-v0.3", {})
    assert target_base_model(ResolvedModel(no_config, None, None)) == {"name": "Mistral 7b v0.3",
                                                                       "version": "v0.3"}
    assert target_base_model(ResolvedModel(with_path, "Qwen/Qwen3-4B", None), "Org/Other-1B@main") == {
        "name": "Other 1B", "organization": "Org", "repo_url": "https://huggingface.co/Org/Other-1B"}
    assert target_base_model(None, None) is None


def test_target_first_readme_base_models_deduplicated(tmp_path: Path) -> None:
    card = "---\nbase_model:\n- Qwen/Qwen3-8B\n- z-lab/dflash-base\n---\n"
    draft = write(tmp_path / "dflash-zlab", {"config.json": {}, "README.md": card})
    kvs = as_tuples(general_kvs(draft, total_params=86_464, target_name="Qwen/Qwen3-8B"))
    assert [kv for kv in kvs if kv[0].startswith("general.base_model")] == [
        ("general.base_model.count", VT.UINT32, 2),
        ("general.base_model.0.name", VT.STRING, "Qwen3 8B"),
        ("general.base_model.0.organization", VT.STRING, "Qwen"),
        ("general.base_model.0.repo_url", VT.STRING, "https://huggingface.co/Qwen/Qwen3-8B"),
        ("general.base_model.1.name", VT.STRING, "Dflash Base"),
        ("general.base_model.1.organization", VT.STRING, "Z Lab"),
        ("general.base_model.1.repo_url", VT.STRING, "https://huggingface.co/z-lab/dflash-base")]


# ---------------------------------------------------------------------------------------------- override


def test_override_wins_everywhere(tmp_path: Path) -> None:
    draft = write(tmp_path / "dflash-zlab", {"config.json": {}, "README.md": README,
                                             "generation_config.json": GEN_CONFIG})
    meta = write(tmp_path, {"m.json": {
        "general.name": "Custom", "general.license": "mit", "general.size_label": "1B",
        "general.sampling.temp": 1, "general.sampling.top_k": None, "general.base_models": [],
        "general.languages": "fr", "general.datasets": None, "general.quantized_by": "tester"}}) / "m.json"
    kvs = as_tuples(general_kvs(draft, total_params=86_464, target_name="Qwen/Qwen3-8B", metadata_override=meta))
    assert kvs == [
        ("general.sampling.top_p", VT.FLOAT32, 0.95),
        ("general.sampling.min_p", VT.FLOAT32, 0.0),
        ("general.sampling.temp", VT.FLOAT32, 1.0),
        ("general.name", VT.STRING, "Custom"),
        ("general.author", VT.STRING, "DeepSeek"),
        ("general.description", VT.STRING, "A draft model"),
        ("general.quantized_by", VT.STRING, "tester"),
        ("general.size_label", VT.STRING, "1B"),
        ("general.license", VT.STRING, "mit"),
        ("general.license.name", VT.STRING, "custom"),
        ("general.license.link", VT.STRING, "https://example.org/LICENSE"),
        ("general.base_model.count", VT.UINT32, 0),
        ("general.tags", VT.ARRAY, ["speculative-decoding", "text-generation"]),
        ("general.languages", VT.ARRAY, ["fr"]),
    ]
    assert general_kvs(draft, total_params=86_464, metadata_override=meta)[-1].sub_type == VT.STRING


@pytest.mark.parametrize(("content", "message"), [
    ({"general.licence": "mit"}, "{p}: unknown key 'general.licence' (expected general.name, general.license, ..., "
                                 "general.sampling.*, general.base_models, general.datasets, general.tags, "
                                 "general.languages; see docs/hub-and-naming.md)"),
    ([1, 2], "{p}: is a JSON list, expected an object of general.* keys"),
    ({"general.sampling.top_k": 2.5}, "{p}: 'general.sampling.top_k' is 2.5, expected an integer"),
    ({"general.sampling.top_k": 2**31}, "{p}: 'general.sampling.top_k' is 2147483648, expected a 32-bit integer"),
    ({"general.sampling.temp": "hot"}, "{p}: 'general.sampling.temp' is 'hot', expected a number"),
    ({"general.sampling.temp": True}, "{p}: 'general.sampling.temp' is True, expected a number"),
    ({"general.name": {"a": 1}}, "README.md / --metadata: 'general.name' is {{'a': 1}}, expected a string"),
    ({"general.base_models": ["Qwen/Qwen3-8B"]},
     "README.md / --metadata: entry 0 of the base_model list is 'Qwen/Qwen3-8B', expected an object"),
    ({"general.tags": 3}, "README.md / --metadata: 'general.tags' is 3, expected a list of strings"),
])
def test_override_errors(tmp_path: Path, content: object, message: str) -> None:
    draft = write(tmp_path / "d", {"config.json": {}})
    meta = write(tmp_path, {"m.json": content}) / "m.json"
    with pytest.raises(ConvertError) as e:
        general_kvs(draft, total_params=1, metadata_override=meta)
    assert str(e.value) == message.format(p=meta)


def test_input_file_errors(tmp_path: Path) -> None:
    draft = write(tmp_path / "d", {"config.json": "{not json"})
    with pytest.raises(ConvertError, match=r"/d/config.json: malformed JSON at line 1 column "):
        general_kvs(draft, total_params=1)
    draft = write(tmp_path / "e", {"config.json": {}, "README.md": "---\nname: [unclosed\n---\n"})
    with pytest.raises(ConvertError, match=r"/e/README.md: the YAML front matter does not parse: "):
        general_kvs(draft, total_params=1)
    with pytest.raises(ConvertError) as e:
        general_kvs(write(tmp_path / "f", {}), total_params=1, metadata_override=tmp_path / "nope.json")
    assert str(e.value) == f"{tmp_path / 'nope.json'}: no such metadata file"
    # generation_config.json with bad types names the file; a broken one is ignored, as upstream does.
    bad = write(tmp_path / "g", {"config.json": {}, "generation_config.json": {"top_k": "many"}})
    with pytest.raises(ConvertError) as e:
        general_kvs(bad, total_params=1)
    assert str(e.value) == f"{bad / 'generation_config.json'}: 'general.sampling.top_k' is 'many', expected a number"
    broken = write(tmp_path / "h", {"config.json": {}, "generation_config.json": "{oops"})
    assert [kv.name for kv in general_kvs(broken, total_params=1)] == ["general.name", "general.size_label"]


def test_yaml_numbers_become_strings(tmp_path: Path) -> None:
    draft = write(tmp_path / "d", {"config.json": {}, "README.md": "---\nversion: 1.0\nlanguage:\n- no\n---\n"})
    kvs = as_tuples(general_kvs(draft, total_params=0))
    assert kvs == [("general.name", VT.STRING, "D"), ("general.version", VT.STRING, "1.0"),
                   ("general.languages", VT.ARRAY, ["no"])]
