"""``dspark-convert bench``: does a draft speed up its target in llama-server? Acceptance, lossless, speed-up.

:func:`bench` starts llama-server (:class:`~.server.LlamaServer`, on a free 127.0.0.1 port) once with the target
alone and once per draft, with the ``--spec-type`` and draft length the draft file needs (``check``'s
:func:`~dspark_convert.check.spec_type`), sends the same prompts greedily to each (temperature 0, ``ignore_eos``,
no prompt cache), and returns a :class:`BenchReport`:

- **lossless**: every draft run's tokens equal the plain run's for the same prompt (greedy speculative decoding
  must not change the output; a difference is reported per prompt with its first differing token, and the command
  exits 1);
- **acceptance**: accepted / drafted tokens, from llama-server's per-request ``timings`` (``draft_n``,
  ``draft_n_accepted``); **mean accepted length**: accepted tokens per verification step, and tokens per step
  (the same + 1, llama-server's ``mean len``);
- **acceptance by draft position**: position k accepted / reached. Each verification step is one
  ``accepted a/n draft tokens`` line of llama-server's log (logged with ``LLAMA_TRACE=1``): position k is reached
  when the draft had more than k tokens and positions 0..k-1 were accepted, accepted when a > k. llama-server's
  own per-position counter (``/metrics``, ``spec_decode_num_accepted_tokens_per_pos_total``) is read too and must
  agree (``server_counts`` in the JSON);
- **speed**: generated tokens per second of the generation phase (``timings.predicted_n / predicted_ms``; prompt
  processing excluded), summed over a run's requests, with and without the draft. The speed-up is the median over
  requests of the draft run's tokens per second over the plain run's for the same prompt and round (a median: one
  request stalled by a busy machine does not move it; the JSON adds the quartiles). The servers take turns: each
  round (``repeat``) starts the plain server, runs every prompt, stops it, then does the same for each draft. A
  warm-up request (not counted) runs first on every server.

The measured figures of a tiny model say little about speed (start-up and per-call overheads dominate); compare
drafts within one run. A Ctrl-C (or SIGTERM) stops llama-server and returns what was measured so far,
``interrupted`` set.

Prompts: :func:`builtin_prompts` (36 short prompts of our own across chat, code, math and summarisation; not a
published benchmark) or :func:`load_prompts` (one prompt a line, or JSONL with a ``prompt`` field: a string, or a
list of token ids sent as they are). Text prompts go through the target's chat template (llama-server's
``/apply-template``) when it has one, unless ``raw``.

Example:
    >>> r = bench("target.gguf", ["draft-bf16.gguf", "draft-q8_0.gguf"], n_predict=64)   # doctest: +SKIP
    >>> [(d.file.name, d.acceptance, d.speedup) for d in r.drafts]                          # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import ConvertError, Interrupted, clip
from .build import ENV_BINARY, SDIST_PACKAGE, SDIST_VERSION, UPSTREAM_TAG, cache_dir, find_llama_server
from .server import LlamaServer, ServerError

#: the JSON document's ``schema`` value (docs/bench.md describes the fields)
SCHEMA = "dspark-convert.bench/1"
#: one verification step in llama-server's log under ``LLAMA_TRACE`` (``tools/server/server-context.cpp``)
_STEP = re.compile(r"accepted\s*(\d+)/\s*(\d+) draft tokens( \(restore checkpoint\))?\s*$")
_PER_POS = re.compile(r'^llamacpp:spec_decode_num_accepted_tokens_per_pos_total\{position="(\d+)"\}\s+([0-9.e+]+)',
                      re.M)
_COUNTER = re.compile(r"^llamacpp:(\w+)\s+([0-9.e+-]+)\s*$", re.M)
#: Progress callback: (requests done, requests in all, what runs now)
Progress = Callable[[int, int, str], None]


# ---------------------------------------------------------------------------------------------- prompts
@dataclass(frozen=True)
class Prompt:
    """One prompt: text (sent through the chat template unless raw) or token ids (sent as they are)."""

    text: str | None = None
    tokens: tuple[int, ...] | None = None
    kind: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **({"text": self.text} if self.text is not None else {"tokens": list(self.tokens or ())})}


def _prompt_from_json(doc: Any, where: str) -> Prompt:
    if not isinstance(doc, dict) or "prompt" not in doc:
        raise ConvertError(f"{where}: expected a JSON object with a \"prompt\" field")
    p, kind = doc["prompt"], str(doc.get("kind", ""))
    if isinstance(p, str) and p.strip():
        return Prompt(text=p, kind=kind)
    if isinstance(p, list) and p and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in p):
        return Prompt(tokens=tuple(p), kind=kind)
    raise ConvertError(f"{where}: \"prompt\" must be a non-empty string or a list of token ids (integers >= 0)")


def load_prompts(path: str | os.PathLike[str]) -> list[Prompt]:
    """The prompts of a file: JSONL (every non-empty line a JSON object with ``prompt``: a string or a list of token
    ids, optional ``kind``) when the first non-empty line starts with ``{``, else one text prompt per non-empty
    line. A bad line is one ConvertError naming the file and line.

    Example:
        >>> import tempfile; f = Path(tempfile.mkdtemp()) / "p.jsonl"
        >>> _ = f.write_text('{"prompt": "Hello"}\\n{"prompt": [1, 2, 3], "kind": "ids"}\\n')
        >>> load_prompts(f)
        [Prompt(text='Hello', tokens=None, kind=''), Prompt(text=None, tokens=(1, 2, 3), kind='ids')]
    """
    p = Path(path)
    try:
        if not stat.S_ISREG(os.stat(p).st_mode):
            raise ConvertError(f"{p}: not a regular file; --prompts reads a text or JSONL file")
        raw = p.read_bytes()
    except OSError as e:
        raise ConvertError(f"{p}: cannot read the prompts: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConvertError(f"{p}: not UTF-8 text (byte {e.start:,})") from None
    lines = [(i, ln) for i, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    if not lines:
        raise ConvertError(f"{p}: no prompts (the file is empty)")
    if not lines[0][1].lstrip().startswith("{"):
        return [Prompt(text=ln) for _, ln in lines]
    out = []
    for i, ln in lines:
        try:
            doc = json.loads(ln)
        except json.JSONDecodeError as e:
            raise ConvertError(f"{p}:{i}: not a JSON line ({e.msg})") from None
        except RecursionError:
            raise ConvertError(f"{p}:{i}: not a JSON line (nested past the interpreter's recursion limit)") from None
        except ValueError as e:  # an integer literal past the interpreter's 4300-digit limit
            raise ConvertError(f"{p}:{i}: not a JSON line ({clip(str(e))})") from None
        out.append(_prompt_from_json(doc, f"{p}:{i}"))
    return out


def builtin_prompts() -> list[Prompt]:
    """The built-in prompt set: 36 short prompts written for this tool (9 each of chat, code, math and
    summarisation). It is a smoke test of drafting on ordinary requests, not a published benchmark."""
    text = resources.files("dspark_convert.llamacpp").joinpath("data/prompts.jsonl").read_text(encoding="utf-8")
    return [_prompt_from_json(json.loads(ln), f"built-in prompts line {i}")
            for i, ln in enumerate(text.splitlines(), 1) if ln.strip()]


# ---------------------------------------------------------------------------------------------- llama-server binary
@dataclass(frozen=True)
class ServerBinary:
    """The llama-server used: its path, how it was found (``--llama-server``, ``$DSPARK_LLAMA_SERVER``, ``PATH``
    or the project's cache build) and what ``--version`` says (build number and commit)."""

    path: Path
    found_by: str
    version: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "found_by": self.found_by, "version": self.version}

    def line(self) -> str:
        return f"llama-server {self.path} ({self.found_by}; {self.version})"


def _version(binary: Path) -> str:
    try:
        p = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConvertError(f"{binary}: cannot run llama-server --version: {e}") from None
    m = re.search(r"version: .*", p.stdout + p.stderr)
    return m.group(0).strip() if m else "version unknown"


def find_binary(given: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None) -> ServerBinary:
    """The llama-server to run: ``given`` (``--llama-server``), else ``$DSPARK_LLAMA_SERVER``, else ``llama-server``
    on ``PATH``, else the project's cache build (``python -m dspark_convert.llamacpp.build`` makes it from the
    pinned upstream sdist). None of them: ConvertError saying how to get one."""
    env = dict(os.environ) if env is None else env
    if given is not None:
        p = Path(given).expanduser()
        cand = p / "bin" / "llama-server" if p.is_dir() else p
        if not (cand.is_file() and os.access(cand, os.X_OK)):
            raise ConvertError(f"--llama-server {given}: no executable llama-server there")
        return ServerBinary(cand.resolve(), "--llama-server", _version(cand))
    if env.get(ENV_BINARY, "").strip():
        found = find_llama_server(env)
        assert found is not None  # find_llama_server raises for a variable that names nothing
        return ServerBinary(found, f"${ENV_BINARY}", _version(found))
    on_path = shutil.which("llama-server", path=env.get("PATH"))
    if on_path:
        return ServerBinary(Path(on_path).resolve(), "PATH", _version(Path(on_path)))
    found = find_llama_server(env)
    if found is not None:
        return ServerBinary(found, f"cache build of llama.cpp b{UPSTREAM_TAG} ({SDIST_PACKAGE}=={SDIST_VERSION})",
                            _version(found))
    raise ConvertError(f"no llama-server found (--llama-server, ${ENV_BINARY}, PATH, {cache_dir(env)}): build "
                       f"llama.cpp b{UPSTREAM_TAG} with 'python -m dspark_convert.llamacpp.build' (about 45 minutes "
                       "on 2 cores) or pass --llama-server PATH")


# ---------------------------------------------------------------------------------------------- files
@dataclass(frozen=True)
class FileInfo:
    """A model file's identity: path, ``general.architecture``, outtype (``general.file_type``), ``general.name``,
    size in bytes, and where it came from when it was downloaded (``source``)."""

    path: Path
    arch: str | None
    outtype: str | None
    name: str | None
    size: int
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "file": self.path.name, "arch": self.arch, "outtype": self.outtype,
                "name": self.name, "size": self.size, "source": self.source}


