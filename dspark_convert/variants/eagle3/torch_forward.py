"""The torch side of the ``eagle3`` variant: how an EAGLE-3 Hugging Face folder is read (the
:class:`~dspark_convert.reference.hf_draft.DraftReader` role; the chain forward itself is
``reference.torch_forward.eagle3_forward``). The class list is the torch side's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import ConvertError
from ...reference.hf_draft import HFHParams, TorchCheckpoint

ARCHITECTURES = ("LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "Eagle3Speculator", "Eagle3DraftModel")
#: the words that name these drafts in an error
WHAT = ("EAGLE-3",)


def claims(c: dict[str, Any], common: dict[str, Any]) -> bool:
    """A one-layer draft with its own draft vocabulary, whatever class its config names (``LlamaForCausalLM``)."""
    return "draft_vocab_size" in c and common["n_layer"] == 1


def read_config(folder: Path, arch: str, raw: dict[str, Any], c: dict[str, Any], w: TorchCheckpoint,
                tcfg: dict[str, Any], common: dict[str, Any], notes: list[str]) -> tuple[str, str, str, HFHParams]:
    """An EAGLE-3 draft's config (``midlayer.`` or ``layers.0.`` layer; speculators layout)."""
    layout = "speculators" if arch == "Eagle3Speculator" else "midlayer"
    prefix = next((p for p in ("midlayer.", "layers.0.", "model.layers.0.") if w.has(p + "mlp.down_proj.weight")), "")
    if not prefix:
        raise ConvertError(f"{folder}: no EAGLE-3 layer tensors (midlayer.* or layers.0.*)")
    if w.has(prefix + "self_attn.q_norm.weight") or any(w.has(f"fc_norm.{i}.weight") for i in range(3)):
        raise ConvertError(f"{folder}: q/k-norm (DeepSpec) or fc_norm EAGLE-3 variants are not supported")
    if common["rope"].type not in ("default", "llama3", "linear"):
        raise ConvertError(f"{folder}/config.json: rope type {common['rope'].type!r} is not supported by verify")
    lt = int(tcfg.get("num_hidden_layers", 0))
    target_layers = list(raw.get("eagle_aux_hidden_state_layer_ids") or [2, lt // 2, lt - 3])
    nested = (raw.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    if nested and [int(i) + 1 for i in nested] != target_layers:
        notes.append(f"eagle_config ids {nested} (output-of-layer) are ignored by upstream; target_layers "
                     f"{target_layers} are used instead")
    hp = HFHParams(
        **common, draft_vocab_size=int(c.get("draft_vocab_size") or w.shape("lm_head.weight")[0]),
        target_layers=target_layers, own_embed=w.has("embed_tokens.weight"),
        target_hidden_size=int(raw.get("target_hidden_size") or tcfg.get("hidden_size") or common["n_embd"]),
        norm_before_residual=bool(raw.get("norm_before_residual", False)),
        norm_before_fc=bool(raw.get("norm_before_fc", False)),
    )
    return "eagle3", layout, prefix, hp
