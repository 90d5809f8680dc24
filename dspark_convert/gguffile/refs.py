"""GGUF file references: a local path, a Hub file (``hf://ORG/REPO/path/file.gguf[@REVISION]``, a Hub URL, or the
plain ``ORG/REPO/file.gguf`` form) or an http(s) URL, told apart without any I/O beyond ``os.path`` checks.

:mod:`.source` opens what a reference names; :mod:`.remote` reads Hub files and URLs. Both import from here, so
the reference types sit below either of them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..errors import ConvertError

HF_SCHEME = "hf://"
_REPO_TYPES = {"datasets": "dataset", "spaces": "space"}
_SEG = re.compile(r"^[A-Za-z0-9][\w.-]*$")
_SPECIAL_REV = re.compile(r"^refs/(?:pr/\d+|convert/[\w.-]+)(?=/)")
_GGUF_AT = re.compile(r"^(?P<path>.+?\.gguf)@(?P<rev>[^@]+)$", re.IGNORECASE)
_PLAIN_HUB = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*(?:@[^/]+)?/.+\.gguf(?:@[^@]+)?$", re.IGNORECASE)
_HUB_URL = re.compile(r"^/(?:(?P<type>datasets|spaces)/)?(?P<org>[^/]+)/(?P<repo>[^/]+)/(?:resolve|blob)/"
                      r"(?P<rest>.+)$")
_HUB_HOSTS = ("https://huggingface.co", "https://hf.co")


@dataclass(frozen=True)
class HubFile:
    """A file in a Hub repository: ``repo_id``, ``filename`` (path in the repo), ``revision`` (None: the
    default branch) and ``repo_type`` (``model``, ``dataset``, ``space``).

    Example:
        >>> HubFile("org/draft-GGUF", "draft-Q8_0.gguf", "v1").display
        'hf://org/draft-GGUF/draft-Q8_0.gguf@v1'
    """

    repo_id: str
    filename: str
    revision: str | None = None
    repo_type: str = "model"
    plain: bool = field(default=False, compare=False, repr=False)  # given as ORG/REPO/file.gguf (no hf://)
    given: str = field(default="", compare=False, repr=False)  # the reference as written

    @property
    def display(self) -> str:
        """The reference as ``hf://[TYPEs/]ORG/REPO/PATH[@REVISION]`` (how messages and output name it)."""
        prefix = "" if self.repo_type == "model" else self.repo_type + "s/"
        return f"{HF_SCHEME}{prefix}{self.repo_id}/{self.filename}" + (f"@{self.revision}" if self.revision else "")


def parse_hub_ref(body: str, given: str) -> HubFile:
    """``[TYPEs/]ORG/REPO[@REV]/PATH[@REV]`` (the part after ``hf://``) as a :class:`HubFile`.

    Example:
        >>> parse_hub_ref("org/repo@refs/pr/3/sub/f.gguf", "x")
        HubFile(repo_id='org/repo', filename='sub/f.gguf', revision='refs/pr/3', repo_type='model')
    """
    repo_type, head = "model", body
    first, sep, tail = body.partition("/")
    if first in _REPO_TYPES and sep:
        repo_type, head = _REPO_TYPES[first], tail
    org, _, tail = head.partition("/")
    m = re.match(r"^(?P<repo>[^/@]*)(?P<at>@?)(?P<rest>.*)$", tail, re.DOTALL)
    assert m is not None  # the pattern matches any string
    repo, rest, revision = m.group("repo"), m.group("rest"), None
    if m.group("at"):  # the Hub's form: ORG/REPO@REV/PATH
        special = _SPECIAL_REV.match(rest)
        revision, _, path = (special.group(0), "", rest[special.end() + 1 :]) if special else rest.partition("/")
    else:
        path = rest[1:] if rest.startswith("/") else ""
        at = _GGUF_AT.match(path)
        if at is not None:  # the file-then-revision form: ORG/REPO/PATH.gguf@REV
            path, revision = at.group("path"), at.group("rev")
    segments = path.split("/")
    if not (_SEG.match(org) and _SEG.match(repo)) or not path or any(s in ("", ".", "..") for s in segments) \
            or revision == "":
        raise ConvertError(f"{given}: not a Hub file reference (expected hf://ORG/REPO/path/file.gguf, optionally "
                           f"followed by @REVISION)")
    return HubFile(f"{org}/{repo}", path, revision, repo_type, given=given)


def _hub_endpoints() -> set[tuple[str, str]]:
    endpoint = os.environ.get("HF_ENDPOINT") or _HUB_HOSTS[0]
    return {_host(u) for u in (*_HUB_HOSTS, endpoint.rstrip("/"))}


def _host(url: str) -> tuple[str, str]:
    u = urlsplit(url)
    return u.scheme.lower(), u.netloc.lower()


def _hub_url(url: str) -> HubFile | None:
    """A Hub file URL (``/ORG/REPO/resolve|blob/REV/PATH`` on a Hub host) as a HubFile, else None."""
    if _host(url) not in _hub_endpoints():
        return None
    m = _HUB_URL.match(urlsplit(url).path)
    if m is None:
        return None
    rest = m.group("rest")
    special = _SPECIAL_REV.match(rest)  # refs/pr/3 written out instead of refs%2Fpr%2F3
    rev, _, path = (special.group(0), "", rest[special.end() + 1 :]) if special else rest.partition("/")
    prefix = f"{m.group('type')}/" if m.group("type") else ""
    return parse_hub_ref(f"{prefix}{m.group('org')}/{m.group('repo')}@{unquote(rev)}/{unquote(path)}", url)


def classify_ref(ref: str | os.PathLike[str]) -> Path | HubFile | str:
    """A local :class:`~pathlib.Path`, a :class:`HubFile`, or a URL (``str``) for ``ref`` (rules above).

    Example:
        >>> classify_ref("hf://org/repo/f.gguf@main")
        HubFile(repo_id='org/repo', filename='f.gguf', revision='main', repo_type='model')
    """
    if not isinstance(ref, str):
        return Path(ref)
    if ref.startswith(HF_SCHEME):
        return parse_hub_ref(ref[len(HF_SCHEME) :], ref)
    if ref.lower().startswith(("http://", "https://")):
        return _hub_url(ref) or ref
    path = Path(ref).expanduser()
    if path.exists() or not _PLAIN_HUB.match(ref) or Path(ref.split("/", 1)[0]).exists():
        return path
    return replace(parse_hub_ref(ref, ref), plain=True)


def is_remote_ref(ref: str | os.PathLike[str]) -> bool:
    """True when ``ref`` names a file on the Hub or at a URL (read header-only over HTTP)."""
    return not isinstance(classify_ref(ref), Path)
