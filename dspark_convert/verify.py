"""``dspark-convert verify``: prove a conversion numerically and check its metadata against the HF config.

Two independent forwards run on the same seeded inputs: the torch forward of the ORIGINAL Hugging Face folder
(:mod:`.reference.torch_forward`, the reference) and the numpy forward of the GGUF file
(:mod:`.reference.dflash_np`, :mod:`.reference.eagle3_np`). Each output is graded by its NMSE
(``mse / var(ref)``) with upstream's thresholds (llama.cpp ``examples/model-conversion``). Token choices are
compared position by position; a differing choice only counts as a failure when the reference's margin between
the two tokens exceeds the observed error (otherwise it is reported as a near-tie). The numpy chain is
teacher-forced with the reference's tokens so that one near-tie does not cascade. See ``docs/verify.md``.

Example:
    >>> r = verify("draft.gguf", "dspark_qwen3_4b_block7", "Qwen3-4B")  # doctest: +SKIP
    >>> r.passed, [o.grade for o in r.outputs]                          # doctest: +SKIP
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ConvertError
from .reference.weights import GGUFWeights, TargetWeights, open_gguf

#: (upper NMSE bound, grade) from llama.cpp examples/model-conversion/scripts/utils/check-nmse.py
GRADES = ((1e-6, "essentially identical"), (1e-4, "excellent"), (1e-3, "very good"), (1e-2, "good"))
PASS_NMSE = 1e-2
#: a differing choice is a near-tie only if the reference margin is at most this fraction of the row's std
TIE_STD_FRACTION = 0.1
SCHEMA_VERSION = 1


@dataclass
class OutputCheck:
    """One compared output: values graded by NMSE and/or token choices checked position by position."""

    name: str
    shape: list[int]
    nmse: float | None = None
    nmse_db: float | None = None
    max_abs: float | None = None
    grade: str = ""
    agree: int | None = None          # positions whose argmax / chosen token agrees
    total: int | None = None
    near_ties: int = 0                # disagreements within the error margin (not failures)
    agree_by_position: list[bool] | None = None
    passed: bool = True
    detail: str = ""


@dataclass
class MetadataCheck:
    """One GGUF metadata value against what the HF config implies."""

    key: str
    gguf: Any
    expected: Any
    passed: bool


@dataclass
class VerifyReport:
    """The result of :func:`verify`; ``passed`` is true iff every output and metadata row passed."""

    gguf: str
    hf_dir: str
    target_dir: str
    arch: str
    family: str
    layout: str
    context: int
    seed: int
    steps: int
    hparams: dict[str, Any] = field(default_factory=dict)
    outputs: list[OutputCheck] = field(default_factory=list)
    metadata: list[MetadataCheck] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.outputs) and all(o.passed for o in self.outputs) and all(m.passed for m in self.metadata)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (schema in docs/verify.md)."""
        d = asdict(self)
        d = {"schema_version": SCHEMA_VERSION, "passed": self.passed, **d}
        d["inputs"] = {k: d.pop(k) for k in ("context", "seed", "steps")}
        return d


# ============================================================================================== grading
def grade(nmse: float) -> str:
    """Upstream's words for an NMSE value.

    Example:
        >>> grade(3e-5), grade(0.5)
        ('excellent', 'poor')
    """
    return next((g for bound, g in GRADES if nmse < bound), "poor")


def compare_values(name: str, ref: np.ndarray, got: np.ndarray) -> OutputCheck:
    """NMSE (in dB too) and max abs error of ``got`` against ``ref``; PASS below 1e-2.

    Example:
        >>> c = compare_values("x", np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.001]))
        >>> c.grade, c.passed
        ('excellent', True)
    """
    ref64, got64 = np.asarray(ref, np.float64), np.asarray(got, np.float64)
    if ref64.shape != got64.shape:
        return OutputCheck(name, list(ref64.shape), grade="shape mismatch", passed=False,
                           detail=f"reference shape {list(ref64.shape)}, GGUF forward shape {list(got64.shape)}")
    if not np.isfinite(got64).all():
        return OutputCheck(name, list(ref64.shape), grade="non-finite", passed=False, detail="GGUF forward produced NaN/Inf")
    mse = float(np.mean((got64 - ref64) ** 2)) if ref64.size else 0.0
    var = float(np.var(ref64)) if ref64.size else 0.0
    denom = var if var > 0 else max(float(np.mean(ref64 ** 2)) if ref64.size else 0.0, 1e-30)
    nmse = mse / denom
    db = 10 * math.log10(max(nmse, 1e-30))           # an exact match reads -300 dB (JSON has no -inf)
    max_abs = float(np.max(np.abs(got64 - ref64))) if ref64.size else 0.0
    return OutputCheck(name, list(ref64.shape), nmse=nmse, nmse_db=db, max_abs=max_abs, grade=grade(nmse),
                       passed=nmse < PASS_NMSE)


