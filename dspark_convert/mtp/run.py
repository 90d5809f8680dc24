"""The three entry points behind ``mtp-extract``, ``mtp-strip`` and ``mtp-graft``: open, plan, write, verify.

Example:
    >>> r = extract("Qwen3.5-9B-Q4_K_M.gguf")  # doctest: +SKIP
    >>> r.path.name, r.plan.layout.nextn  # doctest: +SKIP
    ('mtp-Qwen3.5-9B-Q4_K_M.gguf', 1)
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConvertError
from ..gguffile.options import RemoteOptions
from ..gguffile.reader import GGUFFile, read_gguf
from .cut import CutPlan, open_inputs, plan_extract, plan_graft, plan_strip, split_names, write_cut
from .remote import RemoteFetch
from .verify import CutReport, verify_cut

Progress = Callable[[int], None]


@dataclass
class CutResult:
    """What an operation wrote: the file, its size, the plan (accounting), seconds taken, the verification (when
    asked) and, for a remote source, what was fetched."""

    source: str
    path: Path
    size: int
    plan: CutPlan
    seconds: float
    report: CutReport | None = None
    fetch: RemoteFetch | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "output": str(self.path), "bytes": self.size, "seconds": self.seconds,
                **self.plan.to_dict(), "serve": serve_line(self),
                "verify": self.report.to_dict() if self.report is not None else None,
                "remote": self.fetch.to_dict() if self.fetch is not None else None}


def serve_line(r: CutResult) -> str:
    """How llama-server runs what was written."""
    if r.plan.op == "extract":
        return f"llama-server -m TARGET.gguf -md {r.path} --spec-type draft-mtp"
    if r.plan.op == "strip":
        return f"llama-server -m {r.path} -md mtp-SIDECAR.gguf --spec-type draft-mtp"
    return f"llama-server -m {r.path} --spec-type draft-mtp"


def _base(ref: str) -> str:
    """The file name of ``ref`` without ``.gguf``, a ``@REV`` or a split suffix."""
    name = ref.rsplit("/", 1)[-1].split("?", 1)[0]
    if "@" in name and name.lower().rsplit("@", 1)[0].endswith(".gguf"):
        name = name.rsplit("@", 1)[0]
    shards = split_names(Path(name))
    if shards is not None:
        name = shards[0].name.rsplit("-00001-of-", 1)[0] + ".gguf"
    return name[:-5] if name.lower().endswith(".gguf") else name


def default_name(op: str, ref: str) -> Path:
    """The output name when ``-o`` is not given, in the current folder: ``mtp-NAME.gguf`` (what ``llama-server
    -hf`` looks for beside a model), ``NAME-trunk.gguf``, ``NAME-grafted.gguf``."""
    base = _base(ref)
    return Path({"extract": f"mtp-{base}.gguf", "strip": f"{base}-trunk.gguf", "graft": f"{base}-grafted.gguf"}[op])


def _destination(out: Path, inputs: list[str], force: bool) -> None:
    from ..hf2gguf.destination import check_destination

    check_destination(out, outtype="auto", force=force)
    for i in inputs:
        p = Path(i)
        if p.exists() and out.exists() and out.resolve() == p.resolve():
            raise ConvertError(f"{out}: is an input file; give another -o")


@contextlib.contextmanager
def _opened(ref: str) -> Iterator[list[GGUFFile]]:
    from ..gguffile.refs import is_remote_ref

    if not Path(ref).exists() and is_remote_ref(ref):
        raise ConvertError(f"{ref}: a remote file; mtp-strip and mtp-graft read local files (they copy nearly every "
                           "byte): download it first (mtp-extract reads remote files)")
    if not Path(ref).exists():
        shards = split_names(Path(ref))
        if shards is None or not shards[0].exists():
            raise ConvertError(f"{ref}: no such file")
    files = open_inputs(ref)
    try:
        yield files
    finally:
        for f in files:
            f.close()


def _cut_local(op: str, refs: list[str], out: Path, planner: Callable[..., CutPlan], *, force: bool, verify: bool,
               progress: Progress | None, plan_ready: Callable[[CutPlan], None] | None) -> CutResult:
    """Check the destination, open the local inputs ``refs`` (in order, each a list of shards), plan with
    ``planner(*inputs)``, write ``out`` and, with ``verify``, check it against the inputs."""
    t0 = time.monotonic()
    _destination(out, refs, force)
    with contextlib.ExitStack() as stack:
        inputs = [stack.enter_context(_opened(ref)) for ref in refs]
        plan = planner(*inputs)
        if plan_ready is not None:
            plan_ready(plan)
        size = write_cut(plan, out, force=force, progress=progress)
        report = None
        if verify:
            with read_gguf(out) as written:
                report = verify_cut(op, inputs, written)
    return CutResult(refs[0], out, size, plan, time.monotonic() - t0, report)


def extract(source: str | os.PathLike[str], outfile: str | os.PathLike[str] | None = None, *, force: bool = False,
            verify: bool = False, remote: RemoteOptions | None = None, progress: Progress | None = None,
            plan_ready: Callable[[CutPlan], None] | None = None) -> CutResult:
    """``mtp-extract``: the MTP sidecar of the full target ``source`` (a local file, a split file's shard, an
    ``hf://`` reference or an ``https://`` URL) into ``outfile`` (default :func:`default_name`). A remote source is
    read by range requests: its header, then only the sidecar's tensors (:mod:`.remote`). Raises ConvertError
    (one line, nothing left at the destination) for a file without MTP layers, an arch without an MTP path, or a
    bad destination."""
    from ..gguffile.refs import is_remote_ref

    ref = os.fspath(source)
    out = Path(outfile) if outfile is not None else default_name("extract", ref)
    if not Path(ref).exists() and is_remote_ref(ref):
        from .remote import extract_remote

        t0 = time.monotonic()
        _destination(out, [], force=True)  # an existing file is checked once the data is in (kept as OUT.part)
        if out.exists() and not force:
            raise ConvertError(f"{out}: exists; use --force to replace it")
        plan, size, fetch = extract_remote(ref, out, options=remote or RemoteOptions(), force=force,
                                           progress=progress, plan_ready=plan_ready)
        result = CutResult(ref, out, size, plan, time.monotonic() - t0, None, fetch)
    else:
        result = _cut_local("extract", [ref], out, plan_extract, force=force, verify=verify, progress=progress,
                            plan_ready=plan_ready)
    _loader_note(result)
    return result


def _loader_note(result: CutResult) -> None:
    """A sidecar that llama.cpp's loader rules refuse (``check``) gets a note naming the first error: the cut copies
    the source's MTP blocks as they are, so a source whose blocks do not load as a draft (e.g. upstream's file of a
    checkpoint with more MTP layers than the arch's loader takes) gives such a sidecar."""
    from ..check import check_file

    errors = [f for f in check_file(result.path) if f.level == "error"]
    if errors:
        result.plan.notes.append(f"check finds {len(errors)} loader error(s) in this sidecar, copied from the "
                                 f"source's MTP blocks (first: {errors[0]}); llama-server b11434 does not run it as "
                                 "a draft")


def strip(source: str | os.PathLike[str], outfile: str | os.PathLike[str] | None = None, *, force: bool = False,
          verify: bool = False, progress: Progress | None = None,
          plan_ready: Callable[[CutPlan], None] | None = None) -> CutResult:
    """``mtp-strip``: the trunk of the full target ``source`` (local, single or split) without its MTP blocks,
    loadable by every loader (``block_count = n``, no ``nextn_predict_layers``, per-layer arrays cut)."""
    ref = os.fspath(source)
    out = Path(outfile) if outfile is not None else default_name("strip", ref)
    return _cut_local("strip", [ref], out, plan_strip, force=force, verify=verify, progress=progress,
                      plan_ready=plan_ready)


def graft(trunk: str | os.PathLike[str], sidecar: str | os.PathLike[str],
          outfile: str | os.PathLike[str] | None = None, *, force: bool = False, verify: bool = False,
          progress: Progress | None = None, plan_ready: Callable[[CutPlan], None] | None = None) -> CutResult:
    """``mtp-graft``: the full target from ``trunk`` and its ``sidecar`` (local files). Refused (one line) when the
    sidecar's trunk header or vocabulary differs from the trunk's."""
    tref, sref = os.fspath(trunk), os.fspath(sidecar)
    out = Path(outfile) if outfile is not None else default_name("graft", tref)
    return _cut_local("graft", [tref, sref], out, plan_graft, force=force, verify=verify, progress=progress,
                      plan_ready=plan_ready)
