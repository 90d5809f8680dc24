"""The ``llama`` tier: llama-server b11434's ``-hf`` finds hf2gguf's default output beside its target by name.

A Hub repository is laid out as Hugging Face's cache (``models--ORG--NAME/refs/main`` and ``snapshots/COMMIT/``)
and llama-server runs ``--offline`` on it (``common/hf-cache.cpp`` ``get_cached_files``): no network. The log says
which draft it loaded and under which ``--spec-type``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, TARGET
from typer.testing import CliRunner

from dspark_convert.cli import app
from dspark_convert.hf2gguf.conversion import convert
from dspark_convert.llamacpp.server import free_port
from llama.target import convert_target

COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO = "org/tiny-GGUF"


@pytest.fixture(scope="module")
def files(llama_bin: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory,
          ) -> tuple[Path, Path]:
    """(the target as F32 GGUF, named as a GGUF repo names it; the dspark-qwen3 draft under hf2gguf's default name)."""
    out = tmp_path_factory.mktemp("hf-names")
    target = convert_target(llama_bin[1], TARGET, out / "target-qwen3-F32.gguf")
    cwd = os.getcwd()
    os.chdir(out)
    try:
        draft = out / convert(FIXTURES / "dspark-qwen3", TARGET, None, outtype="f32").path
    finally:
        os.chdir(cwd)
    return target, draft


def serve(binary: Path, cache: Path, target: Path, draft: Path, draft_name: str, *args: str) -> str:
    """llama-server ``-hf REPO:F32 ARGS --offline`` on a cached repo holding ``target`` and ``draft`` (as
    ``draft_name``), stopped once the model is loaded; its log."""
    shutil.rmtree(cache, ignore_errors=True)
    repo = cache / ("models--" + REPO.replace("/", "--"))
    snap = repo / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    shutil.copyfile(target, snap / target.name)
    shutil.copyfile(draft, snap / draft_name)
    env = {**os.environ, "HF_HUB_CACHE": str(cache)}
    env.pop("LLAMA_CACHE", None)
    cmd = [str(binary), "-hf", f"{REPO}:F32", *args, "--offline", "--port", str(free_port()), "-c", "256"]
    log = cache.parent / "server.log"
    with open(log, "wb") as sink:
        p = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and p.poll() is None:
                if "listening on" in log.read_text(errors="replace"):
                    break
                time.sleep(0.2)
        finally:
            p.terminate()
            p.wait(timeout=30)
    text = log.read_text(errors="replace")
    assert "model loaded" in text, text[-2000:]
    return text


@pytest.mark.llama
def test_hf_finds_the_default_name_and_not_the_old_one(llama_bin: tuple[Path, Path], files: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    target, draft = files
    assert draft.name == "dspark-target-qwen3-F32.gguf"
    loaded = f"loading draft model '{tmp_path / 'hub' / 'models--org--tiny-GGUF' / 'snapshots' / COMMIT}/"
    spec = "adding speculative implementation 'draft-dspark'"
    # hf2gguf's default name: found with --spec-type, and -hfd alone takes the type from the name
    log = serve(llama_bin[0], tmp_path / "hub", target, draft, draft.name, "--spec-type", "draft-dspark")
    assert loaded + draft.name + "'" in log and spec in log
    log = serve(llama_bin[0], tmp_path / "hub", target, draft, draft.name, "-hfd", f"{REPO}:F32")
    assert loaded + draft.name + "'" in log and spec in log
    # the names check warns about: -hf loads the target and no draft at all
    runner = CliRunner()
    for old in ("target-qwen3-DSpark-F32.gguf", "dspark_target-qwen3-F32.gguf"):
        log = serve(llama_bin[0], tmp_path / "hub", target, draft, old, "--spec-type", "draft-dspark")
        assert "loading draft model" not in log and "adding speculative implementation" not in log
        named = tmp_path / old
        shutil.copyfile(draft, named)
        r = runner.invoke(app, ["check", str(named)])
        assert r.exit_code == 0 and r.stderr.startswith(f"warning: the file name '{old}' lacks 'dspark-'")
