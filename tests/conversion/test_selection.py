"""Reading only what a conversion needs: family selection by tensor names, and checkpoints restricted to the
tensors a family reads (locally and from the Hub cache), with the other shards absent or unreadable.

The DeepSeek-V4 DSpark draft (``mtp.*`` tensors in 2 of 46 shards of the target checkpoint, config naming
``DeepseekV4ForCausalLM``) is the case these serve; a stand-in family exercises the mechanism here (the real
family, ``variants/dsv4/dspark_dsv4.py``, is tested in tests/variants/test_dsv4*.py).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from bad_inputs_kit import FIX, TARGET, read_tensors, write_tensors
from gguf import GGUFReader

from dspark_convert import convert
from dspark_convert.errors import ConvertError
from dspark_convert.hf.checkpoint import Checkpoint, tensor_names
from dspark_convert.hf2gguf.conversion import plan_conversion
from dspark_convert.registry import families
from dspark_convert.registry.families import family_for, family_name
from dspark_convert.roles.convert import family_claims, family_draft_tensors
from dspark_convert.variants.dflash import dspark

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _is_mtp(name: str) -> bool:
    return name.startswith("mtp.")


# ---------------------------------------------------------------------------------------------- family_for
def _dsv4_standin() -> SimpleNamespace:
    """A family that claims a target checkpoint by its ``dspark_*`` config keys and ``mtp.*`` tensors."""
    return SimpleNamespace(
        __name__="dspark_convert.families.dsv4", ARCHITECTURES=(), TARGET_TENSORS=(),
        claims=lambda config, names: any(k.startswith("dspark_") for k in config) and any(map(_is_mtp, names)),
        draft_tensors=lambda config: _is_mtp)


def test_family_for_claims_a_draft_inside_a_target_by_its_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    # the mtp family is left out too: it names DeepSeek-V4's MTP head itself (test_mtp.py), before any claim here
    real = [m for m in families.family_modules() if family_name(m) not in ("dspark_dsv4", "mtp")]
    standin = _dsv4_standin()
    monkeypatch.setattr(families, "family_modules", lambda: [*real, standin])
    config = {"architectures": ["DeepseekV4ForCausalLM"], "dspark_block_size": 16}
    assert family_for(config, ["model.layers.0.attn.wq.weight", "mtp.0.fc.weight"], "c.json") is standin
    assert family_name(standin) == "dsv4"
    # architecture first: a draft architecture is never taken over by a claim
    assert family_name(family_for({**config, "architectures": ["DFlashDraftModel"]}, ["mtp.0.x"], "c.json")) == "dflash"
    # no mtp tensors (or no dspark keys): the message for an unknown architecture (supported names and aliases,
    # the closest one as a hint); a claiming family adds no name to it
    known = ", ".join([*(a for m in real for a in m.ARCHITECTURES), "LingDSparkModel"])
    for cfg, names in ((config, ["model.layers.0.attn.wq.weight"]), ({"architectures": ["DeepseekV4ForCausalLM"]}, ["mtp.0.x"])):
        with pytest.raises(ConvertError) as e:
            family_for(cfg, names, "c.json")
        # a target class: said so, no closest-name hint (issue 24: it pointed a Qwen3 target at LlamaForCausalLM)
        assert str(e.value) == ("c.json: architecture 'DeepseekV4ForCausalLM' is not a supported draft: it is a target "
                                "model class; if . is the target, pass it as --target-model-dir and the draft as DRAFT; "
                                "if it is a draft declaring its target's class, pass --architecture with the draft's "
                                f"class (one of {known.removesuffix(', LingDSparkModel')})")


def test_every_family_module_implements_the_contract() -> None:
    for mod in families.family_modules():
        assert mod.ARCHITECTURES and isinstance(mod.ARCHITECTURES, tuple)
        assert family_claims(mod, {"architectures": ["X"]}, ["mtp.0.x"]) is False
        assert callable(mod.target_facts)
        if family_name(mod) == "dspark_dsv4":  # a draft inside its target: reads mtp.* only, takes nothing from it
            select = family_draft_tensors(mod, {})
            assert select is not None and select("mtp.2.norm.weight") and not select("norm.weight")
            assert mod.TARGET_TENSORS == () and mod.TOKENIZER_IN_CHECKPOINT and mod.DSPARK_FLAG
            continue
        if family_name(mod) == "mtp":  # the MTP head of a target (--mtp): its own tokenizer, the MTP shards only
            # what it reads depends on the class
            select = family_draft_tensors(mod, {"architectures": ["Qwen3_5ForCausalLM"]})
            assert select is not None and select("mtp.layers.0.fc.weight") and not select("model.layers.0.mlp.up_proj.weight")
            assert mod.TARGET_TENSORS == () and mod.TOKENIZER_IN_CHECKPOINT and mod.MTP_FLAG and not mod.DSPARK_FLAG
            continue
        if family_name(mod) == "gemma4_assistant":  # converted on its own: its folder carries the tokenizer
            assert family_draft_tensors(mod, {}) is None and mod.TARGET_TENSORS == ()
            assert mod.TOKENIZER_IN_CHECKPOINT and not mod.DSPARK_FLAG
            continue
        assert family_draft_tensors(mod, {}) is None
        assert not mod.TOKENIZER_IN_CHECKPOINT and not mod.DSPARK_FLAG
        assert [t.name for t in mod.TARGET_TENSORS][0] == "token_embd.weight"
    assert dspark.hf_names("blk.1.ffn_up.weight") == ("layers.1.mlp.up_proj.weight",)
    assert dspark.hf_names("enc.output_norm.weight") == ("hidden_norm.weight",)
    from dspark_convert.variants.eagle3 import eagle3

    assert eagle3.hf_names("blk.0.attn_norm_2.weight") == ("midlayer.hidden_norm.weight", "layers.0.hidden_norm.weight")
    assert eagle3.hf_names("enc.output_norm.weight") == ("input_norm.weight",)
    assert eagle3.hf_names("markov_w1.weight") == ()


# ---------------------------------------------------------------------------------------------- local checkpoints
def _sharded(folder: Path, shards: dict[str, dict[str, tuple[str, np.ndarray]]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    weight_map = {}
    for fn, tensors in shards.items():
        write_tensors(folder / fn, tensors)
        weight_map.update({n: fn for n in tensors})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}), encoding="utf-8")


def test_checkpoint_restricted_to_selected_tensors_ignores_other_shards(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 8)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    folder = tmp_path / "dsv4"
    _sharded(folder, {
        "model-00001-of-00003.safetensors": {"model.layers.0.w": ("F32", np.zeros((2, 2), np.float32))},
        "model-00002-of-00003.safetensors": {"mtp.0.w": ("F32", w), "mtp.0.b": ("F32", b)},
        "model-00003-of-00003.safetensors": {"model.norm.weight": ("F32", np.ones(2, np.float32))},
    })
    (folder / "config.json").write_text('{"architectures": ["DeepseekV4ForCausalLM"]}', encoding="utf-8")
    (folder / "model-00001-of-00003.safetensors").write_bytes(b"\xff" * 64)  # unreadable garbage
    (folder / "model-00003-of-00003.safetensors").unlink()  # absent

    assert tensor_names(folder) == ["model.layers.0.w", "model.norm.weight", "mtp.0.b", "mtp.0.w"]  # from the index
    ck = Checkpoint(folder, select=_is_mtp)
    assert ck.names == ["mtp.0.b", "mtp.0.w"] and [f.name for f in ck.files] == ["model-00002-of-00003.safetensors"]
    assert ck.read_rows("mtp.0.w", 0, 4).tobytes() == w.tobytes() and np.array_equal(ck.read("mtp.0.b"), b)
    assert "model.norm.weight" not in ck
    with pytest.raises(ConvertError, match=r"shard 'model-00003-of-00003.safetensors' \(holding 'model.norm.weight'\) "
                                           r"is missing"):
        Checkpoint(folder)
    (folder / "model-00003-of-00003.safetensors").write_bytes(b"\xff" * 64)
    with pytest.raises(ConvertError, match=r"model-00001-of-00003.safetensors: safetensors header claims"):
        Checkpoint(folder)


def _draft_with_junk_shard(root: Path) -> Path:
    """fixtures/dspark-qwen3 as an indexed checkpoint plus a shard of tensors no family reads."""
    draft = root / "dspark-qwen3"  # the same folder name: the same general.name as the fixture's conversion
    shutil.copytree(FIX / "dspark-qwen3", draft)
    tensors = read_tensors(draft / "model.safetensors")
    (draft / "model.safetensors").unlink()
    _sharded(draft, {"model-00001-of-00002.safetensors": tensors,
                     "model-00002-of-00002.safetensors": {"junk.0.weight": ("F32", np.ones((2, 2), np.float32))}})
    (draft / "model-00002-of-00002.safetensors").write_bytes(b"\xff" * 64)
    return draft


def test_conversion_reads_only_the_shards_of_the_family_tensors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reference = convert(FIX / "dspark-qwen3", TARGET, tmp_path / "ref.gguf", outtype="bf16")
    draft = _draft_with_junk_shard(tmp_path / "in")
    with pytest.raises(ConvertError, match="model-00002-of-00002.safetensors"):
        convert(draft, TARGET, tmp_path / "all.gguf", outtype="bf16")  # a family reading every tensor
    monkeypatch.setattr(dspark, "draft_tensors", lambda config: lambda n: not n.startswith("junk."), raising=False)
    r = convert(draft, TARGET, tmp_path / "sel.gguf", outtype="bf16")
    assert r.family == "dspark" and (tmp_path / "sel.gguf").read_bytes() == (tmp_path / "ref.gguf").read_bytes()
    assert reference.bytes_written == r.bytes_written


# ---------------------------------------------------------------------------------------------- Hub cache
def _cached_snapshot(cache: Path, repo_id: str, files: dict[str, bytes]) -> Path:
    """A hub cache snapshot written by hand (the layout huggingface_hub reads; see tests/conversion/test_hub.py)."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    for name, data in files.items():
        (snap / name).write_bytes(data)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    return snap


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    return cache


