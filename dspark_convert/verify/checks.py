"""verify's two forward runners.

- :func:`run_reference` / :func:`run_candidate` run the torch / numpy forward, mapping their failures (an input
  error, or a failing ``GGUF forward`` row); :func:`needs_quality_run` says whether quality mode needs a second
  torch run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ConvertError
from ..reference.compare import OutputCheck

if TYPE_CHECKING:
    from ..reference.hf_draft import TorchCheckpoint


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
        detail = (f"the forward needs tensor {e.args[0]!r}, which the file lacks (see 'dspark-convert check')"
                  if isinstance(e, KeyError) and e.args else str(e))
        report.outputs.append(OutputCheck("GGUF forward", [], grade="error", passed=False, detail=detail))
        return None


def needs_quality_run(report: Any, exact: TorchCheckpoint) -> bool:
    """Whether a second torch run on the unrounded weights is needed (and the note that says why not): not when
    rounding the checkpoint ``exact`` to the GGUF's types changed no value."""
    if all(r.changed == 0 for r in exact.rounding.values()):
        report.quality_note = ("storage is lossless for this checkpoint (rounding to the GGUF types changed no "
                               "value): the quality rows equal the exact rows")
        return False
    report.quality_note = "GGUF forward vs the torch forward of the unrounded checkpoint (information, not the verdict)"
    return True
