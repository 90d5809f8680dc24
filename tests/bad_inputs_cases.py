"""The catalogue of bad inputs behind tests/test_bad_inputs.py and docs/troubleshooting.md.

Each :class:`Case` names a fixture, a corruption applied to a copy of it (and, where needed, to a copy of the
target), the CLI options, and the fragments its one error line must contain. ``{draft}`` / ``{target}`` in a
fragment stand for the copies' paths. A case that enforces a rule of ../shared/spec/gguf-contract.md names its
section (``section="§3.5"``: the validation errors; ``"§3.7"``: files upstream writes that llama.cpp rejects),
and its troubleshooting entry says so.

Example:
    >>> inp = build(CASES["no-config"], tmp_path)  # doctest: +SKIP
    >>> fragments(CASES["no-config"], inp)  # doctest: +SKIP
    ['/tmp/.../draft: no config.json (expected a Hugging Face checkpoint folder)']
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from bad_inputs_kit import (
    DELETE,
    TARGET,
    copy_fixture,
    drop_tensor,
    edit_config,
    get_tensor,
    load_raw,
    read_config,
    read_tensors,
    save_raw,
    set_tensor,
    write_config,
    write_tensors,
)

SHARD1, SHARD2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
INDEX = "model.safetensors.index.json"


@dataclass
class Inputs:
    """The draft copy being corrupted, and the target (the committed fixture unless a case copies it)."""

    tmp: Path
    draft: Path
    target: Path = TARGET

    def own_target(self, name: str = "target-qwen3") -> Path:
        self.target = copy_fixture(self.tmp, name, "target")
        return self.target


@dataclass(frozen=True)
class Case:
    id: str
    fixture: str
    mutate: Callable[[Inputs], None]
    fragments: tuple[str, ...]  # "{draft}" / "{target}" are replaced by the copies' paths
    args: tuple[str, ...]
    section: str = ""  # the gguf-contract.md section whose rule this case checks


CASES: dict[str, Case] = {}


def case(id: str, *fragments: str, fixture: str = "dspark-qwen3", args: tuple[str, ...] = (),
         section: str = "") -> Callable:
    """Register the decorated corruption as case ``id``."""
    def register(fn: Callable[[Inputs], None]) -> Callable[[Inputs], None]:
        assert id not in CASES
        CASES[id] = Case(id, fixture, fn, fragments, args, section)
        return fn
    return register


def config_case(id: str, *fragments: str, edits: dict[str, Any], fixture: str = "dspark-qwen3",
                section: str = "") -> None:
    """Register a case that only sets (or, with DELETE, removes) top-level keys of the draft's config.json."""
    def mutate(inp: Inputs) -> None:
        edit_config(inp.draft, **edits)

    case(id, *fragments, fixture=fixture, section=section)(mutate)


def build(c: Case, tmp: Path) -> Inputs:
    """Copy the case's fixture to ``tmp/draft`` and corrupt it."""
    inp = Inputs(tmp, copy_fixture(tmp, c.fixture, "draft"))
    c.mutate(inp)
    return inp


def fragments(c: Case, inp: Inputs) -> list[str]:
    return [f.format(draft=inp.draft, target=inp.target) for f in c.fragments]


def _set_rows(inp: Inputs, name: str, rows: slice, cols: slice = slice(None)) -> None:
    dtype, arr = get_tensor(inp.draft, name)
    set_tensor(inp.draft, name, dtype, arr[rows, cols])


# ------------------------------------------------------------------------------------------- config.json
@case("no-config", "{draft}: no config.json (expected a Hugging Face checkpoint folder)")
def _(inp: Inputs) -> None:
    (inp.draft / "config.json").unlink()


config_case("unknown-architecture", "{draft}/config.json: architecture 'MyDraftModel' is not a supported draft",
            "known: Qwen3DSparkModel", edits={"architectures": ["MyDraftModel"]})
config_case("no-architectures", "{draft}/config.json: no 'architectures' list", edits={"architectures": DELETE})


