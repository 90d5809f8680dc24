"""The catalogue of bad inputs behind tests/reliability/test_bad_inputs.py and docs/troubleshooting.md.

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

import dataclasses
import os
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
    #: another command line than ``hf2gguf DRAFT -t TARGET -o OUT``: its arguments, with {draft} / {target} / {out}
    command: tuple[str, ...] | None = None
    code: int = 2  # the exit code
    #: run in a subprocess under an address-space limit (:data:`BOUND_AS_BYTES`) and a hang guard
    #: (:data:`BOUND_SECONDS`): the hostile inputs of issue 25 (2-5) whose failure mode is memory or a hang
    bounded: bool = False


CASES: dict[str, Case] = {}


#: the address-space limit (RLIMIT_AS) of a bounded case's process: a plain conversion of a fixture peaks at
#: about 1.3 GiB of address space (numpy, threads' stacks, mappings); a hostile input that grows memory fails it
BOUND_AS_BYTES = 3 << 30
#: the hang guard of a bounded case (not a timing assertion: every case ends in 2-4 s; a hang never ends)
BOUND_SECONDS = 120


def case(id: str, *fragments: str, fixture: str = "dspark-qwen3", args: tuple[str, ...] = (),
         section: str = "", command: tuple[str, ...] | None = None, code: int = 2,
         bounded: bool = False) -> Callable:
    """Register the decorated corruption as case ``id``."""
    def register(fn: Callable[[Inputs], None]) -> Callable[[Inputs], None]:
        assert id not in CASES
        CASES[id] = Case(id, fixture, fn, fragments, args, section, command, code, bounded)
        return fn
    return register


def argv(c: Case, inp: Inputs, out_dir: Path) -> list[str]:
    """The case's command line (without the program name)."""
    if c.command is None:
        return ["hf2gguf", str(inp.draft), "-t", str(inp.target), "-o", str(out_dir / "draft.gguf"), *c.args]
    return [a.format(draft=inp.draft, target=inp.target, out=out_dir / "draft.gguf") for a in c.command]


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


@case("header-longer-than-file", "{draft}/model.safetensors: truncated safetensors file: header claims 976.6 KiB (1,000,000 bytes), "
      "the file has 92 bytes after its length field")
def _(inp: Inputs) -> None:
    f = inp.draft / "model.safetensors"
    f.write_bytes(struct.pack("<Q", 1_000_000) + f.read_bytes()[8:100])


@case("header-over-limit", "{draft}/model.safetensors: safetensors header claims 8.0 EiB (9,223,372,036,854,775,808 bytes), "
      "over the limit of 100.0 MiB (104,857,600 bytes)")
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
      "but shape [64, 100] BF16 needs 12.5 KiB (12,800 bytes)")
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
# (the refusals tests/check/test_contract_rules.py used to write out by hand)
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