def _near_tie(ref_row: np.ndarray, got_row: np.ndarray, a: int, b: int) -> bool:
    """Whether choosing ``b`` instead of ``a`` is a near-tie: the reference's own margin between the two is within
    twice the row's max abs error, and small in absolute terms (<= 0.1 x the row's std, the error a "good" NMSE
    allows), so that a large error can never excuse a decisive disagreement."""
    ref64 = np.asarray(ref_row, np.float64)
    tol = min(2.0 * float(np.max(np.abs(np.asarray(got_row, np.float64) - ref64))), TIE_STD_FRACTION * float(np.std(ref64)))
    return float(ref64[a]) - float(ref64[b]) <= tol


def add_argmax(check: OutputCheck, ref: np.ndarray, got: np.ndarray) -> OutputCheck:
    """Per-row argmax agreement of two logit matrices, with near-ties separated from real disagreements."""
    if ref.shape != got.shape or ref.ndim != 2:
        return check
    a, b = ref.argmax(1), got.argmax(1)
    hard = [int(i) for i in np.flatnonzero(a != b) if not _near_tie(ref[i], got[i], int(a[i]), int(b[i]))]
    check.agree, check.total, check.agree_by_position = int((a == b).sum()), int(a.size), (a == b).tolist()
    check.near_ties = int((a != b).sum()) - len(hard)
    if hard:
        check.passed = False
        check.detail = _join(check.detail, f"argmax differs at position(s) {hard}")
    return check


def compare_tokens(name: str, ref_tokens: np.ndarray, got_tokens: np.ndarray, ref_logits: np.ndarray,
                   got_logits: np.ndarray) -> OutputCheck:
    """Chosen tokens (target ids) position by position; a difference is a near-tie when the logits allow it."""
    ref_tokens, got_tokens = np.asarray(ref_tokens), np.asarray(got_tokens)
    c = OutputCheck(name, list(ref_tokens.shape), grade="tokens")
    if ref_tokens.shape != got_tokens.shape:
        c.passed, c.detail = False, f"{got_tokens.size} tokens, expected {ref_tokens.size}"
        return c
    hard, ties = [], 0
    for i in np.flatnonzero(ref_tokens != got_tokens):
        ra, ga = int(ref_logits[i].argmax()), int(got_logits[i].argmax())
        if ra != ga and _near_tie(ref_logits[i], got_logits[i], ra, ga):
            ties += 1
        else:
            hard.append(int(i))
    c.agree, c.total, c.near_ties = int((ref_tokens == got_tokens).sum()), int(ref_tokens.size), ties
    c.agree_by_position = (ref_tokens == got_tokens).tolist()
    if hard:
        c.passed = False
        c.detail = f"position(s) {hard}: reference {ref_tokens[hard].tolist()}, GGUF {got_tokens[hard].tolist()}"
    c.grade = "identical" if c.agree == c.total else ("near-ties only" if c.passed else "differ")
    return c


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b


# ============================================================================================== metadata
def _f32(x: Any) -> float | None:
    return None if x is None else float(np.float32(x))


def _meta(key: str, got: Any, expected: Any) -> MetadataCheck:
    if isinstance(expected, float) or isinstance(got, float):
        ok = got is not None and expected is not None and _f32(got) == _f32(expected)
    else:
        ok = got == expected
    return MetadataCheck(key, got, expected, bool(ok))


