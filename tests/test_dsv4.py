"""DeepSeek-V4 DSpark conversions in other dimensions than the golden sample, tensor by tensor against the
independent oracle (tests/dsv4_oracle.py): sizes, stage counts, expert counts, hc multipliers, shard boundaries
inside a stage, partial FP8 tiles and rows that are not a multiple of 32 (F16), tiny scales; both selection routes
(``dspark_*`` keys + ``mtp.*`` tensors, and ``architectures: [DeepseekV4DSparkModel]``), ``--dspark``, the
tokenizer default, and the refusals. Checkpoints come from fixtures/dsv4.py (no ../shared needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dsv4_support import ROOT, TOKENIZER, assert_matches_oracle, dsv4, kvs_of, make, tensors_of
from gguf import GGUFValueType as VT

from dspark_convert import convert
from dspark_convert.errors import ConvertError
from dspark_convert.gguffile.reader import read_gguf

VARIANTS = {
    # other sizes, 2 stages, 3 experts, hc 2; q_lora 100 and wo_a rows of 80 are not multiples of 32 (-> F16);
    # 320 columns leave partial 128-tiles; 4 draft shards cut inside stages
    "h320-s2-e3-hc2-f16rows-split": (dsv4.Dims(hidden=320, stages=2, experts=3, hc=2, moe=96, heads=3, head_dim=80,
                                               o_groups=3, q_lora=100, o_lora=64, markov_rank=16),
                                     dsv4.Layout(mtp_split="size", mtp_shards=4)),
    # one stage, one expert, hc 1, exact tiles
    "h128-s1-e1-hc1": (dsv4.Dims(hidden=128, stages=1, experts=1, hc=1, moe=64, heads=2, head_dim=64, q_lora=128,
                                 o_groups=1, o_lora=64, taps=2), dsv4.Layout(main_shards=1)),
    # four stages, five experts, hc 3, 7 shards (several boundaries inside stages), 2 taps
    "h384-s4-e5-hc3-split7": (dsv4.Dims(hidden=384, stages=4, experts=5, hc=3, moe=64, taps=2, layers=6,
                                        markov_rank=32), dsv4.Layout(mtp_split="size", mtp_shards=7, main_shards=3)),
    # the class declared in the config instead of DeepseekV4ForCausalLM + dspark_* keys
    "dspark-class": (dsv4.Dims(hidden=192, experts=2, moe=32, head_dim=64, q_lora=64, o_lora=32),
                     dsv4.Layout(arch="DeepseekV4DSparkModel")),
    # tiny and wide E8M0 scales: subnormal products, Q8_0 blocks whose maximum is subnormal
    "tiny-scales": (dsv4.Dims(hidden=128, stages=2, experts=2, moe=32, head_dim=64, q_lora=64, o_lora=32),
                    dsv4.Layout(fp8_scale=(0, 12), fp4_scale=(0, 20))),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_variant_matches_oracle_at_every_outtype(tmp_path: Path, variant: str) -> None:
    dims, layout = VARIANTS[variant]
    ck = make(tmp_path, dims=dims, layout=layout)
    outs = []
    for outtype in ("q8_0", "bf16", "auto"):  # the family forces every type: all outtypes give the same bytes
        out = tmp_path / f"{variant}.{outtype}.gguf"
        r = convert(ck, None, out, outtype=outtype)
        assert r.family == "dspark_dsv4" and read_gguf(out).kvs["general.file_type"].value == 38
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]
    assert_matches_oracle(tmp_path / f"{variant}.q8_0.gguf", ck)


def test_dspark_flag_and_both_routes_give_the_same_bytes(tmp_path: Path) -> None:
    dims = dsv4.Dims(hidden=128, stages=2, experts=2, moe=32, head_dim=64, q_lora=64, o_lora=32)
    a = make(tmp_path, "a/dsv4", dims=dims)
    b = make(tmp_path, "b/dsv4", dims=dims, layout=dsv4.Layout(arch="DeepseekV4DSparkModel"))
    ra = convert(a, None, tmp_path / "a.gguf", dspark=True)
    rb = convert(b, None, tmp_path / "b.gguf")
    assert ra.family == rb.family == "dspark_dsv4"
    assert (tmp_path / "a.gguf").read_bytes() == (tmp_path / "b.gguf").read_bytes()


def test_tokenizer_defaults_to_the_checkpoint_and_target_dir_still_works(tmp_path: Path) -> None:
    dims = dsv4.Dims(hidden=128, stages=1, experts=1, moe=32, head_dim=64, q_lora=64, o_lora=32)
    ck = make(tmp_path, dims=dims)
    r = convert(ck, None, tmp_path / "own.gguf")
    assert "tokenizer: the checkpoint's own (pass --target-model-dir to take it from another model)" in r.notes
    # the same tokenizer and config in another folder: same tensors and keys (general.base_model.0 names that folder)
    other = tmp_path / "target"
    other.mkdir()
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (other / f).write_bytes((ck / f).read_bytes())
    r2 = convert(ck, other, tmp_path / "target.gguf")
    assert not any(n.startswith("tokenizer: the checkpoint") for n in r2.notes)
    assert tensors_of(tmp_path / "own.gguf") == tensors_of(tmp_path / "target.gguf")
    assert kvs_of(tmp_path / "own.gguf") == kvs_of(tmp_path / "target.gguf")
    assert kvs_of(tmp_path / "own.gguf")["tokenizer.ggml.tokens"][1][1016] == "<|mask|>"
    # a checkpoint without tokenizer files needs --target-model-dir, and says so
    bare = make(tmp_path, "bare", dims=dims, tokenizer=None)
    with pytest.raises(ConvertError) as e:
        convert(bare, None, tmp_path / "bare.gguf")
    assert str(e.value) == (f"{bare}: the checkpoint has no tokenizer (tokenizer.json, tokenizer.model, vocab.json); "
                            "pass --target-model-dir with the target model's tokenizer")
    assert not (tmp_path / "bare.gguf").exists()
    convert(bare, TOKENIZER, tmp_path / "bare.gguf")
    assert tensors_of(tmp_path / "bare.gguf") == tensors_of(tmp_path / "own.gguf")


def test_chat_template_is_upstreams_and_0731_by_name(tmp_path: Path) -> None:
    """upstream's DeepSeek-V4 template is the second key; the -Flash-0731 one when the folder name has 0731; a
    template in the tokenizer's own tokenizer_config.json replaces it in place (gguf-py's rule for a re-added key)."""
    dims = dsv4.Dims(hidden=128, stages=1, experts=1, moe=32, head_dim=64, q_lora=64, o_lora=32)
    tok = tmp_path / "tok"
    tok.mkdir()
    (tok / "tokenizer.json").write_bytes((TOKENIZER / "tokenizer.json").read_bytes())
    cfg = json.loads((TOKENIZER / "tokenizer_config.json").read_text())
    own_template = cfg.pop("chat_template")
    (tok / "tokenizer_config.json").write_text(json.dumps(cfg))
    templates = ROOT / "dspark_convert" / "templates"
    for name, fn in (("DeepSeek-V4-Flash-DSpark", "deepseek-ai-DeepSeek-V4.jinja"),
                     ("DeepSeek-V4-Flash-0731", "deepseek-ai-DeepSeek-V4-Flash-0731.jinja")):
        ck = make(tmp_path, name, dims=dims, tokenizer=tok)
        convert(ck, None, tmp_path / f"{name}.gguf")
        kvs = list(kvs_of(tmp_path / f"{name}.gguf", skip_general=False).items())
        assert kvs[1] == ("tokenizer.chat_template", (VT.STRING, (templates / fn).read_text(encoding="utf-8")))
    ck = make(tmp_path, "with-own-template", dims=dims)
    convert(ck, None, tmp_path / "own.gguf")
    kvs = list(kvs_of(tmp_path / "own.gguf", skip_general=False).items())
    assert kvs[1] == ("tokenizer.chat_template", (VT.STRING, own_template))


def test_templates_are_upstreams_files() -> None:
    golden = ROOT.parent / "shared" / "golden" / "templates"
    if not golden.is_dir():
        pytest.skip(f"../shared not found at {golden} (CI provides it beside the checkout)")
    for fn in ("deepseek-ai-DeepSeek-V4.jinja", "deepseek-ai-DeepSeek-V4-Flash-0731.jinja"):
        assert (ROOT / "dspark_convert" / "templates" / fn).read_bytes() == (golden / fn).read_bytes()