def _outtype(ft: Any) -> str | None:
    if not isinstance(ft, int):
        return None
    from gguf import LlamaFileType

    try:
        return LlamaFileType(ft).name.removeprefix("MOSTLY_").replace("ALL_", "")
    except ValueError:
        return f"file_type {ft}"


def local_file(ref: str, what: str) -> tuple[Path, str | None]:
    """A local path for ``ref``: a local file as is; a Hub file (``hf://ORG/REPO/file.gguf[@REV]``, a Hub URL or
    ``ORG/REPO/file.gguf``) downloaded into the Hugging Face cache first (huggingface_hub). Returns the path and
    the reference it was downloaded from (None for a local file). Any other URL is refused with one line."""
    from ..gguffile.refs import HubFile, classify_ref

    where = classify_ref(ref)
    if isinstance(where, Path):
        if not where.is_file():
            raise ConvertError(f"{ref}: {what}: no such file")
        return where, None
    if not isinstance(where, HubFile):
        raise ConvertError(f"{ref}: {what}: only local files and Hub files (hf://ORG/REPO/file.gguf) can be run; "
                           "download the URL first")
    from huggingface_hub import constants, hf_hub_download

    endpoint = (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")  # read now, as the Hub reads do
    try:
        path = hf_hub_download(where.repo_id, where.filename, revision=where.revision, repo_type=where.repo_type,
                               endpoint=endpoint, cache_dir=os.environ.get("HF_HUB_CACHE") or None)
    except Exception as e:  # huggingface_hub raises many kinds; one line names the file
        raise ConvertError(f"{where.display}: {what}: download failed: {str(e).splitlines()[0][:300]}") from None
    return Path(path), where.display


def file_info(ref: str, what: str) -> FileInfo:
    """The :class:`FileInfo` of a GGUF reference (downloaded first when it is on the Hub, :func:`local_file`)."""
    from ..gguffile.reader import read_gguf

    path, source = local_file(ref, what)
    with read_gguf(path) as g:
        return FileInfo(path, g.arch, _outtype(g.value("general.file_type")), g.value("general.name"),
                        path.stat().st_size, source)


def draft_spec(path: Path, n_max: int | None = None) -> tuple[str, int, tuple[str, ...]]:
    """``(--spec-type, --spec-draft-n-max, other flags)`` of a draft file, from :func:`dspark_convert.check.spec_type`
    (``n_max`` None: a whole block, :func:`~dspark_convert.registry.spectype.draft_n_max`). A file llama-server
    does not speculate with raises ConvertError."""
    from ..check import spec_type
    from ..gguffile.reader import plan_from_gguf
    from ..registry.spectype import draft_n_max

    plan = plan_from_gguf(path)
    st = spec_type(plan)
    if st.spec_type is None:
        raise ConvertError(f"{path}: {st.reason}: not a draft llama-server speculates with")
    kv = {k.name: k.value for k in plan.kvs}
    return st.spec_type, (draft_n_max(kv.get, st) if n_max is None else n_max), st.extra_flags


# ---------------------------------------------------------------------------------------------- results
@dataclass
class RequestRun:
    """One request: prompt index, repeat, generated token ids, tokens generated, generation and prompt time (ms,
    llama-server's ``timings``), drafted and accepted tokens."""

    prompt: int
    repeat: int
    tokens: list[int]
    predicted_n: int
    predicted_ms: float
    prompt_ms: float
    draft_n: int
    draft_accepted: int

    def to_dict(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "repeat": self.repeat, "predicted_n": self.predicted_n,
                "predicted_ms": round(self.predicted_ms, 3), "prompt_ms": round(self.prompt_ms, 3),
                "draft_n": self.draft_n, "draft_n_accepted": self.draft_accepted}


@dataclass
class Mismatch:
    """A draft run's output that differs from the plain run: prompt, repeat, first differing token index and the
    two tokens there (None: one output is shorter)."""

    prompt: int
    repeat: int
    index: int
    plain: int | None
    draft: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "repeat": self.repeat, "index": self.index, "plain": self.plain,
                "draft": self.draft}


