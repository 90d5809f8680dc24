"""The DFlash-lineage base: what every family writing arch ``dflash`` shares (contract §2.2, §4.1, §5.1).

Not a family itself (``families/__init__.py`` does not list it): ``dflash.py`` (z-lab DFlash) and
``dspark.py`` (DSpark, DFlash plus Markov / confidence heads) compose these helpers, as upstream's
``DSparkModel`` extends ``DFlashModel``. A new ``dflash``-arch family (a DSpark on another backbone, a draft
stored inside a target checkpoint) starts here: the name table, the target-layer rule, the ``dflash.*`` keys,
the tokenizer step and the tensor walk.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from .. import schema as S
from ..check import Finding
from ..errors import ConvertError
from ..hf.checkpoint import EMBED_NAMES, OUTPUT_NAMES, Select
from ..plan import KV, Plan, TensorSpec
from ..tokenizer.handlers import target_vocab_kvs, vocab_handler_for_target
from ..transforms import Transform
from .base import Context, TargetFacts, TargetTensor
from .common import BACKBONE_GLOBALS, BACKBONE_LAYER, NameTable, is_skipped, tensor_spec
from .hparams import as_u32

#: HF -> GGUF names of the DFlash lineage (§4.1, §4.2): a Qwen3 layer (the shared backbone) plus the DFlash / DSpark
#: globals. Names that map but that the loader never creates (sinks, biases, fc.bias) are written and then refused
#: by check (§7.5).
NAMES = NameTable(
    layer=BACKBONE_LAYER,
    globals={
        **BACKBONE_GLOBALS,
        "fc.weight": S.T_FC,
        "fc.bias": S.T_FC_BIAS,
        "hidden_norm.weight": S.T_ENC_NORM,  # the context norm
        "markov_head.markov_w1.weight": S.T_MARKOV_W1,
        "markov_head.markov_w2.weight": S.T_MARKOV_W2,
        "confidence_head.proj.weight": S.T_CONF_W,
        "confidence_head.proj.bias": S.T_CONF_B,
        "d2t": S.T_D2T,
    },
    mask_embedding=frozenset({"mask_embedding", "mask_embedding.weight"}),  # DeepSpec's learned mask vector
)

#: a self-contained dflash draft takes the input embedding and, unless it has its own or a reduced vocabulary
#: (d2t), the output head (tied targets: the embedding) from the target (§3.6)
TARGET_TENSORS: tuple[TargetTensor, ...] = (
    TargetTensor(S.T_TOKEN_EMBD, EMBED_NAMES, unless=(S.T_TOKEN_EMBD,), what="input embedding tensor",
                 shown=EMBED_NAMES[:2]),
    TargetTensor(S.T_OUTPUT, OUTPUT_NAMES + EMBED_NAMES, unless=(S.T_OUTPUT, S.T_D2T), what="output head",
                 shown=OUTPUT_NAMES[:1]),
)


#: the tokenizer always comes from --target-model-dir; --dspark is not for these drafts
TOKENIZER_IN_CHECKPOINT = False
DSPARK_FLAG = False


# ---------------------------------------------------------------------------------------------- family contract
def claims(config: dict[str, Any], tensor_names: list[str]) -> bool:
    """The lineage's families are chosen by architecture only."""
    return False


def draft_tensors(config: dict[str, Any]) -> Select | None:
    """A DFlash / DSpark checkpoint is the draft: every tensor is read."""
    return None


def hf_names(gguf_name: str) -> tuple[str, ...]:
    return NAMES.hf_names(gguf_name)


def target_facts(ctx: Context, plan: Plan) -> TargetFacts:
    """The fit facts of a ``dflash``-arch file: ``fc`` takes one target hidden state per target layer, the draft
    shares the target's rope, and a learned mask embedding is dropped."""
    taps = plan.value(S.DFLASH_TARGET_LAYERS)
    return TargetFacts(n_taps=len(taps) if isinstance(taps, list) and taps else None, shares_rope=True,
                       mask_embedding=tuple(n for n in ctx.draft.names if bare_name(n) in NAMES.mask_embedding))


