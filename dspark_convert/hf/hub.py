"""Resolve ``DRAFT`` and ``--target-model-dir`` to local folders: a local path, or a Hugging Face Hub repo id.

A spec is a **local folder** when that path exists (an existing path always wins, so a folder called
``Qwen/Qwen3-8B`` under the working directory is used as is). Otherwise a spec of the form ``org/name`` or
``org/name@revision`` is a **Hub repo id**, fetched with :func:`huggingface_hub.snapshot_download` into the
standard Hugging Face cache; only the files the conversion reads are fetched (see :data:`DRAFT_PATTERNS`,
:data:`TARGET_PATTERNS`, and the ``select`` / ``tensors`` arguments of :func:`resolve_draft` /
:func:`resolve_target`, which fetch only the weight shards that hold the tensors a conversion reads).

Environment: ``HF_HUB_CACHE`` / ``HF_HOME`` / ``XDG_CACHE_HOME`` pick the cache, ``HF_HUB_OFFLINE`` (or
``TRANSFORMERS_OFFLINE``) forbids network access, ``HF_TOKEN`` authenticates. huggingface_hub reads these once,
when it is imported; this module reads the same variables, with the same precedence, at call time and passes the
result as ``cache_dir=`` / ``local_files_only=``. In normal use both give the same values; the call-time lookup
also makes a variable set after import (a test's ``monkeypatch.setenv``) take effect. The token is left to
huggingface_hub.
"""

from __future__ import annotations

import glob
import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConvertError, clip, first_line
from .checkpoint import INDEX_NAME, Select, read_json

# huggingface_hub (and its HTTP stack: ~0.3 s of imports) is loaded only when a spec is not a local folder.

#: Files fetched for a draft checkpoint (``*.bin`` only when the repo has no safetensors: BIN_PATTERNS).
DRAFT_PATTERNS = ["config.json", "generation_config.json", "README.md", "*.safetensors",
                  "model.safetensors.index.json", "mask_embedding.pt"]
#: What a draft with a ``select`` is fetched with first: everything but the weights (then only the needed shards).
DRAFT_META_PATTERNS = ["config.json", "generation_config.json", "README.md", "model.safetensors.index.json",
                       "mask_embedding.pt"]
BIN_PATTERNS = ["*.bin", "pytorch_model.bin.index.json"]
#: Files fetched for the target model: its config and everything the tokenizer step reads (contract §3.1).
TARGET_PATTERNS = ["config.json", "tokenizer.json", "tokenizer_config.json", "tokenizer.model", "merges.txt",
                   "vocab.json", "added_tokens.json", "special_tokens_map.json", "chat_template.jinja",
                   "chat_template.json", "additional_chat_templates/*"]
TARGET_INDEX = INDEX_NAME
TARGET_SINGLE = "model.safetensors"
#: At least one of these must exist in a Hub target: without them there is no tokenizer to copy.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")

_REPO_RE = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?:@(?P<rev>[^\s@]+))?$")
_COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
_TRUE = {"1", "ON", "YES", "TRUE"}


@dataclass(frozen=True)
class ResolvedModel:
    """A model folder on local disk, and the Hub repo it came from (if any).

    ``revision`` is the revision as requested (None: the default branch); ``commit`` is the 40-hex commit of
    the cache snapshot actually used (None for a local folder).

    Example:
        >>> m = ResolvedModel(Path("/models/Qwen3-8B"), None, None)
        >>> m.model_id, m.label
        ('Qwen3-8B', '/models/Qwen3-8B')
    """

    path: Path
    repo_id: str | None
    revision: str | None
    commit: str | None = None

    @property
    def model_id(self) -> str:
        """``org/name`` for a Hub model, else the folder name (of the absolute path, so never ``.``)."""
        return self.repo_id if self.repo_id else Path(os.path.abspath(self.path)).name

    @property
    def label(self) -> str:
        """How to name the model in messages: ``org/name@rev``, ``org/name`` or the path as given."""
        if self.repo_id is None:
            return str(self.path)
        return _label(self.repo_id, self.revision)


