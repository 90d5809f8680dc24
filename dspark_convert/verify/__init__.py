"""``dspark-convert verify``: prove a conversion numerically, component by component, and check its metadata.

Two independent forwards run on the same seeded inputs (several cases: context lengths ``context // 4``,
``context`` and ``4 * context``, each with its own features and anchor / tokens): the torch forward of the
ORIGINAL Hugging Face folder and the numpy forward of the GGUF file: each GGUF variant's ``torch_forward`` /
``numpy_forward``, run by the proof driver :mod:`.rows` as the variant's ``verify`` role states (``PROOF``, found
through :mod:`dspark_convert.registry`; this driver names no family and calls every variant the same way).

- **Exact mode (the verdict).** The torch side first rounds every checkpoint tensor exactly as the GGUF stores it
  (its GGML type: BF16/F16 round-to-nearest-even, Q8_0 and other block types through gguf-py's reference
  quantizer), then computes in float32. Both sides then hold the same weights, so every compared quantity must
  agree to float32 round-off: NMSE below :data:`EXACT_NMSE` at every outtype. Each quantity is its own row, in
  forward order (context projection, each layer's output, ..., the heads; or fc output, prefill, each chained
  step), and the report names the first one that diverges.
- **Quality mode (information).** The same GGUF forward against the torch forward of the *unrounded* weights: what
  the storage type cost (NMSE graded with upstream's words, top-1 agreement over every position of every case).
  It never changes the verdict.

See ``docs/verify.md``.

Example:
    >>> r = verify("draft.gguf", "draft_qwen3_4b", "Qwen3-4B")  # doctest: +SKIP
    >>> r.passed, r.first_divergence                                    # doctest: +SKIP
    (True, None)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConvertError
from ..reference.compare import EXACT_NMSE, MetadataCheck, OutputCheck
from ..reference.weights import open_gguf
from ..registry import Variant, gguf_variant
from ..roles.proof import Job, Tensors
from .accounting import ROW as ACCOUNTING_ROW
from .accounting import account_for
from .rows import accepts, checkpoint_prover, prove, prover

SCHEMA_VERSION = 2

#: where to look when a component is the first to diverge (GGUF tensors and keys that feed it)
LOOK_AT = {
    "context projection": "fc.weight (tap column order), enc.output_norm.weight, the features' tap order",
    "block input (embeddings)": "token_embd.weight (or the target's embeddings), tokenizer.ggml.mask_token_id, block_size",
    "layer": "blk.{layer}.* (norm weights, q/k/v/o rows and RoPE pairing, MLP), rope.freq_base / scaling, mask id",
    "block hidden (post-norm)": "output_norm.weight",
    "block logits": "output.weight / token_embd.weight (or the target's lm_head), block_size, sample_from_anchor",
    "Markov bias W2 W1[prev]": "markov_w1.weight, markov_w2.weight",
    "Markov-biased logits": "markov_w1.weight, markov_w2.weight",
    "chosen tokens": "d2t",
    "confidence (logit)": "conf_proj.weight (input order [H; W1]), conf_proj.bias",
    "fc output": "fc.weight (tap column order), enc.output_norm.weight (norm_before_fc)",
    "prefill": "blk.0.* (attn_norm / attn_norm_2, q/k row permutation, RoPE), token_embd, norm_before_residual",
    "prefill logits": "output_norm.weight, output.weight",
    "step": "the chain at later positions: RoPE (rope.freq_base, rope_freqs), blk.0.*, output_norm / output",
    "pre-projection": "nextn.pre_projection.weight (column halves: target embedding, then target hidden), "
                      "embedding_length_out (the embedding scale)",
    "hidden (post-norm)": "output_norm.weight",
    "logits": "token_embd.weight (the assistant's tied head)",
    "post-projection (h_nextn)": "nextn.post_projection.weight",
    "drafted tokens": "token_embd.weight, the chain (the tokens and h_nextn fed back)",
    "GGUF forward": "the keys or tensors the detail names: the file does not load as llama.cpp reads it "
                    "(see 'dspark-convert check')",
    ACCOUNTING_ROW: "the tensors the row names: no forward reads them and no rule drops them (an extra GGUF tensor, "
                    "or a checkpoint tensor the converter left out); `check FILE` names extra GGUF tensors too",
}


@dataclass
class VerifyReport:
    """The result of :func:`verify`: ``passed`` iff every exact-mode row, every metadata row and the tensor accounting
    passed."""

    gguf: str
    hf_dir: str
    target_dir: str
    arch: str
    family: str
    layout: str
    seed: int
    steps: int
    contexts: list[int]
    bound: float = EXACT_NMSE
    hparams: dict[str, Any] = field(default_factory=dict)
    storage: dict[str, dict[str, Any]] = field(default_factory=dict)   # GGML type -> what rounding changed
    outputs: list[OutputCheck] = field(default_factory=list)           # exact mode: the verdict
    quality: list[OutputCheck] = field(default_factory=list)           # quality mode: information only
    quality_note: str = ""
    metadata: list[MetadataCheck] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: tensor accounting (:mod:`.accounting`): counts per side, dropped tensors with reasons, unaccounted
    tensors: dict[str, Any] = field(default_factory=dict)
    accounting: OutputCheck | None = None                              # its verdict row (None: the forwards did not run)

    @property
    def passed(self) -> bool:
        return (bool(self.outputs) and all(o.passed for o in self.outputs) and all(m.passed for m in self.metadata)
                and (self.accounting is None or self.accounting.passed))

    @property
    def first_divergence(self) -> dict[str, Any] | None:
        """The first failing exact-mode row in forward order (else the first failing metadata row), with hints."""
        o = next((o for o in self.outputs if not o.passed), None)
        if o is not None:
            key = max((k for k in LOOK_AT if o.name.startswith(k)), key=len, default="")
            return {"component": o.name, "layer": o.layer, "case": o.case,
                    "look_at": LOOK_AT.get(key, "").format(layer=o.layer)}
        if self.accounting is not None and not self.accounting.passed:
            return {"component": ACCOUNTING_ROW, "layer": None, "case": None, "look_at": LOOK_AT[ACCOUNTING_ROW]}
        m = next((m for m in self.metadata if not m.passed), None)
        return None if m is None else {"component": f"metadata {m.key}", "layer": None, "case": None,
                                       "look_at": "the converter's metadata for this key (the numbers may still agree)"}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (schema in docs/verify.md)."""
        d = asdict(self)
        d = {"schema_version": SCHEMA_VERSION, "passed": self.passed, "first_divergence": self.first_divergence, **d}
        d["inputs"] = {k: d.pop(k) for k in ("contexts", "seed", "steps")}
        return d


