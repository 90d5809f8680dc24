"""What a conversion resolves before writing (:class:`PlannedConversion`) and what it did (:class:`ConvertResult`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..archnames import Architecture
from ..findings import Finding
from ..hf.checkpoint import Checkpoint
from ..hf.hub import ResolvedModel
from ..plan import Plan
from ..registry.families import family_name
from ..registry.spectype import SpecType
from ..roles.convert import Family


@dataclass
class PlannedConversion:
    """What :func:`~dspark_convert.hf2gguf.conversion.plan_conversion` resolved: the plan, the checkpoints it reads,
    and who it is for.

    ``sources`` maps a TensorSpec ``origin`` to its open checkpoint; :meth:`close` releases them. ``fit`` holds
    the fit findings (does the draft belong to this target?) with their own level: the caller decides about
    errors (``--ignore-target-mismatch``). ``architecture`` says which ``architectures`` value was used and why.
    """

    plan: Plan
    sources: dict[str, Checkpoint]
    family: Family
    draft: ResolvedModel
    target: ResolvedModel
    outtype: str  # resolved: never "auto"
    fit: list[Finding] = field(default_factory=list)
    architecture: Architecture | None = None

    @property
    def family_name(self) -> str:
        return family_name(self.family)

    def close(self) -> None:
        for ck in self.sources.values():
            ck.close()


@dataclass
class ConvertResult:
    """What a conversion did (or, for a dry run, would do)."""

    path: Path | None
    plan: Plan
    findings: list[Finding]
    outtype: str
    bytes_written: int = 0
    seconds: float = 0.0  # the whole conversion (resolving inputs, planning, writing)
    write_seconds: float = 0.0  # writing the file alone (what the progress bar's rate measures)
    dry_run: bool = False
    family: str = ""
    notes: list[str] = field(default_factory=list)
    architecture: dict[str, str | None] | None = None  # declared / used / how (declared, alias, forced)
    #: what llama-server does with the file (:class:`~dspark_convert.registry.spectype.SpecType` as a dict)
    spec_type: dict[str, Any] | None = None

    @classmethod
    def of(cls, planned: PlannedConversion, path: Path, findings: list[Finding], spec_type: SpecType,
           dry_run: bool) -> ConvertResult:
        """The result of writing ``planned`` to ``path`` (nothing written yet: ``bytes_written`` 0)."""
        return cls(path=path, plan=planned.plan, findings=findings, outtype=planned.outtype, dry_run=dry_run,
                   family=planned.family_name, notes=list(planned.plan.notes),
                   architecture=planned.architecture.to_dict() if planned.architecture else None,
                   spec_type=spec_type.to_dict() if spec_type.spec_type is not None else None)

    def __repr__(self) -> str:
        """One short line (the plan's KVs hold whole vocabularies: never printed here)."""
        return (f"ConvertResult(path={str(self.path)!r}, family={self.family!r}, outtype={self.outtype!r}, "
                f"dry_run={self.dry_run}, keys={len(self.plan.kvs)}, tensors={len(self.plan.tensors)}, "
                f"bytes_written={self.bytes_written}, findings={len(self.findings)})")
