"""``dspark-convert verify``: prove a conversion numerically, component by component, and check its metadata.

Two independent forwards run on the same seeded inputs (several cases: context lengths ``context // 4``,
``context`` and ``4 * context``, each with its own features and anchor / tokens): the torch forward of the
ORIGINAL Hugging Face folder (:mod:`.reference.torch_forward`) and the numpy forward of the GGUF file
(:mod:`.reference.dflash_np`, :mod:`.reference.eagle3_np`).

- **Exact mode (the verdict).** The torch side first rounds every checkpoint tensor exactly as the GGUF stores it
  (its GGML type: BF16/F16 round-to-nearest-even, Q8_0 and other block types through gguf-py's reference
  quantizer), then computes in float32. Both sides then hold the same weights, so every compared quantity must
  agree to float32 round-off: NMSE below :data:`EXACT_NMSE` at every outtype. Each quantity is its own row, in
  forward order (context projection, each layer's output, ..., Markov bias, confidence; EAGLE-3: fc output,
  prefill, each chained step), and the report names the first one that diverges.
- **Quality mode (information).** The same GGUF forward against the torch forward of the *unrounded* weights: what
  the storage type cost (NMSE graded with upstream's words, top-1 agreement over every position of every case).
  It never changes the verdict.

See ``docs/verify.md``.

Example:
    >>> r = verify("draft.gguf", "dspark_qwen3_4b_block7", "Qwen3-4B")  # doctest: +SKIP
    >>> r.passed, r.first_divergence                                    # doctest: +SKIP
    (True, None)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import ConvertError
from .llamacpp.layouts import runtime_head
from .reference.weights import GGUFWeights, TargetWeights, open_gguf
from .variants import Variant, gguf_variant, variant_of_family
from .verify_accounting import ROW as ACCOUNTING_ROW
from .verify_accounting import account
from .verify_checks import (
    EXACT_NMSE,
    GRADES,
    MetadataCheck,
    OutputCheck,
    add_argmax,
    compare_cases,
    compare_token_cases,
    compare_tokens,
    compare_values,
    grade,
    metadata_checks,
)
from .verify_dflash2 import dflash2_rows, is_dflash2
from .verify_dsv4 import dsv4_rows

if TYPE_CHECKING:
    from .reference.hf_draft import HFDraft

__all__ = ["EXACT_NMSE", "GRADES", "MetadataCheck", "OutputCheck", "VerifyReport", "add_argmax", "case_contexts",
           "compare_cases", "compare_tokens", "compare_values", "grade", "metadata_checks", "verify"]
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
    #: tensor accounting (:mod:`.verify_accounting`): counts per side, dropped tensors with reasons, unaccounted
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
def _load_torch_side(hf_dir: Path, target_dir: Path) -> tuple[Any, HFDraft]:
    try:
        from .reference import torch_forward
    except ImportError as e:
        raise ConvertError(f"verify needs torch ({e}); install it with: pip install 'dspark-convert[torch]'") from None
    try:
        return torch_forward, torch_forward.load_draft(hf_dir, target_dir)
    except ConvertError:
        raise
    except (KeyError, ValueError, TypeError, OSError) as e:
        raise ConvertError(f"{hf_dir}: cannot read the draft checkpoint for the reference forward ({type(e).__name__}: {e})") from None


def _reference(hf_dir: str, run: Any) -> Any:
    """Run the torch forward; a checkpoint it cannot compute (missing tensor, bad shape) is an input error."""
    try:
        return run()
    except ConvertError:
        raise
    except (KeyError, RuntimeError, ValueError, IndexError) as e:
        raise ConvertError(f"{hf_dir}: the reference forward failed on this checkpoint ({type(e).__name__}: {e})") from None


def _require_folder(folder: Path, flag: str, what: str) -> None:
    """``folder`` exists and holds safetensors weights; a draft passed as the target is named as such."""
    if not folder.is_dir():
        raise ConvertError(f"{folder}: no such folder; {flag} must be {what}")
    if not any(folder.glob("*.safetensors")):
        raise ConvertError(f"{folder}: no safetensors files; {flag} must be {what}")
    if flag == "--target-model-dir" and (folder / "config.json").is_file():
        from .hf.checkpoint import load_json
        from .recognize import draft_architecture

        arch = draft_architecture(load_json(folder / "config.json"))
        if arch is not None:
            raise ConvertError(f"{folder}: is a draft checkpoint ({arch}), not a target model; pass the target model "
                               "the draft was trained for as --target-model-dir")


def _candidate(report: VerifyReport, run: Any) -> Any:
    """Run the numpy forward; a readable but inconsistent GGUF (missing tensor, bad shape) fails the report."""
    try:
        return run()
    except (ConvertError, ValueError, IndexError, KeyError) as e:
        report.outputs.append(OutputCheck("GGUF forward", [], grade="error", passed=False, detail=str(e)))
        return None


def gguf_types(g: GGUFWeights) -> dict[str, str]:
    """GGUF tensor name -> GGML type name (what the torch side rounds each checkpoint tensor to)."""
    return {t.name: t.qtype.name for t in g.file.tensors if t.qtype is not None}


def _from_hub(spec: str | Path | None, *, draft: bool) -> Any:
    """A Hub repo id (``org/name[@rev]``, not an existing path) as its local snapshot folder, as ``hf2gguf`` and
    ``check --target`` take it: the draft's config and weights, or the target's config, tokenizer files and the
    shards holding its token embedding and output head. Anything else is returned as given."""
    from .hf.hub import is_repo_id

    if spec is None or not is_repo_id(str(spec)):
        return spec
    from .hf.hub import resolve_draft, resolve_target
    from .reference.weights import EMBED_NAMES, OUTPUT_NAMES

    if draft:
        return resolve_draft(str(spec)).path
    return resolve_target(str(spec), tensors=[*EMBED_NAMES, *OUTPUT_NAMES]).path


#: bounds of verify's inputs: --context 100000000 allocated 35.8 GiB; --seed -1 was a numpy traceback
MAX_CONTEXT = 1024
MAX_STEPS = 64


def verify(gguf_path: str | Path, hf_dir: str | Path, target_dir: str | Path | None, *, context: int = 16,
           seed: int = 0, steps: int = 3, quality: bool = True) -> VerifyReport:
    """Run the torch (HF, storage-rounded) and numpy (GGUF) forwards on seeded inputs; compare every component,
    then (``quality``) the GGUF forward against the unrounded checkpoint; check the metadata.

    Inputs per case: context rows of target features drawn from N(0, 1) (the scale of real hidden states), a
    random anchor (DSpark/DFlash) or random next tokens (EAGLE-3, then ``steps`` chained draft tokens). Raises
    ConvertError for unreadable inputs; a conversion that is readable but wrong gives ``passed == False``.
    A DeepSeek-V4 DSpark file has no reference forward yet: it is compared tensor by tensor
    (:func:`.verify_dsv4.dsv4_rows`; ``target_dir`` may be None).

    Example:
        >>> verify("d.gguf", "dspark_qwen3_4b_block7", "Qwen3-4B", seed=0).passed  # doctest: +SKIP
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
    hf_dir, target_dir = _from_hub(hf_dir, draft=True), _from_hub(target_dir, draft=False)
    _require_folder(Path(hf_dir), "--hf", "the draft's Hugging Face folder, with config.json and safetensors")
    if target_dir is not None:
        _require_folder(Path(target_dir), "--target-model-dir", "the target model's folder, whose token embeddings "
                        "and lm_head verify reads")
    g = open_gguf(gguf_path)
    gguf_names = [t.name for t in g.file.tensors]
    variant = gguf_variant(g.value, gguf_names)
    if variant is not None and variant.proof == "tensors":
        rows = dsv4_rows(g, gguf_path, hf_dir, quality=quality)
        report = VerifyReport(str(gguf_path), str(hf_dir), str(target_dir or hf_dir), str(g.value("general.architecture")),
                              "dspark_dsv4", "DeepSeek-V4 (mtp.* inside the checkpoint)", seed, 0, [],
                              hparams=rows.hparams, outputs=rows.outputs, quality=rows.quality,
                              quality_note=rows.quality_note, metadata=rows.metadata, notes=rows.notes)
        _account(report, variant, gguf_names, set(), rows.gguf_compared, rows.checkpoint_names, set(),
                 rows.checkpoint_compared)
        return report
    if target_dir is None:
        raise ConvertError("--target-model-dir is required: verify reads the target model's token embeddings and lm_head")
    if variant is not None and variant.package is not None:  # a variant package's own forwards and rows
        return _verify_variant_forwards(g, variant, gguf_path, hf_dir, target_dir, context, seed)
    if is_dflash2(g) and _checkpoint_is_dflash2(Path(hf_dir)):  # DFlash2 (issue 22): its own forwards
        return _verify_dflash2(g, gguf_path, hf_dir, target_dir, context, seed)
    # a GGUF with DFlash2 tensors beside a checkpoint of another family goes the generic way: the tensor
    # accounting names the tensors no forward reads
    tf, d = _load_torch_side(Path(hf_dir), Path(target_dir))
    target = TargetWeights(target_dir)
    report = VerifyReport(str(gguf_path), str(hf_dir), str(target_dir), str(g.value("general.architecture")), d.family,
                          d.layout, seed, steps, case_contexts(context), notes=list(d.notes))
    from .check import check_file

    broken = [f for f in check_file(gguf_path) if f.rule == "hparam-value"]  # e.g. head_count 0: a division by zero
    if broken:
        raise ConvertError(f"{gguf_path}: {broken[0].subject}: {broken[0].message}; the forward cannot run on it "
                           "(check reports it as [hparam-value])")
    report.metadata = metadata_checks(g, d)
    head = runtime_head(str(g.value("general.architecture")), {n for n in ("token_embd.weight", "output.weight") if g.has(n)})
    if head == "token_embd":
        report.notes.append("llama.cpp b11434 scores this file with token_embd.weight (output.weight is absent, "
                            "src/models/dflash.cpp), so the GGUF forward does too")
    if not report.metadata[0].passed:
        report.outputs.append(OutputCheck("forward", [], grade="not run", passed=False,
                                          detail="the GGUF architecture does not match the checkpoint family"))
        return report
    rng = np.random.default_rng(seed)
    width = d.weights.shape("fc.weight")[1]
    n_vocab = min(x for x in (d.hp.vocab_size, target.ckpt.shape(target.embed_name)[0]) if x)
    feats = [rng.standard_normal((t, width)).astype(np.float32) for t in report.contexts]
    exact = d.with_storage(gguf_types(g))
    if d.family == "eagle3":
        toks = [rng.integers(0, n_vocab, size=t) for t in report.contexts]
        _verify_eagle3(report, tf, d, exact, g, target, feats, toks, quality)
    else:
        anchors = [int(a) for a in rng.integers(0, n_vocab, size=len(feats))]
        _verify_block(report, tf, d, exact, g, target, feats, anchors, quality)
    report.storage = _storage_summary(exact)
    if not any(o.name == "GGUF forward" for o in report.outputs):      # the forwards ran to the end
        _account(report, variant or variant_of_family(d.family), gguf_names, g.read,
                 set(), d.weights.names, d.weights.read, set())
    return report