def bare_name(hf_name: str) -> str:
    """HF name without the ``model.`` / ``language_model.`` prefixes (upstream adds ``model.`` then maps)."""
    name = hf_name.replace("language_model.", "")
    return name[len("model."):] if name.startswith("model.") else name


# ---------------------------------------------------------------------------------------------- keys
def target_taps(ctx: Context, ids: Any, key: str) -> list[int]:
    """The ``dflash.target_layers`` of the HF output-of-layer ids under config key ``key``: llama.cpp's
    input-of-layer ids (the +1 rule, §5.1), refused when missing or not integers.

    Written ids must lie in [0, n_target_layers] (llama.cpp taps layer inputs): a tap beyond the target is a fit
    error (``target-layers``), recorded in ``ctx.findings``, not raised.
    """
    if not isinstance(ids, list) or not ids:
        raise ConvertError(f"{ctx.where}: '{key}' is missing or empty; llama.cpp needs the target layer ids "
                           "(it fails with \"DFlash model requires 'target_layers'\")")
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ConvertError(f"{ctx.where}: '{key}' is {ids!r}, expected a list of integers")
    taps = [i + 1 for i in ids]
    n = ctx.target_config.get("num_hidden_layers")
    if isinstance(n, int):
        bad = [t for t in taps if t < 0 or t > n]
        if bad:
            ctx.findings.append(Finding("error", key, "target-layers", f"{ctx.where}: '{key}' gives target layer {bad[0]} "
                                        f"(after the +1 shift), but the target {ctx.target_dir / 'config.json'} has {n} "
                                        f"layers (valid: 0..{n})"))
    return taps


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
    if block is not None and (as_u32(block, "block_size", where) == 0):
        raise ConvertError(f"{where}: key 'block_size' is 0, expected a positive integer")
    out = [KV(S.DFLASH_BLOCK_SIZE, VT.UINT32, S.DFLASH_DEFAULT_BLOCK_SIZE if block is None else block),
           KV(S.DFLASH_TARGET_LAYERS, VT.ARRAY, taps, VT.INT32)]
    if hp.get("use_sliding_window") and hp.get("sliding_window") and hp.get("layer_types"):
        out.append(KV(S.DFLASH_SLIDING_WINDOW, VT.UINT32, as_u32(hp["sliding_window"], "sliding_window", where)))
        out.append(KV(S.DFLASH_SLIDING_WINDOW_PATTERN, VT.ARRAY,
                      [t == "sliding_attention" for t in hp["layer_types"]], VT.BOOL))
    return out


def vocab_kvs(ctx: Context, vocab_size: int | None, mask_id: Any) -> tuple[list[KV], list[KV]]:
    """The target's tokenizer (handler chosen by the target's architecture, §2.5.1), padded to the draft's
    (already checked) ``vocab_size``, and the draft mask id."""
    vocab = target_vocab_kvs(ctx.target_dir, vocab_size, vocab_handler_for_target(ctx.target_dir),
                             cache=ctx.options.tokenizer_cache)
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


# ---------------------------------------------------------------------------------------------- tensors
def map_tensors(ctx: Context, out: QT, *, drop: Set[str] = frozenset(),
                transforms: Mapping[str, Transform] | None = None) -> tuple[list[TensorSpec], str | None]:
    """Every checkpoint tensor in conversion order, mapped to its GGUF name; returns (tensors, d2t source name).

    ``drop`` holds bare HF names the family removes; ``transforms`` maps bare names to row transforms.
    """
    specs: list[TensorSpec] = []
    d2t = None
    for hf in ctx.draft.names:
        bare = bare_name(hf)
        if is_skipped("model." + bare) or bare in drop or bare in NAMES.mask_embedding:
            continue
        if bare == "d2t":
            d2t = hf
            continue
        name = NAMES.gguf_name(bare)
        if name is None or name == S.T_D2T:
            raise ConvertError(f"{ctx.draft.ref(hf).file}: tensor '{hf}' has no GGUF name in the dflash layout "
                               "(upstream fails with \"Can not map tensor\")")
        specs.append(tensor_spec(ctx.draft, hf, name, out, transform=(transforms or {}).get(bare)))
    return specs, d2t