def metadata_checks(g: GGUFWeights, d: Any) -> list[MetadataCheck]:
    """Compare the GGUF's hyperparameters with the HF config (normalised by the torch side)."""
    hp, arch = d.hp, g.value("general.architecture")
    out = [MetadataCheck("general.architecture", arch, "eagle3" if d.family == "eagle3" else "dflash",
                         arch == ("eagle3" if d.family == "eagle3" else "dflash"))]
    if not out[0].passed:
        return out
    a = arch
    out += [
        _meta(f"{a}.block_count", g.value(f"{a}.block_count"), hp["n_layer"]),
        _meta(f"{a}.embedding_length", g.value(f"{a}.embedding_length"), hp["n_embd"]),
        _meta(f"{a}.feed_forward_length", g.value(f"{a}.feed_forward_length"), hp["n_ff"]),
        _meta(f"{a}.attention.head_count", g.value(f"{a}.attention.head_count"), hp["n_head"]),
        _meta(f"{a}.attention.head_count_kv", g.value(f"{a}.attention.head_count_kv", g.value(f"{a}.attention.head_count")), hp["n_head_kv"]),
        _meta(f"{a}.attention.key_length", g.value(f"{a}.attention.key_length", hp["n_embd"] // max(1, hp["n_head"])), hp["head_dim"]),
        _meta(f"{a}.attention.layer_norm_rms_epsilon", g.value(f"{a}.attention.layer_norm_rms_epsilon"), hp["eps"]),
        _meta(f"{a}.rope.freq_base", g.value(f"{a}.rope.freq_base", 10000.0), hp["rope_theta"]),
    ]
    if a == "dflash":
        markov = g.has("markov_w1.weight")
        sfa = g.value("dflash.sample_from_anchor")
        out += [
            _meta("dflash.block_size", g.value("dflash.block_size", 16), hp["block_size"]),
            _meta("dflash.target_layers", g.value("dflash.target_layers"), hp["target_layers"]),
            _meta("tokenizer.ggml.mask_token_id", g.value("tokenizer.ggml.mask_token_id"), hp["mask_token_id"]),
            _meta("dflash.sample_from_anchor", bool(sfa) if sfa is not None else markov, hp["sample_from_anchor"]),
            _meta("markov rank (markov_w1.weight)", g.shape("markov_w1.weight")[1] if markov else 0, hp["markov_rank"]),
            _meta("confidence head (conf_proj.weight)", g.has("conf_proj.weight"), hp["has_confidence"]),
        ]
        if hp["sliding_window"] or g.value("dflash.attention.sliding_window"):
            out.append(_meta("dflash.attention.sliding_window", g.value("dflash.attention.sliding_window", 0), hp["sliding_window"]))
    else:
        out += [
            _meta("eagle3.target_layers", g.value("eagle3.target_layers"), hp["target_layers"]),
            _meta("eagle3.target_hidden_size", g.value("eagle3.target_hidden_size"), hp["target_hidden_size"]),
            _meta("eagle3.norm_before_residual", bool(g.value("eagle3.norm_before_residual", False)), hp["norm_before_residual"]),
            _meta("eagle3.norm_before_fc", bool(g.value("eagle3.norm_before_fc", False)), hp["norm_before_fc"]),
        ]
    if d.weights.has("d2t") and (a == "eagle3" or hp["draft_vocab_size"] < hp["vocab_size"]):
        expected = d.weights.get("d2t").long().numpy().reshape(-1)
        expected = expected + np.arange(expected.size)
        got = g.ints("d2t") if g.has("d2t") else None
        same = got is not None and got.shape == expected.shape and bool((got == expected).all())
        out.append(MetadataCheck("d2t (absolute ids)", "equal" if same else ("absent" if got is None else "different"),
                                 f"{expected.size} ids", same))
    return out


# ============================================================================================== driver
def _load_torch_side(hf_dir: Path, target_dir: Path) -> tuple[Any, Any]:
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


def verify(gguf_path: str | Path, hf_dir: str | Path, target_dir: str | Path | None, *, context: int = 16,
           seed: int = 0, steps: int = 3) -> VerifyReport:
    """Run the torch (HF) and numpy (GGUF) forwards on seeded inputs and compare every output and the metadata.

    Inputs: ``context`` target-feature rows drawn from N(0, 1) (the scale of real hidden states), a random anchor
    (DSpark/DFlash) or random next tokens (EAGLE-3, then ``steps`` chained draft tokens). Raises ConvertError for
    unreadable inputs; a conversion that is readable but wrong gives ``passed == False``.

    Example:
        >>> verify("d.gguf", "dspark_qwen3_4b_block7", "Qwen3-4B", context=16, seed=0).passed  # doctest: +SKIP
        True
    """
    if context < 1 or steps < 1:
        raise ConvertError(f"--context ({context}) and --steps ({steps}) must be at least 1")
    g = open_gguf(gguf_path)
    if isinstance(g.value("dflash.hyper_connection.count"), int) and g.value("dflash.hyper_connection.count") > 0:
        from .verify_dsv4 import verify_dsv4  # imports this module: loaded only for DeepSeek-V4 files

        return verify_dsv4(g, gguf_path, hf_dir, target_dir)
    if target_dir is None:
        raise ConvertError("--target-model-dir is required: the forwards read the target's embeddings and lm_head")
    tf, d = _load_torch_side(Path(hf_dir), Path(target_dir))
    target = TargetWeights(target_dir)
    report = VerifyReport(str(gguf_path), str(hf_dir), str(target_dir), str(g.value("general.architecture")), d.family,
                          d.layout, context, seed, steps, notes=list(d.notes))
    report.metadata = metadata_checks(g, d)
    if not report.metadata[0].passed:
        report.outputs.append(OutputCheck("forward", [], grade="not run", passed=False,
                                          detail="the GGUF architecture does not match the checkpoint family"))
        return report
    rng = np.random.default_rng(seed)
    features = rng.standard_normal((context, d.weights.shape("fc.weight")[1])).astype(np.float32)
    n_vocab = min(x for x in (d.hp["vocab_size"], target.ckpt.shape(target.embed_name)[0]) if x)
    if d.family == "eagle3":
        _verify_eagle3(report, tf, d, g, target, features, rng.integers(0, n_vocab, size=context), steps)
    else:
        _verify_block(report, tf, d, g, target, features, int(rng.integers(0, n_vocab)))
    return report


def _candidate(report: VerifyReport, run: Any) -> Any:
    """Run the numpy forward; a readable but inconsistent GGUF (missing tensor, bad shape) fails the report."""
    try:
        return run()
    except (ConvertError, ValueError, IndexError, KeyError) as e:
        report.outputs.append(OutputCheck("GGUF forward", [], grade="error", passed=False, detail=str(e)))
        return None


def _verify_block(report: VerifyReport, tf: Any, d: Any, g: GGUFWeights, target: TargetWeights, features: np.ndarray,
                  anchor: int) -> None:
    from .reference.dflash_np import dflash_forward

    ref = _reference(report.hf_dir, lambda: tf.block_forward(d, features, anchor))
    out = _candidate(report, lambda: dflash_forward(g, target, features, anchor, prev_tokens=ref.prev_tokens))
    if out is None:
        return
    hp = out.hparams
    report.hparams = {"target_layers": hp.target_layers, "block_size": hp.block_size, "mask_token_id": hp.mask_token_id,
                      "sample_from_anchor": hp.sample_from_anchor, "markov_rank": hp.markov_rank,
                      "confidence_head": hp.has_confidence, "n_layer": hp.n_layer, "anchor": anchor,
                      "prediction_rows": hp.prediction_rows}
    o = report.outputs
    o.append(compare_values("block hidden (post-norm)", ref.hidden, out.hidden))
    o.append(add_argmax(compare_values("block logits", ref.logits, out.logits), ref.logits, out.logits))
    choice_ref, choice_got = ref.logits, out.logits
    if ref.markov_logits is not None or out.markov_logits is not None:
        if ref.markov_logits is None or out.markov_logits is None:
            o.append(OutputCheck("Markov-biased logits", [], passed=False, grade="missing",
                                 detail="Markov head present on one side only"))
        else:
            o.append(add_argmax(compare_values("Markov-biased logits", ref.markov_logits, out.markov_logits),
                                ref.markov_logits, out.markov_logits))
            choice_ref, choice_got = ref.markov_logits, out.markov_logits
    if choice_ref.shape == choice_got.shape:
        o.append(compare_tokens("chosen tokens", ref.tokens, out.tokens, choice_ref, choice_got))
    else:
        o.append(OutputCheck("chosen tokens", list(ref.tokens.shape), grade="shape mismatch", passed=False,
                             detail=f"{out.tokens.size} predictions, expected {ref.tokens.size}"))
    if ref.confidence_logits is not None or out.confidence_logits is not None:
        if ref.confidence_logits is None or out.confidence_logits is None:
            o.append(OutputCheck("confidence (logit)", [], passed=False, grade="missing",
                                 detail="confidence head present on one side only"))
        else:
            c = compare_values("confidence (logit)", ref.confidence_logits, out.confidence_logits)
            if c.nmse is not None:
                p_ref, p_got = 1 / (1 + np.exp(-ref.confidence_logits)), 1 / (1 + np.exp(-out.confidence_logits))
                c.detail = _join(c.detail, f"max |p diff| {float(np.max(np.abs(p_ref - p_got))):.3g}")
            o.append(c)


def _verify_eagle3(report: VerifyReport, tf: Any, d: Any, g: GGUFWeights, target: TargetWeights, features: np.ndarray,
                   tokens: np.ndarray, steps: int) -> None:
    from .reference.eagle3_np import eagle3_forward

    ref = _reference(report.hf_dir, lambda: tf.eagle3_forward(d, features, tokens, steps))
    out = _candidate(report, lambda: eagle3_forward(g, target, features, tokens, steps, forced_tokens=ref.tokens))
    if out is None:
        return
    hp = out.hparams
    report.hparams = {"target_layers": hp.target_layers, "target_hidden_size": hp.target_hidden_size,
                      "norm_before_residual": hp.norm_before_residual, "norm_before_fc": hp.norm_before_fc,
                      "rope_freqs": g.has("rope_freqs.weight"), "draft_vocab": int(out.logits.shape[1])}
    o = report.outputs
    o.append(compare_values("prefill hidden (pre-norm)", ref.prefill_hidden, out.prefill_hidden))
    if steps > 1:
        o.append(compare_values("chained step hidden (pre-norm)", ref.step_hidden, out.step_hidden))
    o.append(add_argmax(compare_values("step logits", ref.logits, out.logits), ref.logits, out.logits))
    o.append(compare_tokens("chosen tokens", ref.tokens, out.tokens, ref.logits, out.logits))


# ============================================================================================== rendering
def render_report(report: VerifyReport, console: Any) -> None:
    """Print the report as Rich tables (outputs, then metadata mismatches or a count of matches)."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=f"verify {escape(report.gguf)} ({report.family}, {report.layout} layout)", title_justify="left",
              box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in ("output", "NMSE (dB)", "max abs", "argmax", "grade", "result"):   # fits 80 columns; shapes: --json
        t.add_column(col, justify="right" if col in ("NMSE (dB)", "max abs", "argmax") else "left", no_wrap=True)
    for c in report.outputs:
        agree = "" if c.total is None else f"{c.agree}/{c.total}" + (f" ({c.near_ties} tie)" if c.near_ties else "")
        nmse = "" if c.nmse is None else f"{c.nmse:.1e} ({c.nmse_db:.0f})"
        t.add_row(escape(c.name), nmse, "" if c.max_abs is None else f"{c.max_abs:.2g}", agree,
                  c.grade.replace("essentially identical", "identical"), "[green]PASS[/]" if c.passed else "[bold red]FAIL[/]")
    console.print(t)
    for c in report.outputs:
        if c.detail:
            console.print(f"  {escape(c.name)}: {escape(c.detail)}")
    bad = [m for m in report.metadata if not m.passed]
    if bad:
        mt = Table(title="metadata mismatches", title_justify="left")
        for col in ("key", "GGUF", "expected from the HF config"):
            mt.add_column(col)
        for m in bad:
            mt.add_row(escape(m.key), escape(repr(m.gguf)), escape(repr(m.expected)))
        console.print(mt)
    else:
        console.print(f"metadata: {len(report.metadata)} values match the HF config")
    if report.hparams.get("target_layers") is not None:
        console.print(f"target layers (input-of-layer ids): {report.hparams['target_layers']}")
    for n in report.notes:
        console.print(f"note: {escape(n)}")
    console.print("[bold green]PASS[/]" if report.passed else "[bold red]FAIL[/]")
