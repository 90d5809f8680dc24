"""Reading only the draft of a DeepSeek-V4 checkpoint: locally, the main-model shards may be absent or unreadable
(and are never opened: every ``open`` of the process is audited); from the Hub, only config, tokenizer, index and
the ``mtp.*`` shards are requested (a fake ``snapshot_download`` serving a generated checkpoint, and an offline
cache built in the test holding only those files). No network."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from dsv4_support import ROOT, TOKENIZER, dsv4, kvs_of, tensors_of
from huggingface_hub.utils import filter_repo_objects

from dspark_convert import convert
from dspark_convert.hf import hub
from dspark_convert.hf2gguf.conversion import plan_conversion

COMMIT = "fedcba9876543210fedcba9876543210fedcba98"
REPO = "deepseek-ai/DeepSeek-V4-Flash-DSpark"
DIMS = dsv4.Dims(hidden=192, stages=3, experts=3, moe=64, head_dim=64, q_lora=64, o_lora=32, hc=2)
LAYOUT = dsv4.Layout(main_shards=3, mtp_split="size", mtp_shards=4, decoy_rows=256)

_OPENED: list[str] | None = None


def _audit(event: str, args: tuple) -> None:
    if event == "open" and _OPENED is not None and isinstance(args[0], (str, Path)):
        _OPENED.append(str(args[0]))


sys.addaudithook(_audit)  # audit hooks cannot be removed: this one records only while _OPENED is a list


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return dsv4.write_checkpoint(tmp_path_factory.mktemp("dsv4") / "DeepSeek-V4-Flash-DSpark", DIMS, LAYOUT, seed=5,
                                 tokenizer_dir=TOKENIZER)


@pytest.fixture(scope="module")
def reference(ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ref") / "ref.gguf"
    convert(ckpt, None, out)
    return out


def shards(folder: Path) -> tuple[list[str], list[str]]:
    """(main-model shards, draft shards) of a checkpoint, from its index."""
    import json

    wm = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    draft = sorted({f for n, f in wm.items() if n.startswith("mtp.")})
    return sorted(set(wm.values()) - set(draft)), draft


def test_only_the_draft_shards_are_opened(ckpt: Path, reference: Path, tmp_path: Path) -> None:
    global _OPENED
    local = tmp_path / "DeepSeek-V4-Flash-DSpark"
    shutil.copytree(ckpt, local)
    main, draft = shards(local)
    assert len(main) == 3 and len(draft) == 4
    (local / main[0]).unlink()                                   # absent
    (local / main[1]).write_bytes(b"\xff" * 1000)                # not a safetensors file
    (local / main[2]).unlink()
    (local / main[2]).mkdir()                                    # opening it would fail (IsADirectoryError)
    _OPENED = []
    try:
        r = convert(local, None, tmp_path / "out.gguf")
        opened = {Path(p).name for p in _OPENED if Path(p).parent == local}
    finally:
        _OPENED = None
    assert opened & set(main) == set()
    assert {n for n in opened if n.endswith(".safetensors")} == set(draft)
    assert (tmp_path / "out.gguf").read_bytes() == reference.read_bytes()
    note = next(n for n in r.notes if n.startswith("read "))
    assert note.startswith("read 4 of 7 shards (") and "skipped 3 (about 216.8 KiB), never opened or downloaded" in note


class ServeFolder:
    """A fake ``snapshot_download`` serving the files of a local folder as a Hub repo (bytes copied into the
    cache snapshot), recording every request."""

    def __init__(self, cache: Path, repo_id: str, folder: Path) -> None:
        self.cache, self.repo_id, self.folder = cache, repo_id, folder
        self.files = sorted(p.name for p in folder.iterdir() if p.is_file())
        self.calls: list[list[str]] = []
        self.delivered: set[str] = set()

    def __call__(self, repo_id: str, *, revision: str | None, cache_dir: str, local_files_only: bool,
                 allow_patterns: list[str], ignore_patterns: list[str] | None) -> str:
        assert repo_id == self.repo_id and not local_files_only
        self.calls.append(list(allow_patterns))
        snap = self.cache / ("models--" + repo_id.replace("/", "--")) / "snapshots" / COMMIT
        snap.mkdir(parents=True, exist_ok=True)
        for name in filter_repo_objects(self.files, allow_patterns=allow_patterns, ignore_patterns=ignore_patterns):
            shutil.copy(self.folder / name, snap / name)
            self.delivered.add(name)
        refs = snap.parent.parent / "refs"
        refs.mkdir(exist_ok=True)
        (refs / "main").write_text(COMMIT)
        return str(snap)


def test_hub_downloads_only_the_draft_shards(ckpt: Path, reference: Path, tmp_path: Path, online: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    cache = online
    fake = ServeFolder(cache, REPO, ckpt)
    monkeypatch.setattr(hub, "snapshot_download", fake)
    r = convert(REPO, None, tmp_path / "hub.gguf")
    main, draft = shards(ckpt)
    assert fake.delivered == {"config.json", "generation_config.json", "model.safetensors.index.json",
                              "tokenizer.json", "tokenizer_config.json", *draft}
    assert not any(set(main) & set(filter_repo_objects(main, allow_patterns=c)) for c in fake.calls)
    assert tensors_of(tmp_path / "hub.gguf") == tensors_of(reference)
    # same keys, but the name comes from the repo id (and the source repo is recorded)
    hub_kvs, ref_kvs = kvs_of(tmp_path / "hub.gguf", skip_general=False), kvs_of(reference, skip_general=False)
    assert {k: v for k, v in hub_kvs.items() if not k.startswith("general.")} == \
           {k: v for k, v in ref_kvs.items() if not k.startswith("general.")}
    assert hub_kvs["general.source.repo_url"][1] == f"https://huggingface.co/{REPO}"
    assert any(n.startswith("read 4 of 7 shards") and "skipped 3" in n for n in r.notes)


def test_hub_offline_cache_with_only_the_draft_shards(ckpt: Path, reference: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    main, _ = shards(ckpt)
    repo = cache / ("models--" + REPO.replace("/", "--"))
    snap = repo / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    for p in ckpt.iterdir():
        if p.name not in main:
            shutil.copy(p, snap / p.name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    planned = plan_conversion(REPO, None)
    try:
        assert planned.draft.path == snap and planned.target.path == snap
        assert all(f.parent == snap and f.name not in main for f in planned.sources["draft"].files)
    finally:
        planned.close()
    convert(REPO, None, tmp_path / "off.gguf")
    assert tensors_of(tmp_path / "off.gguf") == tensors_of(reference)


def test_hub_refusals_come_before_any_shard(tmp_path: Path, online: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--dspark`` on another draft, or no ``--target-model-dir`` for a draft whose tokenizer is its target's: one
    line, decided from config and index, before a shard is downloaded."""
    from dspark_convert.errors import ConvertError

    cache = online
    draft = ROOT / "fixtures" / "dflash-zlab-swa"  # a sharded DFlash draft (index + shards)
    fake = ServeFolder(cache, "z-lab/dflash-swa", draft)
    monkeypatch.setattr(hub, "snapshot_download", fake)
    with pytest.raises(ConvertError, match=r"^--target-model-dir is required: the draft's tokenizer comes from its "
                                           r"target model$"):
        convert("z-lab/dflash-swa", None, tmp_path / "a.gguf")
    with pytest.raises(ConvertError, match=r"^--dspark: z-lab/dflash-swa is not a DeepSeek-V4 checkpoint with a "
                                           r"DSpark draft"):
        convert("z-lab/dflash-swa", ROOT / "fixtures" / "target-qwen3", tmp_path / "b.gguf", dspark=True)
    assert {n for n in fake.delivered if n.endswith(".safetensors")} == set()
    assert "model.safetensors.index.json" in fake.delivered and len(fake.calls) == 2
    assert not (tmp_path / "a.gguf").exists() and not (tmp_path / "b.gguf").exists()
