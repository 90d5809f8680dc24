"""DFlash drafts (z-lab ``DFlashDraftModel``): arch ``dflash``, contract §2.2, §3.2, §4.1.

The DSpark family (``dspark.py``) extends this one, as upstream's DSparkModel extends DFlashModel.
"""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from .. import schema as S
from ..check import Finding
from ..errors import ConvertError
from ..plan import KV, Plan, TensorSpec
from ..tokenizer.handlers import target_vocab_kvs, vocab_handler_for_target
from .common import (
    Context,
    _int,
    base_kvs,
    check_vocab_size,
    finish_plan,
    gguf_name,
    is_skipped,
    normalize_hparams,
    resolve_outtype,
    tensor_spec,
)

ARCHITECTURES = ("DFlashDraftModel",)


def bare_name(hf_name: str) -> str:
    """HF name without the ``model.`` / ``language_model.`` prefixes (upstream adds ``model.`` then maps)."""
    name = hf_name.replace("language_model.", "")
    return name[len("model."):] if name.startswith("model.") else name


def target_layers(ids: Any, where: str, key: str) -> list[int]:
    """HF output-of-layer ids -> llama.cpp input-of-layer ids: the +1 rule (§5.1)."""
    if not isinstance(ids, list) or not ids:
        raise ConvertError(f"{where}: '{key}' is missing or empty; llama.cpp needs the target layer ids "
                           "(it fails with \"DFlash model requires 'target_layers'\")")
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ConvertError(f"{where}: '{key}' is {ids!r}, expected a list of integers")
    return [i + 1 for i in ids]


def check_taps(taps: list[int], ctx: Context, key: str) -> None:
    """Written (input-of-layer) ids must lie in [0, n_target_layers]: llama.cpp taps layer inputs (§5.1). A tap
    beyond the target is a fit error (``target-layers``), recorded in ``ctx.findings``."""
    n = ctx.target_config.get("num_hidden_layers")
    if isinstance(n, int):
        bad = [t for t in taps if t < 0 or t > n]
        if bad:
            ctx.findings.append(Finding("error", key, "target-layers", f"{ctx.where}: '{key}' gives target layer {bad[0]} "
                                        f"(after the +1 shift), but the target {ctx.target_dir / 'config.json'} has {n} "
                                        f"layers (valid: 0..{n})"))


def dflash_config(hp: dict[str, Any], where: str) -> dict[str, Any]:
    """The ``dflash_config`` sub-dict (empty when absent); anything but a JSON object is refused."""
    dc = hp.get("dflash_config")
    if dc is None:
        return {}
    if not isinstance(dc, dict):
        raise ConvertError(f"{where}: key 'dflash_config' is {dc!r}, expected a JSON object")
    return dc


def dflash_kvs(hp: dict[str, Any], taps: list[int], where: str = "config.json") -> list[KV]:
    """§2.2: block_size, target_layers, then the sliding-window keys when the config enables them."""
    block = hp.get("block_size")
    if block is not None and (_int(block, "block_size", where) == 0):
        raise ConvertError(f"{where}: key 'block_size' is 0, expected a positive integer")
    out = [KV(S.DFLASH_BLOCK_SIZE, VT.UINT32, S.DFLASH_DEFAULT_BLOCK_SIZE if block is None else block),
           KV(S.DFLASH_TARGET_LAYERS, VT.ARRAY, taps, VT.INT32)]
    if hp.get("use_sliding_window") and hp.get("sliding_window") and hp.get("layer_types"):
        out.append(KV(S.DFLASH_SLIDING_WINDOW, VT.UINT32, _int(hp["sliding_window"], "sliding_window", where)))
        out.append(KV(S.DFLASH_SLIDING_WINDOW_PATTERN, VT.ARRAY,
                      [t == "sliding_attention" for t in hp["layer_types"]], VT.BOOL))
    return out