@case("unsupported-target-architecture", "{target}/config.json: architecture 'TotallyNewForCausalLM' is not a text "
      "architecture llama.cpp b11434 registers, so it cannot be a draft's target", fixture="dflash-zlab",
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


@case("attn-sinks-shape", "the planned file would not load in llama.cpp: blk.0.attn_sinks.weight: has ggml shape [3], "
      "expected [4] (num_attention_heads 4) [shape] (from {draft}/model.safetensors: tensor 'layers.0.self_attn.sinks')",
      fixture="dflash-zlab", section="§3.7")
def _(inp: Inputs) -> None:  # b11434's loader takes optional sinks {n_head}; one per head, not 3
    set_tensor(inp.draft, "layers.0.self_attn.sinks", "BF16", np.zeros(3, np.uint16))


@case("extra-tensor-fc-bias", "the planned file would not load in llama.cpp: fc.bias: is not a tensor llama.cpp "
      "creates for this arch (loading fails with \"wrong number of tensors\") [extra-tensor] (from "
      "{draft}/model.safetensors: tensor 'fc.bias')", fixture="dflash-zlab", section="§3.7")
def _(inp: Inputs) -> None:
    set_tensor(inp.draft, "fc.bias", "BF16", np.zeros(64, np.uint16))


# ---------------------------------------------------------------------------------------------- DFlash2 (issue 22)
def _dflash2_config(inp: Inputs, **dc: Any) -> None:
    cfg = read_config(inp.draft)
    for k, v in dc.items():
        if v is DELETE:
            cfg["dflash_config"].pop(k)
        else:
            cfg["dflash_config"][k] = v
    write_config(inp.draft, cfg)


@case("dflash2-missing-conv-key", "{draft}/config.json: dflash_config has no 'conv_group_size'; a DFlash2DraftModel "
      "needs conv_kernel_size, conv_group_size, selector_rank and selector_top_k", fixture="dflash2-zlab")
def _(inp: Inputs) -> None:
    _dflash2_config(inp, conv_group_size=DELETE)


@case("dflash2-group-not-divisor", "{draft}/config.json: hidden_size 64 is not a multiple of "
      "dflash_config.conv_group_size 24", fixture="dflash2-zlab")
def _(inp: Inputs) -> None:
    _dflash2_config(inp, conv_group_size=24)


@case("dflash2-top-k-too-large", "{draft}/config.json: hidden_size 64 is below selector_top_k x (selector_top_k + 1) "
      "= 72", fixture="dflash2-zlab")
def _(inp: Inputs) -> None:
    _dflash2_config(inp, selector_top_k=8)


@case("dflash2-zero-rank", "{draft}/config.json: key 'dflash_config.selector_rank' is 0, expected a positive integer",
      fixture="dflash2-zlab")
def _(inp: Inputs) -> None:
    _dflash2_config(inp, selector_rank=0)


@case("dflash2-d2t", "{draft}/model.safetensors: tensor 'd2t' is not allowed in a DFlash2DraftModel checkpoint",
      fixture="dflash2-zlab")
def _(inp: Inputs) -> None:
    set_tensor(inp.draft, "d2t", "I64", np.zeros(1024, np.int64))


@case("dflash2-codebook-shape", "{draft}/model.safetensors: tensor 'candidate_selector.predecessor_codebook' has shape "
      "[1024, 7], expected [1024, 8]", fixture="dflash2-zlab")
def _(inp: Inputs) -> None:
    set_tensor(inp.draft, "candidate_selector.predecessor_codebook", "BF16", np.zeros((1024, 7), np.uint16))


@case("dflash2-missing-base-kernel", "{draft}: tensor 'layers.1.mlp_conv.base_kernel' is missing; llama.cpp's DFlash2 "
      "loader requires blk.1.ffn_conv_base", fixture="dflash2-zlab")
def _(inp: Inputs) -> None:
    drop_tensor(inp.draft, "layers.1.mlp_conv.base_kernel")


# ---------------------------------------------------------------------------------------------- Gemma4 DSpark (issue 22)
def _gemma4(inp: Inputs, drop: tuple[str, ...] = (), **config: Any) -> None:
    """Replace the fixture copy by the small Gemma4 DSpark variant of tests/gemma4_drafts.py (and its own Gemma 4
    target), then set (DELETE: remove) top-level config keys and drop tensors."""
    import shutil

    from gemma4_drafts import make

    shutil.rmtree(inp.draft)
    made, target = make(inp.tmp, "v-gemma4-tied")
    made.rename(inp.draft)
    inp.target = target
    if config:
        edit_config(inp.draft, **config)
    for name in drop:
        drop_tensor(inp.draft, name)


@case("gemma4-k-not-v", "{draft}/config.json: attention_k_eq_v is False, expected true")
def _(inp: Inputs) -> None:
    _gemma4(inp, attention_k_eq_v=False)


@case("gemma4-sliding-layers", "{draft}/config.json: layer_types is ['sliding_attention'], expected ['full_attention'] x "
      "num_hidden_layers (1)")
def _(inp: Inputs) -> None:
    _gemma4(inp, layer_types=["sliding_attention"])


@case("gemma4-activation", "{draft}/config.json: hidden_activation is 'silu', expected 'gelu_pytorch_tanh'")
def _(inp: Inputs) -> None:
    _gemma4(inp, hidden_activation="silu")


@case("gemma4-attention-bias", "{draft}/config.json: attention_bias is True, expected false")
def _(inp: Inputs) -> None:
    _gemma4(inp, attention_bias=True)


@case("gemma4-moe", "{draft}/config.json: enable_moe_block is True, expected false")
def _(inp: Inputs) -> None:
    _gemma4(inp, enable_moe_block=True)


@case("gemma4-reduced-vocab", "{draft}/config.json: draft_vocab_size is 100, expected vocab_size 302")
def _(inp: Inputs) -> None:
    _gemma4(inp, draft_vocab_size=100)


@case("gemma4-no-lm-head", "{draft}/config.json: the checkpoint has no 'lm_head.weight' and tie_word_embeddings is "
      "False; expected the tensor, or tie_word_embeddings true")
def _(inp: Inputs) -> None:
    _gemma4(inp, tie_word_embeddings=False)


@case("gemma4-markov-type", "{draft}/config.json: markov_head_type is 'gated', expected 'vanilla'")
def _(inp: Inputs) -> None:
    _gemma4(inp, markov_head_type="gated")


@case("gemma4-rope-type", "{draft}/config.json: rope_parameters rope_type is 'yarn', expected 'default' or "
      "'proportional'")
def _(inp: Inputs) -> None:
    _gemma4(inp, rope_parameters={"full_attention": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6}})


