"""Hub / local resolution of DRAFT and --target-model-dir (dspark_convert.hf.hub).

No test touches the network. A Hugging Face cache is built by hand in tmp_path with the documented layout
(``models--org--name/refs/main`` + ``snapshots/<commit>/<files>``); ``HF_HUB_CACHE`` and ``HF_HUB_OFFLINE`` are
set with monkeypatch, and hub.py reads them at call time (it passes ``cache_dir=`` / ``local_files_only=`` to
huggingface_hub, whose own constants were fixed at import). Online behaviour (which files are requested, how
Hub errors read) is tested with a fake ``snapshot_download`` that serves an in-memory repo.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest
from huggingface_hub import constants as hf_constants
from huggingface_hub.errors import (
    GatedRepoError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import filter_repo_objects

from dspark_convert.errors import ConvertError
from dspark_convert.hf import hub
from dspark_convert.hf.hub import (
    ResolvedModel,
    hub_cache_dir,
    hub_offline,
    is_repo_id,
    resolve_draft,
    resolve_target,
    split_repo_spec,
)

COMMIT = "0123456789abcdef0123456789abcdef01234567"
COMMIT2 = "fedcba9876543210fedcba9876543210fedcba98"


def make_cached_repo(cache: Path, repo_id: str, files: dict[str, str], commit: str = COMMIT,
                     ref: str | None = "main") -> Path:
    """Write one snapshot of ``repo_id`` into a hub cache, as huggingface_hub lays it out; return its folder."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / commit
    for name, text in files.items():
        (snap / name).parent.mkdir(parents=True, exist_ok=True)
        (snap / name).write_text(text)
    if ref is not None:
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return snap


@pytest.fixture
def offline_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)  # so that no relative "org/name" folder of the checkout shadows a repo id
    return cache


DRAFT_FILES = {"config.json": "{}", "model.safetensors": "w", "README.md": "---\nlicense: mit\n---\n"}
TARGET_FILES = {"config.json": "{}", "tokenizer.json": "{}", "tokenizer_config.json": "{}"}


# ---------------------------------------------------------------------------------------------- specs


def test_is_repo_id_patterns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert is_repo_id("deepseek-ai/dspark_qwen3_8b_block7")
    assert is_repo_id("Qwen/Qwen3-8B@main")
    assert is_repo_id(f"Qwen/Qwen3-8B@{COMMIT}")
    assert is_repo_id("Qwen/Qwen3-8B@refs/pr/3")
    for spec in ("./draft", "../draft", "/abs/draft", "a/b/c", "draft", "org/na--me", "org/name@", "org/ name",
                 ".hidden/name", "org/name@a@b"):
        assert not is_repo_id(spec), spec


def test_existing_local_path_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Qwen" / "Qwen3-8B").mkdir(parents=True)
    assert not is_repo_id("Qwen/Qwen3-8B")
    resolved = resolve_target("Qwen/Qwen3-8B", tensors=["model.embed_tokens.weight"])
    assert resolved == ResolvedModel(Path("Qwen/Qwen3-8B"), None, None, None)
    assert resolved.model_id == "Qwen3-8B"
    assert resolved.label == "Qwen/Qwen3-8B"


def test_split_repo_spec() -> None:
    assert split_repo_spec("Qwen/Qwen3-8B") == ("Qwen/Qwen3-8B", None)
    assert split_repo_spec("Qwen/Qwen3-8B@refs/pr/3") == ("Qwen/Qwen3-8B", "refs/pr/3")
    with pytest.raises(ConvertError, match=r"^a/b/c: not a Hugging Face repo id"):
        split_repo_spec("a/b/c")


def test_local_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConvertError) as e:
        resolve_draft("./no-such-draft")
    assert str(e.value) == "./no-such-draft: no such folder"
    (tmp_path / "file.json").write_text("{}")
    with pytest.raises(ConvertError) as e:
        resolve_target("file.json")
    assert str(e.value) == "file.json: not a folder (expected a model folder or a Hugging Face repo id)"
    local = resolve_draft(".")
    assert local.path == Path(".") and local.model_id == tmp_path.name and local.repo_id is None


