"""Test-wide setup: every test gets its own tokenizer-block cache folder (never the user's)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_tokenizer_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path_factory.mktemp("dspark-cache")
    monkeypatch.setenv("DSPARK_CONVERT_CACHE_DIR", str(folder))
    return folder