def _checkpoint_is_dflash2(hf_dir: Path) -> bool:
    """The checkpoint's own config names the DFlash2 class (the GGUF alone does not decide which forwards run)."""
    from .hf.checkpoint import load_json

    archs = load_json(hf_dir / "config.json").get("architectures") if (hf_dir / "config.json").is_file() else None
    return isinstance(archs, list) and "DFlash2DraftModel" in archs


def _verify_dflash2(g: GGUFWeights, gguf_path: str | Path, hf_dir: str | Path, target_dir: str | Path, context: int,
                    seed: int) -> VerifyReport:
    report = VerifyReport(str(gguf_path), str(hf_dir), str(target_dir), str(g.value("general.architecture")),
                          "dflash2", "z-lab DFlash2", seed, 0, case_contexts(context))
    rng = np.random.default_rng(seed)
    feats = [rng.standard_normal((t, g.shape("fc.weight")[1])).astype(np.float32) for t in report.contexts]
    anchors = [int(a) for a in rng.integers(0, g.shape("selector_successor.weight")[0], size=len(feats))]
    rows = _reference(str(hf_dir), lambda: dflash2_rows(g, hf_dir, target_dir, feats, anchors))
    report.hparams, report.outputs, report.metadata = rows.hparams, rows.outputs, rows.metadata
    return report