@case("malformed-json", "{draft}/config.json: malformed JSON at line 3 column 1")
def _(inp: Inputs) -> None:
    (inp.draft / "config.json").write_text('{\n  "architectures": ["Qwen3DSparkModel"],\n}\n')


@case("config-not-an-object", "{draft}/config.json: expected a JSON object, found list")
def _(inp: Inputs) -> None:
    (inp.draft / "config.json").write_text("[1, 2]")


config_case("config-key-wrong-type", "{draft}/config.json: key 'hidden_size' is '64', expected an integer",
            edits={"hidden_size": "64"})
config_case("config-key-negative", "{draft}/config.json: key 'block_size' is -1, expected a non-negative integer",
            edits={"block_size": -1})
config_case("dflash-config-not-an-object", "{draft}/config.json: key 'dflash_config' is 'x', expected a JSON object",
            fixture="dflash-zlab", edits={"dflash_config": "x"})
config_case("vocab-size-absurd", "{draft}/config.json: key 'vocab_size' is 1000000000000, expected a positive "
            "integer up to 16777216", edits={"vocab_size": 10**12})
config_case("layer-count-mismatch", "{draft}/config.json: num_hidden_layers gives 32 layers (block_count) but the "
            "checkpoint has tensors for layers [0, 1]; expected layers 0..31",
            edits={"num_hidden_layers": DELETE})  # the Qwen3 class default, 32, applies
config_case("target-layer-ids-missing", "{draft}/config.json: 'target_layer_ids' is missing or empty",
            edits={"target_layer_ids": DELETE}, section="§3.7")


# ------------------------------------------------------------------------------------------- safetensors files
@case("truncated-safetensors", "{draft}/model.safetensors: tensor '", "past the end of the file", "truncated download?")
def _(inp: Inputs) -> None:
    f = inp.draft / "model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


@case("no-header-length", "{draft}/model.safetensors: truncated safetensors file (5 bytes, no header length)")
def _(inp: Inputs) -> None:
    f = inp.draft / "model.safetensors"
    f.write_bytes(f.read_bytes()[:5])


@case("git-lfs-pointer", "{draft}/model.safetensors: a Git LFS pointer (131 bytes), not the weights; run 'git lfs pull' "
      "in the clone or download the file again")
def _(inp: Inputs) -> None:
    (inp.draft / "model.safetensors").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:"
                                                 + "0" * 64 + "\nsize 470954\n")


@case("header-longer-than-file", "{draft}/model.safetensors: truncated safetensors file: header claims 1000000 bytes, "
      "file has 92")
def _(inp: Inputs) -> None:
    f = inp.draft / "model.safetensors"
    f.write_bytes(struct.pack("<Q", 1_000_000) + f.read_bytes()[8:100])


@case("header-over-limit", "{draft}/model.safetensors: safetensors header claims 9223372036854775808 bytes, over the "
      "104857600 byte limit")
def _(inp: Inputs) -> None:
    f = inp.draft / "model.safetensors"
    f.write_bytes(struct.pack("<Q", 2**63) + f.read_bytes()[8:])


@case("overlapping-offsets", "{draft}/model.safetensors: tensors 'embed_tokens.weight' and 'lm_head.weight' overlap")
def _(inp: Inputs) -> None:
    f = inp.draft / "model.safetensors"
    st = load_raw(f)
    st.header["lm_head.weight"]["data_offsets"] = list(st.header["embed_tokens.weight"]["data_offsets"])  # same size
    save_raw(f, st)


@case("offsets-disagree-with-shape", "{draft}/model.safetensors: tensor 'fc.weight' spans bytes",
      "but shape [64, 100] BF16 needs 12800")
def _(inp: Inputs) -> None:
    f = inp.draft / "model.safetensors"
    st = load_raw(f)
    st.header["fc.weight"]["shape"] = [64, 100]
    save_raw(f, st)