def case_contexts(context: int) -> list[int]:
    """Context lengths of the input cases: a short one, ``context``, and a long one (RoPE distances up to 4x).

    Example:
        >>> case_contexts(16), case_contexts(1)
        ([4, 16, 64], [1, 4])
    """
    return sorted({max(1, context // 4), context, 4 * context})


# ============================================================================================== driver
def _require_folder(folder: Path, flag: str, what: str) -> None:
    """``folder`` exists and holds safetensors weights; a draft passed as the target is named as such."""
    if not folder.is_dir():
        raise ConvertError(f"{folder}: no such folder; {flag} must be {what}")
    if not any(folder.glob("*.safetensors")):
        raise ConvertError(f"{folder}: no safetensors files; {flag} must be {what}")
    if flag == "--target-model-dir" and (folder / "config.json").is_file():
        from ..hf.checkpoint import load_json
        from ..registry.families import draft_architecture

        arch = draft_architecture(load_json(folder / "config.json"))
        if arch is not None:
            raise ConvertError(f"{folder}: is a draft checkpoint ({arch}), not a target model; pass the target model "
                               "the draft was trained for as --target-model-dir")


def _from_hub(spec: str | Path | None, *, draft: bool) -> Any:
    """A Hub repo id (``org/name[@rev]``, not an existing path) as its local snapshot folder, as ``hf2gguf`` and
    ``check --target`` take it: the draft's config and weights, or the target's config, tokenizer files and the
    shards holding its token embedding and output head. Anything else is returned as given."""
    from ..hf.hub import is_repo_id

    if spec is None or not is_repo_id(str(spec)):
        return spec
    from ..hf.hub import resolve_draft, resolve_target
    from ..reference.weights import EMBED_NAMES, OUTPUT_NAMES

    if draft:
        return resolve_draft(str(spec)).path
    return resolve_target(str(spec), tensors=[*EMBED_NAMES, *OUTPUT_NAMES]).path


#: bounds of verify's inputs (docs/limits.md)
MAX_CONTEXT = 1024
MAX_STEPS = 64


def verify(gguf_path: str | Path, hf_dir: str | Path, target_dir: str | Path | None, *, context: int = 16,
           seed: int = 0, steps: int = 3, quality: bool = True) -> VerifyReport:
    """Run the torch (HF, storage-rounded) and numpy (GGUF) forwards on seeded inputs; compare every component,
    then (``quality``) the GGUF forward against the unrounded checkpoint; check the metadata.

    Inputs per case: context rows of target features drawn from N(0, 1) (the scale of real hidden states), a
    random anchor (block drafts) or random next tokens (chain drafts, then ``steps`` chained draft tokens). Raises
    ConvertError for unreadable inputs; a conversion that is readable but wrong gives ``passed == False``.
    Every variant is proved the same way: its ``verify`` role's ``PROOF`` (:mod:`.rows`), the GGUF's
    variant when its torch side reads the checkpoint, else the checkpoint's; a variant without a reference forward
    (:class:`~dspark_convert.roles.proof.TensorChecks`) is compared tensor by tensor (``target_dir`` may be None).

    Example:
        >>> verify("d.gguf", "draft_qwen3_4b", "Qwen3-4B", seed=0).passed  # doctest: +SKIP
        True
    """
    for flag, value in (("--context", context), ("--steps", steps)):
        if value < 1:
            raise ConvertError(f"{flag} {value}: expected at least 1")
    if context > MAX_CONTEXT:
        raise ConvertError(f"--context {context}: expected at most {MAX_CONTEXT} (the longest case has 4 x context "
                           "positions, and the attention memory grows with its square)")
    if steps > MAX_STEPS:
        raise ConvertError(f"--steps {steps}: expected at most {MAX_STEPS}")
    if not 0 <= seed <= 2**32 - 1:
        raise ConvertError(f"--seed {seed}: expected an integer in [0, {2**32 - 1}] (numpy's seed range)")
    if not Path(gguf_path).exists():
        from ..gguffile.refs import is_remote_ref

        if is_remote_ref(str(gguf_path)):
            raise ConvertError(f"{gguf_path}: verify reads every tensor of the file, and a remote file's tensor data "
                               "is not fetched; download it, then verify the local copy")
    hf_dir, target_dir = _from_hub(hf_dir, draft=True), _from_hub(target_dir, draft=False)
    _require_folder(Path(hf_dir), "--hf", "the draft's Hugging Face folder, with config.json and safetensors")
    if target_dir is not None:
        _require_folder(Path(target_dir), "--target-model-dir", "the target model's folder, whose token embeddings "
                        "and lm_head verify reads")
    g = open_gguf(gguf_path)
    gguf_names = [t.name for t in g.file.tensors]
    variant = gguf_variant(g.value, gguf_names)
    arch = g.value("general.architecture")
    if variant is None:  # a target model's file, or another tool's: wrong input, not a wrong conversion
        raise ConvertError(f"{gguf_path}: is not a draft GGUF (general.architecture {arch!r}, no draft variant loads "
                           "it); verify compares a draft GGUF with the checkpoint it was converted from")
    job = Job(g, gguf_path, hf_dir, target_dir, case_contexts(context), seed, steps, quality, variant.name)
    spec = prover(variant)                          # the GGUF's variant first, then the checkpoint's
    if (spec is None or spec.needs_target) and target_dir is None:
        raise ConvertError("--target-model-dir is required: verify reads the target model's token embeddings and lm_head")
    if spec is not None and variant is not None and accepts(spec, job, variant):
        by = variant
    else:  # a GGUF of another variant than the checkpoint's: the accounting names the tensors no forward reads
        by, spec = checkpoint_prover(job)
        if by.arch and by.arch != arch:  # another family's file altogether: no forward compares the two
            raise ConvertError(f"{gguf_path}: general.architecture {arch!r}, but --hf {hf_dir} is a checkpoint of "
                               f"variant {by.name!r}, whose files are {by.arch!r}; verify compares a file with the "
                               "checkpoint it was converted from")
    proof = prove(spec, job, by)
    report = VerifyReport(str(gguf_path), str(hf_dir), str(target_dir or hf_dir), str(g.value("general.architecture")),
                          proof.family, proof.layout, seed, proof.steps, proof.contexts, hparams=proof.hparams,
                          storage=proof.storage, outputs=proof.outputs, quality=proof.quality,
                          quality_note=proof.quality_note, metadata=proof.metadata, notes=proof.notes)
    if proof.tensors is not None:                   # the forwards (or the tensor checks) ran to the end
        _account(report, variant or by, gguf_names, proof.tensors)
    return report


def _account(report: VerifyReport, variant: Variant, gguf_names: list[str], t: Tensors) -> None:
    """Every tensor of both sides read, compared or dropped by a named rule; else one failing row naming it."""
    a = account_for(variant, gguf_names, t)
    report.tensors = a.to_dict()
    report.accounting = a.row()