@case("gemma4-no-mask-id", "{draft}/config.json: mask_token_id is missing (expected in dflash_config or at the top "
      "level)")
def _(inp: Inputs) -> None:
    _gemma4(inp, mask_token_id=DELETE)


@case("gemma4-no-target-layers", "{draft}/config.json: target_layer_ids is missing or empty")
def _(inp: Inputs) -> None:
    _gemma4(inp, target_layer_ids=[])


@case("gemma4-softcapping", "{draft}/config.json: final_logit_softcapping is 30.0, expected null")
def _(inp: Inputs) -> None:
    _gemma4(inp, final_logit_softcapping=30.0)


@case("gemma4-rotary-odd", "{draft}/config.json: rope_parameters.partial_rotary_factor 0.3 x global_head_dim 8 is not "
      "a positive even number of rotated dimensions")
def _(inp: Inputs) -> None:
    _gemma4(inp, rope_parameters={"rope_type": "proportional", "partial_rotary_factor": 0.3})


@case("gemma4-unmapped-tensor", "{draft}/model.safetensors: tensor 'layers.0.per_layer_projection.weight' has no GGUF "
      "name in the Gemma4 DSpark layout")
def _(inp: Inputs) -> None:
    _gemma4(inp)
    set_tensor(inp.draft, "layers.0.per_layer_projection.weight", "BF16", np.zeros((8, 64), np.uint16))


# ---------------------------------------------------------------------------------------------- MiMo mask_embedding.pt
def _mask_pt(inp: Inputs, obj: Any) -> None:
    import torch

    torch.save(obj, inp.draft / "mask_embedding.pt")


def _mask_obj(mask_id: Any = 1016, shape: tuple[int, ...] = (64,)) -> dict[str, Any]:
    import torch

    return {"mask_token_id": mask_id, "embedding": torch.ones(shape)}


@case("mimo-mask-id-mismatch", "{draft}/mask_embedding.pt: mask_token_id is 7, but {draft}/config.json has "
      "dflash_config.mask_token_id 1016 (they must be equal)", fixture="dflash-zlab")
def _(inp: Inputs) -> None:
    _mask_pt(inp, _mask_obj(mask_id=7))


@case("mimo-mask-shape", "{draft}/mask_embedding.pt: 'embedding' has shape [63], expected [64] (hidden_size)",
      fixture="dflash-zlab")
def _(inp: Inputs) -> None:
    _mask_pt(inp, _mask_obj(shape=(63,)))


@case("mimo-mask-2d", "{draft}/mask_embedding.pt: 'embedding' is a 2-D float32 tensor, expected a dict of "
      "'mask_token_id' (an integer) and 'embedding' (a 1-D float tensor)", fixture="dflash-zlab")
def _(inp: Inputs) -> None:
    _mask_pt(inp, _mask_obj(shape=(1, 64)))