def test_cache_dir_and_offline_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HF_HUB_OFFLINE",
                "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert hub_cache_dir() == tmp_path / "home" / ".cache" / "huggingface" / "hub"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub_cache_dir() == tmp_path / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hfhome"))
    assert hub_cache_dir() == tmp_path / "hfhome" / "hub"
    monkeypatch.setenv("HUGGINGFACE_HUB_CACHE", str(tmp_path / "legacy"))
    assert hub_cache_dir() == tmp_path / "legacy"
    monkeypatch.setenv("HF_HUB_CACHE", "~/hub")
    assert hub_cache_dir() == tmp_path / "home" / "hub"

    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    assert hub_offline() is False
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert hub_offline() is False
    monkeypatch.setenv("HF_HUB_OFFLINE", "yes")
    assert hub_offline() is True
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    assert hub_offline() is True
    monkeypatch.delenv("TRANSFORMERS_OFFLINE")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)  # set at import time: still honoured
    assert hub_offline() is True


# ---------------------------------------------------------------------------------------------- offline cache


def test_offline_resolve_default_branch_and_commit(offline_cache: Path) -> None:
    snap = make_cached_repo(offline_cache, "deepseek-ai/dspark_qwen3_8b_block7", DRAFT_FILES)
    make_cached_repo(offline_cache, "deepseek-ai/dspark_qwen3_8b_block7", DRAFT_FILES, commit=COMMIT2, ref=None)

    resolved = resolve_draft("deepseek-ai/dspark_qwen3_8b_block7")
    assert resolved.path == snap
    assert (resolved.repo_id, resolved.revision, resolved.commit) == ("deepseek-ai/dspark_qwen3_8b_block7", None,
                                                                      COMMIT)
    assert resolved.model_id == "deepseek-ai/dspark_qwen3_8b_block7"
    assert (resolved.path / "config.json").read_text() == "{}"

    pinned = resolve_draft(f"deepseek-ai/dspark_qwen3_8b_block7@{COMMIT2}")
    assert pinned.path == offline_cache / "models--deepseek-ai--dspark_qwen3_8b_block7" / "snapshots" / COMMIT2
    assert (pinned.revision, pinned.commit) == (COMMIT2, COMMIT2)
    assert pinned.label == f"deepseek-ai/dspark_qwen3_8b_block7@{COMMIT2}"

    by_branch = resolve_draft("deepseek-ai/dspark_qwen3_8b_block7@main")
    assert by_branch.path == snap and by_branch.revision == "main"