@case("malformed-header-entry", "{draft}/model.safetensors: tensor 'fc.weight' has a malformed header entry",
      "expected a dtype string, a shape list of integers and data_offsets [start, end]")
def _(inp: Inputs) -> None:
    f = inp.draft / "model.safetensors"
    st = load_raw(f)
    st.header["fc.weight"]["dtype"] = ["BF16"]
    save_raw(f, st)


@case("header-not-utf8", "{draft}/model.safetensors: malformed safetensors header")
def _(inp: Inputs) -> None:
    f = inp.draft / "model.safetensors"
    raw = f.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    f.write_bytes(raw[:8] + b"\xff" * n + raw[8 + n:])


@case("unsupported-dtype", "{draft}/model.safetensors: tensor 'fc.weight' has unsupported dtype F8_E5M2",
      "expected one of F64, F32, F16, BF16")
def _(inp: Inputs) -> None:
    f = inp.draft / "model.safetensors"
    st = load_raw(f)
    st.header["fc.weight"]["dtype"] = "F8_E5M2"
    save_raw(f, st)


@case("zero-tensors", "{draft}: the checkpoint has no tensors (no tensor entries in model.safetensors)")
def _(inp: Inputs) -> None:
    write_tensors(inp.draft / "model.safetensors", {})


@case("no-weight-files", "{draft}: the checkpoint has no tensors (no model*.safetensors or pytorch_model*.bin files)")
def _(inp: Inputs) -> None:
    (inp.draft / "model.safetensors").unlink()


# ------------------------------------------------------------------------------------------- shards and index
@case("index-missing-shard", f"{{draft}}/{INDEX}: shard '{SHARD2}' (holding 'fc.weight') is missing from {{draft}}",
      fixture="dflash-zlab-swa")
def _(inp: Inputs) -> None:
    (inp.draft / SHARD2).unlink()


@case("tensor-in-two-shards", f"{{draft}}: tensor 'layers.0.input_layernorm.weight' is in two shards ({SHARD1} and {SHARD2})",
      fixture="dflash-zlab-swa")
def _(inp: Inputs) -> None:
    first = read_tensors(inp.draft / SHARD1)
    second = read_tensors(inp.draft / SHARD2)
    second["layers.0.input_layernorm.weight"] = first["layers.0.input_layernorm.weight"]
    write_tensors(inp.draft / SHARD2, second)


@case("tensor-in-two-shards-no-index", "{draft}: tensor 'layers.0.input_layernorm.weight' is in two shards",
      fixture="dflash-zlab-swa")
def _(inp: Inputs) -> None:
    (inp.draft / INDEX).unlink()
    first = read_tensors(inp.draft / SHARD1)
    second = read_tensors(inp.draft / SHARD2)
    second["layers.0.input_layernorm.weight"] = first["layers.0.input_layernorm.weight"]
    write_tensors(inp.draft / SHARD2, second)


@case("index-lists-absent-tensor", f"{{draft}}/{INDEX}: tensor 'extra.weight' is listed in shard '{SHARD1}' but no shard holds it",
      fixture="dflash-zlab-swa", section="§3.5")
def _(inp: Inputs) -> None:
    idx = read_config(inp.draft, INDEX)
    idx["weight_map"]["extra.weight"] = SHARD1
    write_config(inp.draft, idx, INDEX)


@case("tensor-missing-from-index", f"{{draft}}/{INDEX}: tensor 'fc.weight' in {SHARD2} is not in the weight_map",
      fixture="dflash-zlab-swa", section="§3.5")
def _(inp: Inputs) -> None:
    idx = read_config(inp.draft, INDEX)
    del idx["weight_map"]["fc.weight"]
    write_config(inp.draft, idx, INDEX)


# ------------------------------------------------------------------------------------------- tensors vs config
@case("missing-layer-tensor", "blk.1.ffn_up.weight: is missing", "has no tensor 'layers.1.mlp.up_proj.weight'", "{draft}")
def _(inp: Inputs) -> None:
    drop_tensor(inp.draft, "layers.1.mlp.up_proj.weight")