def _verify_variant_forwards(g: GGUFWeights, variant: Variant, gguf_path: str | Path, hf_dir: str | Path,
                             target_dir: str | Path, context: int, seed: int) -> VerifyReport:
    """A variant whose package holds its forwards and rows (``variants/<name>/verify.py``): seeded cases, both
    forwards, then the tensor accounting of what each side read."""
    import importlib

    from .hf.checkpoint import load_json

    rows_of = importlib.import_module(f".variants.{variant.package}.verify", __package__).rows
    cfg = load_json(Path(hf_dir) / "config.json") if (Path(hf_dir) / "config.json").is_file() else {}
    archs = cfg.get("architectures") if isinstance(cfg, dict) else None
    report = VerifyReport(str(gguf_path), str(hf_dir), str(target_dir), str(g.value("general.architecture")),
                          variant.families[0], str(archs[0]) if isinstance(archs, list) and archs else "?", seed, 0,
                          case_contexts(context))
    rng = np.random.default_rng(seed)
    feats = [rng.standard_normal((t, g.shape("fc.weight")[1])).astype(np.float32) for t in report.contexts]
    n_vocab = g.shape("token_embd.weight")[0] if g.has("token_embd.weight") else TargetWeights(target_dir).ckpt.shape(
        TargetWeights(target_dir).embed_name)[0]
    anchors = [int(a) for a in rng.integers(0, n_vocab, size=len(feats))]
    outputs, report.metadata, report.hparams, ckpt_read = _reference(
        str(hf_dir), lambda: rows_of(g, hf_dir, target_dir, feats, anchors, variant))
    report.outputs = outputs
    if not any(o.name == "GGUF forward" for o in outputs):
        from .reference.hf_draft import TorchCheckpoint

        _account(report, variant, [t.name for t in g.file.tensors], g.read, set(),
                 TorchCheckpoint(Path(hf_dir)).names, ckpt_read, set())
    return report


