"""The torch side of the ``eagle3`` variant (the contract of :mod:`dspark_convert.roles.proof`): how an EAGLE-3
Hugging Face folder is read (:func:`open`, :func:`read_config`; :func:`claims` for a config that names a plain
Llama class), the GGUF tensor each of its tensors becomes (:func:`counterpart`) and its chain forward
(:func:`forward`, :func:`eagle3_forward`) on the shared primitives of ``reference.layers_torch``. The class list is
the torch side's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...errors import ConvertError, clip_value
from ...hf.values import as_u32
from ...reference.hf_draft import HFDraft, HFHParams, TorchCheckpoint, open_draft
from ...reference.layers_torch import Weights, apply_rope, attend, inv_freq, mlp_residual, rms
from ...reference.storage import gguf_counterpart
from ...roles.proof import Inputs

ARCHITECTURES = ("LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "Eagle3Speculator", "Eagle3DraftModel")


def claims(c: dict[str, Any]) -> bool:
    """A one-layer draft with its own draft vocabulary, whatever class its config names (``LlamaForCausalLM``)."""
    layers = c.get("num_hidden_layers")
    return "draft_vocab_size" in c and isinstance(layers, int) and not isinstance(layers, bool) and layers == 1


def open(hf_dir: Path, target_dir: Path | None, storage: Mapping[str, str] | None) -> HFDraft[Eagle3HFHParams]:
    """The checkpoint (its weights rounded as ``storage`` says) and the target's weights."""
    return open_draft(hf_dir, Path(str(target_dir)), read_config, storage)


#: EAGLE-3's own rows over the backbone's (this side's own spelling, for the storage rounding only): the layer's
#: norm of the target hidden states; the context projection and its input norm
_LAYER_GGUF = {"hidden_norm.weight": "attn_norm_2.weight"}
_GLOBAL_GGUF = {"fc.weight": "fc.weight", "input_norm.weight": "enc.output_norm.weight"}


def counterpart(name: str) -> str | None:
    """The GGUF tensor that stores checkpoint tensor ``name`` (the backbone's table with EAGLE-3's rows; the one
    layer is ``blk.0``)."""
    return gguf_counterpart(name, "midlayer.", layer=_LAYER_GGUF, top=_GLOBAL_GGUF)


def forward(d: HFDraft[Eagle3HFHParams], inputs: Inputs, tokens: list[np.ndarray],
            forced: list[TorchEagle3] | None) -> list[TorchEagle3]:
    """:func:`eagle3_forward` on the cases, ``inputs.steps`` chained steps (``forced``: the chain follows those
    results' tokens)."""
    return eagle3_forward(d, inputs.feats, tokens, inputs.steps, None if forced is None else [r.tokens for r in forced])


@dataclass(frozen=True)
class Eagle3HFHParams(HFHParams):
    """An EAGLE-3 draft's hyperparameters: the common ones plus its config's EAGLE-3 fields."""

    target_hidden_size: int = 0
    norm_before_residual: bool = False
    norm_before_fc: bool = False


