"""Run llama-server on 127.0.0.1 for a bounded time, ask it for greedy completions, and read back what it drafted.

:class:`LlamaServer` starts the binary (always with ``--no-repack``: on CPUs that advertise AMX the repacked q8_0
kernels fault), waits for ``/health``, and always kills the process (its whole process group) on exit. With
``verbose=True`` the server runs with ``-v`` and its log is kept: :func:`parse_drafts` reads every draft block from
it. llama.cpp b11434 logs one line per draft candidate (``common/speculative.cpp``)::

    - seq_id 0, draft candidate   0, pos   3:    390 (   0.140) 'ast'

(candidates 0..2 per block position, candidate 0 is the drafted token; a chained draft's lines carry a
``spec <func>:`` prefix), and after each block the slot logs ``generate_draft: id=<anchor>, #tokens=<context
length>, ...``. A draft type whose loop logs no candidates leaves blocks with only those counts.

Example:
    >>> with LlamaServer(binary, target, draft=draft, spec_type="draft-dspark", n_max=7) as srv:  # doctest: +SKIP
    ...     c = srv.complete([1, 2, 3], n_predict=8)
    >>> c.tokens, c.draft_n, parse_drafts(srv.log_text())[0].tokens                                 # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from ..errors import ConvertError
from ..variants.spectype import SPEC_TYPES

HOST = "127.0.0.1"

#: the slot's INFO line that ends a request (logged after every draft line of it)
_DONE = "stop processing: n_tokens"
_CANDIDATE = re.compile(r"draft candidate\s+(\d+), pos\s+(\d+):\s+(-?\d+) \(\s*([-0-9.naif]+)\)")
_GENERATED = re.compile(r"generate_draft: id=(-?\d+), #tokens=(\d+), #draft=(\d+)")
#: logged before the accepted tokens are emitted (the ``accepted k/n draft tokens`` line after them is missing for
#: the block that ends the request): ``ids.size`` = accepted + 1
_ACCEPTED = re.compile(r"add accepted tokens: sampled=(-?\d+), ids\.size=(\d+), n_draft=(\d+)")


@dataclass
class DraftBlock:
    """One draft as llama-server logged it: the tokens drafted (candidate 0 of each position, in order), their
    probabilities, the anchor (the target's last sampled token) and the context length (``#tokens``) before it;
    ``n_draft`` (``#draft``: the tokens sent for verification) and ``n_accepted`` (how many of them the target
    accepted, from the slot's ``add accepted tokens: ..., ids.size=k+1`` line). A draft whose loop logs no
    candidates (a selector lattice walked silently) has blocks with no ``tokens``, only the counts."""

    tokens: list[int] = field(default_factory=list)
    probs: list[float] = field(default_factory=list)
    anchor: int | None = None
    n_context: int | None = None
    n_draft: int | None = None
    n_accepted: int | None = None


def parse_drafts(log: str) -> list[DraftBlock]:
    """Every draft block in a llama-server ``-v`` log, in order.

    A block is the run of candidate-0 lines up to the next ``generate_draft`` line (which names its anchor and
    context length); a position that does not grow also starts a new block (a draft without that line).

    Example:
        >>> log = ("D - seq_id 0, draft candidate   0, pos   0:    815 (   0.367) 'a'\\n"
        ...        "D - seq_id 0, draft candidate   1, pos   0:     68 (   0.085) 'b'\\n"
        ...        "D - seq_id 0, draft candidate   0, pos   1:    437 (   0.167) 'c'\\n"
        ...        "D slot handle_last_: id  0 | task 0 | generate_draft: id=95, #tokens=8, #draft=2, pos_next=8\\n")
        >>> b = parse_drafts(log)[0]
        >>> b.tokens, b.anchor, b.n_context
        ([815, 437], 95, 8)
    """
    blocks: list[DraftBlock] = []
    cur = DraftBlock()
    last_pos = -1
    for line in log.splitlines():
        m = _CANDIDATE.search(line)
        if m:
            k, pos, tok = int(m.group(1)), int(m.group(2)), int(m.group(3))
            if k != 0:
                continue
            if pos <= last_pos and cur.tokens:
                blocks.append(cur)
                cur = DraftBlock()
            cur.tokens.append(tok)
            try:
                cur.probs.append(float(m.group(4)))
            except ValueError:
                cur.probs.append(float("nan"))
            last_pos = pos
            continue
        g = _GENERATED.search(line)
        if g:
            cur.anchor, cur.n_context, cur.n_draft = int(g.group(1)), int(g.group(2)), int(g.group(3))
            blocks.append(cur)
            cur, last_pos = DraftBlock(), -1
            continue
        a = _ACCEPTED.search(line)
        if a and blocks and blocks[-1].n_accepted is None and not cur.tokens:
            blocks[-1].n_accepted = int(a.group(2)) - 1
    if cur.tokens:
        blocks.append(cur)
    return blocks


@dataclass
class Completion:
    """A greedy completion: generated token ids and the server's draft counters (``timings.draft_n`` /
    ``draft_n_accepted``; 0 without a draft)."""

    tokens: list[int]
    draft_n: int
    draft_n_accepted: int

    @property
    def acceptance(self) -> float | None:
        """Accepted / drafted tokens (None when nothing was drafted)."""
        return self.draft_n_accepted / self.draft_n if self.draft_n else None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """llama-server with ``target`` (and optionally ``draft`` under ``spec_type``), on 127.0.0.1, one slot.

    ``n_max`` is ``--spec-draft-n-max``; ``--spec-draft-p-min 0`` keeps every drafted position (no early stop),
    so that drafts are comparable position by position. A server that exits or does not answer ``/health``
    within ``timeout`` seconds raises ConvertError with the end of its log (a file llama.cpp refuses is an error,
    not a skip). Leaving the ``with`` block kills it.
    """

    def __init__(self, binary: Path, target: Path, *, draft: Path | None = None, spec_type: str | None = None,
                 n_max: int | None = None, verbose: bool = False, ctx: int = 512, threads: int = 1,
                 timeout: float = 120.0, extra: list[str] | None = None) -> None:
        if draft is not None and spec_type not in SPEC_TYPES:
            raise ConvertError(f"spec_type {spec_type!r}: expected one of {', '.join(SPEC_TYPES)}")
        self.binary, self.target, self.draft, self.spec_type = binary, target, draft, spec_type
        self.port = free_port()
        self.timeout = timeout
        self.log_wait = 10.0
        self._tmp = tempfile.TemporaryDirectory(prefix="dspark-convert-llama-")
        self.log_path = Path(self._tmp.name) / "server.log"
        args = [str(binary), "-m", str(target), "--host", HOST, "--port", str(self.port), "-c", str(ctx),
                "-np", "1", "-t", str(threads), "--no-repack", "--no-warmup"]
        if draft is not None:
            args += ["-md", str(draft), "--spec-type", str(spec_type), "--spec-draft-p-min", "0"]
            if n_max is not None:
                args += ["--spec-draft-n-max", str(n_max)]
        if verbose:
            args.append("-v")
        self.args = args + list(extra or [])
        self.proc: subprocess.Popen[bytes] | None = None

    # ------------------------------------------------------------------------------------------ lifecycle
    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        log = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        finally:
            log.close()
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                if self.proc.poll() is not None:
                    raise ConvertError(f"llama-server exited with code {self.proc.returncode} loading "
                                       f"{self._what()}: {self.log_tail()}")
                if self._healthy():
                    return
                if time.monotonic() > deadline:
                    raise ConvertError(f"llama-server did not become ready in {self.timeout:.0f} s loading "
                                       f"{self._what()}: {self.log_tail()}")
                time.sleep(0.2)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Kill the server (SIGTERM to its process group, SIGKILL after 5 s); idempotent."""
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=5)

    def close(self) -> None:
        """Stop the server and delete its log."""
        self.stop()
        self._tmp.cleanup()

    def _what(self) -> str:
        return f"{self.target.name}" + (f" with draft {self.draft.name} ({self.spec_type})" if self.draft else "")

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.port}/health", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    # ------------------------------------------------------------------------------------------ use
    def log_text(self) -> str:
        """The server's log so far."""
        return self.log_path.read_bytes().decode("utf-8", errors="replace")

    def log_tail(self, n: int = 1500) -> str:
        return self.log_text()[-n:].strip().replace("\n", " | ")

    def complete(self, prompt: list[int], n_predict: int) -> Completion:
        """Greedy completion of token ids ``prompt`` (temperature 0, no prompt cache reuse, EOS ignored).

        llama.cpp logs from a worker thread, so the response can arrive before the log has the request's last
        lines: this returns only once the log shows the slot's ``stop processing`` line for this request (or
        after ``log_wait`` seconds), so that :meth:`log_text` then holds every draft block of the request."""
        done_before = self.log_text().count(_DONE)
        body = json.dumps({"prompt": prompt, "n_predict": n_predict, "temperature": 0, "top_k": 1,
                           "cache_prompt": False, "return_tokens": True, "ignore_eos": True}).encode()
        req = urllib.request.Request(f"http://{HOST}:{self.port}/completion", data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                doc = json.loads(r.read())
        except (urllib.error.URLError, OSError) as e:
            raise ConvertError(f"llama-server /completion failed ({self._what()}): {e}; {self.log_tail()}") from None
        deadline = time.monotonic() + self.log_wait
        while self.log_text().count(_DONE) <= done_before and time.monotonic() < deadline:
            time.sleep(0.05)
        t = doc.get("timings", {})
        return Completion([int(x) for x in doc.get("tokens", [])], int(t.get("draft_n", 0) or 0),
                          int(t.get("draft_n_accepted", 0) or 0))


def spec_for(draft: Path, chain_steps: int = 4) -> tuple[str, int]:
    """``(--spec-type, --spec-draft-n-max)`` for a converted draft, with a whole block per draft.

    Both come from :mod:`..variants.spectype`: the type the file needs (:func:`~..variants.spectype.spec_type_of`,
    which may differ from the one llama-server auto-detects: a head-less file predicting from the anchor row needs
    the type that reads block rows from the anchor on, measured one position late under the other) and the draft
    length (:func:`~..variants.spectype.draft_n_max`: the block's drafting rows, or ``chain_steps`` chained steps
    for a chained type). A file llama-server does not speculate with raises ConvertError."""
    from ..reference import open_gguf
    from ..variants.spectype import draft_n_max, spec_type_of

    g = open_gguf(draft)
    st = spec_type_of(g.value, [t.name for t in g.file.tensors])
    if st.spec_type is None:
        raise ConvertError(f"{draft}: {st.reason}: not a draft llama-server speculates with")
    return st.spec_type, draft_n_max(g.value, st, chain_steps)