@case("mimo-mask-extra-key", "{draft}/mask_embedding.pt: holds a dict with keys ['embedding', 'mask_token_id', "
      "'step'], expected a dict of 'mask_token_id' (an integer) and 'embedding' (a 1-D float tensor)",
      fixture="dflash-zlab")
def _(inp: Inputs) -> None:
    _mask_pt(inp, {**_mask_obj(), "step": 3})


@case("mimo-mask-not-a-dict", "{draft}/mask_embedding.pt: holds a Tensor, expected a dict of 'mask_token_id'",
      fixture="dflash-zlab")
def _(inp: Inputs) -> None:
    import torch

    _mask_pt(inp, torch.ones(64))


@case("mimo-mask-float-id", "{draft}/mask_embedding.pt: 'mask_token_id' is 1016.0, expected a dict of",
      fixture="dflash-zlab")
def _(inp: Inputs) -> None:
    _mask_pt(inp, _mask_obj(mask_id=1016.0))


@case("mimo-mask-hostile-pickle", "{draft}/mask_embedding.pt: refused to load: it references 'posix.system', which is "
      "not a tensor type; only plain tensor state dicts are read (torch.load with weights_only=True) and nothing in "
      "the file was run", fixture="dflash-zlab")
def _(inp: Inputs) -> None:
    import pickle
    import zipfile

    class Evil:
        def __reduce__(self) -> tuple[Any, ...]:
            import os

            return (os.system, ("touch /tmp/pwned-by-mask-embedding",))

    with zipfile.ZipFile(inp.draft / "mask_embedding.pt", "w") as z:  # torch's zip layout, a hostile data.pkl
        z.writestr("archive/data.pkl", pickle.dumps(Evil(), protocol=2))
        z.writestr("archive/version", "3\n")


@case("mimo-mask-outside-vocab", "{draft}/mask_embedding.pt: mask_token_id 5000 is outside the vocabulary of 1024 "
      "tokens", fixture="dflash-zlab")
def _(inp: Inputs) -> None:
    edit_config(inp.draft, dflash_config={"mask_token_id": 5000, "target_layer_ids": [1, 2, 4]})
    _mask_pt(inp, _mask_obj(mask_id=5000))


@case("mimo-mask-nonfinite", "{draft}/mask_embedding.pt: 'embedding' holds non-finite values", fixture="dflash-zlab")
def _(inp: Inputs) -> None:
    import torch

    _mask_pt(inp, {"mask_token_id": 1016, "embedding": torch.full((64,), float("nan"))})


@case("mimo-mask-int-embedding", "{draft}/mask_embedding.pt: 'embedding' is a 1-D int64 tensor, expected a dict of "
      "'mask_token_id' (an integer) and 'embedding' (a 1-D float tensor)", fixture="dflash-zlab")
def _(inp: Inputs) -> None:
    import torch

    _mask_pt(inp, {"mask_token_id": 1016, "embedding": torch.ones(64, dtype=torch.int64)})