@case("fc-width-vs-taps", "fc.weight: has ggml shape [128, 64], expected [192, 64] (ne[0] = 3 target layers x hidden_size 64)",
      "from {draft}/model.safetensors: tensor 'fc.weight'")
def _(inp: Inputs) -> None:
    _set_rows(inp, "fc.weight", slice(None), slice(0, 128))


@case("q-proj-rows-vs-heads", "blk.0.attn_q.weight: has ggml shape [64, 48], expected [64, 64]",
      "num_attention_heads 4 x head_dim 16", "tensor 'layers.0.self_attn.q_proj.weight'")
def _(inp: Inputs) -> None:
    _set_rows(inp, "layers.0.self_attn.q_proj.weight", slice(0, 48))


@case("eagle3-fc-width", "fc.weight: has ggml shape [128, 64], expected [192, 64] (ne[0] = 3 target layers x "
      "target_hidden_size 64)", fixture="eagle3-specforge")
def _(inp: Inputs) -> None:
    _set_rows(inp, "fc.weight", slice(None), slice(0, 128))


@case("integer-dtype", "{draft}/model.safetensors: tensor 'layers.0.mlp.up_proj.weight' has dtype I32, expected a "
      "floating-point type")
def _(inp: Inputs) -> None:
    dtype, arr = get_tensor(inp.draft, "layers.0.mlp.up_proj.weight")
    set_tensor(inp.draft, "layers.0.mlp.up_proj.weight", "I32", arr.astype(np.int32))


@case("boolean-dtype", "{draft}/model.safetensors: tensor 'layers.0.input_layernorm.weight' has dtype BOOL, expected a "
      "floating-point type")
def _(inp: Inputs) -> None:
    dtype, arr = get_tensor(inp.draft, "layers.0.input_layernorm.weight")
    set_tensor(inp.draft, "layers.0.input_layernorm.weight", "BOOL", arr != 0)


@case("markov-w2-missing", "markov_w2.weight: is missing", "has no tensor 'markov_head.markov_w2.weight'")
def _(inp: Inputs) -> None:
    drop_tensor(inp.draft, "markov_head.markov_w2.weight")


@case("markov-rows-vs-vocab", "markov_w1.weight: has ggml shape [8, 1000], expected [8, 1024]", "1024 tokens",
      "tensor 'markov_head.markov_w1.weight'")
def _(inp: Inputs) -> None:
    _set_rows(inp, "markov_head.markov_w1.weight", slice(0, 1000))


# ------------------------------------------------------------------------------------------- d2t
def _edit_d2t(inp: Inputs, fn: Callable[[np.ndarray], np.ndarray], dtype: str | None = None) -> None:
    old_dtype, arr = get_tensor(inp.draft, "d2t")
    set_tensor(inp.draft, "d2t", dtype or old_dtype, fn(arr.copy()))


def _d2t_too_big(a: np.ndarray) -> np.ndarray:
    a[-1] = 5000
    return a


def _d2t_duplicate(a: np.ndarray) -> np.ndarray:
    a[1] = a[0] - 1  # d2t holds offsets: entry 1 then maps to the same token id as entry 0
    return a


@case("d2t-out-of-range", "{draft}/model.safetensors: tensor 'd2t': entry 255 maps to token id 5255, outside the "
      "vocabulary [0, 1024)", fixture="dspark-reduced", section="§3.5")
def _(inp: Inputs) -> None:
    _edit_d2t(inp, _d2t_too_big)


@case("d2t-duplicates", "{draft}/model.safetensors: tensor 'd2t': token id 7 appears 2 times; expected unique ids",
      fixture="dspark-reduced", section="§3.5")
def _(inp: Inputs) -> None:
    _edit_d2t(inp, _d2t_duplicate)