def read_config(folder: Path, arch: str, raw: dict[str, Any], c: dict[str, Any], w: TorchCheckpoint,
                tcfg: dict[str, Any], common: dict[str, Any], notes: list[str]) -> tuple[str, str, str, Eagle3HFHParams]:
    """An EAGLE-3 draft's config (``midlayer.`` or ``layers.0.`` layer; speculators layout)."""
    layout = "speculators" if arch == "Eagle3Speculator" else "midlayer"
    prefix = next((p for p in ("midlayer.", "layers.0.", "model.layers.0.") if w.has(p + "mlp.down_proj.weight")), "")
    if not prefix:
        raise ConvertError(f"{folder}: no EAGLE-3 layer tensors (midlayer.* or layers.0.*)")
    if w.has(prefix + "self_attn.q_norm.weight") or any(w.has(f"fc_norm.{i}.weight") for i in range(3)):
        raise ConvertError(f"{folder}: q/k-norm (DeepSpec) or fc_norm EAGLE-3 variants are not supported")
    if common["rope"].type not in ("default", "llama3", "linear"):
        raise ConvertError(f"{folder}/config.json: rope type {common['rope'].type!r} is not supported by verify")
    where = f"{folder}/config.json"
    lt = as_u32(tcfg.get("num_hidden_layers", 0), "num_hidden_layers", "the target's config.json")
    ids = raw.get("eagle_aux_hidden_state_layer_ids") or [2, lt // 2, lt - 3]
    if not isinstance(ids, list):
        raise ConvertError(f"{where}: key 'eagle_aux_hidden_state_layer_ids' is {clip_value(ids)}, expected a list")
    target_layers = list(ids)
    eagle_config = raw.get("eagle_config") or {}
    if not isinstance(eagle_config, dict):
        raise ConvertError(f"{folder}/config.json: key 'eagle_config' is {clip_value(eagle_config)}, expected a JSON "
                           "object")
    nested = eagle_config.get("eagle_aux_hidden_state_layer_ids")
    if isinstance(nested, list) and nested and [as_u32(i, "eagle_config.eagle_aux_hidden_state_layer_ids", where) + 1
                                               for i in nested] != target_layers:
        notes.append(f"eagle_config ids {nested} (output-of-layer) are ignored by upstream; target_layers "
                     f"{target_layers} are used instead")
    hp = Eagle3HFHParams(
        **common, draft_vocab_size=as_u32(c.get("draft_vocab_size") or w.shape("lm_head.weight")[0], "draft_vocab_size",
                                          where),
        target_layers=target_layers, own_embed=w.has("embed_tokens.weight"),
        target_hidden_size=as_u32(raw.get("target_hidden_size") or tcfg.get("hidden_size") or common["n_embd"],
                                  "target_hidden_size", where),
        norm_before_residual=bool(raw.get("norm_before_residual", False)),
        norm_before_fc=bool(raw.get("norm_before_fc", False)),
    )
    return "eagle3", layout, prefix, hp


# ============================================================================================== EAGLE-3
@dataclass
class TorchEagle3:
    """Reference outputs of an EAGLE-3 prefill and chain."""

    fc: np.ndarray
    prefill_hidden: np.ndarray
    prefill_logits: np.ndarray
    step_hidden: np.ndarray
    logits: np.ndarray
    tokens: np.ndarray


def eagle3_layer(d: HFDraft, L: Weights, h: torch.Tensor, ids: list[int]) -> torch.Tensor:
    """Layer 0 over every position so far (a full causal recompute, no cache): ``z = [norm(emb); norm(h)]``."""
    hp, p, eps = d.hp, d.prefix, d.hp.eps
    N, nh, nkv, hd = h.shape[0], hp.n_head, hp.n_head_kv, hp.head_dim
    hn = rms(h, L[p + "hidden_norm.weight"], eps)
    z = torch.cat([rms(d.token_embeddings(ids), L[p + "input_layernorm.weight"], eps), hn], 1)
    q = (z @ L[p + "self_attn.q_proj.weight"].T).view(N, nh, hd).transpose(0, 1)
    k = (z @ L[p + "self_attn.k_proj.weight"].T).view(N, nkv, hd).transpose(0, 1)
    v = (z @ L[p + "self_attn.v_proj.weight"].T).view(N, nkv, hd).transpose(0, 1)
    pos, freqs = torch.arange(N), inv_freq(hp)
    q, k = apply_rope(q, pos, freqs, True), apply_rope(k, pos, freqs, True)
    attn = attend(q, k, v, torch.ones(N, N).tril().bool()) @ L[p + "self_attn.o_proj.weight"].T
    mid = (hn if hp.norm_before_residual else h) + attn
    return mlp_residual(L, p, mid, eps)


@torch.no_grad()
def eagle3_forward(d: HFDraft, features: Sequence[np.ndarray], tokens: Sequence[np.ndarray], steps: int,
                   forced_tokens: Sequence[np.ndarray | None] | None = None) -> list[TorchEagle3]:
    """EAGLE-3 (checkpoints.md §4.4), per case: fc over the 3 taps, one Llama layer on ``[norm(emb); norm(h)]``,
    causal over the draft's own positions, logits over the draft vocab at every position, then chained steps
    feeding back the pre-norm hidden."""
    with d.threads():
        forced = forced_tokens or [None] * len(features)
        return [_eagle3_case(d, f, t, steps, ft) for f, t, ft in zip(features, tokens, forced, strict=True)]


def _eagle3_case(d: HFDraft, features: np.ndarray, tokens: np.ndarray, steps: int,
                 forced: np.ndarray | None) -> TorchEagle3:
    hp, w = d.hp, d.weights
    L = d.decoder_layer(d.prefix)
    g = torch.from_numpy(np.asarray(features, dtype=np.float32))
    if hp.norm_before_fc:
        g = rms(g, w.get("input_norm.weight"), hp.eps)
    h_in, ids = g @ w.get("fc.weight").T, [int(t) for t in tokens]
    fc = h_in.clone()
    to_target_ids = d.to_target(True)
    norm_w = w.get("norm.weight")
    out = eagle3_layer(d, L, h_in, ids)
    prefill, prefill_logits = out.clone(), d.output_logits(rms(out, norm_w, hp.eps), True)
    logits: list[torch.Tensor] = []
    chosen: list[int] = []
    for s in range(steps):
        if s == 0:
            zs = prefill_logits[-1]
        else:
            nxt = chosen[-1] if forced is None else int(forced[s - 1])
            h_in, ids = torch.cat([h_in, out[-1:]]), ids + [nxt]
            out = eagle3_layer(d, L, h_in, ids)
            zs = d.output_logits(rms(out[-1:], norm_w, hp.eps), True)[0]
        logits.append(zs)
        chosen.append(to_target_ids(int(zs.argmax())))
    T = features.shape[0]
    return TorchEagle3(fc.numpy(), prefill.numpy(), prefill_logits.numpy(), out[T:].numpy(),
                       torch.stack(logits).numpy(), np.array(chosen, dtype=np.int64))