def _account(report: VerifyReport, variant: Variant, gguf_names: list[str], gguf_read: set[str],
             gguf_compared: set[str], ckpt_names: list[str], ckpt_read: set[str], ckpt_compared: set[str]) -> None:
    """Every tensor of both sides read, compared or dropped by a named rule; else one failing row naming it."""
    a = account(variant, gguf_names, gguf_read, gguf_compared, ckpt_names, ckpt_read, ckpt_compared)
    report.tensors = a.to_dict()
    report.accounting = a.row()


def _storage_summary(exact: HFDraft) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in exact.weights.rounding.values():
        s = out.setdefault(r.ggml_type, {"tensors": 0, "values": 0, "changed": 0, "max_change": 0.0})
        s["tensors"] += 1
        s["values"] += r.values
        s["changed"] += r.changed
        s["max_change"] = max(s["max_change"], r.max_change)
    return dict(sorted(out.items()))


def _lossless(exact: HFDraft) -> bool:
    return all(r.changed == 0 for r in exact.weights.rounding.values())


def _quality_ref(report: VerifyReport, exact: HFDraft) -> bool:
    """Whether a second torch run on the unrounded weights is needed (and the note that says why not)."""
    if _lossless(exact):
        report.quality_note = ("storage is lossless for this checkpoint (rounding to the GGUF types changed no "
                               "value): the quality rows equal the exact rows")
        return False
    report.quality_note = "GGUF forward vs the torch forward of the unrounded checkpoint (information, not the verdict)"
    return True