@case("eagle3-d2t-out-of-range", "tensor 'd2t': entry 255 maps to token id 5255, outside the vocabulary [0, 1024)",
      fixture="eagle3-specforge", section="§3.5")
def _(inp: Inputs) -> None:
    _edit_d2t(inp, _d2t_too_big)


@case("eagle3-d2t-boolean", "{draft}/model.safetensors: tensor 'd2t' has dtype BOOL, expected integer offsets",
      fixture="eagle3-specforge")
def _(inp: Inputs) -> None:
    _edit_d2t(inp, lambda a: a > 50, "BOOL")


@case("d2t-length", "{draft}/model.safetensors: tensor 'd2t' has 200 entries, expected draft_vocab_size 256",
      fixture="dspark-reduced", section="§3.5")
def _(inp: Inputs) -> None:
    _edit_d2t(inp, lambda a: a[:200])


@case("reduced-vocab-without-d2t", "{draft}/config.json: draft_vocab_size 256 < vocab_size 1024 but the checkpoint has "
      "no 'd2t' tensor", fixture="dspark-reduced", section="§3.5")
def _(inp: Inputs) -> None:
    drop_tensor(inp.draft, "d2t")


# ------------------------------------------------------------------------------------------- vocabulary, mask
config_case("mask-id-outside-vocab", "{draft}/config.json: mask_token_id is 5000, outside the vocabulary of 1024 "
            "tokens (expected an id in [0, 1024))", edits={"mask_token_id": 5000}, section="§3.7")
config_case("mask-id-negative", "{draft}/config.json: mask_token_id is -3, expected a non-negative integer",
            edits={"mask_token_id": -3})


@case("target-tokenizer-larger-than-draft-vocab", "{target}/tokenizer.json: token id 1016 ('<|mask|>') does not fit "
      "the draft vocab_size 512", section="§3.5")
def _(inp: Inputs) -> None:
    inp.own_target()  # the draft says 512 ids; the target's tokenizer has 1017
    edit_config(inp.draft, vocab_size=512)


@case("self-contained-embedding-rows", "{target}/model.safetensors: tensor 'model.embed_tokens.weight' has 1000 rows "
      "but the draft writes 1024 tokens (expected 1024 rows)", fixture="dflash-zlab", args=("--with-target-embeddings",))
def _(inp: Inputs) -> None:
    dtype, arr = get_tensor(inp.own_target(), "model.embed_tokens.weight")
    set_tensor(inp.target, "model.embed_tokens.weight", dtype, arr[:1000])


@case("eagle3-self-contained-embedding-rows", "{target}/model.safetensors: tensor 'model.embed_tokens.weight' has 1000 "
      "rows but the draft writes 1024 tokens", fixture="eagle3-angelslim", args=("--with-target-embeddings",))
def _(inp: Inputs) -> None:
    dtype, arr = get_tensor(inp.own_target(), "model.embed_tokens.weight")
    set_tensor(inp.target, "model.embed_tokens.weight", dtype, arr[:1000])


@case("self-contained-without-target-embedding", "{target}: no input embedding tensor (model.embed_tokens.weight",
      fixture="dflash-zlab", args=("--with-target-embeddings",))
def _(inp: Inputs) -> None:
    drop_tensor(inp.own_target(), "model.embed_tokens.weight")


@case("no-tokenizer", "{target}: no tokenizer files (expected tokenizer.json or tokenizer.model)")
def _(inp: Inputs) -> None:
    (inp.own_target() / "tokenizer.json").unlink()


@case("target-without-config", "{target}: no config.json (the target model folder needs its config.json")
def _(inp: Inputs) -> None:
    (inp.own_target() / "config.json").unlink()


# ------------------------------------------------------------------------------------------- target layers
@case("tap-beyond-target-layers", "{draft}/config.json: 'target_layer_ids' gives target layer 5 (after the +1 shift), "
      "but the target {target}/config.json has 3 layers (valid: 0..3) (pass --ignore-target-mismatch to convert "
      "anyway)")
