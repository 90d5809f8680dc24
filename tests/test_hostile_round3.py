"""Hostile inputs, third round: the Hub cache's own layout, files of a folder that link out of it, deadlines over a
misbehaving server, total header budgets, degenerate hyperparameters, bounded alignment, quoted values.

The bounded cases run the command line in a subprocess under an address-space limit (``RLIMIT_AS``) and a hang
guard, like tests/test_bad_inputs.py; their limits are listed in docs/limits.md.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bad_inputs_kit import FIX, TARGET, copy_fixture

from dspark_convert import convert
from dspark_convert.errors import ConvertError

ROOT = Path(__file__).resolve().parents[1]
AS_LIMIT = 3 << 30  # the address space a bounded command may use (a fixture conversion peaks near 1.3 GiB)
HANG_GUARD = 120  # seconds: not a timing assertion, a command that never ends fails here


def _limit_as() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def run_bounded(*args: str, env: dict[str, str] | None = None, timeout: float = HANG_GUARD,
                as_limit: bool = True) -> subprocess.CompletedProcess[str]:
    """``dspark-convert ARGS`` in a child process under the address-space limit and the hang guard."""
    cmd = [sys.executable, "-c", "import sys; from dspark_convert.entry import main; sys.argv[0] = 'dspark-convert'; "
           "main()", *args]
    full = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "10000", "NO_COLOR": "1", **(env or {})}
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=full, timeout=timeout,
                              preexec_fn=_limit_as if as_limit else None, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"dspark-convert {' '.join(args)[:200]}: still running after {timeout} s")


def one_error(r: subprocess.CompletedProcess[str], *fragments: str, code: int = 2) -> str:
    """Exit ``code``, no traceback, exactly one ``error:`` line (returned) holding every fragment, nothing else on
    stderr but that line."""
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    errs = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert r.returncode == code and len(errs) == 1, (r.returncode, r.stderr[-3000:])
    for f in fragments:
        assert f in errs[0], (f, errs[0][:2000])
    return errs[0]


# ------------------------------------------------------------------------------------------- 1: Hub cache layout
def hub_cache_layout(src: Path, cache: Path, repo_id: str, commit: str = "0123456789abcdef0123456789abcdef01234567",
                     sub: str = "") -> Path:
    """Lay ``src``'s files out as huggingface_hub's cache does: the bytes in ``blobs/<sha256>``, the snapshot's
    files relative symlinks ``snapshots/<commit>/[sub/]<name> -> ../../[../]blobs/<sha256>``, ``refs/main``."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snap = repo / "snapshots" / commit
    folder = snap / sub if sub else snap
    for f in sorted(p for p in src.rglob("*") if p.is_file()):
        data = f.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = folder / f.relative_to(src)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    return folder


@pytest.mark.parametrize("sub", ["", "draft"])
def test_a_sharded_draft_in_the_hub_cache_converts(tmp_path: Path, sub: str) -> None:
    """Every snapshot file of the cache is a symlink into blobs/: a sharded draft (and a sharded target) converts
    to the same bytes as the plain folder, also from a subfolder of the snapshot."""
    cache = tmp_path / "hub"
    draft = hub_cache_layout(FIX / "dflash-zlab-swa", cache, "org/draft", sub=sub)
    target = hub_cache_layout(FIX / "target-qwen3-sharded", cache, "org/target")
    assert (draft / "model-00001-of-00002.safetensors").is_symlink()
    ours, plain = tmp_path / "cache.gguf", tmp_path / "plain.gguf"
    convert(draft, target, ours)
    convert(FIX / "dflash-zlab-swa", FIX / "target-qwen3-sharded", plain)
    assert same_model(ours, plain)


def same_model(a: Path, b: Path) -> bool:
    """Same tensors (names, types, bytes) and the same KVs but ``general.*`` (the name comes from the folder)."""
    from gguf import GGUFReader

    def facts(p: Path) -> tuple[dict[str, object], list[tuple[str, int, bytes]]]:
        r = GGUFReader(p)
        kvs = {k: f.contents() for k, f in r.fields.items() if not k.startswith(("general.", "GGUF."))}
        return kvs, [(t.name, int(t.tensor_type), bytes(t.data.tobytes())) for t in r.tensors]

    fa, fb = facts(a), facts(b)
    assert fa[0] == fb[0]
    assert fa[1] == fb[1]
    return True