@dataclass
class Run:
    """One llama-server: the plain target (``file`` None) or one draft, and what it measured."""

    file: FileInfo | None
    spec_type: str | None = None
    n_max: int | None = None
    command: list[str] = field(default_factory=list)
    requests: list[RequestRun] = field(default_factory=list)
    #: per verification step: (accepted, drafted), from the log
    steps: list[tuple[int, int]] = field(default_factory=list)
    #: llama-server's own counters over the measured requests (``/metrics``): steps, drafted, accepted, per position
    server_counts: dict[str, Any] | None = None
    mismatches: list[Mismatch] = field(default_factory=list)
    error: str | None = None
    #: the last lines of llama-server's log when it failed
    log_tail: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    complete: bool = False

    # ------------------------------------------------------------------ figures
    @property
    def predicted(self) -> int:
        return sum(r.predicted_n for r in self.requests)

    @property
    def tokens_per_second(self) -> float | None:
        """Generated tokens per second of the generation phase, over every request."""
        ms = sum(r.predicted_ms for r in self.requests)
        return self.predicted / ms * 1000.0 if ms > 0 else None

    def speedups(self, plain: Run) -> list[float]:
        """Per request measured by both runs (same prompt, same round): this run's tokens per second over the plain
        run's, in prompt order."""
        base = {(r.prompt, r.repeat): r for r in plain.requests}
        out = []
        for r in self.requests:
            b = base.get((r.prompt, r.repeat))
            if b is not None and r.predicted_ms > 0 and b.predicted_ms > 0 and b.predicted_n > 0:
                out.append((r.predicted_n / r.predicted_ms) / (b.predicted_n / b.predicted_ms))
        return out

    def speedup(self, plain: Run) -> float | None:
        """The median of :meth:`speedups` (None: no request measured by both)."""
        s = self.speedups(plain)
        return statistics.median(s) if s else None

    @property
    def drafted(self) -> int:
        return sum(r.draft_n for r in self.requests)

    @property
    def accepted(self) -> int:
        return sum(r.draft_accepted for r in self.requests)

    @property
    def acceptance(self) -> float | None:
        """Accepted / drafted tokens (None: nothing drafted)."""
        return self.accepted / self.drafted if self.drafted else None

    @property
    def mean_accepted(self) -> float | None:
        """Accepted draft tokens per verification step (None: no step)."""
        return self.accepted / len(self.steps) if self.steps else None

    def by_position(self) -> list[tuple[int, int]]:
        """Per draft position k: (accepted, reached), see the module docstring."""
        n = max((d for _, d in self.steps), default=0)
        out = []
        for k in range(n):
            reached = sum(1 for a, d in self.steps if d > k and a >= k)
            out.append((sum(1 for a, _ in self.steps if a > k), reached))
        return out

    @property
    def lossless(self) -> bool | None:
        """True when every measured request equals the plain run's (None: nothing to compare)."""
        return None if not self.requests else not self.mismatches

    def to_dict(self, plain: Run | None) -> dict[str, Any]:
        tps = self.tokens_per_second
        d: dict[str, Any] = {
            "file": self.file.to_dict() if self.file else None, "spec_type": self.spec_type, "n_max": self.n_max,
            "command": self.command, "complete": self.complete, "error": self.error, "log_tail": self.log_tail,
            "requests": len(self.requests), "predicted": self.predicted,
            "tokens_per_second": _r(tps), "wall_seconds": _r(self.wall_s),
        }
        if self.file is None:
            return d
        d.update({
            "lossless": self.lossless, "mismatches": [m.to_dict() for m in self.mismatches],
            "drafted": self.drafted, "accepted": self.accepted, "acceptance": _r(self.acceptance),
            "steps": len(self.steps), "mean_accepted": _r(self.mean_accepted),
            "tokens_per_step": _r(None if self.mean_accepted is None else 1.0 + self.mean_accepted),
            "speedup": _r(self.speedup(plain)) if plain is not None else None,
            "speedup_quartiles": _quartiles(self.speedups(plain)) if plain is not None else None,
            "by_position": [{"position": k, "accepted": a, "reached": n, "rate": _r(a / n if n else None)}
                            for k, (a, n) in enumerate(self.by_position())],
            "server_counts": self.server_counts,
        })
        return d