def _(inp: Inputs) -> None:
    edit_config(inp.own_target(), num_hidden_layers=3)


config_case("eagle3-tap-beyond-target-layers", "{draft}/config.json: 'eagle_aux_hidden_state_layer_ids' gives target "
            "layer 9, outside the target's 6 layers (valid: 0..6) (pass --ignore-target-mismatch to convert anyway)",
            fixture="eagle3-speculators", edits={"eagle_aux_hidden_state_layer_ids": [2, 3, 9]})


# ------------------------------------------------------------------------------------------- draft/target fit
@case("target-hidden-size", "{draft}/model.safetensors: fc.weight takes 3 target layers x 64 = 192 inputs (a target "
      "of hidden size 64), but {target}/config.json has hidden_size 128 (pass --ignore-target-mismatch to convert "
      "anyway)", fixture="dflash-zlab")
def _(inp: Inputs) -> None:
    edit_config(inp.own_target(), hidden_size=128)


@case("target-vocab-size", "{draft}/config.json: vocab_size 1024, but {target}/config.json has vocab_size 512; the "
      "draft predicts ids of another vocabulary (pass --ignore-target-mismatch to convert anyway)")
def _(inp: Inputs) -> None:
    edit_config(inp.own_target(), vocab_size=512)


@case("target-d2t-beyond-vocab", "{draft}/config.json: d2t maps draft tokens to target id 588, outside the 500 tokens "
      "of {target}/config.json (vocab_size 500) (pass --ignore-target-mismatch to convert anyway)",
      fixture="dspark-reduced")
def _(inp: Inputs) -> None:
    edit_config(inp.own_target(), vocab_size=500)


config_case("unknown-architecture-near-miss", "{draft}/config.json: architecture 'Qwen3DsparkModel' is not a supported "
            "draft", "; closest known name: Qwen3DSparkModel (pass --architecture Qwen3DSparkModel if the checkpoint "
            "has that layout)", edits={"architectures": ["Qwen3DsparkModel"]})


# ------------------------------------------------------------------------------------------- values
def _poison(inp: Inputs, name: str, value: float) -> None:
    dtype, arr = get_tensor(inp.draft, name)
    arr = arr.copy()
    arr[3, 5] = 0x7FC0 if dtype == "BF16" else value  # BF16 is stored as raw bits: 0x7FC0 is a quiet NaN
    set_tensor(inp.draft, name, dtype, arr)


@case("nan-in-weights", "{draft}/model.safetensors: tensor 'layers.0.mlp.up_proj.weight' contains NaN or Inf values "
      "(pass --allow-nonfinite to convert it anyway)")
def _(inp: Inputs) -> None:
    _poison(inp, "layers.0.mlp.up_proj.weight", float("nan"))


@case("inf-in-weights", "{draft}/model.safetensors: tensor 'fc.weight' contains NaN or Inf values",
      fixture="dspark-qwen3-f32")
def _(inp: Inputs) -> None:
    _poison(inp, "fc.weight", float("inf"))


# ------------------------------------------------------------------------------------------- contract §3.5 / §3.7
# (the refusals tests/test_contract_rules.py used to write out by hand)
config_case("markov-head-type-unsupported", "{draft}/config.json: markov_head_type is 'gated'; llama.cpp implements "
            "only 'vanilla'",
            edits={"markov_head_type": "gated"}, section="§3.5")


@case("markov-head-type-unsupported-nested", "{draft}/config.json: markov_head_type is 'rnn'; llama.cpp implements "
      "only 'vanilla'", fixture="dspark-specforge",
      section="§3.5")
def _(inp: Inputs) -> None:
    cfg = read_config(inp.draft)
    cfg["dflash_config"]["markov_head_type"] = "rnn"
    write_config(inp.draft, cfg)


config_case("draft-vocab-larger-than-vocab", "{draft}/config.json: draft_vocab_size 2048 is larger than vocab_size 1024",
            fixture="dspark-speculators", edits={"draft_vocab_size": 2048}, section="§3.5")