def test_offline_target_with_tensors(offline_cache: Path) -> None:
    index = {"weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                            "lm_head.weight": "model-00002-of-00002.safetensors"}}
    files = dict(TARGET_FILES, **{"model.safetensors.index.json": json.dumps(index),
                                  "model-00001-of-00002.safetensors": "s1"})
    snap = make_cached_repo(offline_cache, "Qwen/Qwen3-8B", files)
    resolved = resolve_target("Qwen/Qwen3-8B", tensors=["model.embed_tokens.weight"])
    assert resolved.path == snap and resolved.commit == COMMIT
    # The second shard is not cached: asking for a tensor in it is an offline miss naming that file.
    with pytest.raises(ConvertError) as e:
        resolve_target("Qwen/Qwen3-8B", tensors=["lm_head.weight"])
    assert str(e.value) == (f"Qwen/Qwen3-8B: model-00002-of-00002.safetensors not in the local Hugging Face cache "
                            f"({offline_cache}) and offline mode is on; run `hf download Qwen/Qwen3-8B` or unset "
                            "HF_HUB_OFFLINE")


def test_offline_missing_repo_message(offline_cache: Path) -> None:
    with pytest.raises(ConvertError) as e:
        resolve_draft("org/missing")
    assert str(e.value) == (f"org/missing: not in the local Hugging Face cache ({offline_cache}) and offline mode "
                            "is on; run `hf download org/missing` or unset HF_HUB_OFFLINE")
    make_cached_repo(offline_cache, "org/name", DRAFT_FILES)
    with pytest.raises(ConvertError) as e:
        resolve_draft(f"org/name@{COMMIT2}")
    assert str(e.value) == (f"org/name@{COMMIT2}: not in the local Hugging Face cache ({offline_cache}) and offline "
                            f"mode is on; run `hf download org/name --revision {COMMIT2}` or unset HF_HUB_OFFLINE")


def test_offline_missing_files_messages(offline_cache: Path) -> None:
    make_cached_repo(offline_cache, "org/noweights", {"config.json": "{}"})
    with pytest.raises(ConvertError) as e:
        resolve_draft("org/noweights")
    assert str(e.value) == (f"org/noweights: weights (*.safetensors or *.bin) not in the local Hugging Face cache "
                            f"({offline_cache}) and offline mode is on; run `hf download org/noweights` or unset "
                            "HF_HUB_OFFLINE")
    make_cached_repo(offline_cache, "org/notok", {"config.json": "{}"})
    with pytest.raises(ConvertError, match=r"^org/notok: tokenizer \(tokenizer.json, tokenizer.model or vocab.json\) "
                                           r"not in the local Hugging Face cache"):
        resolve_target("org/notok")
    make_cached_repo(offline_cache, "org/binonly", {"config.json": "{}", "pytorch_model.bin": "b"})
    assert resolve_draft("org/binonly").commit == COMMIT


# ---------------------------------------------------------------------------------------------- fake Hub


class FakeHub:
    """Serves one in-memory repo the way snapshot_download does: matching files land in the cache snapshot."""

    def __init__(self, cache: Path, repo_id: str, files: dict[str, str]) -> None:
        self.cache, self.repo_id, self.files = cache, repo_id, files
        self.calls: list[tuple[str | None, list[str], list[str] | None, bool]] = []

    def __call__(self, repo_id: str, *, revision: str | None, cache_dir: str, local_files_only: bool,
                 allow_patterns: list[str], ignore_patterns: list[str] | None) -> str:
        assert repo_id == self.repo_id and cache_dir == str(self.cache)
        self.calls.append((revision, list(allow_patterns), ignore_patterns, local_files_only))
        wanted = filter_repo_objects(self.files, allow_patterns=allow_patterns, ignore_patterns=ignore_patterns)
        return str(make_cached_repo(self.cache, repo_id, {n: self.files[n] for n in wanted}))


def test_target_fetches_only_needed_shards(online: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = {"weight_map": {"model.embed_tokens.weight": "model-00001-of-00003.safetensors",
                            "model.norm.weight": "model-00003-of-00003.safetensors",
                            "lm_head.weight": "model-00003-of-00003.safetensors"}}
    files = dict(TARGET_FILES, **{"model.safetensors.index.json": json.dumps(index), "merges.txt": "m",
                                  "additional_chat_templates/tool.jinja": "t", "README.md": "r",
                                  "generation_config.json": "{}", "original/consolidated.pth": "x"},
                 **{f"model-0000{i}-of-00003.safetensors": f"s{i}" for i in (1, 2, 3)})
    fake = FakeHub(online, "Qwen/Qwen3-8B", files)
    monkeypatch.setattr(hub, "snapshot_download", fake)

    resolved = resolve_target("Qwen/Qwen3-8B", tensors=["lm_head.weight", "model.norm.weight", "not.there"])
    got = sorted(str(p.relative_to(resolved.path)) for p in resolved.path.rglob("*") if p.is_file())
    assert got == ["additional_chat_templates/tool.jinja", "config.json", "merges.txt", "model-00003-of-00003.safetensors",
                   "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"]
    assert [c[0] for c in fake.calls] == [None, COMMIT]  # the second call is pinned to the first call's commit
    assert fake.calls[0][1] == hub.TARGET_PATTERNS + ["model.safetensors.index.json"]
    assert fake.calls[1][1] == ["model-00003-of-00003.safetensors"]
    assert all(c[3] is False for c in fake.calls)

    no_weights = resolve_target("Qwen/Qwen3-8B")
    assert len(fake.calls) == 3 and "model.safetensors.index.json" not in fake.calls[2][1]
    assert no_weights.path == resolved.path


def test_target_single_file_and_draft_patterns(online: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeHub(online, "org/small", dict(TARGET_FILES, **{"model.safetensors": "w"}))
    monkeypatch.setattr(hub, "snapshot_download", fake)
    resolved = resolve_target("org/small@v1", tensors=["model.embed_tokens.weight"])
    assert (resolved.path / "model.safetensors").read_text() == "w"
    assert [c[:2] for c in fake.calls[1:]] == [(COMMIT, ["model.safetensors"])]
    assert (resolved.revision, resolved.commit, resolved.label) == ("v1", COMMIT, "org/small@v1")

    draft = FakeHub(online, "org/draft", {"config.json": "{}", "pytorch_model.bin": "b", "sub/x.bin": "no",
                                          "generation_config.json": "{}", "optimizer.pt": "no"})
    monkeypatch.setattr(hub, "snapshot_download", draft)
    got = resolve_draft("org/draft")
    assert sorted(p.name for p in got.path.iterdir()) == ["config.json", "generation_config.json",
                                                          "pytorch_model.bin"]
    assert [c[1] for c in draft.calls] == [hub.DRAFT_PATTERNS, hub.BIN_PATTERNS]
    assert draft.calls[0][2] == ["*/*"]


def test_online_missing_file_message(online: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub, "snapshot_download", FakeHub(online, "org/cfgless", {"model.safetensors": "w"}))
    with pytest.raises(ConvertError) as e:
        resolve_draft("org/cfgless")
    assert str(e.value) == "org/cfgless: no config.json in the repository"


def _http_error(cls: type, status: int) -> Exception:
    response = httpx2.Response(status, request=httpx2.Request("GET", "https://huggingface.co/api/models/org/x"))
    return cls("boom\nsecond line", response=response)


@pytest.mark.parametrize(("exc", "expected"), [
    (_http_error(RepositoryNotFoundError, 404),
     "org/x: no such folder, and no such repository on the Hugging Face Hub (if it is private, log in with "
     "`hf auth login` or set HF_TOKEN)"),
    (_http_error(GatedRepoError, 403),
     "org/x: gated repository; accept its conditions on https://huggingface.co/org/x and log in "
     "(`hf auth login` or HF_TOKEN)"),
    (_http_error(RevisionNotFoundError, 404), "org/x: the repository has no default branch"),
    (LocalEntryNotFoundError("Got: ConnectError: [Errno -3] name resolution\nAn error happened"),
     "org/x: cannot reach the Hugging Face Hub and the repository is not in the local cache ({cache}): "
     "Got: ConnectError: [Errno -3] name resolution"),
    (httpx2.ConnectError("connection refused"), "org/x: cannot reach the Hugging Face Hub: ConnectError: "
     "connection refused"),
    (TimeoutError("timed out"), "org/x: cannot reach the Hugging Face Hub: TimeoutError: timed out"),
    (PermissionError(13, "Permission denied"),
     "org/x: download into {cache} failed: PermissionError: [Errno 13] Permission denied"),
])
def test_hub_errors_are_one_line(online: Path, monkeypatch: pytest.MonkeyPatch, exc: Exception,
                                 expected: str) -> None:
    def failing(*args: object, **kwargs: object) -> str:
        raise exc

    monkeypatch.setattr(hub, "snapshot_download", failing)
    with pytest.raises(ConvertError) as e:
        resolve_draft("org/x")
    assert str(e.value) == expected.format(cache=online)
    assert "\n" not in str(e.value)


def test_revision_not_found(online: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(*args: object, **kwargs: object) -> str:
        raise _http_error(RevisionNotFoundError, 404)

    monkeypatch.setattr(hub, "snapshot_download", failing)
    with pytest.raises(ConvertError) as e:
        resolve_draft("org/x@v2")
    assert str(e.value) == "org/x@v2: revision 'v2' not found in the repository"


def test_unexpected_errors_propagate(online: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(*args: object, **kwargs: object) -> str:
        raise KeyError("bug")

    monkeypatch.setattr(hub, "snapshot_download", failing)
    with pytest.raises(KeyError):
        resolve_target("org/x")


def test_hostile_index_shard_name(online: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = {"weight_map": {"model.embed_tokens.weight": "../../etc/passwd"}}
    files = dict(TARGET_FILES, **{"model.safetensors.index.json": json.dumps(index)})
    monkeypatch.setattr(hub, "snapshot_download", FakeHub(online, "org/bad", files))
    with pytest.raises(ConvertError) as e:
        resolve_target("org/bad", tensors=["model.embed_tokens.weight"])
    assert str(e.value) == ("org/bad: model.safetensors.index.json: tensor 'model.embed_tokens.weight' maps to "
                            "'../../etc/passwd', expected a file name")


def test_draft_with_select_fetches_only_the_shards_it_reads(online: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A draft inside a target checkpoint (DeepSeek-V4 DSpark: ``mtp.*`` in some of the shards): config, index,
    generation and tokenizer files and the shards holding ``mtp.*``; never the rest of the weights."""
    index = {"weight_map": {"model.embed_tokens.weight": "model-00001-of-00003.safetensors",
                            "mtp.0.fc.weight": "model-00002-of-00003.safetensors",
                            "mtp.0.norm.weight": "model-00003-of-00003.safetensors",
                            "model.norm.weight": "model-00003-of-00003.safetensors"}}
    files = dict(TARGET_FILES, **{"model.safetensors.index.json": json.dumps(index), "README.md": "r",
                                  "generation_config.json": "{}", "original/consolidated.pth": "x",
                                  "model-00004-of-00004.safetensors": "not in the index"},
                 **{f"model-0000{i}-of-00003.safetensors": f"s{i}" for i in (1, 2, 3)})
    fake = FakeHub(online, "deepseek-ai/DeepSeek-V4", files)
    monkeypatch.setattr(hub, "snapshot_download", fake)
    seen: list[list[str]] = []

    def select(folder: Path) -> Callable[[str], bool]:
        seen.append(sorted(p.name for p in folder.iterdir()))
        return lambda name: name.startswith("mtp.")

    draft = resolve_draft("deepseek-ai/DeepSeek-V4", select=select)
    assert seen == [["README.md", "config.json", "generation_config.json", "model.safetensors.index.json"]]
    assert [c[1] for c in fake.calls] == [hub.DRAFT_META_PATTERNS,
                                          ["model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"]]
    target = resolve_target("deepseek-ai/DeepSeek-V4")
    assert target.path == draft.path and draft.commit == COMMIT
    got = sorted(p.name for p in draft.path.iterdir())
    assert got == ["README.md", "config.json", "generation_config.json", "model-00002-of-00003.safetensors",
                   "model-00003-of-00003.safetensors", "model.safetensors.index.json", "tokenizer.json",
                   "tokenizer_config.json"]

    # without an index, or when select returns None, every top-level safetensors file is fetched (as before)
    whole = FakeHub(online, "org/plain", {"config.json": "{}", "model.safetensors": "w"})
    monkeypatch.setattr(hub, "snapshot_download", whole)
    resolve_draft("org/plain", select=lambda folder: None)
    assert [c[1] for c in whole.calls] == [hub.DRAFT_META_PATTERNS, hub.DRAFT_PATTERNS]


# ---------------------------------------------------------------------------------------------- issue 25.9
@pytest.mark.parametrize("rev", ["../../../../srv/x", "refs/../../x", "/etc", "a//b", ".hidden", "x.lock", "a~1",
                                 "a:b", "a\\b"])
def test_revision_that_could_leave_the_cache_is_refused(offline_cache: Path, tmp_path: Path, rev: str) -> None:
    """A revision is a git ref name or a commit: `..`, an absolute name and git's forbidden characters are refused
    before the cache is looked at (offline, `org/name@../../../../srv/x` converted whatever folder it named)."""
    planted = tmp_path / "srv" / "x"
    planted.mkdir(parents=True)
    (planted / "config.json").write_text("{}")
    make_cached_repo(offline_cache, "org/name", DRAFT_FILES)
    with pytest.raises(ConvertError) as info:
        resolve_draft(f"org/name@{rev}")
    msg = str(info.value)
    assert msg.startswith(f"org/name@{rev}: revision '{rev}' is not a valid revision (") and msg.endswith(
        "); expected a branch, tag, refs/pr/N or a commit hash"), msg


def test_planted_ref_pointing_outside_the_snapshots_is_refused(offline_cache: Path, tmp_path: Path) -> None:
    """refs/main holding a path instead of a commit: the folder it names is not a snapshot of the repo."""
    planted = tmp_path / "elsewhere" / COMMIT
    planted.mkdir(parents=True)
    (planted / "config.json").write_text("{}")
    make_cached_repo(offline_cache, "org/name", DRAFT_FILES)
    repo = offline_cache / "models--org--name"
    (repo / "refs" / "main").write_text(f"../../../elsewhere/{COMMIT}")
    with pytest.raises(ConvertError) as info:
        resolve_draft("org/name")
    msg = str(info.value)
    assert msg.startswith("org/name: ") and "not a commit snapshot of this repository" in msg, msg
    assert str((repo / "snapshots").resolve()) in msg