def _quartiles(xs: list[float]) -> list[float | None] | None:
    if len(xs) < 2:
        return None
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return [_r(q[0]), _r(q[2])]


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


@dataclass
class BenchReport:
    """What :func:`bench` measured: the target, the binary, the settings, the prompts, the plain run and one
    :class:`Run` per draft (in the order given); ``interrupted`` says which signal stopped it (the runs hold what
    was measured until then). ``to_dict()`` is the ``--json`` document (docs/bench.md)."""

    target: FileInfo
    binary: ServerBinary
    settings: dict[str, Any]
    prompts: list[Prompt]
    plain: Run
    drafts: list[Run]
    interrupted: str | None = None
    signum: int | None = None

    @property
    def lossless(self) -> bool:
        """No draft run's output differs from the plain run's."""
        return all(not d.mismatches for d in self.drafts)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "llama_server": self.binary.to_dict(), "target": self.target.to_dict(),
                "settings": self.settings, "prompts": len(self.prompts),
                "prompt_kinds": sorted({p.kind for p in self.prompts if p.kind}),
                "interrupted": self.interrupted, "lossless": self.lossless,
                "plain": self.plain.to_dict(None), "drafts": [d.to_dict(self.plain) for d in self.drafts]}


# ---------------------------------------------------------------------------------------------- running
def parse_steps(log: str) -> list[tuple[int, int]]:
    """The verification steps of a ``LLAMA_TRACE=1`` llama-server log, as (accepted, drafted). A step logged with
    ``(restore checkpoint)`` (a target that cannot drop part of its cache) is followed by the replay of the
    accepted tokens, whose line is not another step.

    Example:
        >>> parse_steps("slot x: id  0 | task 3 | accepted  6/ 7 draft tokens\\n"
        ...             "slot x: id  0 | task 3 | accepted  2/ 7 draft tokens (restore checkpoint)\\n"
        ...             "slot x: id  0 | task 3 | accepted  2/ 2 draft tokens\\n")
        [(6, 7), (2, 7)]
    """
    steps: list[tuple[int, int]] = []
    replay = False
    for line in log.splitlines():
        m = _STEP.search(line)
        if not m:
            continue
        if replay:
            replay = False
            continue
        steps.append((int(m.group(1)), int(m.group(2))))
        replay = m.group(3) is not None
    return steps


