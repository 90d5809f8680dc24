"""verify's metadata rows of the shared torch reader and its two forward runners.

- :func:`metadata_checks` compares every GGUF hyperparameter with what the HF config implies, reading the GGUF
  through :func:`dspark_convert.reference.ops.read_common_hparams`, the reader the numpy forwards use;
- :func:`run_reference` / :func:`run_candidate` run the torch / numpy forward, mapping their failures (an input
  error, or a failing ``GGUF forward`` row); :func:`needs_quality_run` says whether quality mode needs a second
  torch run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ConvertError
from ..reference.compare import MetadataCheck, OutputCheck, meta_row
from ..reference.ops import read_common_hparams
from ..reference.weights import GGUFWeights
from ..registry import variant_of_family

if TYPE_CHECKING:
    from ..reference.hf_draft import HFDraft


def metadata_checks(g: GGUFWeights, d: HFDraft) -> list[MetadataCheck]:
    """Compare the GGUF's hyperparameters with the HF config (normalised by the torch side)."""
    hp, arch = d.hp, g.value("general.architecture")
    variant = variant_of_family(d.family)          # the checkpoint's variant: the arch its file must have
    want = variant.arch
    out = [MetadataCheck("general.architecture", arch, want, arch == want)]
    if not out[0].passed:
        return out
    a = want
    try:
        c = read_common_hparams(g, a)
    except ConvertError as e:
        return out + [MetadataCheck(f"{a}.* (required keys)", str(e), "present", False)]
    scaling = {"linear": "linear", "yarn": "yarn"}.get(hp.rope.type)
    out += [
        meta_row(f"{a}.block_count", c.n_layer, hp.n_layer),
        meta_row(f"{a}.embedding_length", c.n_embd, hp.n_embd),
        meta_row(f"{a}.feed_forward_length", c.n_ff, hp.n_ff),
        meta_row(f"{a}.attention.head_count", c.n_head, hp.n_head),
        meta_row(f"{a}.attention.head_count_kv", c.n_head_kv, hp.n_head_kv),
        meta_row(f"{a}.attention.key_length", c.head_dim, hp.head_dim),
        meta_row(f"{a}.rope.dimension_count", c.n_rot, int(hp.head_dim * hp.rope.partial)),
        meta_row(f"{a}.attention.layer_norm_rms_epsilon", c.eps, hp.eps),
        meta_row(f"{a}.rope.freq_base", c.rope_base, hp.rope.theta),
        meta_row(f"{a}.rope.scaling.type", c.rope_scaling_type, scaling),
    ]
    if scaling or c.rope_scaling_factor is not None:
        out.append(meta_row(f"{a}.rope.scaling.factor", c.rope_scaling_factor, hp.rope.factor if scaling else None))
    out += variant.role("verify").PROOF.metadata(g, d)
    return out


# ============================================================================================== running the forwards
def run_reference(hf_dir: str, run: Any) -> Any:
    """Run the torch forward; a checkpoint it cannot compute (missing tensor, bad shape) is an input error."""
    try:
        return run()
    except ConvertError:
        raise
    except (KeyError, RuntimeError, ValueError, IndexError) as e:
        raise ConvertError(f"{hf_dir}: the reference forward failed on this checkpoint ({type(e).__name__}: {e})") from None


def run_candidate(report: Any, run: Any,
               errors: tuple[type[Exception], ...] = (ConvertError, ValueError, IndexError, KeyError)) -> Any:
    """Run the numpy forward; a readable but inconsistent GGUF (missing tensor, bad shape: ``errors``) fails the
    report."""
    try:
        return run()
    except errors as e:
        report.outputs.append(OutputCheck("GGUF forward", [], grade="error", passed=False, detail=str(e)))
        return None


def _lossless(exact: HFDraft) -> bool:
    return all(r.changed == 0 for r in exact.weights.rounding.values())


def needs_quality_run(report: Any, exact: HFDraft) -> bool:
    """Whether a second torch run on the unrounded weights is needed (and the note that says why not)."""
    if _lossless(exact):
        report.quality_note = ("storage is lossless for this checkpoint (rounding to the GGUF types changed no "
                               "value): the quality rows equal the exact rows")
        return False
    report.quality_note = "GGUF forward vs the torch forward of the unrounded checkpoint (information, not the verdict)"
    return True