def test_hub_draft_needs_only_the_selected_shards(offline: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline, the junk shard is not in the cache at all: a conversion that asked for it would fail."""
    local = _draft_with_junk_shard(tmp_path / "in")
    files = {p.name: p.read_bytes() for p in local.iterdir() if p.name != "model-00002-of-00002.safetensors"}
    snap = _cached_snapshot(offline, "org/dspark-qwen3", files)
    monkeypatch.setattr(dspark, "draft_tensors", lambda config: lambda n: not n.startswith("junk."), raising=False)
    planned = plan_conversion("org/dspark-qwen3", TARGET)
    try:
        assert planned.draft.path == snap and planned.draft.commit == COMMIT
        assert [f.name for f in planned.sources["draft"].files] == ["model-00001-of-00002.safetensors"]
    finally:
        planned.close()
    convert("org/dspark-qwen3", TARGET, tmp_path / "hub.gguf", outtype="bf16")
    convert(FIX / "dspark-qwen3", TARGET, tmp_path / "ref.gguf", outtype="bf16")
    got, ref = GGUFReader(tmp_path / "hub.gguf"), GGUFReader(tmp_path / "ref.gguf")
    assert [t.name for t in got.tensors] == [t.name for t in ref.tensors]
    assert all(np.array_equal(a.data, b.data) for a, b in zip(got.tensors, ref.tensors, strict=True))
