"""pyproject.toml as setuptools reads it: no deprecation warning (issue 24: ``project.license`` as a TOML table is
deprecated, removal after 2027-02-18), the licence an SPDX expression, and the build requirement a setuptools that
understands one (77+, PEP 639)."""

from __future__ import annotations

import re
import shutil
import warnings
from pathlib import Path

import pytest
from conftest import ROOT


def test_pyproject_reads_without_deprecation_warnings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import setuptools  # in the test extra: a fresh Python 3.12+ venv has none
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist = apply_configuration(Distribution(), "pyproject.toml")
    assert [str(w.message).split("\n")[0] for w in caught] == []
    assert dist.metadata.license_expression == "MIT"
    m = re.search(r'^requires = \["setuptools>=(\d+)"\]', (ROOT / "pyproject.toml").read_text(), re.M)
    assert m and int(m.group(1)) >= 77 and int(setuptools.__version__.split(".")[0]) >= int(m.group(1))
