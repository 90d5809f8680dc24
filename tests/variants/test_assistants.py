"""Gemma 4 assistants and Muse-Glimmer assistants (and a DFlash2 draft on a Muse-Glimmer target): byte parity with
upstream b11434 at every outtype on the generated layouts of ``tests/assistant_drafts.py``, the refusals (one line,
nothing written), the default output names llama.cpp's ``-hf`` discovers, and ``check``'s loader rules."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from assistant_drafts import GEMMA_VARIANTS, MUSE_VARIANTS, ORACLE, OUTTYPES, make
from golden_manifest import compare

from dspark_convert import convert
from dspark_convert.check import check_file, check_plan, errors
from dspark_convert.errors import ConvertError
from dspark_convert.gguffile.source import plan_from_source


@pytest.mark.parametrize("variant", sorted(GEMMA_VARIANTS) + sorted(MUSE_VARIANTS))
def test_identical_to_upstream_at_every_outtype(variant: str, tmp_path: Path) -> None:
    draft, target = make(tmp_path, variant)
    differing = {}
    for outtype in OUTTYPES:
        out = tmp_path / f"{variant}.{outtype}.gguf"
        r = convert(draft, target, out, outtype=outtype)
        assert [str(f) for f in r.findings if f.level != "note"] == []
        diffs = compare(out, json.loads((ORACLE / f"{variant}.{outtype}.json").read_text()))
        if diffs:
            differing[outtype] = diffs[:4]
        assert [str(f) for f in errors(check_file(out))] == []
    assert differing == {}


def test_gemma4_assistant_file_facts(tmp_path: Path) -> None:
    """The E2B layout: masked_embedding dropped, arch gemma4-assistant, backbone size and nextn count written."""
    draft, _ = make(tmp_path, "a-gemma4-e2b")
    out = tmp_path / "a.gguf"
    r = convert(draft, None, out, outtype="f32")
    plan = r.plan
    assert plan.arch == "gemma4-assistant"
    assert plan.value("gemma4-assistant.embedding_length_out") == 48
    assert plan.value("gemma4-assistant.nextn_predict_layers") == 4
    assert plan.value("gemma4-assistant.attention.sliding_window_pattern") == [True, True, True, False]
    names = [t.name for t in plan.tensors]
    assert names[0] == "rope_freqs.weight" and not any("masked" in n for n in names)
    assert plan.tensor("nextn.pre_projection.weight").shape == (32, 96)
    assert plan.tensor("rope_freqs.weight").data.tolist() == [1.0, 1.0] + [float(np.float32(1e30))] * 6


def test_gemma4_assistant_global_kv_heads_as_transformers_keeps_them(tmp_path: Path) -> None:
    """attention_k_eq_v: global KV heads equal to the sliding ones are dropped as a per-layer value (one UINT32
    head_count_kv, upstream's), other ones give the per-layer array, typed INT32 as gguf-py types a list of ints."""
    from dspark_convert.gguffile.reader import read_gguf

    for variant, want_type, want in (("a-gemma4-kv-eq", "UINT32", 2), ("a-gemma4-kv-array", "ARRAY", [2, 1, 1])):
        draft, _ = make(tmp_path, variant)
        out = tmp_path / f"{variant}.gguf"
        convert(draft, None, out, outtype="bf16")
        f = read_gguf(out)
        kv = f.kvs["gemma4-assistant.attention.head_count_kv"]
        assert (kv.type.name, kv.value) == (want_type, want)
        if want_type == "ARRAY":
            assert kv.sub_type.name == "INT32"
        f.close()


def test_default_output_names_carry_the_hf_sidecar_keyword(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    g, _ = make(tmp_path, "a-gemma4-e2b")
    m, mt = make(tmp_path, "a-muse")
    monkeypatch.chdir(tmp_path)
    assert convert(g, None, None, outtype="bf16", dry_run=True).path == Path("mtp-a-gemma4-e2b-BF16.gguf")
    assert convert(m, mt, None, outtype="q8_0", dry_run=True).path == Path("dflash-a-muse-target-Q8_0.gguf")


def _edit(folder: Path, fn) -> None:  # type: ignore[no-untyped-def]
    cfg = json.loads((folder / "config.json").read_text())
    fn(cfg)
    (folder / "config.json").write_text(json.dumps(cfg))


GEMMA_REFUSALS = [
    (lambda c: c.pop("backbone_hidden_size"), "backbone_hidden_size is None, expected the target's hidden size"),
    (lambda c: c.pop("text_config"), "key 'text_config' is None"),
    (lambda c: c["text_config"].update(layer_types=["full_attention"]), "text_config.layer_types is"),
    (lambda c: c["text_config"].update(num_kv_shared_layers=2), "num_kv_shared_layers is 2, expected num_hidden_layers (4)"),
    (lambda c: c["text_config"].update(hidden_size_per_layer_input=8), "hidden_size_per_layer_input is 8, expected 0"),
    (lambda c: c["text_config"].update(use_double_wide_mlp=True), "use_double_wide_mlp is True, expected False"),
    (lambda c: c["text_config"]["rope_parameters"]["full_attention"].update(rope_type="default"),
     "rope_type is 'default', expected 'proportional'"),
    (lambda c: c["text_config"].update(sliding_window=None), "text_config.sliding_window is None"),
    (lambda c: c.update(backbone_hidden_size=32), "'pre_projection.weight' has shape [32, 96], expected [32, 64]"),
    (lambda c: c["text_config"].update(global_head_dim=32), "'model.layers.3.self_attn.q_proj.weight' has shape"),
    # transformers drops the full layers' head_dim equal to head_dim; upstream b11434 then stops (AssertionError)
    (lambda c: c["text_config"].update(global_head_dim=8), "the full-attention layers' head dim equals "
     "text_config.head_dim (8): transformers drops a per-layer value equal to the global one"),
]


@pytest.mark.parametrize("edit,message", GEMMA_REFUSALS)
def test_gemma4_assistant_refusals(edit, message: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    draft, _ = make(tmp_path, "a-gemma4-e2b")
    _edit(draft, edit)
    out = tmp_path / "out.gguf"
    with pytest.raises(ConvertError) as e:
        convert(draft, None, out, outtype="f16")
    assert message in str(e.value) and "\n" not in str(e.value)
    assert not out.exists()


def test_gemma4_assistant_untied_head_and_stray_tensor_refused(tmp_path: Path) -> None:
    from draft_kit import save_safetensors
    from safetensors.numpy import load_file

    draft, _ = make(tmp_path, "a-gemma4-f32")
    tensors = {k: ("F32", v) for k, v in load_file(str(draft / "model.safetensors")).items()}
    save_safetensors(draft / "model.safetensors", {**tensors, "lm_head.weight": tensors["model.embed_tokens.weight"]})
    with pytest.raises(ConvertError, match="tensor 'lm_head.weight': the Gemma 4 assistant's head is its tied"):
        convert(draft, None, tmp_path / "o.gguf", outtype="f16")
    save_safetensors(draft / "model.safetensors", {**tensors, "model.layers.0.self_attn.k_proj.weight": tensors["model.norm.weight"]})
    with pytest.raises(ConvertError, match="'model.layers.0.self_attn.k_proj.weight' has no GGUF name"):
        convert(draft, None, tmp_path / "o.gguf", outtype="f16")
    assert not (tmp_path / "o.gguf").exists()


MUSE_REFUSALS = [
    (lambda c: c.pop("block_size"), "key 'block_size' is missing"),
    (lambda c: c.pop("target_layer_ids"), "key 'target_layer_ids' is missing"),
    (lambda c: (c.pop("layer_types"), c.update(sliding_window_pattern=4)),
     "layer_types is missing (sliding_window_pattern 4 is not read)"),
    (lambda c: c.update(layer_types=["sliding_attention"]), "layer_types is ['sliding_attention'], expected "
                                                            "num_hidden_layers (3)"),
    (lambda c: c.update(target_layer_ids=[0, 2, 9]), "gives target layer 10 (after the +1 shift)"),
]


@pytest.mark.parametrize("edit,message", MUSE_REFUSALS)
def test_muse_refusals(edit, message: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    draft, target = make(tmp_path, "a-muse")
    _edit(draft, edit)
    out = tmp_path / "out.gguf"
    with pytest.raises(ConvertError) as e:
        convert(draft, target, out, outtype="f16")
    assert message in str(e.value) and "\n" not in str(e.value)
    assert not out.exists()


def test_muse_needs_its_target_and_unprefixed_encoder(tmp_path: Path) -> None:
    from draft_kit import save_safetensors
    from safetensors.numpy import load_file

    draft, target = make(tmp_path, "a-muse-f32")
    with pytest.raises(ConvertError, match="--target-model-dir is required"):
        convert(draft, None, tmp_path / "o.gguf")
    tensors = {("model." + k): ("F32", v) for k, v in load_file(str(draft / "model.safetensors")).items()}
    save_safetensors(draft / "model.safetensors", tensors)
    with pytest.raises(ConvertError, match="tensor 'model.encoder.fc.weight' has no GGUF name"):
        convert(draft, target, tmp_path / "o.gguf")
    assert not (tmp_path / "o.gguf").exists()


def test_check_flags_a_broken_assistant(tmp_path: Path) -> None:
    draft, _ = make(tmp_path, "a-gemma4-unified")
    out = tmp_path / "a.gguf"
    convert(draft, None, out, outtype="f16")
    plan = plan_from_source(out)[0]
    assert errors(check_plan(plan)) == []
    plan.kvs = [k for k in plan.kvs if k.name != "gemma4-assistant.embedding_length_out"]
    plan.tensors = [t for t in plan.tensors if t.name != "blk.1.layer_output_scale.weight"]
    found = {(f.subject, f.rule) for f in errors(check_plan(plan))}
    assert ("gemma4-assistant.embedding_length_out", "required-key") in found
    assert ("blk.1.layer_output_scale.weight", "required-tensor") in found


# ---------------------------------------------------------------------------------------------- verify
@pytest.fixture(scope="module")
def muse(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The Muse layouts with target weights, converted once per outtype: (variant, outtype) -> (gguf, draft, target)."""
    root = tmp_path_factory.mktemp("muse")
    made = {v: make(root, v, target_weights=True) for v in ("a-muse", "a-muse-f32", "a-muse-dflash2")}
    cache: dict = {}

    def get(variant: str, outtype: str) -> tuple[Path, Path, Path]:
        if (variant, outtype) not in cache:
            draft, target = made[variant]
            out = convert(draft, target, root / f"{variant}.{outtype}.gguf", outtype=outtype).path
            cache[variant, outtype] = (out, draft, target)
        return cache[variant, outtype]
    return get


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("variant", ["a-muse", "a-muse-f32", "a-muse-dflash2"])
def test_verify_passes_muse_files_with_every_tensor_read(muse, variant: str, outtype: str) -> None:  # type: ignore[no-untyped-def]
    from dspark_convert.verify import verify

    gguf, draft, target = muse(variant, outtype)
    r = verify(gguf, draft, target)
    assert r.passed, r.first_divergence
    acc = r.accounting
    assert acc is not None and acc.passed and acc.grade == "complete" and "0 dropped; checkpoint" in acc.detail, acc


def _scale(w: np.ndarray) -> np.ndarray:
    return w * 1.5


def _swap_first_taps(w: np.ndarray) -> np.ndarray:
    h = w.shape[1] // 4  # a-muse-f32: 4 taps of hidden 32
    return np.concatenate([w[:, h:2 * h], w[:, :h], w[:, 2 * h:]], axis=1)


#: defects of a Muse-Glimmer file (a-muse-f32: a sliding layer with window 64, then a full layer), each caught by
#: the component it breaks first
MUSE_MUTATIONS = [
    ("output norm dropped (ones)", {"output_norm.weight": np.ones_like}, {}, "block hidden (post-norm)"),
    ("encoder norm scaled", {"enc.output_norm.weight": _scale}, {}, "context projection"),
    ("taps swapped in fc", {"fc.weight": _swap_first_taps}, {}, "context projection"),
    ("SWA window wrong", {}, {"dflash.attention.sliding_window": 3}, "layer 0 output"),
    ("q/k norms swapped", {"blk.0.attn_q_norm.weight": lambda w: w[::-1].copy()}, {}, "layer 0 output"),
]


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("defect,tensors,kvs,first", MUSE_MUTATIONS, ids=[m[0] for m in MUSE_MUTATIONS])
def test_verify_fails_each_muse_mutation(muse, tmp_path: Path, defect: str, tensors: dict, kvs: dict, first: str,  # type: ignore[no-untyped-def]
                                         outtype: str) -> None:
    from test_mutations import mutate

    from dspark_convert.verify import verify

    gguf, draft, target = muse("a-muse-f32", outtype)
    bad = verify(mutate(gguf, tmp_path / "m.gguf", tensors, kvs), draft, target)
    assert not bad.passed
    assert bad.first_divergence is not None and bad.first_divergence["component"] == first, bad.first_divergence


@pytest.fixture(scope="module")
def gemma(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The Gemma 4 assistant layouts, converted once per outtype: (variant, outtype) -> (gguf, draft)."""
    root = tmp_path_factory.mktemp("gemma4-assistant")
    made: dict = {}
    cache: dict = {}

    def get(variant: str, outtype: str) -> tuple[Path, Path]:
        if variant not in made:
            made[variant] = make(root, variant)[0]
        if (variant, outtype) not in cache:
            out = convert(made[variant], None, root / f"{variant}.{outtype}.gguf", outtype=outtype).path
            cache[variant, outtype] = (out, made[variant])
        return cache[variant, outtype]
    return get


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("variant", sorted(GEMMA_VARIANTS))
def test_verify_passes_gemma4_assistant_files_by_both_forwards(gemma, variant: str, outtype: str) -> None:
    """No target folder: the numpy forward of the GGUF and the torch forward of the checkpoint agree component by
    component over three chained steps, and every tensor is read (the E2B layout's two sampler tensors dropped)."""
    from dspark_convert.verify import verify

    gguf, draft = gemma(variant, outtype)
    r = verify(gguf, draft, None)
    assert r.passed, r.first_divergence
    n_layer = GEMMA_VARIANTS[variant][0].text.get("num_hidden_layers", 4)
    assert [o.name for o in r.outputs] == [
        "pre-projection", *[f"layer {i} output" for i in range(n_layer)], "hidden (post-norm)", "logits",
        "post-projection (h_nextn)", "step 1 logits", "step 1 post-projection (h_nextn)", "step 2 logits",
        "step 2 post-projection (h_nextn)", "drafted tokens"]
    assert all(o.grade in ("exact", "round-off", "identical") for o in r.outputs), [(o.name, o.grade) for o in r.outputs]
    tokens = r.outputs[-1]
    assert tokens.agree == tokens.total == 3 * len(r.contexts)
    assert all(m.passed for m in r.metadata) and len(r.metadata) == 13
    acc = r.accounting
    dropped = 2 if variant == "a-gemma4-e2b" else 0
    assert acc is not None and acc.grade == "complete" and f"0 compared, {dropped} dropped" in acc.detail, acc.detail
    counts = r.tensors["counts"]
    assert counts["gguf"]["read_by_forward"] == counts["gguf"]["total"]
    assert counts["checkpoint"]["read_by_forward"] == counts["checkpoint"]["total"] - dropped
    assert r.hparams["query_position"] and r.steps == 3 and any("seeded inputs" in n for n in r.notes)


def test_verify_covers_the_sliding_window(gemma) -> None:  # type: ignore[no-untyped-def]
    """Caches longer than the window (512): the sliding layers see only its last 511 positions, on both sides."""
    from dspark_convert.verify import verify

    gguf, draft = gemma("a-gemma4-e2b", "bf16")
    r = verify(gguf, draft, None, context=256, steps=1)
    assert r.contexts == [64, 256, 1024] and r.passed, r.first_divergence
    wrong = verify(mutate_kv(gguf, gguf.with_name("w.gguf"), "gemma4-assistant.attention.sliding_window", 1000),
                   draft, None, context=256, steps=1)
    assert wrong.first_divergence is not None and wrong.first_divergence["component"] == "layer 0 output"
    assert wrong.first_divergence["case"] == 2     # only the 1024-position cache is longer than either window


def mutate_kv(src: Path, dst: Path, key: str, value: object) -> Path:
    from test_mutations import mutate

    return mutate(src, dst, {}, {key: value})


def _halves(w: np.ndarray) -> np.ndarray:
    h = w.shape[1] // 2     # a-gemma4-e2b: [target embedding (48); target hidden (48)]
    return np.concatenate([w[:, h:], w[:, :h]], axis=1)


A = "gemma4-assistant."
#: defects of a Gemma 4 assistant file (a-gemma4-e2b: three sliding layers, window 512, then a full layer), each
#: caught by the component it breaks first (and, for a key, its metadata row)
GEMMA_MUTATIONS = [
    ("pre-projection halves swapped", {"nextn.pre_projection.weight": _halves}, {}, "pre-projection"),
    ("embedding_length_out wrong", {}, {A + "embedding_length_out": 40}, "GGUF forward"),
    ("post-attention norm dropped (ones)", {"blk.0.post_attention_norm.weight": np.ones_like}, {}, "layer 0 output"),
    ("output norm dropped (ones)", {"output_norm.weight": np.ones_like}, {}, "hidden (post-norm)"),
    ("SWA window wrong", {}, {A + "attention.sliding_window": 4}, "layer 0 output"),
    ("SWA rope base wrong", {}, {A + "rope.freq_base_swa": 1e6}, "layer 0 output"),
    ("proportional RoPE lost (rope_freqs all ones)", {"rope_freqs.weight": np.ones_like}, {}, "layer 3 output"),
    ("layer output scale changed", {"blk.0.layer_output_scale.weight": _scale}, {}, "layer 0 output"),
    ("q norm reversed", {"blk.2.attn_q_norm.weight": lambda w: w[::-1].copy()}, {}, "layer 2 output"),
    ("post-projection scaled", {"nextn.post_projection.weight": _scale}, {}, "post-projection (h_nextn)"),
    ("nextn_predict_layers wrong", {}, {A + "nextn_predict_layers": 2}, "GGUF forward"),
    ("sliding/full pattern wrong", {}, {A + "attention.sliding_window_pattern": [False, True, True, False]},
     "GGUF forward"),
]


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("defect,tensors,kvs,first", GEMMA_MUTATIONS, ids=[m[0] for m in GEMMA_MUTATIONS])
def test_verify_fails_each_gemma4_assistant_mutation(gemma, tmp_path: Path, defect: str, tensors: dict, kvs: dict,  # type: ignore[no-untyped-def]
                                                     first: str, outtype: str) -> None:
    from test_mutations import mutate

    from dspark_convert.verify import verify

    good, draft = gemma("a-gemma4-e2b", outtype)
    bad = verify(mutate(good, tmp_path / "m.gguf", tensors, kvs), draft, None)
    assert not bad.passed
    assert bad.first_divergence is not None and bad.first_divergence["component"] == first, bad.first_divergence
    row = next(o for o in bad.outputs if o.name == first)
    if first == "GGUF forward":   # a file llama.cpp refuses: the row says which key or tensor
        assert any(k.removeprefix(A) in row.detail for k in kvs) or "attn_q" in row.detail, row.detail
    else:
        assert row.nmse is not None and row.nmse > 1e-3, row
    assert {m.key for m in bad.metadata if not m.passed} == set(kvs)


# ---------------------------------------------------------------------------------------------- llama-server
def _tiny_gemma4_target(folder: Path, hidden: int) -> Path:
    """A random Gemma4ForCausalLM matching a-gemma4-e2b's backbone (hidden 48, head dims 8 / 16), with the
    assistant's tokenizer, saved by transformers: what upstream's converter turns into the target GGUF."""
    import torch
    from gemma4_drafts import N_TOKENS, gemma_tokenizer
    from transformers.models.gemma4.configuration_gemma4 import Gemma4TextConfig
    from transformers.models.gemma4.modeling_gemma4 import Gemma4ForCausalLM

    torch.manual_seed(0)
    cfg = Gemma4TextConfig(
        vocab_size=N_TOKENS, hidden_size=hidden, intermediate_size=96, num_hidden_layers=5, num_attention_heads=4,
        num_key_value_heads=1, head_dim=8, global_head_dim=16, attention_k_eq_v=False,
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


def _damped(draft: Path, folder: Path) -> Path:
    """``draft`` with ``post_projection`` x0.1: the chain no longer multiplies round-off step by step (a random
    assistant's does, and llama.cpp rounds every matmul's input rows), so the three-way check compares choices,
    not amplified noise."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(draft, folder)
    t = load_file(str(folder / "model.safetensors"))
    w = t["post_projection.weight"]
    t["post_projection.weight"] = (w.float() * 0.1).to(w.dtype)
    save_file(t, str(folder / "model.safetensors"))
    return folder


@pytest.mark.llama
def test_llama_server_runs_the_assistant_losslessly(llama_bin: tuple[Path, Path], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """llama-server b11434 loads the converted assistant beside a Gemma 4 target converted by upstream, drafts with
    --spec-type draft-mtp and decodes exactly what the target decodes alone; check --target pairs them; and it
    drafts what the numpy reference drafts from the same target cache, hidden row and tokens (three-way)."""
    from llama.refs import gemma4_assistant as reference
    from llama.target import convert_target
    from llama.threeway import three_way
    from llama_support import run

    from dspark_convert.fit import check_fit

    runs = {}
    folder = _tiny_gemma4_target(tmp_path / "t", 48)
    target = convert_target(llama_bin[1], folder, tmp_path / "t.gguf")
    draft = _damped(make(tmp_path, "a-gemma4-e2b")[0], tmp_path / "damped")
    prompt = [20, 30, 40, 50, 60, 70, 80, 90]
    plain = run(llama_bin[0], target, prompt=prompt)
    for outtype in OUTTYPES:
        f = convert(draft, None, tmp_path / f"mtp-a.{outtype}.gguf", outtype=outtype).path
        report = check_fit(f, target)
        assert report.ok, [r for r in report.results if r.status == "fail"]
        r = run(llama_bin[0], target, f, prompt=prompt)
        assert r.completion.tokens == plain.completion.tokens
        assert r.completion.draft_n > 0
        tw = three_way(f, folder, prompt, r.completion.tokens, r.blocks)
        assert tw.agree, tw.summary()
        same, ties, total = tw.counts
        assert total >= r.completion.draft_n and same + ties == total and same >= total - 2, tw.summary()
        runs[outtype] = (f, r)
    # teeth: a reference reading the sliding cache of the target's layer n-3 (also sliding) instead of n-2
    f, r = runs["f32"]
    monkeypatch.setitem(reference.SHARED, "sliding", 3)
    wrong = three_way(f, folder, prompt, r.completion.tokens, r.blocks)
    assert not wrong.agree and wrong.counts[0] < wrong.counts[2] - 10, wrong.summary()
