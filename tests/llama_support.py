"""The ``llama`` tier's plumbing: finding llama-server (or one plain skip reason), the tiny target GGUF, runs.

The tier runs whenever conftest's ``llama_bin`` fixture finds a binary (``DSPARK_LLAMA_SERVER`` or the cache
folder) and the llama.cpp tree that goes with it (for upstream's converter, which makes the target GGUF). Otherwise
every ``llama`` test skips with the same reason, and under CI the run ends with a plain line saying the tier did
not run (conftest's terminal summary).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from llama.drafts_log import DraftBlock, parse_drafts

from dspark_convert.llamacpp.bench import draft_spec
from dspark_convert.llamacpp.server import Completion, LlamaServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import correlated  # noqa: E402  (fixtures/correlated.py: the constant-token target and the drafts that predict it)

mimo_draft = correlated.mimo_draft

#: a fixed prompt of 8 target-qwen3 ids (sent as ids: no tokenizer is involved) and the completion length
PROMPT = [400, 401, 72, 300, 22, 500, 12, 33]
N_PREDICT = 16

@dataclass
class Run:
    """One llama-server completion: its tokens and counters, and the draft blocks its -v log shows."""

    completion: Completion
    blocks: list[DraftBlock]


def run(binary: Path, target_gguf: Path, draft: Path | None = None, prompt: list[int] | None = None) -> Run:
    """A greedy completion of ``prompt`` (default :data:`PROMPT`; with ``draft`` under its spec type: verbose,
    blocks parsed)."""
    prompt = PROMPT if prompt is None else prompt
    if draft is None:
        with LlamaServer(binary, target_gguf) as s:
            return Run(s.complete(prompt, N_PREDICT), [])
    spec_type, n_max = draft_spec(draft)[:2]
    srv = LlamaServer(binary, target_gguf, draft=draft, spec_type=spec_type, n_max=n_max, verbose=True)
    try:
        with srv:
            c = srv.complete(prompt, N_PREDICT)
            log = srv.log_text()
        return Run(c, parse_drafts(log))
    finally:
        srv.close()


def failing_log(binary: Path, target_gguf: Path, draft: Path, prompt: list[int] | None = None) -> str:
    """llama-server's whole log of a speculative completion that must fail (its backtrace included; a completion
    that succeeds raises AssertionError)."""
    from dspark_convert.llamacpp.server import ServerError

    spec_type, n_max = draft_spec(draft)[:2]
    srv = LlamaServer(binary, target_gguf, draft=draft, spec_type=spec_type, n_max=n_max)
    try:
        try:
            with srv:
                srv.complete(PROMPT if prompt is None else prompt, N_PREDICT)
        except ServerError:
            return srv.log_text()
        raise AssertionError(f"{draft.name} on {target_gguf.name}: llama-server completed")
    finally:
        srv.close()
