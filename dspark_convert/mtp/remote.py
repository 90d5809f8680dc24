"""Extract the MTP sidecar of a remote target (``hf://ORG/REPO/file.gguf[@REV]`` or an ``https://`` URL) by
fetching its header and then exactly the byte ranges of the tensors the sidecar holds.

The output is written to ``OUT.part`` beside the destination, with a small state file ``OUT.part.json`` (the
source's size, ETag or commit, the planned header's digest and how many tensors are complete, updated after each
tensor once its bytes are synced). A run that stops (a dropped connection after the retries, the deadline, Ctrl-C)
leaves both; the next run with the same source and destination checks them and fetches only the tensors not on
disk yet. On success ``OUT.part`` is renamed to ``OUT`` and the state file removed. Memory stays bounded: each
range is streamed to the file in chunks of at most 1 MiB.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConvertError
from ..gguffile.options import RemoteOptions
from ..gguffile.reader import GGUFFile
from .cut import CutPlan, plan_extract


@dataclass
class RemoteFetch:
    """What a remote extraction fetched: bytes received (header and tensors), requests, the remote file size(s)
    and how many tensors were already on disk from an earlier run."""

    bytes_fetched: int
    requests: int
    file_bytes: int
    resumed_tensors: int
    source: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"bytes_fetched": self.bytes_fetched, "requests": self.requests, "file_bytes": self.file_bytes,
                "fraction_fetched": self.bytes_fetched / self.file_bytes if self.file_bytes else 0.0,
                "resumed_tensors": self.resumed_tensors, "source": self.source}


def _shard_refs(ref: str) -> list[str]:
    """The references of every shard of a split remote file (any shard given), else ``[ref]``."""
    import re

    m = re.search(r"-(\d{5})-of-(\d{5})\.gguf(?=$|@|\?)", ref, re.IGNORECASE)
    if m is None:
        return [ref]
    count = int(m.group(2))
    return [ref[: m.start()] + f"-{i:05d}-of-{m.group(2)}.gguf" + ref[m.end():] for i in range(1, count + 1)]


def extract_remote(ref: str, out: Path, *, options: RemoteOptions, force: bool = False,
                   progress: Callable[[int], None] | None = None,
                   plan_ready: Callable[[CutPlan], None] | None = None) -> tuple[CutPlan, int, RemoteFetch]:
    """Extract the sidecar of the remote file ``ref`` into ``out``; returns the plan, the file size and what was
    fetched. ``progress(n)`` is called as tensor bytes arrive; ``plan_ready(plan)`` once the header is planned."""
    from ..gguffile.refs import classify_ref
    from ..gguffile.remote import open_with_reader

    files: list[GGUFFile] = []
    readers = []
    sources = []
    for r in _shard_refs(ref):
        where = classify_ref(r)
        if isinstance(where, Path):
            raise ConvertError(f"{r}: a local path; expected an hf:// reference or a URL")
        f, reader, source = open_with_reader(where, options)
        files.append(f)
        readers.append(reader)
        sources.append(source)
    plan = plan_extract(files)
    if plan_ready is not None:
        plan_ready(plan)
    head = plan.header()
    part = out.with_name(out.name + ".part")
    state_path = out.with_name(out.name + ".part.json")
    identity = [{"ref": r.name, "size": r.size, "etag": r.etag, "commit": s(r).commit}
                for r, s in zip(readers, sources, strict=True)]
    digest = hashlib.sha256(head).hexdigest()
    done = _resume_point(part, state_path, identity, digest)
    resumed = done
    offsets = plan.offsets()
    total = len(head) + (offsets[-1] + _padded(plan.tensors[-1].tensor.nbytes or 0, plan.alignment)
                         if plan.tensors else 0)
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(part, flags, 0o644)
    try:
        if done == 0:
            os.ftruncate(fd, 0)
            os.pwrite(fd, head, 0)
            _save_state(state_path, identity, digest, 0)
        for i in range(done, len(plan.tensors)):
            p = plan.tensors[i]
            t = p.tensor
            pos = len(head) + offsets[i]

            def sink(chunk: bytes) -> None:
                nonlocal pos
                os.pwrite(fd, chunk, pos)
                pos += len(chunk)
                if progress is not None:
                    progress(len(chunk))

            start, end = t.offset, t.offset + (t.nbytes or 0)
            held = readers[p.src].buf  # bytes [0, len) came with the header: not fetched twice
            if start < len(held):
                sink(bytes(held[start:min(end, len(held))]))
                start = min(end, len(held))
            if start < end:
                readers[p.src].read_range(start, end, sink)
            os.fdatasync(fd)
            _save_state(state_path, identity, digest, i + 1)
        os.ftruncate(fd, total)
        os.fsync(fd)
    finally:
        os.close(fd)
    if out.exists() and not force:
        raise ConvertError(f"{out}: exists; use --force to replace it (the extracted file is kept as {part})")
    os.replace(part, out)
    state_path.unlink(missing_ok=True)
    fetched = sum(r.bytes_fetched for r in readers)
    info = sources[0](readers[0]).to_dict()
    return plan, total, RemoteFetch(fetched, sum(r.requests for r in readers), sum(r.size or 0 for r in readers),
                                    resumed, info)


def _padded(n: int, alignment: int) -> int:
    return n + (-n) % alignment


def _save_state(path: Path, identity: list[dict[str, Any]], digest: str, done: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"sources": identity, "header_sha256": digest, "tensors_done": done}))
    os.replace(tmp, path)


def _resume_point(part: Path, state_path: Path, identity: list[dict[str, Any]], digest: str) -> int:
    """How many tensors an earlier run left complete in ``part`` (0: start afresh). Only a regular file with a
    state file naming the same source (size, ETag, commit) and the same planned header counts."""
    if not part.exists() and not part.is_symlink():
        return 0
    if part.is_symlink() or not part.is_file():
        raise ConvertError(f"{part}: exists and is not a regular file; remove it (extraction writes there first)")
    try:
        state = json.loads(state_path.read_text())
    except (OSError, ValueError, RecursionError):
        return 0
    if not isinstance(state, dict) or state.get("sources") != identity or state.get("header_sha256") != digest:
        return 0
    done = state.get("tensors_done")
    return done if isinstance(done, int) and done >= 0 else 0