def _verify_block(report: VerifyReport, tf: Any, d: HFDraft, exact: HFDraft, g: GGUFWeights, target: TargetWeights,
                  feats: list[np.ndarray], anchors: list[int], quality: bool) -> None:
    from .reference.dflash_np import BlockCase, dflash_forward

    refs = _reference(report.hf_dir, lambda: tf.block_forward(exact, feats, anchors))
    outs = _candidate(report, lambda: dflash_forward(
        g, target, [BlockCase(f, a, r.prev_tokens) for f, a, r in zip(feats, anchors, refs, strict=True)]))
    if outs is None:
        return
    hp = outs[0].hparams
    report.hparams = {"target_layers": hp.target_layers, "block_size": hp.block_size, "mask_token_id": hp.mask_token_id,
                      "sample_from_anchor": hp.sample_from_anchor, "markov_rank": hp.markov_rank,
                      "confidence_head": hp.has_confidence, "n_layer": hp.n_layer, "anchors": anchors,
                      "prediction_rows": hp.prediction_rows}
    o = report.outputs
    o.append(compare_cases("context projection", [r.context for r in refs], [x.context for x in outs]))
    o.append(compare_cases("block input (embeddings)", [r.block_input for r in refs], [x.block_input for x in outs]))
    for il in range(max(len(refs[0].layers), len(outs[0].layers))):
        if il >= len(refs[0].layers) or il >= len(outs[0].layers):
            o.append(OutputCheck(f"layer {il} output", [], grade="missing", passed=False, layer=il,
                                 detail=f"{len(refs[0].layers)} layers in the checkpoint, {len(outs[0].layers)} in the GGUF"))
            continue
        o.append(compare_cases(f"layer {il} output", [r.layers[il] for r in refs], [x.layers[il] for x in outs], layer=il))
    o.append(compare_cases("block hidden (post-norm)", [r.hidden for r in refs], [x.hidden for x in outs]))
    o.append(compare_cases("block logits", [r.logits for r in refs], [x.logits for x in outs], argmax=True))
    choice = ([r.logits for r in refs], [x.logits for x in outs])
    if _both(o, "Markov head", refs[0].markov_bias, outs[0].markov_bias):
        o.append(compare_cases("Markov bias W2 W1[prev]", [r.markov_bias for r in refs], [x.markov_bias for x in outs]))
        o.append(compare_cases("Markov-biased logits", [r.markov_logits for r in refs], [x.markov_logits for x in outs],
                               argmax=True))
        choice = ([r.markov_logits for r in refs], [x.markov_logits for x in outs])
    o.append(compare_token_cases("chosen tokens", [r.tokens for r in refs], [x.tokens for x in outs], *choice))
    if _both(o, "confidence head", refs[0].confidence_logits, outs[0].confidence_logits):
        o.append(_confidence_row(refs, outs, EXACT_NMSE))
    if not quality:
        report.quality_note = "quality mode skipped (--no-quality)"
        return
    if _quality_ref(report, exact):
        refs = _reference(report.hf_dir, lambda: tf.block_forward(d, feats, anchors, [r.prev_tokens for r in refs]))
    q = report.quality
    q.append(compare_cases("block logits", [r.logits for r in refs], [x.logits for x in outs], bound=None, argmax=True))
    if refs[0].markov_logits is not None and outs[0].markov_logits is not None:
        q.append(compare_cases("Markov-biased logits", [r.markov_logits for r in refs], [x.markov_logits for x in outs],
                               bound=None, argmax=True))
    if refs[0].confidence_logits is not None and outs[0].confidence_logits is not None:
        q.append(_confidence_row(refs, outs, None))


