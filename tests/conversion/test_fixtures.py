"""The committed fixtures under fixtures/: regeneration is byte-identical, and every folder holds what it claims.

The expected names, shapes, dtypes and ids below are written out independently of fixtures/generate.py, so a
change to the generator that alters the public layouts fails here.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fixture_registry import names

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"
GEN = FIX / "generate.py"

#: every committed folder, sorted (tests/fixture_registry.py; EXPECTED below stays written out by hand)
NAMES = sorted(names(source="committed"))
H, HD, FF, V, VD, MASK, TOKENIZER_SIZE = 64, 16, 128, 1024, 256, 1016, 1017
TAPS = [1, 2, 4]
ITEMSIZE = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "BOOL": 1}
SAMPLE = "Hello world! <|im_start|>user\nCafé 東京 🚀 x = 3.14<|im_end|><think>ok</think><|mask|>"


# ------------------------------------------------------------------------------------------- helpers


def read_safetensors(path: Path) -> dict[str, tuple[str, list[int], bytes]]:
    """Parse a safetensors file strictly: {name: (dtype, shape, raw bytes)}."""
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    assert n % 8 == 0, f"{path}: header length {n} is not 8-aligned"
    header = json.loads(blob[8 : 8 + n])
    assert header.pop("__metadata__") == {"format": "pt"}
    data = blob[8 + n :]
    spans = sorted((info["data_offsets"], name) for name, info in header.items())
    end = 0
    out = {}
    for (start, stop), name in spans:
        dtype, shape = header[name]["dtype"], header[name]["shape"]
        assert start == end, f"{path}: gap or overlap before {name}"
        assert stop - start == int(np.prod(shape, dtype=np.int64)) * ITEMSIZE[dtype], name
        out[name] = (dtype, shape, data[start:stop])
        end = stop
    assert end == len(data), f"{path}: {len(data) - end} trailing bytes"
    return out


def load_dir(name: str) -> dict[str, tuple[str, list[int], bytes]]:
    d = FIX / name
    tensors: dict[str, tuple[str, list[int], bytes]] = {}
    for f in sorted(d.glob("*.safetensors")):
        part = read_safetensors(f)
        assert not set(part) & set(tensors), f"{f}: tensor repeated across shards"
        tensors.update(part)
    return tensors


def as_float(t: tuple[str, list[int], bytes]) -> np.ndarray:
    dtype, shape, raw = t
    if dtype == "BF16":
        return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
    return np.frombuffer(raw, {"F16": "<f2", "F32": "<f4"}[dtype]).astype(np.float32).reshape(shape)


def config(name: str) -> dict:
    return json.loads((FIX / name / "config.json").read_text(encoding="utf-8"))


def layer(p: str, in_mult: int = 1, qk_norm: bool = True) -> dict[str, list[int]]:
    s = {f"{p}self_attn.q_proj.weight": [64, in_mult * H], f"{p}self_attn.k_proj.weight": [32, in_mult * H],
         f"{p}self_attn.v_proj.weight": [32, in_mult * H], f"{p}self_attn.o_proj.weight": [H, 64],
         f"{p}mlp.gate_proj.weight": [FF, H], f"{p}mlp.up_proj.weight": [FF, H], f"{p}mlp.down_proj.weight": [H, FF],
         f"{p}input_layernorm.weight": [H], f"{p}post_attention_layernorm.weight": [H]}
    if qk_norm:
        s.update({f"{p}self_attn.q_norm.weight": [HD], f"{p}self_attn.k_norm.weight": [HD]})
    return s


BODY = {**layer("layers.0."), **layer("layers.1."), "fc.weight": [H, 3 * H], "hidden_norm.weight": [H],
        "norm.weight": [H]}
STORED = {"embed_tokens.weight": [V, H], "lm_head.weight": [V, H]}
VMAP = {"d2t": [VD], "t2d": [V]}


def markov(r: int, vd: int = V) -> dict[str, list[int]]:
    return {"markov_head.markov_w1.weight": [V, r], "markov_head.markov_w2.weight": [vd, r],
            "confidence_head.proj.weight": [1, H + r], "confidence_head.proj.bias": [1]}


def eagle(p: str) -> dict[str, list[int]]:
    return {**layer(p, in_mult=2, qk_norm=False), f"{p}hidden_norm.weight": [H], "norm.weight": [H],
            "fc.weight": [H, 3 * H], "lm_head.weight": [VD, H], **VMAP}


TARGET = {"model.embed_tokens.weight": [V, H], "model.norm.weight": [H], "lm_head.weight": [V, H]}
for _i in range(6):
    TARGET.update(layer(f"model.layers.{_i}."))
LLAMA2 = {"model.embed_tokens.weight": [512, H], "model.norm.weight": [H], "lm_head.weight": [512, H]}
for _i in range(6):
    LLAMA2.update(layer(f"model.layers.{_i}.", qk_norm=False))

DFLASH2 = {**BODY, "candidate_selector.predecessor_codebook": [V, 8], "candidate_selector.successor_codebook": [V, 8],
           "candidate_selector.hidden_projection.weight": [8, H]}
for _i in range(2):
    for _m in ("attention_conv", "mlp_conv"):
        DFLASH2.update({f"layers.{_i}.{_m}.base_kernel": [2, 2, H], f"layers.{_i}.{_m}.kernel_projection.weight": [H // 4, H]})

# folder -> (float dtype, {tensor: shape})
EXPECTED: dict[str, tuple[str, dict[str, list[int]]]] = {
    "dspark-qwen3": ("BF16", {**BODY, **markov(8), **STORED}),
    "dspark-qwen3-interleaved": ("BF16", {**BODY, **markov(8), **STORED}),
    "dspark-qwen3-f32": ("F32", {**BODY, **markov(8), **STORED}),
    "dflash-deepspec": ("BF16", {**BODY, **STORED}),
    "dflash-zlab": ("BF16", BODY),
    "dflash-zlab-swa": ("BF16", BODY),
    "dflash2-zlab": ("BF16", DFLASH2),
    "dspark-specforge": ("BF16", {**BODY, **markov(32)}),
    "dspark-speculators": ("BF16", {**BODY, **markov(8), **STORED}),
    "dspark-reduced": ("BF16", {**BODY, **markov(8, VD), "embed_tokens.weight": [V, H], "lm_head.weight": [VD, H],
                                **VMAP}),
    "eagle3-specforge": ("BF16", {**eagle("midlayer."), "embed_tokens.weight": [V, H]}),
    "eagle3-angelslim": ("BF16", eagle("midlayer.")),
    "eagle3-speculators": ("BF16", {**eagle("layers.0."), "embed_tokens.weight": [V, H]}),
    "eagle3-normfc": ("BF16", {**eagle("layers.0."), "embed_tokens.weight": [V, H], "input_norm.weight": [3 * H]}),
    "eagle3-llama": ("F16", eagle("midlayer.")),
    "target-qwen3": ("BF16", TARGET),
    "target-qwen3-sharded": ("BF16", TARGET),
    "target-llama2-spm": ("F16", LLAMA2),
}


# --------------------------------------------------------------------------------------- determinism


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fresh")
    subprocess.run([sys.executable, str(GEN), "--out", str(out)], check=True, capture_output=True, text=True)
    return out


def test_folder_list_is_the_public_one() -> None:
    assert sorted(p.name for p in FIX.iterdir() if p.is_dir() and p.name != "__pycache__") == NAMES
    assert sorted(EXPECTED) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_regeneration_is_byte_identical(fresh: Path, name: str) -> None:
    committed = sorted(p.name for p in (FIX / name).iterdir())
    assert sorted(p.name for p in (fresh / name).iterdir()) == committed
    for fn in committed:
        assert (fresh / name / fn).read_bytes() == (FIX / name / fn).read_bytes(), f"{name}/{fn} differs"


def test_check_flag(tmp_path: Path) -> None:
    # (the full --check is what test_regeneration_is_byte_identical does, folder by folder)
    ok = subprocess.run([sys.executable, str(GEN), "--check", "--only", "dflash-zlab-swa", "--only", "eagle3-llama"],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "fixtures are up to date" in ok.stdout
    shutil.copytree(FIX / "dflash-zlab", tmp_path / "dflash-zlab")
    cfg = tmp_path / "dflash-zlab" / "config.json"
    cfg.write_text(cfg.read_text().replace('"block_size": 16', '"block_size": 15'))
    (tmp_path / "dflash-zlab" / "extra.txt").write_text("stale")
    bad = subprocess.run([sys.executable, str(GEN), "--check", "--out", str(tmp_path), "--only", "dflash-zlab"],
                         capture_output=True, text=True)
    assert bad.returncode == 1
    assert "differs: dflash-zlab/config.json" in bad.stdout
    assert "not generated (stale?): dflash-zlab/extra.txt" in bad.stdout
    assert "model.safetensors" not in bad.stdout


# ----------------------------------------------------------------------------------------- structure


@pytest.mark.parametrize("name", NAMES)
def test_tensor_names_shapes_dtypes(name: str) -> None:
    float_dtype, shapes = EXPECTED[name]
    tensors = load_dir(name)
    assert {k: v[1] for k, v in tensors.items()} == shapes
    for k, (dtype, _, _) in tensors.items():
        assert dtype == {"d2t": "I64", "t2d": "BOOL"}.get(k, float_dtype), k
        if dtype not in ("I64", "BOOL"):
            assert np.isfinite(as_float(tensors[k])).all(), k


@pytest.mark.parametrize("name", ["dflash-zlab-swa", "target-qwen3-sharded"])
def test_index_matches_shards(name: str) -> None:
    d = FIX / name
    index = json.loads((d / "model.safetensors.index.json").read_text())
    shards = sorted(p.name for p in d.glob("*.safetensors"))
    assert shards == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert sorted(set(index["weight_map"].values())) == shards
    total = 0
    for shard in shards:
        part = read_safetensors(d / shard)
        assert sorted(part) == sorted(k for k, v in index["weight_map"].items() if v == shard)
        total += sum(len(raw) for _, _, raw in part.values())
    assert index["metadata"]["total_size"] == total
    # Neither shard is a name-sorted slice: per-file ordering differs from one global sort.
    names_1 = sorted(read_safetensors(d / shards[0]))
    assert any(n < names_1[-1] for n in read_safetensors(d / shards[1]))


def test_draft_configs() -> None:
    for name in ("dspark-qwen3", "dspark-qwen3-interleaved", "dspark-qwen3-f32", "dflash-deepspec"):
        c = config(name)
        assert c["architectures"] == ["Qwen3DSparkModel"] and c["model_type"] == "qwen3"
        assert (c["target_layer_ids"], c["mask_token_id"], c["block_size"], c["num_target_layers"]) == (TAPS, MASK, 7, 6)
        assert c["rope_parameters"] == {"rope_theta": 1000000.0, "rope_type": "default"} and "rope_theta" not in c
        assert c["vocab_size"] == V and c["hidden_size"] == H and c["num_hidden_layers"] == 2
    assert config("dspark-qwen3")["markov_rank"] == 8 and config("dflash-deepspec")["markov_rank"] == 0
    assert "markov_head_type" not in config("dflash-deepspec")
    assert config("dspark-qwen3-interleaved") == {**config("dspark-qwen3"), "rope_is_neox_style": False}
    assert config("dspark-qwen3-f32")["torch_dtype"] == "float32"
    z, swa = config("dflash-zlab"), config("dflash-zlab-swa")
    assert z["dflash_config"] == {"mask_token_id": MASK, "target_layer_ids": TAPS}
    assert (z["block_size"], z["rope_theta"], z["auto_map"]) == (16, 1000000, {"AutoModel": "dflash.DFlashDraftModel"})
    assert (swa["use_sliding_window"], swa["sliding_window"]) == (True, 32)
    assert swa["layer_types"] == ["sliding_attention", "full_attention"]
    sf = config("dspark-specforge")
    assert sf["architectures"] == ["DSparkDraftModel"] and sf["dflash_config"]["projector_type"] == "dspark"
    assert sf["dflash_config"]["markov_rank"] == 32 and sf["dflash_config"]["target_layer_ids"] == TAPS
    for name, vd in (("dspark-speculators", V), ("dspark-reduced", VD)):
        c = config(name)
        assert c["speculators_model_type"] == "dspark" and c["architectures"] == ["DSparkSpeculator"]
        assert c["aux_hidden_state_layer_ids"] == [t + 1 for t in TAPS] and c["draft_vocab_size"] == vd
        assert c["transformer_layer_config"]["vocab_size"] == V and c["mask_token_id"] == MASK


def test_eagle3_configs() -> None:
    for name, arch in (("eagle3-specforge", "LlamaForCausalLMEagle3"), ("eagle3-angelslim", "Eagle3LlamaForCausalLM")):
        c = config(name)
        assert c["architectures"] == [arch] and c["num_hidden_layers"] == 1 and c["draft_vocab_size"] == VD
        assert c["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == TAPS
    sp, nf = config("eagle3-speculators"), config("eagle3-normfc")
    assert sp["eagle_aux_hidden_state_layer_ids"] == [2, 3, 5] and sp["norm_before_residual"] is True
    assert nf["norm_before_fc"] is True and sp["transformer_layer_config"]["num_hidden_layers"] == 1
    ll = config("eagle3-llama")
    assert ll["architectures"] == ["LlamaForCausalLM"] and "head_dim" not in ll
    assert ll["rope_scaling"] == {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                  "original_max_position_embeddings": 8192, "rope_type": "llama3"}


# ----------------------------------------------------------------------------------------- tokenizers


def test_qwen_tokenizer_round_trip_and_mask() -> None:
    import tokenizers  # a runtime dependency: never skipped

    a = tokenizers.Tokenizer.from_file(str(FIX / "target-qwen3" / "tokenizer.json"))
    b = tokenizers.Tokenizer.from_file(str(FIX / "target-qwen3-sharded" / "tokenizer.json"))
    enc = a.encode(SAMPLE)
    assert a.decode(enc.ids, skip_special_tokens=False) == SAMPLE
    assert b.encode(SAMPLE).ids == enc.ids and enc.ids[-1] == MASK
    assert a.get_vocab_size() == TOKENIZER_SIZE and a.token_to_id("<|mask|>") == MASK
    assert a.encode("the weather").tokens == ["the", "Ġw", "eat", "her"]
    raw_a = json.loads((FIX / "target-qwen3" / "tokenizer.json").read_text(encoding="utf-8"))
    raw_b = json.loads((FIX / "target-qwen3-sharded" / "tokenizer.json").read_text(encoding="utf-8"))
    assert raw_a["model"]["merges"][0] == ["Ġ", "Ġ"] and raw_b["model"]["merges"][0] == "Ġ Ġ"
    assert len(raw_a["model"]["vocab"]) == 990 and len(raw_a["model"]["merges"]) == 734
    added = {t["id"]: t for t in raw_a["added_tokens"]}
    assert added[MASK]["content"] == "<|mask|>" and added[MASK]["special"] is True
    assert added[990]["content"] == "<|endoftext|>" and added[1015]["content"] == "</think>"
    tc = json.loads((FIX / "target-qwen3" / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert tc["added_tokens_decoder"][str(MASK)]["special"] is True and tc["bos_token"] is None
    assert (tc["eos_token"], tc["pad_token"], tc["add_bos_token"]) == ("<|im_end|>", "<|endoftext|>", False)
    assert "<|im_start|>assistant" in tc["chat_template"]
    # the mask id is a real special token, below every config vocab_size that pads the tokenizer
    for name in ("dspark-qwen3", "dflash-deepspec", "dspark-speculators", "target-qwen3"):
        assert TOKENIZER_SIZE <= config(name).get("vocab_size", V) == V
    assert config("target-qwen3")["rope_parameters"]["rope_theta"] == 1000000.0
    assert config("target-qwen3-sharded")["rope_theta"] == 1000000 and "rope_parameters" not in config(
        "target-qwen3-sharded")


def test_sentencepiece_round_trip() -> None:
    import sentencepiece as spm  # a runtime dependency: never skipped

    sp = spm.SentencePieceProcessor(model_file=str(FIX / "target-llama2-spm" / "tokenizer.model"))
    assert (sp.get_piece_size(), sp.unk_id(), sp.bos_id(), sp.eos_id()) == (512, 0, 1, 2)
    text = "Hello wörld 🚀 Москва 12345"
    ids = sp.encode(text)
    assert sp.decode(ids) == text
    assert "<0xD0>" in sp.encode("Москва", out_type=str)  # byte fallback for scripts left out of the vocab
    assert config("target-llama2-spm")["vocab_size"] == 512
    tc = json.loads((FIX / "target-llama2-spm" / "tokenizer_config.json").read_text())
    assert (tc["bos_token"], tc["eos_token"], tc["unk_token"], tc["add_bos_token"]) == ("<s>", "</s>", "<unk>", True)


# ------------------------------------------------------------------------------------------- values


def test_vocab_maps() -> None:
    target_lm = load_dir("target-qwen3")["lm_head.weight"][2]
    for name in ("dspark-reduced", "eagle3-specforge", "eagle3-angelslim", "eagle3-speculators", "eagle3-llama"):
        t = load_dir(name)
        d2t = np.frombuffer(t["d2t"][2], "<i8")
        t2d = np.frombuffer(t["t2d"][2], np.uint8)
        used = np.arange(VD) + d2t
        assert (np.diff(used) > 0).all() and used[0] >= 0 and used[-1] < TOKENIZER_SIZE
        assert set(np.unique(t2d)) <= {0, 1} and t2d.sum() == VD and t2d[used].all()
        assert used[:5].tolist() == [7, 8, 11, 12, 13]
    red_lm = np.frombuffer(load_dir("dspark-reduced")["lm_head.weight"][2], "<u2").reshape(VD, H)
    assert (red_lm == np.frombuffer(target_lm, "<u2").reshape(V, H)[used]).all()


def test_stored_copies_equal_the_target() -> None:
    target = load_dir("target-qwen3")
    for name in ("dspark-qwen3", "dflash-deepspec", "dspark-speculators", "dspark-reduced", "eagle3-specforge",
                 "eagle3-speculators"):
        t = load_dir(name)
        assert t["embed_tokens.weight"] == target["model.embed_tokens.weight"], name
        if t["lm_head.weight"][1] == [V, H]:
            assert t["lm_head.weight"] == target["lm_head.weight"], name
    assert load_dir("target-qwen3-sharded") == target


def test_shared_models_share_weights() -> None:
    assert load_dir("dspark-qwen3-interleaved") == load_dir("dspark-qwen3")
    assert load_dir("dflash-zlab-swa") == load_dir("dflash-zlab")
    assert load_dir("eagle3-angelslim").items() <= load_dir("eagle3-specforge").items()
    assert load_dir("eagle3-speculators").items() <= load_dir("eagle3-normfc").items()


def test_f32_variant_rounds_to_the_bf16_one() -> None:
    bf, f32 = load_dir("dspark-qwen3"), load_dir("dspark-qwen3-f32")
    ties = 0
    for name, t in f32.items():
        bits = np.frombuffer(t[2], "<u4").astype(np.int64)
        ties += int(((bits & 0xFFFF) == 0x8000).sum())
        lo, hi = bits >> 16, (bits >> 16) + 1
        x = np.frombuffer(t[2], "<f4").astype(np.float64)
        lo_v = ((lo << 16).astype(np.uint32)).view(np.float32).astype(np.float64)
        hi_v = ((hi << 16).astype(np.uint32)).view(np.float32).astype(np.float64)
        d_lo, d_hi = np.abs(x - lo_v), np.abs(hi_v - x)
        nearest = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(lo % 2 == 0, lo, hi)))
        assert (nearest == np.frombuffer(bf[name][2], "<u2")).all(), name
    assert ties > 1000  # exact half-way cases are present, so round-half-even is exercised


def test_weight_scales_are_sane() -> None:
    t = load_dir("dspark-qwen3")
    assert abs(as_float(t["layers.0.self_attn.q_proj.weight"]).std() - 64**-0.5) < 0.01
    assert abs(as_float(t["layers.0.input_layernorm.weight"]).mean() - 1.0) < 0.05
    assert abs(as_float(t["embed_tokens.weight"]).std() - 1.0) < 0.02
