"""The human summary of ``mtp-extract`` / ``mtp-strip`` / ``mtp-graft`` (plain lines on stdout)."""

from __future__ import annotations

from typing import Any


def _size(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"


def cut_lines(result: Any) -> list[str]:
    """The summary of a :class:`~dspark_convert.mtp.run.CutResult`: what was written, what it holds, how it runs,
    what was fetched (remote), and the verification (when asked)."""
    p = result.plan
    kind = {"extract": "MTP sidecar", "strip": "trunk without MTP blocks", "graft": "full target"}[p.op]
    lines = [f"wrote {result.path}: {kind} ({p.arch}), {len(p.tensors)} tensors, {_size(result.size)} "
             f"({result.size:,} bytes) in {result.seconds:.2f} s",
             f"  blocks: {p.layout.n} trunk + {p.layout.nextn} MTP; tensors left out: {p.dropped_tensors}"]
    changed = [k for k in p.kvs if k.fate in ("changed", "added")]
    lines += [f"  {k.fate}: {k.name}: {k.why}" for k in changed]
    lines += [f"  dropped: {name}: {why}" for name, why in p.dropped_kvs]
    lines += [f"  note: {n}" for n in p.notes]
    if result.fetch is not None:
        f = result.fetch
        frac = f.bytes_fetched / f.file_bytes if f.file_bytes else 0.0
        resumed = f"; {f.resumed_tensors} tensors were on disk from an earlier run" if f.resumed_tensors else ""
        lines.append(f"  fetched {_size(f.bytes_fetched)} ({f.bytes_fetched:,} bytes, {frac:.2%} of the remote "
                     f"{_size(f.file_bytes)}) in {f.requests} requests{resumed}")
    from ..mtp.run import serve_line

    lines.append(f"  run: {serve_line(result)}")
    if result.report is not None:
        lines.append(f"  {result.report.line()}")
    return lines