def _both(rows: list[OutputCheck], what: str, ref: Any, got: Any) -> bool:
    """Whether both sides computed an optional head; a row that fails when only one side did."""
    if ref is None and got is None:
        return False
    if ref is None or got is None:
        rows.append(OutputCheck(what, [], passed=False, grade="missing",
                                detail=f"{what} present in the {'GGUF' if ref is None else 'checkpoint'} only"))
        return False
    return True


def _confidence_row(refs: list[Any], outs: list[Any], bound: float | None) -> OutputCheck:
    c = compare_cases("confidence (logit)", [r.confidence_logits for r in refs], [x.confidence_logits for x in outs],
                      bound=bound, by_energy=True)      # a few values around the bias: relative to their size
    if c.nmse is not None:
        diff = max(float(np.max(np.abs(1 / (1 + np.exp(-r.confidence_logits)) - 1 / (1 + np.exp(-x.confidence_logits)))))
                   for r, x in zip(refs, outs, strict=True))
        c.detail = f"{c.detail}; max |p diff| {diff:.3g}" if c.detail else f"max |p diff| {diff:.3g}"
    return c


def _verify_eagle3(report: VerifyReport, tf: Any, d: HFDraft, exact: HFDraft, g: GGUFWeights, target: TargetWeights,
                   feats: list[np.ndarray], toks: list[np.ndarray], quality: bool) -> None:
    from .reference.eagle3_np import Eagle3Case, eagle3_forward

    K = report.steps
    refs = _reference(report.hf_dir, lambda: tf.eagle3_forward(exact, feats, toks, K))
    outs = _candidate(report, lambda: eagle3_forward(
        g, target, [Eagle3Case(f, t, K, forced_tokens=r.tokens) for f, t, r in zip(feats, toks, refs, strict=True)]))
    if outs is None:
        return
    hp = outs[0].hparams
    report.hparams = {"target_layers": hp.target_layers, "target_hidden_size": hp.target_hidden_size,
                      "norm_before_residual": hp.norm_before_residual, "norm_before_fc": hp.norm_before_fc,
                      "rope_freqs": g.has("rope_freqs.weight"), "draft_vocab": int(outs[0].logits.shape[1])}
    o = report.outputs
    o.append(compare_cases("fc output", [r.fc for r in refs], [x.fc for x in outs]))
    o.append(compare_cases("prefill output (layer 0, pre-norm)", [r.prefill_hidden for r in refs],
                           [x.prefill_hidden for x in outs], layer=0))
    o.append(compare_cases("prefill logits", [r.prefill_logits for r in refs], [x.prefill_logits for x in outs], argmax=True))
    for s in range(K):
        if s > 0:
            o.append(compare_cases(f"step {s} hidden (pre-norm)", [r.step_hidden[s - 1:s] for r in refs],
                                   [x.step_hidden[s - 1:s] for x in outs], layer=0))
        o.append(compare_cases(f"step {s} logits", [r.logits[s:s + 1] for r in refs], [x.logits[s:s + 1] for x in outs],
                               argmax=True))
    o.append(compare_token_cases("chosen tokens", [r.tokens for r in refs], [x.tokens for x in outs],
                                 [r.logits for r in refs], [x.logits for x in outs]))
    if not quality:
        report.quality_note = "quality mode skipped (--no-quality)"
        return
    if _quality_ref(report, exact):
        refs = _reference(report.hf_dir, lambda: tf.eagle3_forward(d, feats, toks, K, [r.tokens for r in refs]))
    report.quality += [
        compare_cases("prefill logits", [r.prefill_logits for r in refs], [x.prefill_logits for x in outs], bound=None,
                      argmax=True),
        compare_cases("step logits", [r.logits for r in refs], [x.logits for x in outs], bound=None, argmax=True),
    ]