def parse_metrics(text: str) -> dict[str, Any]:
    """llama-server's ``/metrics`` (Prometheus text): the speculative counters and ``tokens_predicted_total``.

    Example:
        >>> parse_metrics('llamacpp:spec_decode_num_drafts_total 4\\n'
        ...               'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 3\\n')
        {'steps': 4, 'drafted': 0, 'accepted': 0, 'predicted': 0, 'accepted_per_pos': [3]}
    """
    c = {k: float(v) for k, v in _COUNTER.findall(text)}
    per = {int(k): int(float(v)) for k, v in _PER_POS.findall(text)}
    return {"steps": int(c.get("spec_decode_num_drafts_total", 0)),
            "drafted": int(c.get("spec_decode_num_draft_tokens_total", 0)),
            "accepted": int(c.get("spec_decode_num_accepted_tokens_total", 0)),
            "predicted": int(c.get("tokens_predicted_total", 0)),
            "accepted_per_pos": [per.get(k, 0) for k in range(max(per) + 1)] if per else []}


def _combine_counts(a: dict[str, Any], b: dict[str, Any], sign: int) -> dict[str, Any]:
    """``a + sign * b`` of two :func:`parse_metrics` counts; per position a missing entry counts 0, and a difference
    (``sign`` -1) keeps ``a``'s positions."""
    pa, pb = a["accepted_per_pos"], b["accepted_per_pos"]
    out = {k: a[k] + sign * b[k] for k in ("steps", "drafted", "accepted", "predicted")}
    out["accepted_per_pos"] = [(pa[i] if i < len(pa) else 0) + sign * (pb[i] if i < len(pb) else 0)
                               for i in range(len(pa) if sign < 0 else max(len(pa), len(pb)))]
    return out