def test_a_real_huggingface_hub_download_converts(tmp_path: Path) -> None:
    """The layout huggingface_hub itself writes (hf_hub_download from a local 127.0.0.1 server into a temporary
    cache) is accepted: shards and index are symlinks into the repository's blobs/."""
    from http_server import FileServer, Route
    from huggingface_hub import hf_hub_download

    commit = "89abcdef0123456789abcdef0123456789abcdef"
    src = FIX / "dflash-zlab-swa"
    cache = tmp_path / "hub"
    with FileServer() as server:
        for f in sorted(src.iterdir()):
            data = f.read_bytes()
            server.routes[f"/org/draft/resolve/main/{f.name}"] = Route(data, headers={
                "X-Repo-Commit": commit, "ETag": '"' + hashlib.sha256(data).hexdigest() + '"'})
        for f in sorted(src.iterdir()):
            hf_hub_download("org/draft", f.name, cache_dir=cache, endpoint=server.url, token=False)
    snap = cache / "models--org--draft" / "snapshots" / commit
    assert os.readlink(snap / "model-00002-of-00002.safetensors").startswith("../../blobs/")
    ours, plain = tmp_path / "cache.gguf", tmp_path / "plain.gguf"
    convert(snap, TARGET, ours)
    convert(src, TARGET, plain)
    assert same_model(ours, plain)