def vocab_kvs(ctx: Context, hp: dict[str, Any], mask_id: Any) -> tuple[list[KV], list[KV]]:
    """The target's tokenizer (handler chosen by the target's architecture, §2.5.1) and the draft mask id."""
    check_vocab_size(hp.get("vocab_size"), "vocab_size", ctx.where)
    vocab = target_vocab_kvs(ctx.target_dir, hp.get("vocab_size"), vocab_handler_for_target(ctx.target_dir))
    tail: list[KV] = []
    if mask_id is not None:
        if isinstance(mask_id, bool) or not isinstance(mask_id, int) or mask_id < 0:
            raise ConvertError(f"{ctx.where}: mask_token_id is {mask_id!r}, expected a non-negative integer")
        n_tokens = len(next((kv.value for kv in vocab if kv.name == S.TOKENIZER_TOKENS), []))
        if n_tokens and mask_id >= n_tokens:  # llama.cpp would drop it ("bad special token") and fill blocks with -1
            raise ConvertError(f"{ctx.where}: mask_token_id is {mask_id}, outside the vocabulary of {n_tokens} tokens "
                               f"(expected an id in [0, {n_tokens}))")
        tail.append(KV(S.TOKENIZER_MASK_ID, VT.UINT32, mask_id))
    return vocab, tail


def map_tensors(ctx: Context, out: QT, *, drop: Set[str] = frozenset(), transforms: dict[str, tuple[str, tuple[int, ...]]] | None = None) -> tuple[list[TensorSpec], str | None]:
    """Every checkpoint tensor in conversion order, mapped to its GGUF name; returns (tensors, d2t source name).

    ``drop`` holds bare HF names the family removes; ``transforms`` maps bare names to (transform, args).
    """
    specs: list[TensorSpec] = []
    d2t = None
    for hf in ctx.draft.names:
        bare = bare_name(hf)
        if is_skipped("model." + bare) or bare in drop:
            continue
        if bare == "d2t":
            d2t = hf
            continue
        name = gguf_name(bare)
        if name is None or name == S.T_D2T:
            raise ConvertError(f"{ctx.draft.ref(hf).file}: tensor '{hf}' has no GGUF name in the dflash layout "
                               "(upstream fails with \"Can not map tensor\")")
        t, args = (transforms or {}).get(bare, (None, ()))
        specs.append(tensor_spec(ctx.draft, hf, name, out, transform=t, transform_args=args))
    return specs, d2t


def build_plan(ctx: Context) -> Plan:
    """Plan for a z-lab DFlash draft: ``dflash_config`` only, never permuted, no d2t (§3.2, §4.1)."""
    hp = normalize_hparams(ctx.draft.config, ctx.where)
    outtype = resolve_outtype(ctx.options.outtype, ctx.draft)
    out, file_type = S.OUTTYPES[outtype]
    dc = dflash_config(hp, ctx.where)
    taps = target_layers(dc.get("target_layer_ids"), ctx.where, "dflash_config.target_layer_ids")
    check_taps(taps, ctx, "dflash_config.target_layer_ids")
    drop = {"embed_tokens.weight"} if hp.get("has_embed_tokens") is False else set()
    for hf in ctx.draft.names:
        if bare_name(hf) in ("d2t", "t2d"):
            raise ConvertError(f"{ctx.draft.ref(hf).file}: tensor '{hf}' is not part of a DFlashDraftModel checkpoint "
                               "(reduced vocabularies are a DSpark/speculators feature)")
    tensors, _ = map_tensors(ctx, out, drop=drop)
    vocab, tail = vocab_kvs(ctx, hp, dc.get("mask_token_id"))
    return finish_plan(S.ARCH_DFLASH, [], base_kvs(S.ARCH_DFLASH, hp, file_type, ctx.where), dflash_kvs(hp, taps, ctx.where),
                       vocab, tail, tensors, [f"outtype {outtype}"])
