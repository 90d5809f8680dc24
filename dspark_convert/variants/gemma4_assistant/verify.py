"""``verify`` for Gemma 4 assistant files: tensor-level proof (no assistant reference forward yet).

Every GGUF tensor is compared with the checkpoint tensor it comes from (this module's own spelling of the HF ->
GGUF names, apart from the converter's table, so a wrong row there fails here): the checkpoint's values through the
GGUF type's rounding (gguf-py) must equal the GGUF's values exactly. The generated ``rope_freqs`` is compared with
the proportional-RoPE factors the config implies, and the model keys with the config. The report says plainly that
no assistant forward ran. The checkpoint's ``masked_embedding`` tensors are dropped by the variant's rules.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...hf.checkpoint import Checkpoint
from ...reference.compare import OutputCheck, meta_row
from ...reference.storage import round_values
from ...reference.weights import GGUFWeights
from ...roles.proof import Job, Proof, TensorChecks, Tensors

FAMILY = "gemma4_assistant"
LAYOUT = "Gemma 4 assistant (text_config nested)"
NO_FORWARD = ("a Gemma 4 assistant reference forward (Q-only attention into the target's KV cache) is not "
              "implemented yet: no forward outputs are graded; instead every tensor is compared with the checkpoint "
              "(its values through the GGUF type's rounding must equal the GGUF's values exactly)")
QUALITY_NOTE = "the GGUF's tensors against the unrounded checkpoint values: max abs is the rounding of the type"

#: HF layer suffix -> GGUF name after ``blk.{i}.`` (Gemma 4 decoder layer without K/V)
_LAYER = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
          "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.o_proj.weight": "attn_output.weight",
          "post_attention_layernorm.weight": "post_attention_norm.weight",
          "pre_feedforward_layernorm.weight": "ffn_norm.weight",
          "post_feedforward_layernorm.weight": "post_ffw_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
          "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
          "layer_scalar": "layer_output_scale.weight"}
_ROOT = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
         "pre_projection.weight": "nextn.pre_projection.weight",
         "post_projection.weight": "nextn.post_projection.weight"}
_LAYER_RX = re.compile(r"model\.layers\.(\d+)\.(.+)")


@dataclass
class TensorCheck:
    """One GGUF tensor against its checkpoint source: ``max_abs`` from the rounded checkpoint values (0: exact),
    ``max_rounding`` from the unrounded ones."""

    name: str
    type: str
    shape: list[int]
    mismatches: int = 0
    elements: int = 0
    max_abs: float = 0.0
    max_rounding: float = 0.0
    first_mismatch: str = ""

    @property
    def passed(self) -> bool:
        return self.mismatches == 0


def _plain(raw: np.ndarray, dtype: str) -> np.ndarray:
    """BF16 bits / F16 / F32 checkpoint values as float32."""
    if dtype == "BF16":
        return (np.asarray(raw).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(raw).astype(np.float32)


def check_tensor(g: GGUFWeights, ck: Checkpoint, name: str, source: str) -> TensorCheck:
    """GGUF tensor ``name`` (dequantized by gguf-py) against checkpoint tensor ``source`` after the GGUF type's
    rounding: every value equal."""
    qt = g.qtype(name)
    chk = TensorCheck(name, qt.name if qt is not None else "?", list(g.shape(name))[::-1])
    if qt is None:
        chk.mismatches, chk.first_mismatch = 1, "unknown GGML type"
        return chk
    ref = _plain(ck.read(source), ck.ref(source).dtype).reshape(-1)
    got = np.asarray(g.array(name), dtype=np.float32).reshape(-1)
    if got.shape != ref.shape:
        chk.mismatches, chk.first_mismatch = 1, f"{got.size} values, the checkpoint has {ref.size}"
        return chk
    rounded = round_values(ref.reshape(ck.ref(source).shape or (1,)), qt.name).reshape(-1)
    bad = np.flatnonzero(got != rounded)
    chk.elements, chk.mismatches = int(ref.size), int(bad.size)
    if bad.size:
        i = int(bad[0])
        chk.first_mismatch = f"element {i}: GGUF {float(got[i])!r}, checkpoint {float(rounded[i])!r} after rounding"
    chk.max_abs = float(np.max(np.abs(got - rounded))) if ref.size else 0.0
    chk.max_rounding = float(np.max(np.abs(got - ref))) if ref.size else 0.0
    return chk


def source_map(names: list[str]) -> dict[str, str]:
    """GGUF tensor name -> the checkpoint tensor it comes from.

    Example:
        >>> source_map(["model.layers.2.layer_scalar", "post_projection.weight", "masked_embedding.centroids.weight"])
        {'blk.2.layer_output_scale.weight': 'model.layers.2.layer_scalar', 'nextn.post_projection.weight': 'post_projection.weight'}
    """
    out: dict[str, str] = {}
    for n in names:
        m = _LAYER_RX.fullmatch(n)
        if m is not None and m.group(2) in _LAYER:
            out[f"blk.{m.group(1)}.{_LAYER[m.group(2)]}"] = n
        elif n in _ROOT:
            out[_ROOT[n]] = n
    return out


def _text(config: dict[str, Any]) -> dict[str, Any]:
    return {**config, **(config.get("text_config") or {})}


def expected_rope_freqs(c: dict[str, Any]) -> np.ndarray | None:
    """The factors of the full-attention layers' proportional RoPE (1 per rotated pair, 1e30 for the rest)."""
    full = ((c.get("rope_parameters") or {}).get("full_attention") or
            {"rope_type": "proportional", "partial_rotary_factor": 0.25})
    head = c.get("global_head_dim", 512)
    if full.get("rope_type") != "proportional" or not isinstance(head, int):
        return None
    n_rot = int(head * float(full.get("partial_rotary_factor", 0.25)) / 2)
    return np.array([1.0] * n_rot + [1e30] * (head // 2 - n_rot), dtype=np.float32)


def assistant_rows(g: GGUFWeights, gguf_path: str | Path, hf_dir: str | Path, *, quality: bool = True) -> Proof:
    """A Gemma 4 assistant GGUF: every tensor against the checkpoint and the model keys against its config."""
    config = json.loads((Path(hf_dir) / "config.json").read_text())
    c = _text(config)
    ck = Checkpoint(Path(hf_dir), config=config)
    rows = Proof(FAMILY, LAYOUT, quality_note=QUALITY_NOTE, notes=[NO_FORWARD])
    present = [t.name for t in g.file.tensors]
    try:
        smap = source_map(list(ck.names))
        checks: list[TensorCheck] = [check_tensor(g, ck, n, smap[n]) for n in present if n in smap]
        names = list(ck.names)
    finally:
        ck.close()
    problems = [f"GGUF tensor '{n}' has no source in the checkpoint" for n in present
                if n not in smap and n != "rope_freqs.weight"]
    problems += [f"checkpoint tensor '{smap[n]}' is missing from the GGUF (expected '{n}')"
                 for n in smap if n not in set(present)]
    by_name = {chk.name: chk for chk in checks}
    freqs = expected_rope_freqs(c)
    for name in present:  # one row per GGUF tensor, in file order
        if name == "rope_freqs.weight":
            got = np.asarray(g.array(name), dtype=np.float32).reshape(-1)
            ok = freqs is not None and got.shape == freqs.shape and bool(np.array_equal(got, freqs))
            rows.outputs.append(OutputCheck(name, list(got.shape), grade="exact" if ok else "differs", passed=ok,
                                            detail="" if ok else f"expected {None if freqs is None else freqs.tolist()}"))
            continue
        chk = by_name.get(name)
        if chk is None:
            continue
        detail = "" if chk.passed else f"{chk.mismatches} of {chk.elements} values differ; first: {chk.first_mismatch}"
        rows.outputs.append(OutputCheck(chk.name, chk.shape, max_abs=chk.max_abs,
                                        grade="exact" if chk.passed else "differs", passed=chk.passed, detail=detail))
        if quality:
            rows.quality.append(OutputCheck(chk.name, chk.shape, max_abs=chk.max_rounding, grade="rounding of " + chk.type))
    if "rope_freqs.weight" not in present and freqs is not None:
        problems.append("GGUF tensor 'rope_freqs.weight' is missing (proportional RoPE of the full-attention layers)")
    rows.outputs += [OutputCheck("tensors", [], grade="missing", passed=False, detail=p) for p in problems]
    rows.tensors = Tensors(set(), {ch.name for ch in checks} | ({"rope_freqs.weight"} & set(present)), names, set(),
                           {smap[ch.name] for ch in checks})
    a = "gemma4-assistant."
    types = list(c.get("layer_types") or [])
    for key, expected in ((a + "block_count", c.get("num_hidden_layers")),
                          (a + "embedding_length", c.get("hidden_size")),
                          (a + "embedding_length_out", config.get("backbone_hidden_size")),
                          (a + "nextn_predict_layers", c.get("num_hidden_layers")),
                          (a + "attention.head_count", c.get("num_attention_heads")),
                          (a + "attention.key_length_swa", c.get("head_dim")),
                          (a + "attention.sliding_window_pattern",
                           [t == "sliding_attention" for t in types[:-1]] + [False] if types else None)):
        rows.metadata.append(meta_row(key, g.value(key), expected))
    rows.hparams = {"layers": c.get("num_hidden_layers"), "backbone": config.get("backbone_hidden_size")}
    return rows


def _proof(job: Job) -> Proof:
    return assistant_rows(job.g, job.gguf_path, job.hf_dir, quality=job.quality)


#: verify's role: every tensor against the checkpoint (no target needed)
PROOF = TensorChecks(_proof)