def test_a_cache_link_that_leaves_the_cache_is_refused(tmp_path: Path) -> None:
    """A snapshot file linked outside both the snapshot and the repository's blobs/ (another repository's blob,
    /etc/passwd) is refused by name; so is an index naming '..' or an absolute path."""
    cache = tmp_path / "hub"
    draft = hub_cache_layout(FIX / "dflash-zlab-swa", cache, "org/draft")
    other = hub_cache_layout(FIX / "dflash-zlab-swa", cache, "org/other")
    shard = draft / "model-00002-of-00002.safetensors"
    shard.unlink()
    shard.symlink_to((other / "model-00002-of-00002.safetensors").resolve())
    with pytest.raises(ConvertError, match="shard 'model-00002-of-00002.safetensors' .* is outside the checkpoint"):
        convert(draft, TARGET, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists()


# ------------------------------------------------------------------------------------------- 2: folder files
def _target_with(tmp_path: Path, name: str, link_to: str | None = None, data: bytes | None = None) -> Path:
    target = copy_fixture(tmp_path, "target-qwen3", "target")
    import json

    cfg = json.loads((target / "tokenizer_config.json").read_text())
    cfg.pop("chat_template", None)
    (target / "tokenizer_config.json").write_text(json.dumps(cfg))
    p = target / name
    p.parent.mkdir(parents=True, exist_ok=True)
    if link_to is not None:
        p.symlink_to(link_to)
    else:
        p.write_bytes(data or b"")
    return target


@pytest.mark.parametrize("secret", ["/proc/self/environ", "/etc/passwd"])
def test_a_chat_template_linked_to_a_local_file_is_refused(tmp_path: Path, secret: str) -> None:
    """chat_template.jinja -> /proc/self/environ wrote the environment (HF_TOKEN included) into
    tokenizer.chat_template: a folder file that links out of the folder is refused in one line, nothing written."""
    target = _target_with(tmp_path, "chat_template.jinja", link_to=secret)
    out = tmp_path / "out"
    out.mkdir()
    r = run_bounded("hf2gguf", str(FIX / "dspark-qwen3"), "-t", str(target), "-o", str(out / "d.gguf"),
                    env={"HF_TOKEN": "hf_secret_token_value"})
    line = one_error(r, f"{target}/chat_template.jinja: is a symlink to {secret}, outside {target}")
    assert "hf_secret_token_value" not in r.stdout + r.stderr and line
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("name", ["tokenizer_config.json", "config.json", "merges.txt",
                                  "additional_chat_templates/tool_use.jinja"])
def test_any_target_file_linked_out_of_the_folder_is_refused(tmp_path: Path, name: str) -> None:
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("{}")
    target = copy_fixture(tmp_path, "target-qwen3", "target")
    (target / "chat_template.jinja").write_text("{{ x }}")
    p = target / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.unlink(missing_ok=True)
    p.symlink_to(outside)
    with pytest.raises(ConvertError, match=f"{name}: is a symlink to {outside}, outside"):
        convert(FIX / "dspark-qwen3", target, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists()


def test_a_draft_config_linked_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    draft = copy_fixture(tmp_path, "dspark-qwen3", "draft")
    shutil.move(draft / "config.json", tmp_path / "config.json")
    (draft / "config.json").symlink_to(tmp_path / "config.json")
    with pytest.raises(ConvertError, match=f"{draft}/config.json: is a symlink to .*, outside {draft}"):
        convert(draft, TARGET, tmp_path / "x.gguf")


def test_a_chat_template_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    target = _target_with(tmp_path, "chat_template.jinja", data=b"{{ bos }}\xff\xfe")
    with pytest.raises(ConvertError, match=r"chat_template.jinja: not UTF-8 text \(byte 9: b'\\xff'\)"):
        convert(FIX / "dspark-qwen3", target, tmp_path / "x.gguf")


def test_a_chat_template_inside_the_folder_is_still_read(tmp_path: Path) -> None:
    """The rule refuses links out of the folder only: a template (also a symlink to a file inside) is kept."""
    from gguf import GGUFReader

    target = _target_with(tmp_path, "templates/t.jinja", data="{{ messages }} é".encode())
    (target / "chat_template.jinja").symlink_to("templates/t.jinja")
    convert(FIX / "dspark-qwen3", target, tmp_path / "x.gguf")
    f = GGUFReader(tmp_path / "x.gguf")
    assert f.fields["tokenizer.chat_template"].contents() == "{{ messages }} é"


@pytest.mark.parametrize("over", [0, 1])
def test_a_chat_template_over_the_text_limit_is_refused(tmp_path: Path, over: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The text-file limit (``hf.members.MAX_TEXT_BYTES``) at the limit and one byte past it."""
    from dspark_convert.hf import members
    from dspark_convert.tokenizer import cache

    monkeypatch.setattr(members, "MAX_TEXT_BYTES", 4096)
    monkeypatch.setattr(cache, "MAX_TEXT_BYTES", 4096)
    target = _target_with(tmp_path, "chat_template.jinja", data=b"x" * (4096 + over))
    if over:
        with pytest.raises(ConvertError, match="chat_template.jinja: 4097 bytes, larger than the 4096 byte limit"):
            convert(FIX / "dspark-qwen3", target, tmp_path / "x.gguf")
    else:
        convert(FIX / "dspark-qwen3", target, tmp_path / "x.gguf")
        assert (tmp_path / "x.gguf").is_file()


# ------------------------------------------------------------------------------------------- 3: deadlines
class Misbehaving:
    """A raw TCP server on 127.0.0.1 that answers every request with ``behaviour``: a list of byte strings sent
    ``gap`` seconds apart, the last one repeated for ever (a server trickling its status line or headers, or
    answering ``100 Continue`` without end). Each connection runs in a daemon thread until the client leaves."""

    def __init__(self, prefix: bytes, repeat: bytes, gap: float = 0.5) -> None:
        import socket
        import threading

        self.prefix, self.repeat, self.gap = prefix, repeat, gap
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import threading

        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: object) -> None:
        import socket

        assert isinstance(conn, socket.socket)
        try:
            conn.settimeout(5)
            conn.recv(65536)  # the request
            for b in self.prefix:
                conn.sendall(bytes([b]))
                time.sleep(self.gap / 10)
            while not self._stop.is_set():
                conn.sendall(self.repeat)
                time.sleep(self.gap)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self.sock.close()


BEHAVIOURS = {
    "status-line-trickle": (b"", b"H"),  # "HHHH...": a status line that never ends
    "header-trickle": (b"HTTP/1.1 206 Partial Content\r\nX-Slow: ", b"a"),  # a header line that never ends
    "endless-100-continue": (b"", b"HTTP/1.1 100 Continue\r\n\r\n"),
}


@pytest.mark.parametrize("behaviour", sorted(BEHAVIOURS))
@pytest.mark.parametrize("verb", ["inspect", "check", "diff"])
def test_the_deadline_bounds_a_url_read_whatever_the_server_sends(verb: str, behaviour: str, tmp_path: Path) -> None:
    """``--timeout 2 --deadline 4`` over a server that sends a byte (or a header line, or a 100 Continue) every
    half second: the per-read timeout never fires, the deadline ends the command with one line (it ran 90 s)."""
    server = Misbehaving(*BEHAVIOURS[behaviour])
    try:
        url = server.url + "/d.gguf"
        args = [verb, url, url] if verb == "diff" else [verb, url]
        t0 = time.monotonic()
        r = run_bounded(*args, "--timeout", "2", "--deadline", "4", timeout=60)
        took = time.monotonic() - t0
    finally:
        server.close()
    one_error(r, f"{url}: not read within the 4 s deadline (--deadline)")
    assert took < 60  # the hang guard above; the figure itself is not asserted


@pytest.mark.parametrize("behaviour", ["header-trickle", "endless-100-continue"])
def test_the_deadline_bounds_the_hub_metadata_request(behaviour: str) -> None:
    """``hf://`` first sends huggingface_hub's HEAD: a server trickling its answer took 150 s; the deadline holds."""
    server = Misbehaving(*BEHAVIOURS[behaviour])
    try:
        r = run_bounded("inspect", "hf://org/repo/d.gguf", "--timeout", "2", "--deadline", "4", timeout=60,
                        env={"HF_ENDPOINT": server.url, "HF_HUB_OFFLINE": "0", "HF_HUB_DISABLE_TELEMETRY": "1"})
    finally:
        server.close()
    one_error(r, "hf://org/repo/d.gguf: not read within the 4 s deadline (--deadline)")


def test_check_target_is_bounded_by_the_deadline(tmp_path: Path) -> None:
    """``check FILE --target URL``: the target's header read is bounded by the same deadline."""
    server = Misbehaving(*BEHAVIOURS["header-trickle"])
    draft = tmp_path / "d.gguf"
    convert(FIX / "dspark-qwen3", TARGET, draft)
    try:
        r = run_bounded("check", str(draft), "--target", server.url + "/t.gguf", "--timeout", "2", "--deadline", "4",
                        timeout=60)
    finally:
        server.close()
    one_error(r, "t.gguf: not read within the 4 s deadline (--deadline)")
