"""inspect/check/diff of GGUF files over HTTP: a local server (started here, no network) serves fixture files
with and without Range support, truncated bodies, error statuses, slow answers, and the Hub's URL layout
(reached through HF_ENDPOINT). Asserted: results equal to the local reads, exit codes, one-line errors, and
the bytes fetched (the header plus at most one window, never the tensor data).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import point_hub_at
from gguf import GGUFValueType as VT
from gguf_samples import kv_raw, raw_gguf, u32, u64, write_gguf, write_sample
from http_server import FileServer, Route, sparse_gguf
from huggingface_hub import constants as hf_constants
from typer.testing import CliRunner

from dspark_convert.cli import app
from dspark_convert.errors import ConvertError, GGUFFormatError
from dspark_convert.gguffile.options import RemoteOptions
from dspark_convert.gguffile.reader import read_gguf
from dspark_convert.gguffile.source import open_gguf_source
from dspark_convert.inspect import inspect_gguf
from dspark_convert.units import size_text

runner = CliRunner()
W1, WMAX = 64, 256  # small windows, so that a few-KB header takes several range requests
OPTS = RemoteOptions(first_window=W1, max_window=WMAX, timeout=5.0, retries=2, backoff=0.01)
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def big(tmp_path: Path) -> Path:
    """A file whose tensor data (1 MiB) dwarfs its header (~4 KB: 300 token strings)."""
    return write_gguf(tmp_path / "big.gguf", [("t.tokens", [f"tok{i}" for i in range(300)], VT.ARRAY),
                                             ("t.n", 7, VT.UINT32)],
                      [("w", np.ones((512, 512), np.float32), None), ("v", np.arange(64, dtype=np.float32), None)])


@pytest.fixture
def server() -> Iterator[FileServer]:
    with FileServer() as s:
        yield s


@pytest.fixture
def hub(server: FileServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FileServer:
    """The local server as the Hub: HF_ENDPOINT points at it, online, no token unless a test sets one."""
    point_hub_at(server.url, tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    return server


def local_doc(path: Path) -> dict[str, Any]:
    doc = inspect_gguf(path)
    doc.pop("file")
    hub = doc.pop("hf_name")  # the name -hf would see: the file's own
    assert hub is None or hub["name"] == path.name
    return doc


def remote_doc(ref: str, opts: RemoteOptions = OPTS) -> tuple[dict[str, Any], dict[str, Any]]:
    doc = inspect_gguf(ref, remote=opts)
    assert doc.pop("file") == ref or ref.startswith("hf://") or "/" in ref
    hub = doc.pop("hf_name")  # the name -hf would see: the one in the reference (no revision), not a redirect's
    assert hub is None or hub["name"] == ref.rsplit("/", 1)[-1].split("@")[0]
    return doc, doc.pop("source")


def header_end(path: Path) -> int:
    with read_gguf(path) as f:
        return f.header_end


def cli(*args: str) -> Any:
    return runner.invoke(app, [*args, "--timeout", "5"])


def one_error_line(result: Any) -> str:
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


# ------------------------------------------------------------------------------------------ plain URLs
def test_range_reads_fetch_the_header_plus_at_most_one_window(server: FileServer, big: Path) -> None:
    server.routes["/big.gguf"] = Route(big.read_bytes())
    doc, src = remote_doc(server.url + "/big.gguf")
    assert doc == local_doc(big)
    end, size = header_end(big), big.stat().st_size
    assert size > 1 << 20 and end < 5000
    assert end <= src["bytes_fetched"] <= end + WMAX
    gets = server.gets("/big.gguf")
    assert src == {"kind": "url", "url": server.url + "/big.gguf", "revision": None, "commit": None,
                   "bytes_fetched": server.sent(), "requests": len(gets), "range_requests": True,
                   "header_only": True, "notes": []}
    # windows double from 64 to 256 bytes and every range stays below header end + one window
    ranges = [tuple(int(x) for x in e.headers["range"][6:].split("-")) for e in gets]
    assert ranges[:3] == [(0, 63), (64, 191), (192, 447)]
    assert all(b - a + 1 <= WMAX for a, b in ranges) and max(b for _, b in ranges) < end + WMAX


@pytest.mark.parametrize("ranges", [False, True])
def test_a_file_under_the_first_window_is_not_header_only(server: FileServer, tmp_path: Path, ranges: bool) -> None:
    """Issue 24 bug 14: a server ignoring Range, a file smaller than the first window: the whole file came, yet
    ``source`` said ``header_only: true`` with no note. Both kinds of server: whole file, said so."""
    small = write_gguf(tmp_path / "small.gguf", [("t.n", 7, VT.UINT32)], [("v", np.arange(4, dtype=np.float32), None)])
    size = small.stat().st_size
    server.routes["/small.gguf"] = Route(small.read_bytes(), ranges=ranges)
    opts = RemoteOptions(first_window=size + 100, timeout=5.0)
    doc, src = remote_doc(server.url + "/small.gguf", opts)
    assert doc == local_doc(small)
    notes = [] if ranges else [f"the server ignores Range requests (it answered 200 with the whole {size} bytes): "
                               "the file is smaller than the first window, so all of it was read"]
    assert src == {"kind": "url", "url": server.url + "/small.gguf", "revision": None, "commit": None,
                   "bytes_fetched": size, "requests": 1, "range_requests": ranges, "header_only": False,
                   "notes": notes}
    r = cli("inspect", server.url + "/small.gguf", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["source"]["header_only"] is False
    r = cli("inspect", server.url + "/small.gguf", "--no-tensors")
    assert f"whole file (smaller than the first window), fetched {size:,} bytes in 1 " in r.stdout


def test_server_ignoring_range_is_read_up_to_the_header_then_closed(server: FileServer, big: Path) -> None:
    server.routes["/big.gguf"] = Route(big.read_bytes(), ranges=False)
    doc, src = remote_doc(server.url + "/big.gguf")
    assert doc == local_doc(big)
    end = header_end(big)
    assert src["range_requests"] is False and src["requests"] == 1 and len(server.gets()) == 1
    assert end <= src["bytes_fetched"] <= end + WMAX
    assert src["notes"] == [f"the server ignores Range requests (it answered 200 with the whole "
                            f"{size_text(big.stat().st_size)}): read the first {size_text(src['bytes_fetched'])} of the body, then closed the "
                            f"connection"]
    r = cli("inspect", server.url + "/big.gguf", "--no-tensors")
    assert r.exit_code == 0 and "ignores Range requests" in r.stdout and "header only, fetched" in r.stdout


@pytest.mark.parametrize("ranges", [True, False])
def test_file_smaller_than_the_first_window_is_read_whole(server: FileServer, tmp_path: Path, ranges: bool) -> None:
    """A whole file below the first window (the default 1 MiB) is one request, with or without Range support."""
    small = write_gguf(tmp_path / "small.gguf", [("t.n", 7, VT.UINT32)], [("v", np.arange(64, dtype=np.float32), None)])
    server.routes["/small.gguf"] = Route(small.read_bytes(), ranges=ranges)
    doc, src = remote_doc(server.url + "/small.gguf", RemoteOptions(timeout=5.0, retries=0))
    assert doc == local_doc(small)
    assert src["requests"] == 1 and src["bytes_fetched"] == small.stat().st_size and src["range_requests"] is ranges


def test_remote_json_is_the_local_schema_plus_source(server: FileServer, tmp_path: Path) -> None:
    sample = write_sample(tmp_path / "sample.gguf")
    server.routes["/s.gguf"] = Route(sample.read_bytes())
    url = server.url + "/s.gguf"
    r = cli("inspect", url, "--json", "--full-arrays")
    assert r.exit_code == 0, r.stderr
    remote = json.loads(r.stdout)
    local = json.loads(cli("inspect", str(sample), "--json", "--full-arrays").stdout)
    assert remote.pop("file") == url and local.pop("file") == str(sample)
    assert (remote.pop("hf_name")["name"], local.pop("hf_name")["name"]) == ("s.gguf", "sample.gguf")
    assert remote.pop("source")["bytes_fetched"] >= header_end(sample)
    assert remote == local


@pytest.mark.parametrize(("status", "text", "requests"), [
    (404, "HTTP 404 Not Found", 1),
    (401, "HTTP 401 Unauthorized: access denied", 1),
    (403, "HTTP 403 Forbidden: access denied", 1),
    (500, "HTTP 500 Internal Server Error (3 attempts)", 3),
    (503, "HTTP 503 Service Unavailable (3 attempts)", 3),
])
def test_http_errors_are_one_line_and_only_transient_ones_retried(server: FileServer, status: int, text: str,
                                                                   requests: int) -> None:
    server.routes["/f.gguf"] = Route(b"GGUF", status=status)
    url = server.url + "/f.gguf"
    with pytest.raises(ConvertError) as e:
        open_gguf_source(url, OPTS)
    assert str(e.value).startswith(f"{url}: {text}") and len(server.gets()) == requests
    r = cli("inspect", url)
    assert r.exit_code == 2 and url in one_error_line(r) and text in one_error_line(r)


def test_redirects_are_followed_but_only_to_http(server: FileServer, big: Path) -> None:
    server.routes["/big.gguf"] = Route(big.read_bytes())
    server.routes["/moved.gguf"] = Route(redirect=server.url + "/big.gguf")
    server.routes["/ftp.gguf"] = Route(redirect="ftp://127.0.0.1/big.gguf")
    server.routes["/loop.gguf"] = Route(redirect=server.url + "/loop.gguf")
    doc, src = remote_doc(server.url + "/moved.gguf")
    assert doc == local_doc(big) and src["url"] == server.url + "/moved.gguf"
    with pytest.raises(ConvertError) as e:
        open_gguf_source(server.url + "/ftp.gguf", OPTS)
    assert str(e.value) == (f"{server.url}/ftp.gguf: HTTP 302 redirect to a non-HTTP URL refused: "
                            f"ftp://127.0.0.1/big.gguf")
    with pytest.raises(ConvertError) as e:
        open_gguf_source(server.url + "/loop.gguf", OPTS)
    assert str(e.value).startswith(f"{server.url}/loop.gguf: HTTP 302 ") and "\n" not in str(e.value)


def test_truncated_body_is_retried_then_one_line(server: FileServer, big: Path) -> None:
    server.routes["/big.gguf"] = Route(big.read_bytes(), truncate_at=100)  # promises 128 bytes, sends 100
    url = server.url + "/big.gguf"
    with pytest.raises(ConvertError) as e:
        open_gguf_source(url, OPTS)
    assert str(e.value) == f"{url}: connection closed after 100 of 128 bytes (truncated response) (3 attempts)"
    assert [g.headers["range"] for g in server.gets()] == ["bytes=0-63"] + ["bytes=64-191"] * 3


def test_truncated_file_is_a_format_error_naming_the_url(server: FileServer, big: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(big.read_bytes()[:1000])
    server.routes["/cut.gguf"] = Route(cut.read_bytes())
    server.routes["/tiny.gguf"] = Route(b"GGUF\x03\x00")
    with pytest.raises(GGUFFormatError) as local:
        read_gguf(cut)
    with pytest.raises(GGUFFormatError) as e:
        open_gguf_source(server.url + "/cut.gguf", OPTS)
    assert str(e.value) == str(local.value).replace(str(cut), server.url + "/cut.gguf")
    assert "KV #1 't.tokens' at byte 102: array of 300 STRING needs at least 2.3 KiB (2,400 bytes), only 898 bytes left" in str(e.value)
    with pytest.raises(GGUFFormatError, match="truncated: file has 6 bytes, a GGUF header needs 24 bytes"):
        open_gguf_source(server.url + "/tiny.gguf", OPTS)
    server.routes["/html"] = Route(b"<!doctype html><html>" + b" " * 100)
    r = cli("check", server.url + "/html")
    assert r.exit_code == 2 and "not a GGUF file" in one_error_line(r)


def test_slow_server_times_out_with_bounded_retries(server: FileServer, big: Path) -> None:
    server.routes["/slow.gguf"] = Route(big.read_bytes(), delay=3.0)
    url = server.url + "/slow.gguf"
    t0 = time.monotonic()
    with pytest.raises(ConvertError) as e:
        open_gguf_source(url, RemoteOptions(timeout=0.2, retries=1, backoff=0.01))
    assert str(e.value) == f"{url}: timed out after 0.2 s (2 attempts)"
    assert time.monotonic() - t0 < 3.0 and len(server.gets()) == 2  # no hang: gave up before the server answered
    server.routes["/late.gguf"] = Route(big.read_bytes(), delay=0.3)  # slow but within the timeout: fine
    with open_gguf_source(server.url + "/late.gguf", RemoteOptions(timeout=5)) as f:
        assert f.value("t.n") == 7
    r = runner.invoke(app, ["inspect", url, "--timeout", "0.2"])
    assert r.exit_code == 2 and "timed out after 0.2 s (3 attempts)" in one_error_line(r)


def test_header_larger_than_the_limit_is_refused_with_one_line(server: FileServer, tmp_path: Path) -> None:
    tokens = [f"token-{i:06d}" for i in range(120_000)]  # a 2.3 MB header
    p = write_gguf(tmp_path / "vocab.gguf", [("tokenizer.ggml.tokens", tokens, VT.ARRAY)],
                   [("w", np.ones(32, np.float32), None)])
    server.routes["/v.gguf"] = Route(p.read_bytes())
    url = server.url + "/v.gguf"
    opts = RemoteOptions(max_header_bytes=1 << 20, backoff=0.01)
    with pytest.raises(GGUFFormatError) as e:
        open_gguf_source(url, opts)
    msg = str(e.value)
    assert msg.startswith(f"{url}: KV #1 'tokenizer.ggml.tokens' element ") and "1 MiB limit for remote files" in msg
    assert server.sent() <= 1 << 20
    r = runner.invoke(app, ["inspect", url, "--max-header-mib", "1"])
    assert r.exit_code == 2 and "--max-header-mib raises it" in one_error_line(r)
    r = runner.invoke(app, ["inspect", url, "--max-header-mib", "3", "--json", "--no-tensors"])
    assert r.exit_code == 0 and json.loads(r.stdout)["tokenizer"]["n_tokens"] == 120_000


@pytest.mark.parametrize(("kvs", "n_tensors", "what"), [
    ([kv_raw("big", VT.ARRAY, u32(VT.UINT64) + u64(2**28))], 0, "KV #0 'big' (array of 268,435,456 UINT64)"),
    ([kv_raw("big", VT.ARRAY, u32(VT.STRING) + u64(2**27))], 0, "KV #0 'big' (array of 134,217,728 STRING)"),
    ([kv_raw("s", VT.STRING, u64(2**30) + b"x")], 0, "KV #0 's' (string length 1073741824)"),
    ([], 2**25, "header (33,554,432 tensors and 0 KVs)"),
])
def test_hostile_counts_are_refused_before_fetching_more(server: FileServer, tmp_path: Path, kvs: list[bytes],
                                                         n_tensors: int, what: str) -> None:
    """Counts that fit the (multi-GB) file but not a sane header: refused from the first window."""
    head = raw_gguf(kvs, n_tensors=n_tensors) + b"\0" * 64
    server.routes["/h.gguf"] = Route(sparse_gguf(tmp_path / "h.gguf", head, 16 << 30))
    with pytest.raises(GGUFFormatError) as e:
        open_gguf_source(server.url + "/h.gguf", OPTS)
    assert str(e.value).startswith(f"{server.url}/h.gguf: {what} at byte ") and "256 MiB budget" in str(e.value)
    assert server.sent() == W1 and len(server.gets()) == 1  # nothing fetched beyond the first window


def test_stats_and_tensor_data_are_refused_for_remote_files(server: FileServer, big: Path) -> None:
    server.routes["/big.gguf"] = Route(big.read_bytes())
    url = server.url + "/big.gguf"
    with open_gguf_source(url, OPTS) as f:
        assert f.header_only and f.tensor("w").shape == (512, 512)
        with pytest.raises(ConvertError, match="tensor data is not read from remote files"):
            f.tensor_array("w")
    r = cli("inspect", url, "--stats")
    assert r.exit_code == 2 and "--stats reads tensor data" in one_error_line(r)


def test_hostile_names_are_shown_literally(server: FileServer, tmp_path: Path) -> None:
    p = write_gguf(tmp_path / "m.gguf", [("[red]x[/]", "[/]y", VT.STRING)], [("[bold]t", np.ones(4, np.float32), None)])
    server.routes["/[red]m.gguf"] = Route(p.read_bytes())
    r = cli("inspect", server.url + "/[red]m.gguf")
    assert r.exit_code == 0 and "[red]x[/]" in r.stdout and "[bold]t" in r.stdout and "/[red]m.gguf" in r.stdout


# ------------------------------------------------------------------------------------------ diff / check
def test_diff_remote_compares_headers_only_and_says_so(server: FileServer, big: Path, tmp_path: Path) -> None:
    server.routes["/a.gguf"] = Route(big.read_bytes())
    other = write_gguf(tmp_path / "other.gguf", [("t.tokens", [f"tok{i}" for i in range(300)], VT.ARRAY),
                                                 ("t.n", 8, VT.UINT32)],
                       [("w", np.zeros((512, 512), np.float32), None), ("v", np.zeros(32, np.float32), None)])
    server.routes["/b.gguf"] = Route(other.read_bytes())
    a, b = server.url + "/a.gguf", server.url + "/b.gguf"
    r = cli("diff", a, str(big), "--json")  # remote vs local: equal headers; the data differs nowhere but unread
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["equal"] is True and doc["tensor_data_compared"] is False and doc["tensors"]["identical"] == 2
    assert doc["note"] == ("tensor data was not compared: A read header-only over HTTP; metadata and tensor infos "
                           "(name, type, shape) were compared")
    assert doc["source"]["a"]["url"] == a and doc["source"]["b"] is None
    r = cli("diff", a, b)
    assert r.exit_code == 1 and "tensor data was not compared: A and B" in r.stdout
    doc = json.loads(cli("diff", a, b, "--json").stdout)
    assert [c["name"] for c in doc["kvs"]["changed"]] == ["t.n"]
    assert doc["tensors"]["changed"] == [{"name": "v", "a": {"name": "v", "type": "F32", "shape": [64], "nbytes": 256},
                                          "b": {"name": "v", "type": "F32", "shape": [32], "nbytes": 128},
                                          "bytes_equal": None}]
    assert doc["tensors"]["identical"] == 1  # "w": same type and shape (its values differ, unread)
    local = json.loads(cli("diff", str(big), str(other), "--json").stdout)
    assert local["tensor_data_compared"] is True and "source" not in local and local["tensors"]["identical"] == 0


@pytest.fixture(scope="module")
def draft(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from dspark_convert.hf2gguf.conversion import convert

    out = tmp_path_factory.mktemp("draft") / "draft.gguf"
    convert(REPO_ROOT / "fixtures" / "dspark-qwen3", REPO_ROOT / "fixtures" / "target-qwen3", out, outtype="bf16")
    return out


def test_check_remote_draft_matches_local(hub: FileServer, draft: Path) -> None:
    hub.add_hub_file("org/draft-GGUF", "draft.gguf", draft.read_bytes())
    local = json.loads(cli("check", str(draft), "--json").stdout)
    r = cli("check", "hf://org/draft-GGUF/draft.gguf", "--json")
    assert r.exit_code == 0, r.stderr
    remote = json.loads(r.stdout)
    src = remote.pop("source")
    assert remote.pop("file") == "hf://org/draft-GGUF/draft.gguf" and local.pop("file") == str(draft)
    assert remote == local and local["ok"] is True
    # the 230 KB fixture fits in the default first window (1 MiB): one request, the whole file
    assert src["kind"] == "hub" and src["requests"] == 1 and src["bytes_fetched"] == draft.stat().st_size
    assert src["header_only"] is False  # issue 24 bug 14: the whole file came, and the source says so
    r = cli("check", "hf://org/draft-GGUF/draft.gguf")
    assert r.exit_code == 0 and "passes every loader rule" in r.stdout and "whole file (smaller than the first window), fetched" in r.stdout


# ------------------------------------------------------------------------------------------ the Hub
def test_hub_reference_through_hf_endpoint(hub: FileServer, big: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commit = "abc123" + "0" * 34
    hub.add_hub_file("org/repo", "sub/big.gguf", big.read_bytes(), commit=commit, token="hf_secret")
    hub.add_hub_file("org/repo", "sub/big.gguf", big.read_bytes(), revision="v1", commit=commit, token="hf_secret")
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    expected = local_doc(big)
    for ref, rev in [("hf://org/repo/sub/big.gguf", None), ("hf://org/repo/sub/big.gguf@v1", "v1"),
                     ("hf://org/repo@v1/sub/big.gguf", "v1"), ("org/repo/sub/big.gguf", None),
                     (f"{hub.url}/org/repo/blob/v1/sub/big.gguf", "v1")]:
        hub.log.clear()
        doc, src = remote_doc(ref)
        assert doc == expected, ref
        base = f"{hub.url}/org/repo/resolve/{rev or 'main'}/sub/big.gguf"
        assert (src["kind"], src["url"], src["revision"], src["commit"]) == ("hub", base, rev, commit)
        heads = [e for e in hub.log if e.method == "HEAD"]
        assert [e.path for e in heads] == [f"/org/repo/resolve/{rev or 'main'}/sub/big.gguf"]
        # every window reads the resolved commit, with the token (same origin as the Hub)
        gets = hub.gets()
        assert {e.path for e in gets} == {f"/org/repo/resolve/{commit}/sub/big.gguf"}
        assert all(e.headers["authorization"] == "Bearer hf_secret" for e in heads + gets)
        assert all(e.headers["user-agent"].startswith("dspark-convert/") for e in gets)
        assert src["bytes_fetched"] == sum(e.sent for e in gets) and src["requests"] == len(gets)
    assert cli("inspect", "hf://org/repo/sub/big.gguf@v1", "--no-tensors").exit_code == 0


def test_hub_stored_login_is_used(hub: FileServer, big: Path, tmp_path: Path) -> None:
    hub.add_hub_file("org/private", "f.gguf", big.read_bytes(), token="hf_stored")
    with pytest.raises(ConvertError, match=r"^hf://org/private/f.gguf: no repository org/private, or it is private"):
        open_gguf_source("hf://org/private/f.gguf", OPTS)
    token_file = Path(hf_constants.HF_TOKEN_PATH)
    token_file.parent.mkdir(parents=True, exist_ok=True)
    token_file.write_text("hf_stored")
    with open_gguf_source("hf://org/private/f.gguf", OPTS) as f:
        assert f.value("t.n") == 7


def test_hub_cdn_redirect_gets_no_token(hub: FileServer, big: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    with FileServer() as cdn:
        cdn.routes["/blob/big"] = Route(big.read_bytes())
        commit = "c0ffee" + "0" * 34
        # 1. the Hub's HEAD redirects to the CDN: the bytes are read there, without the token
        hub.routes["/org/a/resolve/main/big.gguf"] = Route(
            redirect=cdn.url + "/blob/big", headers={"X-Repo-Commit": commit, "X-Linked-Size": str(big.stat().st_size),
                                                     "X-Linked-Etag": '"e"'})
        doc, src = remote_doc("hf://org/a/big.gguf")
        assert doc == local_doc(big) and src["url"] == f"{hub.url}/org/a/resolve/main/big.gguf"
        assert not hub.gets() and cdn.gets() and all("authorization" not in e.headers for e in cdn.log)
        # 2. the commit URL redirects (after the HEAD): urllib follows it and drops the token on the way out
        cdn.log.clear()
        hub.add_hub_file("org/b", "big.gguf", big.read_bytes(), commit=commit)
        hub.routes[f"/org/b/resolve/{commit}/big.gguf"] = Route(redirect=cdn.url + "/blob/big")
        doc, _ = remote_doc("hf://org/b/big.gguf")
        assert doc == local_doc(big)
        assert all(e.headers.get("authorization") == "Bearer hf_secret" for e in hub.log if "/org/b/" in e.path)
        assert cdn.gets() and all("authorization" not in e.headers for e in cdn.log)


@pytest.mark.parametrize(("headers", "status", "ref", "text"), [
    ({"X-Error-Code": "EntryNotFound"}, 404, "hf://org/r/f.gguf@v2", "hf://org/r/f.gguf@v2: no file 'f.gguf' in org/r at revision 'v2'"),
    ({"X-Error-Code": "RevisionNotFound"}, 404, "hf://org/r/f.gguf@nope", "hf://org/r/f.gguf@nope: revision 'nope' not found in org/r"),
    ({"X-Error-Code": "RepoNotFound"}, 401, "hf://org/r/f.gguf", "hf://org/r/f.gguf: no repository org/r, or it is private (log in with `hf auth login` or HF_TOKEN)"),
    ({"X-Error-Code": "GatedRepo"}, 403, "hf://org/r/f.gguf", "hf://org/r/f.gguf: gated repository; accept its conditions on {url}/org/r and log in (`hf auth login` or HF_TOKEN)"),
    ({"X-Error-Code": "EntryNotFound"}, 404, "org/r/f.gguf", "org/r/f.gguf: no such local file, and on the Hugging Face Hub (hf://org/r/f.gguf): no file 'f.gguf' in org/r"),
    ({}, 500, "hf://org/r/f.gguf", "hf://org/r/f.gguf: Hugging Face Hub error (HTTP 500) (3 attempts): "),
])
def test_hub_errors_are_one_line(hub: FileServer, headers: dict[str, str], status: int, ref: str, text: str) -> None:
    rev = ref.split("@")[1] if "@" in ref else "main"
    hub.routes[f"/org/r/resolve/{rev}/f.gguf"] = Route(status=status, headers=headers)
    with pytest.raises(ConvertError) as e:
        open_gguf_source(ref, OPTS)
    assert str(e.value).startswith(text.format(url=hub.url)) and "\n" not in str(e.value)
    assert len([x for x in hub.log if x.method == "HEAD"]) == (3 if status == 500 else 1) and not hub.gets()


def test_hub_slow_metadata_times_out(hub: FileServer, big: Path) -> None:
    hub.add_hub_file("org/slow", "f.gguf", big.read_bytes(), delay=3.0)
    t0 = time.monotonic()
    with pytest.raises(ConvertError) as e:
        open_gguf_source("hf://org/slow/f.gguf", RemoteOptions(timeout=0.2, retries=1, backoff=0.01))
    msg = str(e.value)
    assert msg.startswith(f"hf://org/slow/f.gguf: cannot reach the Hugging Face Hub ({hub.url}) (2 attempts): ")
    assert "Timeout" in msg and time.monotonic() - t0 < 3.0


def test_offline_mode_is_one_line_without_a_request(hub: FileServer, big: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    hub.add_hub_file("org/repo", "big.gguf", big.read_bytes())
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    r = cli("inspect", "hf://org/repo/big.gguf")
    assert r.exit_code == 2 and not hub.log
    assert one_error_line(r) == (f"error: hf://org/repo/big.gguf: offline mode is on (HF_HUB_OFFLINE) and the file is "
                                 f"not in the local Hugging Face cache ({tmp_path / 'hfcache'}); unset HF_HUB_OFFLINE "
                                 f"or run `hf download org/repo big.gguf`")
    # a file in the local cache is read from there (whole: --stats works)
    commit = "1234567" + "0" * 33
    snap = tmp_path / "hfcache" / "models--org--repo" / "snapshots" / commit
    snap.mkdir(parents=True)
    (snap / "big.gguf").write_bytes(big.read_bytes())
    (tmp_path / "hfcache" / "models--org--repo" / "refs").mkdir()
    (tmp_path / "hfcache" / "models--org--repo" / "refs" / "main").write_text(commit)
    r = cli("inspect", "hf://org/repo/big.gguf", "--json", "--stats")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["source"] == {"kind": "hub-cache", "url": "hf://org/repo/big.gguf", "revision": None, "commit": commit,
                             "bytes_fetched": 0, "requests": 0, "range_requests": None, "header_only": False,
                             "notes": ["offline mode: read from the local Hugging Face cache"]}
    assert doc["tensors"][0]["stats"]["mean"] == 1.0 and not hub.log


def _run_cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dspark_convert.cli", *args], env={**os.environ, **env}, cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def test_cli_process_reads_hf_endpoint_and_offline_from_the_environment(server: FileServer, big: Path,
                                                                        tmp_path: Path) -> None:
    """The real entry point, in a fresh process: huggingface_hub reads HF_ENDPOINT / HF_HUB_OFFLINE at import."""
    server.add_hub_file("org/repo", "big.gguf", big.read_bytes())
    env = {"HF_ENDPOINT": server.url, "HF_HOME": str(tmp_path / "h"), "HF_HUB_CACHE": str(tmp_path / "c"),
           "HF_HUB_OFFLINE": "0", "HF_TOKEN": "", "PYTHONPATH": str(REPO_ROOT)}
    r = _run_cli(["inspect", "hf://org/repo/big.gguf", "--json", "--no-tensors"], env, tmp_path)
    assert r.returncode == 0, r.stderr
    src = json.loads(r.stdout)["source"]
    assert src["url"] == f"{server.url}/org/repo/resolve/main/big.gguf" and src["commit"].startswith("c0ffee")
    assert header_end(big) <= src["bytes_fetched"] < 3 << 20 and src["bytes_fetched"] < big.stat().st_size
    n = len(server.log)
    r = _run_cli(["inspect", "hf://org/repo/big.gguf"], {**env, "HF_HUB_OFFLINE": "1"}, tmp_path)
    assert r.returncode == 2 and len(server.log) == n
    assert r.stderr.count("\n") == 1 and "offline mode is on (HF_HUB_OFFLINE)" in r.stderr and "Traceback" not in r.stderr


# ------------------------------------------------------------------------------------------ issue 25.10 / 25.11
def test_userinfo_is_sent_as_basic_auth_and_never_shown(server: FileServer, big: Path) -> None:
    """`http://user:pw@127.0.0.1:PORT/x.gguf` used to resolve the host `user:pw@127.0.0.1` (the password went to
    DNS). The userinfo is now an Authorization header to that origin only, and no message or report shows it."""
    server.routes["/private.gguf"] = Route(big.read_bytes())
    host = server.url.removeprefix("http://")
    url = f"http://alice:s%3Acret@{host}/private.gguf"
    r = runner.invoke(app, ["inspect", url, "--json", "--timeout", "5"])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["file"] == f"http://{host}/private.gguf" and "s%3Acret" not in r.stdout + r.stderr
    assert {g.headers.get("authorization") for g in server.gets("/private.gguf")} == {
        "Basic " + base64.b64encode(b"alice:s:cret").decode()}
    r = runner.invoke(app, ["inspect", f"http://alice:pw@{host}/missing.gguf", "--timeout", "5"])
    assert one_error_line(r) == f"error: http://{host}/missing.gguf: HTTP 404 Not Found" and "pw@" not in r.stderr


def test_redirect_to_another_origin_drops_the_userinfo_credentials(server: FileServer, big: Path) -> None:
    with FileServer() as other:
        other.routes["/f.gguf"] = Route(big.read_bytes())
        server.routes["/r.gguf"] = Route(redirect=other.url + "/f.gguf")
        host = server.url.removeprefix("http://")
        with open_gguf_source(f"http://u:p@{host}/r.gguf", RemoteOptions(timeout=5)) as f:
            assert f.value("t.n") == 7
        assert [g.headers.get("authorization") for g in other.gets("/f.gguf")] == [None]


def test_dripping_server_is_abandoned_by_the_minimum_rate(server: FileServer, big: Path) -> None:
    """--timeout is per read: a server sending 1 byte every 0.05 s never trips it. The minimum rate does, once
    `timeout` seconds have passed (here 0.3 s at 64 bytes/s minimum, about 20 bytes/s offered)."""
    server.routes["/drip.gguf"] = Route(big.read_bytes(), drip=0.05)
    url = server.url + "/drip.gguf"
    with pytest.raises(ConvertError) as e:
        open_gguf_source(url, RemoteOptions(timeout=0.3, min_rate=64, retries=0))
    msg = str(e.value)
    assert msg.startswith(f"{url}: transfer too slow: ") and msg.endswith("below the minimum of 64 bytes/s"), msg


def test_overall_deadline_ends_a_slow_read(server: FileServer, big: Path) -> None:
    """A transfer above the minimum rate still ends at the overall deadline (retries included)."""
    server.routes["/drip.gguf"] = Route(big.read_bytes(), drip=0.01)
    url = server.url + "/drip.gguf"
    with pytest.raises(ConvertError) as e:
        open_gguf_source(url, RemoteOptions(timeout=5, min_rate=1, deadline=0.5))
    msg = str(e.value)
    assert msg.startswith(f"{url}: not read within the 0.5 s deadline (--deadline); ") and msg.endswith(
        " bytes fetched"), msg
    r = runner.invoke(app, ["inspect", url, "--deadline", "0.5", "--timeout", "5"])
    assert r.exit_code == 2 and "not read within the 0.5 s deadline (--deadline)" in one_error_line(r)
