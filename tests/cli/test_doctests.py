"""Every docstring example in the package runs and prints what it says (examples that need real files or the
network are marked ``+SKIP`` in place)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import dspark_convert

MODULES = sorted(m.name for m in pkgutil.walk_packages(dspark_convert.__path__, "dspark_convert."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} docstring examples failed"