def _first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


class _Runner:
    """One invocation's servers, prompts and progress (see :func:`bench`)."""

    def __init__(self, binary: ServerBinary, target: FileInfo, prompts: list[Prompt], *, n_predict: int, repeat: int,
                 ctx_size: int, threads: int, timeout: float, progress: Progress | None, total: int,
                 server_args: Sequence[str]) -> None:
        self.binary, self.target, self.prompts = binary, target, prompts
        self.n_predict, self.repeat, self.ctx, self.threads = n_predict, repeat, ctx_size, threads
        self.timeout, self.progress, self.total, self.server_args = timeout, progress, total, list(server_args)
        self.done = 0
        self.sent: list[str | list[int]] | None = None  # prompts as sent (chat template applied), from the first run

    def server(self, run: Run, extra: Sequence[str] = ()) -> LlamaServer:
        draft = run.file.path if run.file is not None else None
        srv = LlamaServer(self.binary.path, self.target.path, draft=draft, spec_type=run.spec_type, n_max=run.n_max,
                          ctx=self.ctx, threads=self.threads, timeout=self.timeout, p_min=None, metrics=True,
                          env={"LLAMA_TRACE": "1"}, extra=[*extra, *self.server_args],
                          request_timeout=max(self.timeout, 600.0))
        run.command = srv.args
        return srv

    def prepare_prompts(self, srv: LlamaServer, raw: bool) -> list[str | list[int]]:
        template = "" if raw else str(srv.get_json("/props").get("chat_template") or "")
        out: list[str | list[int]] = []
        for p in self.prompts:
            if p.tokens is not None:
                out.append(list(p.tokens))
            elif template:
                doc = srv.post("/apply-template", {"messages": [{"role": "user", "content": p.text}]})
                out.append(str(doc["prompt"]))
            else:
                out.append(str(p.text))
        return out

    def request(self, srv: LlamaServer, prompt: str | list[int], n: int) -> dict[str, Any]:
        doc = srv.post("/completion", {"prompt": prompt, "n_predict": n, "temperature": 0, "top_k": 1, "seed": 0,
                                       "cache_prompt": False, "return_tokens": True, "ignore_eos": True})
        if not isinstance(doc, dict):
            raise ConvertError(f"llama-server /completion answered {type(doc).__name__}, expected an object")
        return doc

    def measure(self, run: Run, srv: LlamaServer, label: str, rep: int) -> None:
        """Round ``rep``: every prompt once on ``srv`` (after a warm-up request that is not counted)."""
        assert self.sent is not None
        start = time.monotonic()
        self.request(srv, self.sent[0], min(self.n_predict, 16))  # warm-up, not counted
        before = _settled_metrics(srv, None)
        log_before = len(parse_steps(srv.log_text()))
        predicted = 0
        for i, prompt in enumerate(self.sent):
            doc = self.request(srv, prompt, self.n_predict)
            t = doc.get("timings") or {}
            q = RequestRun(i, rep, [int(x) for x in doc.get("tokens") or []], int(t.get("predicted_n") or 0),
                           float(t.get("predicted_ms") or 0.0), float(t.get("prompt_ms") or 0.0),
                           int(t.get("draft_n") or 0), int(t.get("draft_n_accepted") or 0))
            run.requests.append(q)
            predicted += q.predicted_n
            self.done += 1
            if self.progress is not None:
                self.progress(self.done, self.total, label)
        counts = _combine_counts(_settled_metrics(srv, before["predicted"] + predicted), before, -1)
        run.server_counts = counts if run.server_counts is None else _combine_counts(run.server_counts, counts, 1)
        deadline = time.monotonic() + srv.log_wait
        while True:  # the log is written by a worker thread: wait for every step's line
            steps = parse_steps(srv.log_text())[log_before:]
            if len(steps) >= counts["steps"] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        run.steps += steps
        run.wall_s += time.monotonic() - start