def is_repo_id(spec: str) -> bool:
    """True if ``spec`` is to be read as a Hub repo id (``org/name`` or ``org/name@revision``).

    An existing local path is never a repo id, nor is ``org/name`` when ``org`` is an existing local folder (a
    mistyped path under it, e.g. ``fixtures/nonexist``: "no such folder", never a Hub lookup).

    Example:
        >>> is_repo_id("deepseek-ai/dspark_qwen3_8b_block7@main"), is_repo_id("./draft"), is_repo_id("a/b/c")
        (True, False, False)
    """
    if Path(spec).expanduser().exists() or Path(spec.split("@", 1)[0]).expanduser().parent.is_dir():
        return False
    m = _REPO_RE.match(spec)
    if m is None:
        return False
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(m.group("repo"))  # rejects "--", "..", names over 96 characters, ...
    except HFValidationError:
        return False
    return True


def split_repo_spec(spec: str) -> tuple[str, str | None]:
    """``org/name@rev`` -> (``org/name``, ``rev``); the revision is None when absent.

    Example:
        >>> split_repo_spec("Qwen/Qwen3-8B@refs/pr/3")
        ('Qwen/Qwen3-8B', 'refs/pr/3')
    """
    m = _REPO_RE.match(spec)
    if m is None:
        raise ConvertError(f"{spec}: not a Hugging Face repo id (expected org/name or org/name@revision)")
    rev = m.group("rev")
    if rev is not None:
        bad = _bad_revision(rev)
        if bad:
            raise ConvertError(f"{clip(spec)}: revision '{clip(rev)}' is not a valid revision ({bad}); expected a "
                               "branch, tag, refs/pr/N or a commit hash")
    return m.group("repo"), rev