@case("eagle3-d2t-negative", "{draft}/model.safetensors: tensor 'd2t': entry 0 maps to token id -1, outside the "
      "vocabulary [0, 1024)", fixture="eagle3-specforge", section="§3.5")
def _(inp: Inputs) -> None:
    _edit_d2t(inp, _d2t_first_negative)


def _d2t_first_negative(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a[0] = -1
    return a


@case("unmappable-tensor", "{draft}/model.safetensors: tensor 'layers.0.mystery.weight' has no GGUF name in the "
      "dflash layout (upstream fails with \"Can not map tensor\")", section="§3.5")
def _(inp: Inputs) -> None:
    set_tensor(inp.draft, "layers.0.mystery.weight", "BF16", np.zeros((4, 4), np.uint16))


@case("d2t-in-dflash-draft-model", "{draft}/model.safetensors: tensor 'd2t' is not part of a DFlashDraftModel "
      "checkpoint (reduced vocabularies are a DSpark/speculators feature)", fixture="dflash-zlab", section="§3.5")
def _(inp: Inputs) -> None:
    set_tensor(inp.draft, "d2t", "I64", np.zeros(16, np.int64))


@case("unsupported-target-architecture", "{target}/config.json: architecture 'TotallyNewForCausalLM' is not "
      "supported as a target (known: DeepseekForCausalLM, ", fixture="dflash-zlab",
      section="§3.5")
def _(inp: Inputs) -> None:
    edit_config(inp.own_target(), architectures=["TotallyNewForCausalLM"])


@case("missing-target-folder", "{target}: no such folder", fixture="dflash-zlab", section="§3.5")
def _(inp: Inputs) -> None:
    inp.target = inp.tmp / "nope"


@case("target-layer-ids-empty", "{draft}/config.json: 'dflash_config.target_layer_ids' is missing or empty; "
      "llama.cpp needs the target layer ids (it fails with \"DFlash model requires 'target_layers'\")", fixture="dflash-zlab", section="§3.7")
def _(inp: Inputs) -> None:
    cfg = read_config(inp.draft)
    cfg["dflash_config"]["target_layer_ids"] = []
    write_config(inp.draft, cfg)


config_case("eagle3-input-norm-without-norm-before-fc", "{draft}/model.safetensors: tensor 'input_norm.weight' is "
            "present but config norm_before_fc is not true; llama.cpp would reject the file (set norm_before_fc: "
            "true if the draft uses it)",
            fixture="eagle3-normfc", edits={"norm_before_fc": DELETE}, section="§3.7")
config_case("eagle3-tap-count", "{draft}/config.json: eagle_aux_hidden_state_layer_ids has 4 entries; llama.cpp "
            "needs exactly 3",
            fixture="eagle3-speculators", edits={"eagle_aux_hidden_state_layer_ids": [1, 2, 3, 4]}, section="§3.7")


@case("attn-sinks-wrong-shape", "the planned file would not load in llama.cpp: blk.0.attn_sinks.weight: has ggml "
      "shape [3], expected [4] (num_attention_heads 4) [shape] (from {draft}/model.safetensors: tensor "
      "'layers.0.self_attn.sinks')", fixture="dflash-zlab", section="§3.7")
def _(inp: Inputs) -> None:  # sinks load since b10705, one per head
    set_tensor(inp.draft, "layers.0.self_attn.sinks", "BF16", np.zeros(3, np.uint16))


@case("extra-tensor-fc-bias", "the planned file would not load in llama.cpp: fc.bias: is not a tensor llama.cpp "
      "creates for this arch (loading fails with \"wrong number of tensors\") [extra-tensor] (from "
      "{draft}/model.safetensors: tensor 'fc.bias')", fixture="dflash-zlab", section="§3.7")
def _(inp: Inputs) -> None:
    set_tensor(inp.draft, "fc.bias", "BF16", np.zeros(64, np.uint16))
