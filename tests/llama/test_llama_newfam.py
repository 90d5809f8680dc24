"""The ``llama`` tier for the families of issue 22: ModelOpt NVFP4 DSpark and Gemma4 DSpark, at bf16, f16 and q8_0.

For each converted file llama-server b11434 loads it against a tiny target converted by upstream, drafts (the
server reports drafted tokens), decodes exactly what the target decodes alone, and drafts what our numpy reference
drafts from the target's tap features (the three-way check, :mod:`llama.threeway`):

- NVFP4 (make_inputs_b11434.py's ``n-dspark-nvfp4`` / ``-mixed``, Qwen3 target): the NVFP4 tensors stay NVFP4 at
  every outtype, llama.cpp's CPU backend runs them (ggml-cpu has NVFP4 dot products), and the reference is the
  ordinary DSpark forward on the dequantized blocks times their ``.scale``;
- Gemma4 (tests/gemma4_drafts.py's variants): the target is a random ``Gemma4ForCausalLM`` (sliding and full
  layers, sandwich norms, K-as-V, proportional RoPE, embedding scale), whose tap features come from the numpy
  Gemma 4 forward of :mod:`llama.target_np` (checked against llama-server's greedy output and
  against transformers), and the draft side is :mod:`dspark_convert.variants.gemma4.numpy_forward`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from llama_support import Run, run

from dspark_convert.hf2gguf.conversion import convert
from dspark_convert.llamacpp.bench import draft_spec
from dspark_convert.reference import open_gguf
from llama.target import convert_target
from llama.threeway import three_way

OUTTYPES = ["bf16", "f16", "q8_0"]
NVFP4_CASES = ("n-dspark-nvfp4", "n-dspark-nvfp4-mixed")
PROMPT = [400, 401, 72, 300, 22, 500, 12, 33]          # llama_support.PROMPT (ids of either Qwen3 target)


# ---------------------------------------------------------------------------------------------- NVFP4
@pytest.fixture(scope="module")
def nvfp4_target(llama_bin: tuple[Path, Path], b11434_qwen3: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Run]:
    """The public sample's Qwen3 target (DeepSeek tokenizer) as F32 GGUF by upstream's converter, and its plain run."""
    g = convert_target(llama_bin[1], b11434_qwen3 / "target", tmp_path_factory.mktemp("llama-nvfp4") / "t.gguf")
    return g, run(llama_bin[0], g)


@pytest.mark.llama
@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("case", NVFP4_CASES)
def test_nvfp4_loads_drafts_lossless_and_matches_reference(case: str, outtype: str, llama_bin: tuple[Path, Path],
                                                           b11434_qwen3: Path,
                                                           nvfp4_target: tuple[Path, Run], tmp_path: Path) -> None:
    target_dir = b11434_qwen3 / "target"
    f = convert(b11434_qwen3 / case, target_dir, tmp_path / f"{case}.{outtype}.gguf", outtype=outtype).path
    assert f is not None
    g = open_gguf(f)
    nvfp4 = sorted(t.name for t in g.file.tensors if t.type_name == "NVFP4")
    assert "fc.weight" in nvfp4 and "markov_w2.weight" in nvfp4, nvfp4      # NVFP4 stays NVFP4 at every outtype
    assert draft_spec(f)[0] == "draft-dspark"
    gtarget, plain = nvfp4_target
    r = run(llama_bin[0], gtarget, f)
    c = r.completion
    assert c.draft_n > 0, f"{f.name}: llama-server reported no drafted tokens"
    assert c.tokens == plain.completion.tokens and len(c.tokens) == 16
    tw = three_way(f, target_dir, PROMPT, c.tokens, r.blocks)
    assert tw.agree, tw.summary()
    same, ties, total = tw.counts
    assert total >= c.draft_n and same + ties == total, tw.summary()


@pytest.mark.llama
def test_nvfp4_correlated_draft_is_fully_accepted(llama_bin: tuple[Path, Path], b11434_qwen3: Path,
                                                  tmp_path: Path) -> None:
    """fixtures/correlated.py's NVFP4 pair (n-dspark-nvfp4 with zeroed NVFP4 codes in the rows that would write
    channel 0): the target always predicts TOKEN, llama.cpp accepts every token the NVFP4 draft drafts, and the
    three-way check agrees."""
    from llama_support import correlated

    t, d = correlated.correlated_nvfp4(tmp_path / "corr", b11434_qwen3)
    g = convert_target(llama_bin[1], t, tmp_path / "target.f32.gguf")
    plain = run(llama_bin[0], g)
    assert plain.completion.tokens == [correlated.TOKEN] * 16
    f = convert(d, t, tmp_path / "draft.bf16.gguf", outtype="bf16").path
    assert f is not None and open_gguf(f).file.tensor("markov_w2.weight").type_name == "NVFP4"
    r = run(llama_bin[0], g, f)
    c = r.completion
    assert c.tokens == plain.completion.tokens
    assert c.draft_n >= 12 and c.draft_n_accepted == c.draft_n, (c.draft_n, c.draft_n_accepted)
    tw = three_way(f, t, PROMPT, c.tokens, r.blocks)
    assert tw.agree, tw.summary()


# ---------------------------------------------------------------------------------------------- Gemma4
#: the variants whose dimensions fit the tiny Gemma 4 target (hidden 32, 5 layers; v-gemma4-tied has hidden 64):
#: v-gemma4-f32 at every outtype, the others (default RoPE + SWA keys, no Markov head) at bf16
GEMMA4_RUNS = [("v-gemma4-f32", t) for t in OUTTYPES] + [("v-gemma4-default", "bf16"), ("v-gemma4-nomarkov", "bf16")]
GEMMA4_PROMPT = [2, 300, 280, 290, 271, 285, 299, 277]
#: the synthetic tokenizer's end-of-generation ids (<eos>, <end_of_turn>), which llama-server's ignore_eos bans
GEMMA4_EOG = [1, 6]


@pytest.fixture(scope="module")
def gemma4_target(llama_bin: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Run]:
    """test_gemma4_dspark's random Gemma4ForCausalLM: (HF folder, F32 GGUF by upstream's converter, plain run)."""
    from test_gemma4_dspark import _tiny_gemma4_target

    out = tmp_path_factory.mktemp("llama-gemma4")
    t = _tiny_gemma4_target(out / "target")
    g = convert_target(llama_bin[1], t, out / "target.f32.gguf")
    return t, g, run(llama_bin[0], g, prompt=GEMMA4_PROMPT)


@pytest.mark.llama
def test_numpy_gemma4_target_greedy_equals_llama_server(gemma4_target: tuple[Path, Path, Run]) -> None:
    """The numpy Gemma 4 forward (which gives the tap features) decodes what llama-server decodes, and its layer
    inputs and logits are transformers' (hidden_states[L] for L < n_layer)."""
    import torch
    from transformers import AutoModelForCausalLM

    from llama.target_np import TargetModel, greedy_generate, target_forward

    folder, _, plain = gemma4_target
    m = TargetModel(folder)
    assert greedy_generate(m, GEMMA4_PROMPT, 16, exclude=GEMMA4_EOG) == plain.completion.tokens
    assert len(plain.completion.tokens) == 16
    ours = target_forward(m, GEMMA4_PROMPT)
    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    with torch.no_grad():
        r = hf(torch.tensor([GEMMA4_PROMPT]), output_hidden_states=True)
    for L in range(m.n_layer):                       # HF's last entry is after the final norm; ours before it
        np.testing.assert_allclose(ours.hidden[L], r.hidden_states[L][0].numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ours.logits, r.logits[0].numpy(), rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def gemma4_files(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    from gemma4_drafts import make

    out, files = tmp_path_factory.mktemp("llama-gemma4-drafts"), {}
    for name in dict(GEMMA4_RUNS):
        draft, target = make(out, name)
        for t in {t for n, t in GEMMA4_RUNS if n == name}:
            f = convert(draft, target, out / f"{name}.{t}.gguf", outtype=t).path
            assert f is not None
            files[name, t] = f
    return files


@pytest.mark.llama
@pytest.mark.parametrize(("variant", "outtype"), GEMMA4_RUNS)
def test_gemma4_loads_drafts_lossless_and_matches_reference(variant: str, outtype: str,
                                                            llama_bin: tuple[Path, Path],
                                                            gemma4_target: tuple[Path, Path, Run],
                                                            gemma4_files: dict[tuple[str, str], Path]) -> None:
    folder, gtarget, plain = gemma4_target
    f = gemma4_files[variant, outtype]
    assert draft_spec(f)[0] == "draft-dspark"
    r = run(llama_bin[0], gtarget, f, prompt=GEMMA4_PROMPT)
    c = r.completion
    assert c.draft_n > 0, f"{f.name}: llama-server reported no drafted tokens"
    assert c.tokens == plain.completion.tokens
    tw = three_way(f, folder, GEMMA4_PROMPT, c.tokens, r.blocks)
    assert tw.agree, tw.summary()
    same, ties, total = tw.counts
    assert total >= c.draft_n and same + ties == total, tw.summary()


@pytest.mark.llama
def test_gemma4_correlated_draft_is_fully_accepted(llama_bin: tuple[Path, Path],
                                                   gemma4_target: tuple[Path, Path, Run], tmp_path: Path) -> None:
    """fixtures/correlated.py's Gemma 4 pair: the target always predicts GEMMA4_TOKEN and the draft (v-gemma4-f32
    rewritten) drafts it: llama.cpp accepts every drafted token, and drafts what the reference drafts."""
    from gemma4_drafts import make
    from llama_support import correlated

    from llama.target_np import TargetModel, greedy_generate

    t = correlated.correlated_gemma4_target(tmp_path / "target", gemma4_target[0])
    g = convert_target(llama_bin[1], t, tmp_path / "target.f32.gguf")
    plain = run(llama_bin[0], g, prompt=GEMMA4_PROMPT)
    assert plain.completion.tokens == [correlated.GEMMA4_TOKEN] * 16
    assert greedy_generate(TargetModel(t), GEMMA4_PROMPT, 16, exclude=GEMMA4_EOG) == plain.completion.tokens
    src, conv_target = make(tmp_path, "v-gemma4-f32")
    d = correlated.correlated_gemma4_draft(tmp_path / "draft", src, t)
    f = convert(d, conv_target, tmp_path / "draft.bf16.gguf", outtype="bf16").path
    assert f is not None
    r = run(llama_bin[0], g, f, prompt=GEMMA4_PROMPT)
    c = r.completion
    assert c.tokens == plain.completion.tokens
    assert c.draft_n >= 12 and c.draft_n_accepted == c.draft_n, (c.draft_n, c.draft_n_accepted)
    tw = three_way(f, t, GEMMA4_PROMPT, c.tokens, r.blocks)
    assert tw.agree, tw.summary()


@pytest.mark.llama
def test_gemma4_three_way_has_teeth(llama_bin: tuple[Path, Path], gemma4_target: tuple[Path, Path, Run],
                                    gemma4_files: dict[tuple[str, str], Path],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison fails when the reference's target side is wrong: the tap features of the previous layer, or
    of a forward whose embeddings miss the factor sqrt(hidden), each disagree with what llama.cpp drafts."""
    from llama import target_np, threeway

    folder, gtarget, _ = gemma4_target
    f = gemma4_files["v-gemma4-f32", "bf16"]
    r = run(llama_bin[0], gtarget, f, prompt=GEMMA4_PROMPT)
    assert three_way(f, folder, GEMMA4_PROMPT, r.completion.tokens, r.blocks).agree
    real = target_np.tap_features
    monkeypatch.setattr(threeway, "tap_features", lambda out, layers: real(out, [int(L) - 1 for L in layers]))
    shifted = three_way(f, folder, GEMMA4_PROMPT, r.completion.tokens, r.blocks)
    assert not shifted.agree, shifted.summary()
    monkeypatch.setattr(threeway, "tap_features", real)

    def unscaled(m: target_np.TargetModel, tokens: list[int]) -> target_np.TargetOutputs:
        # embeddings without the factor sqrt(hidden) (scaling every feature alike would be invisible: the draft's
        # context projection is RMS-normalised; the residual stream is not)
        n, m.n_embd = m.n_embd, 1
        try:
            return target_np.gemma4_forward(m, tokens)
        finally:
            m.n_embd = n

    monkeypatch.setattr(threeway, "target_forward", unscaled)
    wrong = three_way(f, folder, GEMMA4_PROMPT, r.completion.tokens, r.blocks)
    assert not wrong.agree, wrong.summary()
