"""``verify`` for DeepSeek-V4 DSpark files: tensor-level proof (the variant has no reference forward).

Every GGUF tensor is compared with the checkpoint (:mod:`.tensors`: the checkpoint's values
dequantized in torch as upstream does, passed through the GGUF type's rounding with gguf-py, must equal the GGUF's
values exactly), and the model keys with the checkpoint's config. The report says plainly that no DeepSeek-V4
reference forward ran. Its ``PROOF`` (:class:`~dspark_convert.verify.rows.TensorChecks`) is how the driver
reaches it.
"""

from __future__ import annotations

from pathlib import Path

from ...hf.checkpoint import Checkpoint
from ...reference.compare import MetadataCheck, OutputCheck
from ...reference.weights import GGUFWeights
from ...roles.proof import Job, Proof, TensorChecks
from .tensors import dsv4_tensor_checks, source_map

#: DeepSeek-V4 DSpark: GGUF key -> the checkpoint config field holding its value (this role's metadata rows);
#: the target layers are the field's layer ids plus one
_DSV4_FIELDS: dict[str, str] = {
    "dflash.embedding_length": "hidden_size",
    "dflash.attention.head_count": "num_attention_heads",
    "dflash.attention.key_length": "head_dim",
    "dflash.rope.dimension_count": "qk_rope_head_dim",
    "dflash.attention.q_lora_rank": "q_lora_rank",
    "dflash.attention.output_group_count": "o_groups",
    "dflash.attention.output_lora_rank": "o_lora_rank",
    "dflash.expert_count": "n_routed_experts",
    "dflash.expert_used_count": "num_experts_per_tok",
    "dflash.expert_feed_forward_length": "moe_intermediate_size",
    "dflash.expert_shared_count": "n_shared_experts",
    "dflash.hyper_connection.count": "hc_mult",
    "dflash.block_size": "dspark_block_size",
    "dflash.target_layers": "dspark_target_layer_ids",
    "tokenizer.ggml.mask_token_id": "dspark_noise_token_id",
}


#: the note every DeepSeek-V4 report carries
NO_FORWARD = ("a DeepSeek-V4 reference forward (mHC, MoE, sparse attention with sinks) is not implemented yet: no "
              "forward outputs are graded; instead every tensor is compared with the checkpoint (its values dequantized "
              "in torch as upstream does, through the GGUF type's rounding, must equal the GGUF's values exactly)")


#: the report's family and layout words
FAMILY = "dspark_dsv4"
LAYOUT = "DeepSeek-V4 (mtp.* inside the checkpoint)"
#: quality mode's note
QUALITY_NOTE = "the GGUF's tensors against the unrounded checkpoint values: max abs is the rounding of the type"


def dsv4_rows(g: GGUFWeights, gguf_path: str | Path, hf_dir: str | Path, *, quality: bool = True) -> Proof:
    """A DeepSeek-V4 DSpark GGUF: every tensor against the checkpoint (see :mod:`.tensors`), and
    the model keys against its config. No forward outputs are graded (the variant has no reference forward).

    Exact mode (the verdict): one row per tensor, the GGUF's values against the checkpoint's after the GGUF
    type's rounding (``max abs`` 0 when they are equal). Quality (information, with ``quality``): the same
    tensors against the unrounded checkpoint values (the Q8_0 / F16 rounding error). Accounting: every GGUF
    tensor compared, the checkpoint's draft tensors (``mtp.*``) compared as their sources.
    """
    ck = Checkpoint(Path(hf_dir), select=lambda n: n.startswith("mtp."))  # the draft's shards only
    rows = Proof(FAMILY, LAYOUT, quality_note=QUALITY_NOTE, notes=[NO_FORWARD])
    try:
        checks, problems = dsv4_tensor_checks(gguf_path, ck)
    finally:
        ck.close()
    for c in checks:
        detail = "" if c.passed else f"{c.mismatches} of {c.elements} values differ; first: {c.first_mismatch}"
        rows.outputs.append(OutputCheck(c.name, c.shape, max_abs=c.max_abs, grade="exact" if c.passed else "differs",
                                        passed=c.passed, detail=detail))
        if quality:
            rows.quality.append(OutputCheck(c.name, c.shape, max_abs=c.max_rounding, grade="rounding of " + c.type))
    rows.outputs += [OutputCheck("tensors", [], grade="missing", passed=False, detail=p) for p in problems]
    names = [n for n in ck.names if n.startswith("mtp.")]
    smap = source_map(names)
    rows.compared({c.name for c in checks}, names, {s for c in checks for s in smap.get(c.name, ())})
    found = {int(n.split(".")[1]) for n in names if n.split(".")[1:2] and n.split(".")[1].isdigit()}
    n_stages = 1 + max(found) if found else 0  # upstream's block_count: 1 + the highest stage
    rows.metadata.append(MetadataCheck.compare("dflash.block_count", g.value("dflash.block_count"), n_stages))
    for key, field in _DSV4_FIELDS.items():
        try:
            expected = ck.config[field]
            if key == "dflash.target_layers":
                expected = [i + 1 for i in expected]
        except (KeyError, TypeError):
            expected = None
        rows.metadata.append(MetadataCheck.compare(key, g.value(key), expected))
    rows.hparams = {"stages": n_stages, "target_layers": g.value("dflash.target_layers")}
    return rows


def _proof(job: Job) -> Proof:
    return dsv4_rows(job.g, job.gguf_path, job.hf_dir, quality=job.quality)


#: verify's role: no forward, every tensor against the checkpoint (any checkpoint folder; no target needed)
PROOF = TensorChecks(_proof)
