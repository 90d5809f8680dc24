"""The ``llama`` tier on the target families whose llama.cpp b11434 graph records the layer inputs a draft reads
(``res->t_layer_inp`` in src/models/*.cpp; the table's ``layer_inputs``): Llama-3, Qwen3-MoE (Qwen3-30B-A3B's
layout), Qwen3-Next, gpt-oss, MiniMax-M2, LFM2, Gemma 4, Nemotron-H (Nemotron-3-Nano's MoE layout and the dense
one; their draft taps the last layer, whose output only a few graphs record: the table's ``final_layer_input``),
Qwen3.5-MoE, MiniMax-01, DeepSeek-V4 and MiMo-V2 (their drafts tap the last layer too), Nanbeige and HunYuan dense.
For each family a draft converted for it loads in llama-server b11434 beside the target, drafts, and decodes exactly
what the target decodes alone.

The targets are the seeded models of ``tests/llama/families.py`` (transformers, or ``tests/mtp_makers.py`` for
DeepSeek-V4 and MiMo-V2) with the Qwen3.5 tokenizer (Gemma 4: the Gemma-style one of ``tests/gemma4_drafts.py``),
converted by upstream's own ``convert_hf_to_gguf.py``. The drafts are cases of ``tests/target_drafts.py``: those with an
oracle are proved byte-identical to upstream's by ``tests/conversion/test_targets.py``; the Qwen3-MoE one has none, because
upstream b11434 stops on a draft for that target (its ``set_vocab`` calls ``super()``), and we convert it (the
``upstream-stops`` note of ``test_targets.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_support import run
from target_drafts import make_case

from dspark_convert import convert
from dspark_convert.fit.rules import check_fit
from dspark_convert.reference import open_gguf
from dspark_convert.tokenizer import targets as T
from llama.families import FAMILIES
from llama.target import convert_target


@pytest.mark.llama
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_draft_on_family_target_loads_and_is_lossless(family: str, llama_bin: tuple[Path, Path],
                                                      tmp_path: Path) -> None:
    fam = FAMILIES[family]
    hf = fam.make(tmp_path / "target")
    gguf = convert_target(llama_bin[1], hf, tmp_path / "target.bf16.gguf", outtype="bf16", pre="qwen35",
                          extra=fam.extra, raw_config=fam.raw_config)
    assert open_gguf(gguf).value("general.architecture") == fam.arch
    assert T.table()["layer_inputs"][fam.arch] is True
    prompt = list(fam.prompt) if fam.prompt is not None else None
    plain = run(llama_bin[0], gguf, prompt=prompt)
    assert len(plain.completion.tokens) == 16
    for case in fam.cases:
        draft, _ = make_case(tmp_path, case, tmp_path / "targets")
        conv = convert(draft, hf, tmp_path / f"{case}.bf16.gguf", outtype="bf16")
        assert conv.path is not None
        assert not [f for f in conv.findings if f.rule == "target-graph"]
        rule = {r.id: r for r in check_fit(conv.path, gguf).results}["target-graph"]
        assert rule.status == "pass", rule.message
        c = run(llama_bin[0], gguf, conv.path, prompt=prompt).completion
        print(f"{case}: drafted {c.draft_n}, accepted {c.draft_n_accepted}")
        assert c.draft_n > 0, f"{case}: llama-server reported no drafted tokens"
        assert 0 <= c.draft_n_accepted <= c.draft_n
        assert c.tokens == plain.completion.tokens, f"{case}: speculative output differs from plain greedy"
