"""The third first-day trial, bug by bug: each test reproduces what a new user met (exact line, exit code,
nothing left behind) and fails without its fix."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest
from cli_kit import refused, run
from conftest import FIXTURES, TARGET

DRAFT = FIXTURES / "dspark-qwen3"
ROOT_USER = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture(scope="module")
def draft_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dspark-qwen3 fixture converted at bf16 (the Quick start's file)."""
    out = tmp_path_factory.mktemp("draft") / "dspark-qwen3-BF16.gguf"
    r = run("hf2gguf", DRAFT, "-t", TARGET, "-o", out, "--outtype", "bf16")
    assert r.exit_code == 0, r.stderr
    return out


# ------------------------------------------------------------------------------------------- 1: --force
def _make(kind: str, path: Path) -> object:
    """Put a ``kind`` at ``path``; returns what keeps it alive (the socket) or None."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        return s
    elif kind == "chardev":
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # the numbers of /dev/null, in a temp folder
    elif kind == "symlink":
        (path.parent / "real.gguf").write_bytes(b"keep me")
        path.symlink_to("real.gguf")
    elif kind == "dangling":
        path.symlink_to("missing.gguf")
    return None


KINDS = {"fifo": "is a FIFO (named pipe), not a regular file; only a regular file is replaced (even with --force)",
         "socket": "is a socket, not a regular file; only a regular file is replaced (even with --force)",
         "chardev": "is a character device, not a regular file; only a regular file is replaced (even with --force)",
         "symlink": "is a symbolic link (to real.gguf); only a regular file is replaced, a link is neither followed "
                    "nor replaced: give the file it points to, or remove the link",
         "dangling": "is a symbolic link (to missing.gguf); only a regular file is replaced, a link is neither "
                     "followed nor replaced: give the file it points to, or remove the link"}


def _kind_params() -> list:
    return [pytest.param(k, marks=pytest.mark.skipif(not ROOT_USER, reason="mknod needs root"))
            if k == "chardev" else k for k in KINDS]


@pytest.mark.parametrize("kind", _kind_params())
@pytest.mark.parametrize("force", [True, False])
@pytest.mark.parametrize("verb", ["hf2gguf", "upgrade"])
def test_force_replaces_only_a_regular_file(tmp_path: Path, draft_gguf: Path, kind: str, force: bool,
                                            verb: str) -> None:
    out = tmp_path / "out.gguf"
    keep = _make(kind, out)
    before = os.lstat(out)
    args = (["hf2gguf", DRAFT, "-t", TARGET] if verb == "hf2gguf" else ["upgrade", draft_gguf])
    r = run(*args, "-o", out, *(["--force"] if force else []))
    refused(r, f"{out}: {KINDS[kind]}")
    after = os.lstat(out)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out.gguf"] + (["real.gguf"] if kind == "symlink"
                                                                                  else []))
    if kind == "symlink":
        assert (tmp_path / "real.gguf").read_bytes() == b"keep me"
    if keep is not None:
        keep.close()  # type: ignore[attr-defined]


def test_write_atomically_refuses_what_appears_before_the_rename(tmp_path: Path) -> None:
    """The shared writer (every verb that writes) checks again just before the rename: a FIFO that appears at the
    destination while writing is left as it is, and nothing else stays behind."""
    from dspark_convert.errors import ConvertError
    from dspark_convert.hf2gguf.atomic import write_atomically

    out = tmp_path / "x.gguf"

    def body(f) -> None:  # type: ignore[no-untyped-def]
        f.write(b"GGUF")
        os.mkfifo(out)

    with pytest.raises(ConvertError, match="x.gguf: is a FIFO"):
        write_atomically(out, body, force=True)
    assert stat.S_ISFIFO(os.lstat(out).st_mode) and [p.name for p in tmp_path.iterdir()] == ["x.gguf"]


# ------------------------------------------------------------------------------------------- 2: remote dry run
def _without_keys(path: Path, out: Path, names: tuple[str, ...]) -> Path:
    """``path`` without the keys ``names``: the file an older revision wrote before it learned them."""
    from dspark_convert.gguffile.reader import read_gguf
    from dspark_convert.upgrade import plan_upgrade, write_upgrade

    with read_gguf(path) as f:
        plan = plan_upgrade(f)
        plan.kvs = [k for k in plan.kvs if k.name not in names]
        write_upgrade(plan, f, out)
    return out


def test_remote_upgrade_dry_run_reads_the_header_only(draft_gguf: Path, tmp_path: Path) -> None:
    """``upgrade URL --dry-run`` lists the stale items from the header (a multi-MiB file: its data is never
    fetched); without ``--dry-run`` a URL is refused in one line before anything (no ``http:/host`` path)."""
    from http_server import FileServer, Route, sparse_gguf

    from dspark_convert.gguffile.reader import read_gguf

    old = _without_keys(draft_gguf, tmp_path / "old.gguf", ("dflash.has_confidence_head",))
    with read_gguf(old) as f:
        header = old.read_bytes()[:f.data_offset]
    big = sparse_gguf(tmp_path / "big.gguf", header, f.data_offset + 8 * (1 << 20))  # data past the first window
    with FileServer() as server:
        server.routes["/old.gguf"] = Route(big)
        url = server.url + "/old.gguf"
        r = run("upgrade", url, "--dry-run")
        assert (r.exit_code, r.stderr) == (0, ""), r.stderr
        assert r.stdout.splitlines()[1] == ("  would change: dflash.has_confidence_head: missing; b10705+ writes it (true: a confidence head in "
                                           "the file) (upstream b10705+; upgrade fixes it from the file alone)")
        assert server.sent() < 2 * (1 << 20)
        refused(run("upgrade", url), f"{url}: a remote file is upgraded only with --dry-run (its header is read, the "
                                     "tensor data is not fetched); download it, then upgrade the local copy")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.gguf", "old.gguf"]


# ------------------------------------------------------------------------------------------- 3: a wrong target
WRONG_TARGET = FIXTURES / "target-llama2-spm"


def test_a_target_that_does_not_fit_claims_no_staleness(draft_gguf: Path) -> None:
    """A fresh Qwen draft against Llama-2's target: the fit fails, and nothing is called stale from that target
    (no add_bos_token claim, no ``upgrade --target WRONG`` suggestion)."""
    import json

    r = run("check", draft_gguf, "--target", WRONG_TARGET, "--json")
    doc = json.loads(r.stdout)
    assert r.exit_code == 1 and not doc["ok"]
    assert [f for f in doc["loader_findings"] if f["rule"] == "stale-layout"] == []
    assert doc["notes"][-1]["message"] == ("the target's vocabulary does not fit the draft (vocab-type, vocab-size, "
                                           "token-text): no stale-layout item is judged from it")
    assert "upgrade" not in run("check", draft_gguf, "--target", WRONG_TARGET).stdout


def test_upgrade_refuses_a_target_whose_vocabulary_does_not_fit(draft_gguf: Path, tmp_path: Path) -> None:
    r = run("upgrade", draft_gguf, "-o", tmp_path / "new.gguf", "--target", WRONG_TARGET)
    assert (r.exit_code, r.stdout) == (2, "")
    assert r.stderr.startswith(f"error: --target {WRONG_TARGET}: its vocabulary does not fit {draft_gguf} (vocab-type: "
                               "vocab type differs: draft BPE (gpt2), target SPM (llama);")
    assert r.stderr.endswith("; upgrade takes tokenizer facts only from the target the draft was made for\n")
    assert len(r.stderr.splitlines()) == 1 and list(tmp_path.iterdir()) == []
    ok = run("upgrade", draft_gguf, "-o", tmp_path / "new.gguf", "--target", TARGET)
    assert ok.exit_code == 0 and (tmp_path / "new.gguf").read_bytes() == draft_gguf.read_bytes()


# ------------------------------------------------------------------------------------------- 4: --match-upstream
@pytest.mark.parametrize("layout, with_hf", [("dspark-qwen3", False), ("dspark-qwen3", True),
                                             ("dflash-deepspec", True), ("dflash-zlab", True)])
def test_upgrade_match_upstream_gives_upstreams_layout(tmp_path: Path, layout: str, with_hf: bool) -> None:
    """A default hf2gguf file (``output.weight`` added on the untied target) upgraded with ``--match-upstream`` is
    byte for byte what ``hf2gguf --match-upstream`` writes (no "already current" copy)."""
    default, upstream, new = tmp_path / "default.gguf", tmp_path / "upstream.gguf", tmp_path / "new.gguf"
    for out, extra in ((default, []), (upstream, ["--match-upstream"])):
        assert run("hf2gguf", FIXTURES / layout, "-t", TARGET, "-o", out, *extra).exit_code == 0
    r = run("upgrade", default, "-o", new, "--match-upstream", *(["--hf", FIXTURES / layout] if with_hf else []))
    assert r.exit_code == 0, r.stderr
    assert new.read_bytes() == upstream.read_bytes()
    if default.read_bytes() != upstream.read_bytes():
        assert "already current" not in r.stdout and "  changed: output.weight: present" in r.stdout


# ------------------------------------------------------------------------------------------- 5: --hf checks
@pytest.mark.parametrize("as_json", [False, True])
def test_upgrade_with_hf_lists_nothing_hf_would_check(tmp_path: Path, as_json: bool) -> None:
    import json

    gguf = tmp_path / "zlab.gguf"
    assert run("hf2gguf", FIXTURES / "dflash-zlab", "-t", TARGET, "-o", gguf).exit_code == 0
    without = run("upgrade", gguf, "--dry-run", "--json")
    assert [u for u in json.loads(without.stdout)["unchecked"] if u.endswith("--hf)")] != []
    r = run("upgrade", gguf, "--dry-run", "--hf", FIXTURES / "dflash-zlab", *(["--json"] if as_json else []))
    assert r.exit_code == 0
    unchecked = (json.loads(r.stdout)["unchecked"] if as_json
                 else [ln.removeprefix("  not checked: ") for ln in r.stdout.splitlines() if "not checked" in ln])
    assert unchecked == ["dflash.rope.dimension_sections (M-RoPE target?)", "dflash.embedding_scale (Gemma target?)",
                         "tokenizer add_bos/add_eos (post-processor rule)"]


def test_upgrade_dry_run_json_names_the_file_it_would_write(tmp_path: Path) -> None:
    """Friction: ``upgrade --dry-run --json`` had ``"output": null``. It names the file the real run would write
    (-o, else OLD.upgraded.gguf beside the input), and writes nothing."""
    import json

    gguf = tmp_path / "zlab.gguf"
    assert run("hf2gguf", FIXTURES / "dflash-zlab", "-t", TARGET, "-o", gguf).exit_code == 0
    default = json.loads(run("upgrade", gguf, "--dry-run", "--json").stdout)
    chosen = json.loads(run("upgrade", gguf, "-o", tmp_path / "new.gguf", "--dry-run", "--json").stdout)
    assert (default["output"], default["bytes"]) == (str(tmp_path / "zlab.upgraded.gguf"), None)
    assert chosen["output"] == str(tmp_path / "new.gguf")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["zlab.gguf"]


def test_a_target_file_or_model_folder_gets_the_right_verb(tmp_path: Path) -> None:
    """Friction: a target GGUF given to ``check`` and a model folder given to ``inspect`` / ``check`` got no hint of
    the verb that reads them."""
    from fit_pairs import write_target_gguf

    target = write_target_gguf(tmp_path / "Qwen3-8B-Q8_0.gguf", [], big_tensor_bytes=4096)
    r = run("check", target)
    assert r.exit_code == 1
    assert ("'qwen3' is not a draft architecture llama.cpp loads; expected one of " in r.stdout
            and "(a target model's file? check a draft against it: 'dspark-convert check DRAFT.gguf --target FILE')"
            in r.stdout), r.stdout
    # a folder: both readings named, each with what it is (re-tried on a draft folder, the line called it a target)
    for verb in ("inspect", "check"):
        for folder in (TARGET, FIXTURES / "dspark-qwen3"):
            refused(run(verb, folder), f"{folder}: is a model folder, not a GGUF file; if it is a draft checkpoint, "
                                       f"convert it with 'dspark-convert hf2gguf {folder} --target-model-dir TARGET'; "
                                       "if it is a target model, check a draft against it with 'dspark-convert check "
                                       f"DRAFT.gguf --target {folder}'")


# ------------------------------------------------------------------------------------------- 6: --hf / --target
@pytest.mark.parametrize("flag, folder, line", [
    ("--hf", "target-qwen3", "--hf {d}: is a target model (Qwen3ForCausalLM), not a draft checkpoint; pass the "
                             "draft's checkpoint folder as --hf"),
    ("--hf", "dflash-zlab", "--hf {d}: a checkpoint of family dflash, but {f} is a DSpark file; pass the checkpoint "
                            "the file was converted from"),
    ("--hf", "eagle3-llama", "--hf {d}: a checkpoint of family eagle3 (its files are 'eagle3' GGUFs), but {f} is a "
                             "'dflash' file; pass the checkpoint the file was converted from"),
    ("--hf", "nonexistent", "--hf {d}: no such folder; expected the draft checkpoint folder (config.json + "
                            "safetensors)"),
    ("--target", "dflash-zlab", "{d}: is a draft checkpoint (DFlashDraftModel), not a target model; pass the target "
                                "model the draft was trained for as --target"),
])
@pytest.mark.parametrize("dry_run", [False, True])
def test_upgrade_validates_its_folders_like_the_other_verbs(draft_gguf: Path, tmp_path: Path, flag: str, folder: str,
                                                            line: str, dry_run: bool) -> None:
    d = FIXTURES / folder
    r = run("upgrade", draft_gguf, "-o", tmp_path / "new.gguf", flag, d, *(["--dry-run"] if dry_run else []))
    refused(r, line.format(d=d, f=draft_gguf))
    assert list(tmp_path.iterdir()) == []
    assert run("upgrade", draft_gguf, "-o", tmp_path / "new.gguf", "--hf", DRAFT).exit_code == 0


# ------------------------------------------------------------------------------------------- 7, 18: what upgrade takes
def _target_gguf(path: Path) -> Path:
    import numpy as np
    from gguf_samples import write_gguf

    from dspark_convert.gguf_constants import VT

    return write_gguf(path, [("qwen3.embedding_length", 64, VT.UINT32)],
                      [("token_embd.weight", np.ones((8, 64), np.float32), None)], arch="qwen3")


@pytest.mark.parametrize("dry_run", [False, True])
def test_upgrade_refuses_a_target_model_gguf(tmp_path: Path, dry_run: bool) -> None:
    old = _target_gguf(tmp_path / "target.gguf")
    r = run("upgrade", old, *(["--dry-run"] if dry_run else []))
    refused(r, f"{old}: is not a draft GGUF (general.architecture 'qwen3', no draft variant loads it); upgrade "
               "rewrites draft files made by older converters")
    assert [p.name for p in tmp_path.iterdir()] == ["target.gguf"]


def _without_tensor(src: Path, out: Path, name: str) -> Path:
    from dspark_convert.gguffile.reader import read_gguf
    from dspark_convert.upgrade import plan_upgrade, write_upgrade

    with read_gguf(src) as f:
        plan = plan_upgrade(f)
        plan.pieces = [p for p in plan.pieces if p.spec.name != name]
        write_upgrade(plan, f, out)
    return out


@pytest.mark.parametrize("as_json", [False, True])
@pytest.mark.parametrize("dry_run", [False, True])
def test_upgrade_refuses_a_file_that_would_not_load(draft_gguf: Path, tmp_path: Path, dry_run: bool,
                                                    as_json: bool) -> None:
    """Bug 18, and its review: the dry run printed ``nothing stale`` (or a JSON document) before the refusal; a file
    no upgrade makes loadable gets the one error line and nothing else, dry run or not, text or JSON."""
    broken = _without_tensor(draft_gguf, tmp_path / "broken.gguf", "blk.0.ffn_up.weight")
    r = run("upgrade", broken, *(["--dry-run"] if dry_run else []), *(["--json"] if as_json else []))
    line = (f"{broken}: the upgraded file would fail llama.cpp's loader rules (blk.0.ffn_up.weight: is missing "
            "(llama.cpp: \"check_tensor_dims: tensor not found\")); upgrade does not repair that: see 'dspark-convert "
            f"check {broken}', then reconvert with 'dspark-convert hf2gguf'")
    assert (r.exit_code, r.stdout, r.stderr) == (2, "", f"error: {line}\n")
    assert [p.name for p in tmp_path.iterdir()] == ["broken.gguf"]


# ------------------------------------------------------------------------------------------- 15: revision options
@pytest.mark.parametrize("args, line", [
    (["--from-revision", "b99999"], "--from-revision b99999: later than b11434, the layout upgrade writes; a file made "
                                    "by that revision needs no upgrade (check it with 'dspark-convert check')"),
    (["--rope-interleaved"], "--rope-interleaved: needs --from-revision bNNNN (the upstream revision that made the "
                             "file); alone it changes nothing (--hf CHECKPOINT tells both by itself)"),
    (["--from-revision", "bogus"], "--from-revision 'bogus': expected an upstream tag such as b10900 (or 749f688)"),
])
@pytest.mark.parametrize("dry_run", [False, True])
def test_upgrade_revision_options_are_checked_first(draft_gguf: Path, tmp_path: Path, args: list[str], line: str,
                                                    dry_run: bool) -> None:
    r = run("upgrade", draft_gguf, "-o", tmp_path / "new.gguf", *args, *(["--dry-run"] if dry_run else []))
    refused(r, line)  # nothing on stdout: no listing before the error
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------- 8: MiMo
def test_mimo_conversion_does_not_call_its_written_mask_row_dropped(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(FIXTURES.parent))
    from fixtures.correlated import mimo_draft

    draft = mimo_draft(tmp_path / "mimo")
    r = run("hf2gguf", draft, "-t", TARGET, "-o", tmp_path / "mimo.gguf")
    assert (r.exit_code, r.stderr) == (0, "")
    assert ("  mask_embedding.pt: token_embd is the target's embedding with row 1016 replaced by the draft's mask "
            "vector; output is the target's head") in r.stdout.splitlines()
    assert "cannot hold" not in r.stdout + r.stderr


# ------------------------------------------------------------------------------------------- 9, 19: --spec-type
SPEC_WARNING = ("warning: llama-server would auto-detect draft-dflash for this file; serve it with --spec-type "
                "draft-dspark --spec-draft-p-min 0: no markov_w1.weight, so llama-server auto-detects draft-dflash, "
                "which reads block rows 1..n; this file predicts from the anchor row (dflash.sample_from_anchor = "
                "true), which only draft-dspark reads: under draft-dflash every drafted token is one position late")


def test_deepspec_dflash_conversion_says_which_spec_type(tmp_path: Path) -> None:
    import json

    out = tmp_path / "dspark-dd.gguf"  # a name -hf finds: check's only warning is the spec-type one
    r = run("hf2gguf", FIXTURES / "dflash-deepspec", "-t", TARGET, "-o", out)
    assert r.exit_code == 0 and SPEC_WARNING + " (llama-server, rule spec-type)" in r.stdout.splitlines()
    doc = json.loads(run("hf2gguf", FIXTURES / "dflash-deepspec", "-t", TARGET, "-o", out, "--force", "--json").stdout)
    assert (doc["spec_type"]["spec_type"], doc["spec_type"]["extra_flags"]) == ("draft-dspark", ["--spec-draft-p-min 0"])
    assert [f["rule"] for f in doc["findings"] if f["level"] == "warning"] == ["spec-type"]
    plain = json.loads(run("hf2gguf", DRAFT, "-t", TARGET, "-o", tmp_path / "d.gguf", "--json").stdout)
    assert plain["spec_type"]["spec_type"] == "draft-dspark" and not plain["spec_type"]["flag_needed"]
    # check: the reason once (in the warning), not twice
    c = run("check", out)
    assert c.stdout.splitlines()[-1] == "llama-server: pass --spec-type draft-dspark --spec-draft-p-min 0"
    assert c.stderr == SPEC_WARNING + "\n"


def test_check_advertises_no_spec_type_for_a_file_that_does_not_load(draft_gguf: Path, tmp_path: Path) -> None:
    import json

    broken = _without_tensor(draft_gguf, tmp_path / "broken.gguf", "blk.0.ffn_up.weight")
    r = run("check", broken)
    assert r.exit_code == 1 and "llama-server" not in r.stdout + r.stderr
    doc = json.loads(run("check", broken, "--json").stdout)
    assert doc["ok"] is False and doc["spec_type"] is None


# ------------------------------------------------------------------------------------------- 10: verify
def test_verify_of_a_file_that_does_not_load_is_an_input_error(draft_gguf: Path, tmp_path: Path) -> None:
    broken = _without_tensor(draft_gguf, tmp_path / "broken.gguf", "blk.0.ffn_up.weight")
    r = run("verify", broken, "--hf", DRAFT, "-t", TARGET)
    refused(r, f"{broken}: does not load in llama.cpp (blk.0.ffn_up.weight: is missing (llama.cpp: \"check_tensor_dims: "
               f"tensor not found\")); verify compares a file that loads: see 'dspark-convert check {broken}'")


# ------------------------------------------------------------------------------------------- 11: verify URL
def test_verify_of_a_url_says_so_and_keeps_the_url(tmp_path: Path) -> None:
    url = "http://127.0.0.1:9/x.gguf"  # never contacted: refused before any read
    refused(run("verify", url, "--hf", DRAFT, "-t", TARGET),
            f"{url}: verify reads every tensor of the file, and a remote file's tensor data is not fetched; download "
            "it, then verify the local copy")


# ------------------------------------------------------------------------------------------- 14: mixed revisions
def test_a_file_no_revision_wrote_is_not_called_b10705_or_later(draft_gguf: Path, tmp_path: Path) -> None:
    import json

    old = _without_keys(draft_gguf, tmp_path / "nohc.gguf", ("dflash.has_confidence_head",))
    doc = json.loads(run("check", old, "--json").stdout)
    (stale,) = [f for f in doc["findings"] if f["rule"] == "stale-layout"]
    assert "file made by b10705 or later" not in stale["message"]
    assert ("file made by no single revision (features of b10705 or later next to older ones: another tool, or a "
            "hand edit)") in stale["message"]


# ------------------------------------------------------------------------------------------- 13: mistyped paths
@pytest.mark.parametrize("args", [["hf2gguf", "fixtures/nonexist", "-t", "fixtures/target-qwen3", "--dry-run"],
                                  ["hf2gguf", "fixtures/dspark-qwen3", "-t", "fixtures/target-qwen", "--dry-run"]])
def test_a_mistyped_path_under_an_existing_folder_is_no_such_folder(tmp_path: Path, args: list[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    (tmp_path / "fixtures").mkdir()
    for name in ("dspark-qwen3", "target-qwen3"):
        shutil.copytree(FIXTURES / name, tmp_path / "fixtures" / name)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # a Hub lookup would fail with a connection error
    bad = next(a for a in args if a.endswith(("nonexist", "target-qwen")))
    refused(run(*args, cwd=tmp_path), f"{bad}: no such folder (read as a local path, since the folder fixtures exists "
                                      "here; for the Hub repo of that name, run from another folder)")


# ------------------------------------------------------------------------------------------- 12: Gemma 4 vocabulary
def test_gemma4_vocabulary_is_known_to_the_fit_rules() -> None:
    """llama.cpp b11434 loads tokenizer.ggml.model 'gemma4' as BPE with no default BOS / EOS and its own
    pre-tokenizer (so add_bos defaults to false): never ``unknown 'gemma4'``."""
    from dspark_convert.roles.fit import vocab_facts

    f = vocab_facts({"tokenizer.ggml.model": "gemma4", "tokenizer.ggml.pre": "llama-bpe"}, ["<pad>", "<eos>", "<bos>"])
    assert (f.type, f.bos, f.eos, f.add_bos, f.add_eos) == ("BPE", None, None, False, False)
    g = vocab_facts({"tokenizer.ggml.model": "gemma4", "tokenizer.ggml.bos_token_id": 2}, ["<pad>", "<eos>", "<bos>"])
    assert (g.bos, g.bos_from if hasattr(g, "bos_from") else "key") == (2, "key")


# ------------------------------------------------------------------------------------------- frictions
def test_no_arguments_prints_the_help_and_exits_0() -> None:
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "dspark_convert.cli"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "hf2gguf" in p.stdout and p.stderr == ""
    q = subprocess.run([sys.executable, "-m", "dspark_convert.cli", "check"], capture_output=True, text=True,
                       timeout=120)
    assert q.returncode == 2 and q.stderr == "error: Missing argument 'FILE'; see 'dspark-convert check -h'\n"


def test_target_has_t_on_check_and_upgrade(draft_gguf: Path) -> None:
    long = run("check", draft_gguf, "--target", TARGET, "--json")
    short = run("check", draft_gguf, "-t", TARGET, "--json")
    assert long.exit_code == short.exit_code == 0 and long.stdout == short.stdout
    up = run("upgrade", draft_gguf, "-t", TARGET, "--dry-run", "--json")
    assert up.exit_code == 0 and '"unchecked"' in up.stdout