def _bad_revision(rev: str) -> str | None:
    """Why ``rev`` is not a git ref name or commit (the rules of ``git check-ref-format``, which the Hub's
    branches and tags follow), or None. A revision names a file under the cache's ``refs/`` folder when offline:
    ``..`` or an absolute name would leave the repository's cache folder."""
    if len(rev) > 255:
        return "longer than 255 characters"
    if ".." in rev:
        return "contains '..'"
    if rev.startswith("/") or rev.endswith("/") or "//" in rev:
        return "an empty path component"
    if any(part.startswith(".") or part.endswith(".lock") for part in rev.split("/")):
        return "a component starts with '.' or ends with '.lock'"
    if rev.endswith(".") or "@{" in rev or any(c in rev for c in "\\~^:?*[") or any(ord(c) < 32 or ord(c) == 127
                                                                                  for c in rev):
        return "a character git does not allow in a ref name"
    return None


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache folder, from the environment now (same precedence as huggingface_hub).

    ``HF_HUB_CACHE``, else the legacy ``HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, else
    ``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``.

    Example:
        >>> hub_cache_dir()  # with HF_HUB_CACHE=/tmp/hf  # doctest: +SKIP
        PosixPath('/tmp/hf')
    """
    env = os.environ
    raw = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    if not raw:
        home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"),
                                                  "huggingface")
        raw = os.path.join(home, "hub")
    return Path(os.path.expandvars(os.path.expanduser(raw)))


def hub_offline() -> bool:
    """True when Hub access is off: ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` now, or at import time.

    Example:
        >>> hub_offline()  # with HF_HUB_OFFLINE=1  # doctest: +SKIP
        True
    """
    from huggingface_hub import constants as hf_constants

    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
    return (value is not None and value.upper() in _TRUE) or bool(hf_constants.HF_HUB_OFFLINE)


def resolve_draft(spec: str, *, select: Callable[[Path], Select | None] | None = None) -> ResolvedModel:
    """The draft checkpoint folder for ``spec``: a local folder, or the cache snapshot of a Hub repo.

    From the Hub it fetches ``config.json``, ``generation_config.json``, ``README.md`` (both read by the
    ``general.*`` metadata), the top-level ``*.safetensors`` and ``model.safetensors.index.json``, and only if
    there is no safetensors file, ``*.bin`` and ``pytorch_model.bin.index.json``.

    With ``select``, the files other than weights come first; when the repo has a safetensors index,
    ``select(folder)`` (the snapshot folder holding them) may return a tensor-name predicate, and then only the
    shards the index maps the accepted names to are fetched: a draft stored in 2 of the 46 shards of a target
    checkpoint costs those 2. A ``select`` returning None fetches every shard.

    Example:
        >>> resolve_draft("deepseek-ai/dspark_qwen3_8b_block7").path.parent.name  # doctest: +SKIP
        'snapshots'
    """
    local = _local_folder(spec)
    if local is not None:
        return local
    repo_id, revision = split_repo_spec(spec)
    fetch = _Fetcher(repo_id, revision)
    if select is not None:
        folder = fetch(DRAFT_META_PATTERNS, ignore=["*/*"])
        fetch.require(folder, "config.json")
        wanted = select(folder) if (folder / TARGET_INDEX).is_file() else None
        if wanted is not None:
            return fetch.result(_fetch_shards(fetch, folder, wanted))
    # "*/*" keeps the wildcards to the top level: drafts never need files in sub-folders.
    folder = fetch(DRAFT_PATTERNS, ignore=["*/*"])
    if not any(folder.glob("*.safetensors")):
        folder = fetch(BIN_PATTERNS, ignore=["*/*"])
    fetch.require(folder, "config.json")
    if not any(folder.glob("*.safetensors")) and not any(folder.glob("*.bin")):
        fetch.missing("weights (*.safetensors or *.bin)")
    return fetch.result(folder)


def resolve_target(spec: str, *, tensors: Iterable[str] | Select = ()) -> ResolvedModel:
    """The target model folder for ``spec``: a local folder, or the cache snapshot of a Hub repo.

    From the Hub it fetches ``config.json`` and the tokenizer files (:data:`TARGET_PATTERNS`). Weights are
    fetched only when ``tensors`` names some (for example the embedding a ``--with-target-embeddings`` run copies),
    as names or as a name predicate: ``model.safetensors.index.json`` first, then only the shards that hold
    those tensors; without an index, the single ``model.safetensors``. Names absent from the index are skipped
    (the caller reports them).

    Example:
        >>> t = resolve_target("Qwen/Qwen3-8B", tensors=["model.embed_tokens.weight"])  # doctest: +SKIP
        >>> sorted(p.name for p in t.path.glob("*.safetensors"))  # doctest: +SKIP
        ['model-00001-of-00005.safetensors']
    """
    wanted = _as_select(tensors)
    local = _local_folder(spec)
    if local is not None:
        return local
    repo_id, revision = split_repo_spec(spec)
    fetch = _Fetcher(repo_id, revision)
    folder = fetch(TARGET_PATTERNS + ([TARGET_INDEX] if wanted is not None else []))
    fetch.require(folder, "config.json")
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        fetch.missing("tokenizer (" + ", ".join(TOKENIZER_FILES[:-1]) + " or " + TOKENIZER_FILES[-1] + ")")
    if wanted is not None:
        if (folder / TARGET_INDEX).is_file():
            folder = _fetch_shards(fetch, folder, wanted)
        else:
            folder = fetch([TARGET_SINGLE])
            fetch.require(folder, TARGET_SINGLE)
    return fetch.result(folder)


# ---------------------------------------------------------------------------------------------- internals


def snapshot_download(*args: Any, **kwargs: Any) -> str:
    """:func:`huggingface_hub.snapshot_download`, imported on first use."""
    from huggingface_hub import snapshot_download as download

    return str(download(*args, **kwargs))


def _label(repo_id: str, revision: str | None) -> str:
    return f"{repo_id}@{revision}" if revision else repo_id


def _local_folder(spec: str) -> ResolvedModel | None:
    """A ResolvedModel for an existing folder; None for a repo id; ConvertError for anything else."""
    path = Path(spec).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ConvertError(f"{spec}: not a folder (expected a model folder or a Hugging Face repo id)")
        return ResolvedModel(path=path, repo_id=None, revision=None)
    if is_repo_id(spec):
        return None
    parent = Path(spec.split("@", 1)[0]).expanduser().parent
    if str(parent) not in ("", ".") and parent.is_dir() and _REPO_RE.match(spec):
        raise ConvertError(f"{spec}: no such folder (read as a local path, since the folder {parent} exists here; "
                           "for the Hub repo of that name, run from another folder)")
    raise ConvertError(f"{spec}: no such folder")


def _as_select(tensors: Iterable[str] | Select) -> Select | None:
    """A name predicate for ``tensors`` (names or a predicate); None for no names."""
    if callable(tensors):
        return tensors
    names = set(tensors)
    return names.__contains__ if names else None


def _fetch_shards(fetch: _Fetcher, folder: Path, select: Select) -> Path:
    """Fetch the shards the index in ``folder`` maps the accepted tensor names to; return the snapshot folder."""
    shards = _shards_for(folder / TARGET_INDEX, select, fetch.display)
    if shards:
        folder = fetch([glob.escape(s) for s in shards])
        for shard in shards:
            fetch.require(folder, shard)
    return folder


def _shards_for(index: Path, select: Select, display: str) -> list[str]:
    """The shard files of ``index`` that hold the tensors ``select`` accepts, in file-name order; shard names
    are checked (the index is repo content)."""
    data = read_json(index)
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if weight_map is None:
        raise ConvertError(f"{display}: {index.name} is not a safetensors index (no 'weight_map')")
    if not isinstance(weight_map, dict):
        raise ConvertError(f"{display}: {index.name}: weight_map is {type(weight_map).__name__}, expected an object")
    shards = set()
    for name, shard in weight_map.items():
        if not select(name):
            continue
        # The index is repo content: a shard must be a plain file name inside the snapshot.
        if not isinstance(shard, str) or not shard or "/" in shard or "\\" in shard or shard in (".", ".."):
            raise ConvertError(f"{display}: {index.name}: tensor '{name}' maps to {shard!r}, expected a file name")
        shards.add(shard)
    return sorted(shards)


def hub_command() -> str:
    """The download command of the installed huggingface_hub (``hf`` since 0.34, ``huggingface-cli`` before)."""
    import huggingface_hub

    try:
        major, minor = (int(x) for x in huggingface_hub.__version__.split(".")[:2])
    except ValueError:
        return "hf"
    return "hf" if (major, minor) >= (0, 34) else "huggingface-cli"


def network_errors() -> tuple[type[BaseException], ...]:
    """Connection-level exception types of the HTTP client huggingface_hub uses (if it is loaded)."""
    types: list[type[BaseException]] = [ConnectionError, TimeoutError]
    for module, attr in (("httpx2", "HTTPError"), ("httpx", "HTTPError"), ("requests", "RequestException")):
        cls = getattr(sys.modules.get(module), attr, None)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            types.append(cls)
    return tuple(types)


class _Fetcher:
    """snapshot_download calls for one repo, turning every failure into a one-line ConvertError."""

    def __init__(self, repo_id: str, revision: str | None) -> None:
        self.repo_id = repo_id
        self.revision = revision
        self.display = _label(repo_id, revision)
        self.cache = hub_cache_dir()
        self.offline = hub_offline()
        self.commit: str | None = None

    def __call__(self, patterns: list[str], ignore: list[str] | None = None) -> Path:
        # After the first call, pin the commit: later calls then read the same snapshot (and skip a Hub
        # round trip that could move to a newer commit of a branch).
        revision = self.commit or self.revision
        try:
            folder = Path(snapshot_download(self.repo_id, revision=revision, cache_dir=str(self.cache),
                                            local_files_only=self.offline, allow_patterns=patterns,
                                            ignore_patterns=ignore))
        except Exception as exc:  # mapped below; anything unexpected is re-raised unchanged
            raise self._error(exc) from None
        snapshots = (self.cache / ("models--" + self.repo_id.replace("/", "--")) / "snapshots").resolve()
        if not _COMMIT_RE.match(folder.name) or Path(os.path.realpath(folder)).parent != snapshots:
            # a planted ref (refs/main holding "../../x") names a folder outside this repository's snapshots
            raise ConvertError(f"{self.display}: the Hub cache resolves it to {clip(str(folder))}, not a commit "
                               f"snapshot of this repository (expected a folder in {snapshots}); refused")
        self.commit = folder.name
        return folder

    def _error(self, exc: Exception) -> Exception:
        from huggingface_hub.errors import (
            DisabledRepoError,
            GatedRepoError,
            HfHubHTTPError,
            HFValidationError,
            LocalEntryNotFoundError,
            OfflineModeIsEnabled,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )

        where = self.display
        if isinstance(exc, GatedRepoError):
            return ConvertError(f"{where}: gated repository; accept its conditions on "
                                f"https://huggingface.co/{self.repo_id} and log in (`{hub_command()} auth login` or HF_TOKEN)")
        if isinstance(exc, RepositoryNotFoundError):
            return ConvertError(f"{where}: no such folder, and no such repository on the Hugging Face Hub (if it is "
                                f"private, log in with `{hub_command()} auth login` or set HF_TOKEN)")
        if isinstance(exc, RevisionNotFoundError):
            if self.revision:
                return ConvertError(f"{where}: revision '{self.revision}' not found in the repository")
            return ConvertError(f"{where}: the repository has no default branch")
        if isinstance(exc, DisabledRepoError):
            return ConvertError(f"{where}: the repository is disabled on the Hugging Face Hub")
        if isinstance(exc, (LocalEntryNotFoundError, OfflineModeIsEnabled)):
            if self.offline:
                return ConvertError(self._offline_message(None))
            cause = exc.__cause__ if exc.__cause__ is not None else exc
            return ConvertError(f"{where}: cannot reach the Hugging Face Hub and the repository is not in the local "
                                f"cache ({self.cache}): {first_line(cause)}")
        if isinstance(exc, HfHubHTTPError):
            return ConvertError(f"{where}: Hugging Face Hub error: {first_line(exc)}")
        if isinstance(exc, HFValidationError):
            return ConvertError(f"{where}: not a valid Hugging Face repo id: {first_line(exc)}")
        if isinstance(exc, network_errors()):
            return ConvertError(f"{where}: cannot reach the Hugging Face Hub: {type(exc).__name__}: "
                                f"{first_line(exc)}")
        if isinstance(exc, OSError):  # e.g. a read-only or full cache folder
            return ConvertError(f"{where}: download into {self.cache} failed: {type(exc).__name__}: "
                                f"{first_line(exc)}")
        return exc

    def _offline_message(self, what: str | None) -> str:
        command = f"{hub_command()} download {self.repo_id}" + (f" --revision {self.revision}" if self.revision else "")
        subject = f"{what} " if what else ""
        return (f"{self.display}: {subject}not in the local Hugging Face cache ({self.cache}) and offline mode is "
                f"on; run `{command}` or unset HF_HUB_OFFLINE")

    def missing(self, what: str) -> None:
        """Raise for a file the snapshot lacks: a cache miss when offline, else absent from the repo."""
        if self.offline:
            raise ConvertError(self._offline_message(what))
        raise ConvertError(f"{self.display}: no {what} in the repository")

    def require(self, folder: Path, name: str) -> None:
        if not (folder / name).is_file():
            self.missing(name)

    def result(self, folder: Path) -> ResolvedModel:
        return ResolvedModel(path=folder, repo_id=self.repo_id, revision=self.revision, commit=self.commit)