def _settled_metrics(srv: LlamaServer, predicted: int | None) -> dict[str, Any]:
    """``/metrics`` once the finished requests are counted (the slot adds them when it is released, after the
    answer was sent): ``predicted`` tokens in all, or two equal readings."""
    deadline = time.monotonic() + srv.log_wait
    last = parse_metrics(srv.get_text("/metrics"))
    while time.monotonic() < deadline:
        if predicted is not None and last["predicted"] >= predicted:
            return last
        time.sleep(0.1)
        now = parse_metrics(srv.get_text("/metrics"))
        if predicted is None and now == last:
            return now
        last = now
    return last


def bench(target: str | os.PathLike[str], drafts: Sequence[str | os.PathLike[str]], *,
          prompts: Sequence[Prompt] | None = None, n_predict: int = 128, repeat: int = 1, ctx_size: int = 4096,
          threads: int | None = None, spec_draft_n_max: int | None = None,
          llama_server: str | os.PathLike[str] | None = None, raw: bool = False, timeout: float = 300.0,
          server_args: Sequence[str] = (), progress: Progress | None = None) -> BenchReport:
    """Run ``prompts`` (default :func:`builtin_prompts`) greedily through llama-server with ``target`` alone, then
    with each of ``drafts``, and report (module docstring). ``target`` and ``drafts`` are local GGUF files or Hub
    files (downloaded first); ``n_predict`` tokens per prompt, ``repeat`` rounds (module docstring); ``ctx_size``,
    ``threads`` (default: the CPU count, at most 8) and ``spec_draft_n_max`` (default: a whole block, per draft)
    go to llama-server; ``llama_server`` names the binary (:func:`find_binary`); ``raw`` sends text prompts without
    the chat template; ``timeout`` bounds each server's start (and, at least 600 s, each request); ``server_args``
    are passed to every llama-server as they are.

    Raises ConvertError for bad input, a target llama-server refuses, or the plain run failing. A draft llama-server
    refuses does not stop the others: its :class:`Run` has ``error`` (llama-server's reason in one line). On
    :class:`~dspark_convert.errors.Interrupted` every server is stopped and the report so far is returned, with
    ``interrupted`` set."""
    if n_predict < 1 or repeat < 1 or ctx_size < 8:
        raise ConvertError("bench: -n and --repeat must be at least 1, --ctx-size at least 8")
    if not drafts:
        raise ConvertError("bench: give at least one draft file after the target")
    binary = find_binary(llama_server)
    tinfo = file_info(str(target), "target")
    plist = list(builtin_prompts() if prompts is None else prompts)
    if not plist:
        raise ConvertError("bench: no prompts")
    runs: list[Run] = []
    for d in drafts:
        info = file_info(str(d), "draft")
        st, n_max, _ = draft_spec(info.path, spec_draft_n_max)
        runs.append(Run(info, st, n_max))
    threads = threads or min(os.cpu_count() or 1, 8)
    settings = {"n_predict": n_predict, "repeat": repeat, "ctx_size": ctx_size, "threads": threads,
                "spec_draft_n_max": spec_draft_n_max, "prompt_format": "raw" if raw else "chat template if any",
                "timeout": timeout, "server_args": list(server_args)}
    plain = Run(None)
    report = BenchReport(tinfo, binary, settings, plist, plain, runs)
    total = (1 + len(runs)) * len(plist) * repeat
    r = _Runner(binary, tinfo, plist, n_predict=n_predict, repeat=repeat, ctx_size=ctx_size, threads=threads,
                timeout=timeout, progress=progress, total=total, server_args=server_args)
    try:
        for rep in range(repeat):
            for run in (plain, *runs):
                if run.error is not None:
                    continue
                flags = draft_spec(run.file.path, spec_draft_n_max)[2] if run.file is not None else ()
                srv = r.server(run, [x for f in flags for x in f.split()])
                try:
                    try:
                        srv.start()
                    except ServerError as e:
                        if run.file is None:
                            raise
                        run.error, run.log_tail = str(e), e.log_tail
                        r.done += len(plist) * (repeat - rep)
                        continue
                    if r.sent is None:
                        r.sent = r.prepare_prompts(srv, raw)
                        settings["prompt_format"] = "chat template" if any(
                            isinstance(s, str) and s != p.text for s, p in zip(r.sent, plist, strict=True)) else "raw"
                    r.measure(run, srv, "plain" if run.file is None else run.file.path.name, rep)
                finally:
                    srv.close()
    except Interrupted as e:
        report.interrupted, report.signum = Interrupted.describe(e.signum), e.signum
    reference = {(q.prompt, q.repeat): q.tokens for q in plain.requests}
    for run in (plain, *runs):
        run.complete = run.error is None and len(run.requests) == len(plist) * repeat
        if run.file is not None:
            run.mismatches = compare(reference, run.requests)
    return report