class _EvalPayload:
    """A legacy (non-zip) pickle whose load would call ``eval`` on code that creates ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (eval, (f"open({str(self.marker)!r}, 'w').close()",))


@case("mimo-mask-eval-pickle", "{draft}/mask_embedding.pt: refused to load: it references 'eval', which is not a "
      "tensor type; only plain tensor state dicts are read (torch.load with weights_only=True) and nothing in the "
      "file was run", fixture="dflash-zlab")
def _(inp: Inputs) -> None:
    import pickle

    (inp.draft / "mask_embedding.pt").write_bytes(pickle.dumps(_EvalPayload(inp.tmp / "ran"), protocol=2))


@case("mimo-missing-index", "{draft}: the checkpoint has no tensors (found dflash_draft_model.safetensors, but only "
      "model*.safetensors are read without a model.safetensors.index.json that names the weights files)",
      fixture="dflash-zlab")
def _(inp: Inputs) -> None:
    (inp.draft / "model.safetensors").rename(inp.draft / "dflash_draft_model.safetensors")  # MiMo's name, no index
    _mask_pt(inp, _mask_obj())


@case("mimo-target-no-head", "{target}: no tensor 'lm_head.weight'; mask_embedding.pt needs the target's output head",
      fixture="dflash-zlab")
def _(inp: Inputs) -> None:
    drop_tensor(inp.own_target(), "lm_head.weight")
    _mask_pt(inp, _mask_obj())


# ------------------------------------------------------------------------------------------- special files (issue 25.5)
# Only regular files are read, everywhere: a FIFO would block the read forever and /dev/zero never ends. Each of
# these hung (or read to MemoryError) before; each is one line now, checked before the file is opened.
NOT_REGULAR = "not a regular file; only regular files are read"


def _fifo(p: Path) -> None:
    if p.exists():
        p.unlink()
    p.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(p)


def _to_dev_zero(p: Path) -> None:
    if p.exists():
        p.unlink()
    p.symlink_to("/dev/zero")


@case("fifo-stray-safetensors", f"{{draft}}/model-extra.safetensors: is a FIFO (named pipe), {NOT_REGULAR}",
      bounded=True)
def _(inp: Inputs) -> None:
    _fifo(inp.draft / "model-extra.safetensors")  # beside good weights


@case("fifo-shard-in-index", f"{{draft}}/{SHARD2}: is a FIFO (named pipe), {NOT_REGULAR}", fixture="dflash-zlab-swa",
      bounded=True)
def _(inp: Inputs) -> None:
    _fifo(inp.draft / SHARD2)


@case("dev-zero-pytorch-bin", f"{{draft}}/pytorch_model.bin: is a character device (a symlink to /dev/zero), "
      f"{NOT_REGULAR}", bounded=True)
def _(inp: Inputs) -> None:
    (inp.draft / "model.safetensors").unlink()
    _to_dev_zero(inp.draft / "pytorch_model.bin")


@case("fifo-pytorch-bin", f"{{draft}}/pytorch_model.bin: is a FIFO (named pipe), {NOT_REGULAR}", bounded=True)
def _(inp: Inputs) -> None:
    (inp.draft / "model.safetensors").unlink()
    _fifo(inp.draft / "pytorch_model.bin")


@case("fifo-config", f"{{draft}}/config.json: is a FIFO (named pipe), {NOT_REGULAR}", bounded=True)
def _(inp: Inputs) -> None:
    _fifo(inp.draft / "config.json")


@case("fifo-readme", f"{{draft}}/README.md: is a FIFO (named pipe), {NOT_REGULAR}", bounded=True)
def _(inp: Inputs) -> None:
    _fifo(inp.draft / "README.md")


@case("dev-zero-target-merges", f"{{target}}/merges.txt: is a character device (a symlink to /dev/zero), {NOT_REGULAR}",
      bounded=True)
def _(inp: Inputs) -> None:
    _to_dev_zero(inp.own_target() / "merges.txt")


@case("fifo-target-tokenizer-config", f"{{target}}/tokenizer_config.json: is a FIFO (named pipe), {NOT_REGULAR}",
      bounded=True)
def _(inp: Inputs) -> None:
    _fifo(inp.own_target() / "tokenizer_config.json")


@case("fifo-target-tokenizer-model", f"{{target}}/tokenizer.model: is a FIFO (named pipe), {NOT_REGULAR}",
      bounded=True)
def _(inp: Inputs) -> None:
    _fifo(inp.own_target() / "tokenizer.model")


@case("fifo-target-chat-template", f"{{target}}/chat_template.jinja: is a FIFO (named pipe), {NOT_REGULAR}",
      bounded=True)
def _(inp: Inputs) -> None:
    _fifo(inp.own_target() / "chat_template.jinja")


@case("dev-zero-target-added-tokens", f"{{target}}/added_tokens.json: is a character device (a symlink to /dev/zero), "
      f"{NOT_REGULAR}", bounded=True)
def _(inp: Inputs) -> None:
    _to_dev_zero(inp.own_target() / "added_tokens.json")


@case("fifo-target-additional-template", f"{{target}}/additional_chat_templates/tool_use.jinja: is a FIFO (named "
      f"pipe), {NOT_REGULAR}", bounded=True)
def _(inp: Inputs) -> None:
    _fifo(inp.own_target() / "additional_chat_templates" / "tool_use.jinja")


@case("inspect-fifo-gguf", f"{{draft}}/draft.gguf: is a FIFO (named pipe), {NOT_REGULAR}",
      command=("inspect", "{draft}/draft.gguf"), bounded=True)
def _(inp: Inputs) -> None:
    _fifo(inp.draft / "draft.gguf")


# ------------------------------------------------------------------------------------------- model card (issue 25.2)
# README.md's YAML front matter is read for general.* metadata (Hub drafts fetch it too). A few hundred bytes of
# nested aliases expand to 9**10 values: the read is bounded in size, aliases, expanded values and depth.
CARD_EXPANDS = ("{draft}/README.md: the YAML front matter expands to more than 100000 values (nested aliases?); "
                "expected a plain model card")


def _laughs(key: str) -> str:
    """Nested aliases, 10 levels x 9 (a "billion laughs"), referenced from ``key``."""
    lines = ["---", 'l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    lines += [f"{key}: *l9", "---", "# a model card", ""]
    return "\n".join(lines)


for _key in ("license", "tags", "model_name", "base_model", "datasets"):
    def _card(inp: Inputs, key: str = _key) -> None:
        (inp.draft / "README.md").write_text(_laughs(key), encoding="utf-8")
    case(f"card-alias-bomb-{_key.replace('_', '-')}", CARD_EXPANDS, bounded=True)(_card)


@case("card-too-many-aliases", "{draft}/README.md: the YAML front matter uses more than 1000 aliases (*name); "
      "expected a plain model card", bounded=True)
def _(inp: Inputs) -> None:
    (inp.draft / "README.md").write_text("---\nx: &x 1\ntags: [" + ", ".join(["*x"] * 1001) + "]\n---\n")


@case("card-too-deep", "{draft}/README.md: the YAML front matter is nested more than 100 levels deep; expected a "
      "plain model card", bounded=True)
def _(inp: Inputs) -> None:
    (inp.draft / "README.md").write_text("---\ntags: " + "[" * 150 + "]" * 150 + "\n---\n")


@case("card-nested-past-recursion", "{draft}/README.md: the YAML front matter is nested too deeply; expected a plain "
      "model card", bounded=True)
def _(inp: Inputs) -> None:
    (inp.draft / "README.md").write_text("---\ntags: " + "[" * 5000 + "]" * 5000 + "\n---\n")


@case("card-front-matter-too-long", "{draft}/README.md: the YAML front matter is longer than the limit of 1.0 MiB (1,048,576 bytes) "
      "(no closing '---' line within it)", bounded=True)
def _(inp: Inputs) -> None:
    (inp.draft / "README.md").write_text("---\n" + "tags:\n" + "- t\n" * 400_000)


@case("card-value-shown-bounded", "README.md / --metadata: 'general.name' is [[[...], [...], [...], [...], ...], "
      "[[...], [...], [...], [...], ...], [[...], [...], [...], [...], ...], [[...], [...], [...], [...], ...], ...], "
      "expected a string", bounded=True)
def _(inp: Inputs) -> None:  # within the bounds (9**4 values), but its repr is never printed whole
    lines = ["---", 'l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]',
             "l1: &l1 [" + ", ".join(["*l0"] * 9) + "]", "l2: &l2 [" + ", ".join(["*l1"] * 9) + "]",
             "model_name: *l2", "---", ""]
    (inp.draft / "README.md").write_text("\n".join(lines))


# ------------------------------------------------------------------------------------------- index and JSON (25.7, 25.12)
for _value, _shown, _id in ((5, "5", "int"), (None, "null", "null"), (["x"], '["x"]', "list")):
    def _bad_map(inp: Inputs, value: Any = _value) -> None:
        idx = read_config(inp.draft, INDEX)
        idx["weight_map"]["fc.weight"] = value
        write_config(inp.draft, idx, INDEX)
    case(f"index-weight-map-value-{_id}",
         f"{{draft}}/{INDEX}: weight_map['fc.weight'] is {_shown}, expected a shard file name (a string)",
         fixture="dflash-zlab-swa")(_bad_map)


@case("index-shard-outside-folder", f"{{draft}}/{INDEX}: shard '../../etc/passwd' (holding 'fc.weight') is outside "
      "the checkpoint folder {draft}; expected a file name inside it", fixture="dflash-zlab-swa")
def _(inp: Inputs) -> None:
    idx = read_config(inp.draft, INDEX)
    idx["weight_map"]["fc.weight"] = "../../etc/passwd"
    write_config(inp.draft, idx, INDEX)


@case("index-shard-symlink-outside", f"{{draft}}/{INDEX}: shard 'model-00003-of-00003.safetensors' (holding "
      "'fc.weight') is outside the checkpoint folder {draft}; expected a file name inside it", fixture="dflash-zlab-swa")
def _(inp: Inputs) -> None:
    (inp.draft / "model-00003-of-00003.safetensors").symlink_to("/etc/passwd")
    idx = read_config(inp.draft, INDEX)
    idx["weight_map"]["fc.weight"] = "model-00003-of-00003.safetensors"
    write_config(inp.draft, idx, INDEX)


@case("dev-zero-shard", f"{{draft}}/model.safetensors: is a character device (a symlink to /dev/zero), {NOT_REGULAR}",
      bounded=True)
def _(inp: Inputs) -> None:
    _to_dev_zero(inp.draft / "model.safetensors")


@case("config-nested-3000-deep", "{draft}/config.json: JSON nested too deeply (arrays or objects inside each other "
      "past the interpreter's recursion limit); expected a flat configuration")
def _(inp: Inputs) -> None:
    cfg = (inp.draft / "config.json").read_text()
    (inp.draft / "config.json").write_text(cfg.rstrip().rstrip("}") + ', "x": ' + "[" * 3000 + "]" * 3000 + "}")


@case("index-nested-3000-deep", f"{{draft}}/{INDEX}: JSON nested too deeply (arrays or objects inside each other "
      "past the interpreter's recursion limit); expected a flat configuration", fixture="dflash-zlab-swa")
def _(inp: Inputs) -> None:
    (inp.draft / INDEX).write_text('{"weight_map": ' + "[" * 3000 + "]" * 3000 + "}")


config_case("architecture-name-elided", "{draft}/config.json: architecture '" + "A" * 120 + "... (9999880 more "
            "characters)' is not a supported draft", edits={"architectures": ["A" * 10_000_000]})


# ------------------------------------------------------------------------------------------- counts (issue 25.6)
config_case("layer-count-absurd", "{draft}/config.json: num_hidden_layers gives 4000000000 layers (block_count) but "
            "the checkpoint has tensors for layers [0, 1]; expected layers 0..3999999999",
            edits={"num_hidden_layers": 4_000_000_000})
CASES["layer-count-absurd"] = dataclasses.replace(CASES["layer-count-absurd"], bounded=True)


@case("layer-count-absurd-dry-run", "{draft}/config.json: num_hidden_layers gives 4000000000 layers (block_count) but "
      "the checkpoint has tensors for layers [0, 1]; expected layers 0..3999999999", args=("--dry-run",), bounded=True)
def _(inp: Inputs) -> None:
    edit_config(inp.draft, num_hidden_layers=4_000_000_000)


# ------------------------------------------------------------------------------------------- hyperparameter values (25.8)
_PLANNED = "the planned file would not load in llama.cpp: "
config_case("head-count-zero", _PLANNED + "dflash.attention.head_count: is 0, expected a positive integer (the head "
            "size is embedding_length / head_count; llama.cpp divides or sizes tensors by it) [hparam-value]",
            edits={"num_attention_heads": 0}, section="§3.7")
config_case("key-length-zero", _PLANNED + "dflash.attention.key_length: is 0, expected a positive integer (the K "
            "projection has head_count x key_length rows; llama.cpp divides or sizes tensors by it) [hparam-value]",
            edits={"head_dim": 0}, section="§3.7")
config_case("kv-head-count-zero", _PLANNED + "dflash.attention.head_count_kv: is 0, expected a positive integer (the "
            "GQA ratio is head_count / head_count_kv; llama.cpp divides or sizes tensors by it) [hparam-value]",
            edits={"num_key_value_heads": 0}, section="§3.7")
config_case("rms-eps-nan", _PLANNED + "dflash.attention.layer_norm_rms_epsilon: is nan, expected a finite positive "
            "number (RMS norm divides by sqrt(mean(x^2) + eps)) [hparam-value]", edits={"rms_norm_eps": float("nan")},
            section="§3.7")
config_case("rms-eps-negative", _PLANNED + "dflash.attention.layer_norm_rms_epsilon: is -1.0, expected a finite "
            "positive number (RMS norm divides by sqrt(mean(x^2) + eps)) [hparam-value]", edits={"rms_norm_eps": -1},
            section="§3.7")


# ------------------------------------------------------------------------------------------- tokenizer.json sizes (25.4)
def _edit_tokenizer(inp: Inputs, fn: Callable[[dict[str, Any]], None]) -> None:
    import json

    p = inp.own_target() / "tokenizer.json"
    data = json.loads(p.read_text(encoding="utf-8"))
    fn(data)
    p.write_text(json.dumps(data), encoding="utf-8")


@case("target-added-token-50mb", "{target}/tokenizer.json: added token 0 (id 990) is 50000000 characters long, over "
      "the 65536 character limit; expected a short special token", bounded=True)
def _(inp: Inputs) -> None:
    _edit_tokenizer(inp, lambda d: d["added_tokens"][0].__setitem__("content", "x" * 50_000_000))


@case("target-normalizer-amplifies", "{target}/tokenizer.json: the normalizer holds a string of 1000000 characters, "
      "over the 1024 character limit (a rule that long multiplies the text it is applied to); expected a real "
      "tokenizer", bounded=True)
def _(inp: Inputs) -> None:
    _edit_tokenizer(inp, lambda d: d.__setitem__("normalizer", {"type": "Replace", "pattern": {"String": " "},
                                                                "content": " " * 1_000_000}))


# ------------------------------------------------------------------------------------------- GGUF header claims (25.3)
# Work and memory are bounded by what the header claims, before anything is looped over: each of these files is
# real (every KV, tensor info or element present), tens of MB, and used to cost gigabytes.
def _raw_gguf(inp: Inputs, kvs: list[bytes] = (), tensors: list[bytes] = ()) -> None:  # type: ignore[assignment]
    from gguf_samples import raw_gguf

    (inp.draft / "h.gguf").write_bytes(raw_gguf(list(kvs), list(tensors)))


@case("gguf-one-million-kvs", "{draft}/h.gguf: header at byte 16: claims 1,000,000 KVs, over the limit of 65,536 (a real "
      "GGUF has far fewer; set DSPARK_CONVERT_GGUF_MAX_KVS to raise it)", command=("inspect", "{draft}/h.gguf"),
      bounded=True)
def _(inp: Inputs) -> None:
    from gguf_samples import kv_u32

    _raw_gguf(inp, [kv_u32(f"k{i}", i) for i in range(1_000_000)])


@case("gguf-300k-tensors", "{draft}/h.gguf: header at byte 8: claims 300,000 tensors, over the limit of 100,000 (a real "
      "GGUF has far fewer; set DSPARK_CONVERT_GGUF_MAX_TENSORS to raise it)", command=("inspect", "{draft}/h.gguf"),
      bounded=True)
def _(inp: Inputs) -> None:
    from gguf_samples import tinfo

    _raw_gguf(inp, tensors=[tinfo(f"t{i}", [1], 0, 32 * i) for i in range(300_000)])


@case("gguf-20m-element-array", "{draft}/h.gguf: ", "array of 20,000,000 UINT8, over the limit of 16,777,216 elements (a "
      "real GGUF's largest array is its vocabulary; set DSPARK_CONVERT_GGUF_MAX_ARRAY to raise it)",
      command=("check", "{draft}/h.gguf"), bounded=True)
def _(inp: Inputs) -> None:
    import struct

    from gguf_samples import kv_raw

    payload = struct.pack("<IQ", 0, 20_000_000) + bytes(20_000_000)  # UINT8 elements
    _raw_gguf(inp, [kv_raw("big.array", 9, payload)])