def compare(reference: dict[tuple[int, int], list[int]], requests: Sequence[RequestRun]) -> list[Mismatch]:
    """The requests whose tokens differ from ``reference[(prompt, repeat)]`` (or repeat 0's): one
    :class:`Mismatch` each, at the first differing token.

    Example:
        >>> compare({(0, 0): [5, 6, 7]}, [RequestRun(0, 0, [5, 6, 8], 3, 1.0, 1.0, 2, 1)])
        [Mismatch(prompt=0, repeat=0, index=2, plain=7, draft=8)]
    """
    out = []
    for q in requests:
        ref = reference.get((q.prompt, q.repeat), reference.get((q.prompt, 0)))
        if ref is None:
            continue
        i = _first_difference(ref, q.tokens)
        if i is not None:
            out.append(Mismatch(q.prompt, q.repeat, i, ref[i] if i < len(ref) else None,
                                q.tokens[i] if i < len(q.tokens) else None))
    return out


def write_plot(path: str | os.PathLike[str], svg: str) -> Path:
    """Write ``svg`` to ``path`` through a temporary file in the same folder, renamed over it: an existing regular
    file is replaced, anything else (a folder, a FIFO, a device) refused with one line and left alone."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise ConvertError(f"--plot {p}: {e.strerror or e}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise ConvertError(f"--plot {p}: exists and is not a regular file; only a regular file is replaced")
    if p.suffix.lower() != ".svg":
        raise ConvertError(f"--plot {p}: the picture is an SVG file; name it *.svg")
    tmp = p.with_name(f".{p.name}.{os.getpid()}.partial")
    try:
        tmp.write_text(svg, encoding="utf-8")
        os.replace(tmp, p)
    except OSError as e:
        raise ConvertError(f"--plot {p}: cannot write: {e.strerror or e}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return p
