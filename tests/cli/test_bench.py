"""``bench`` and llama-server's process handling.

Without a binary: tests/fake_llama_server.py stands in for llama-server (one that exits at once, one that never
listens, a port in use, a draft refused, an output that differs, a slow one interrupted), so the process handling
and the whole report are tested anywhere. Every test checks that no server it started is left running (the
``no_orphans`` fixture: each started server carries the test's tag in its environment; ``/proc`` is scanned).

With llama-server b11434 (``llama`` marker, tests/llama_support.py): the correlated fixture drafts (known full
acceptance), the same DSpark draft in upstream's untied-head layout (known low acceptance) beside ours, and a
bf16/q8_0 pair, through the CLI.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

import pytest
from conftest import ROOT, TARGET
from typer.testing import CliRunner

from dspark_convert.cli import app
from dspark_convert.errors import ConvertError
from dspark_convert.llamacpp import server as server_mod
from dspark_convert.llamacpp.bench import (
    Prompt,
    RequestRun,
    Run,
    bench,
    builtin_prompts,
    compare,
    find_binary,
    load_prompts,
    parse_metrics,
    parse_steps,
)
from dspark_convert.llamacpp.server import LlamaServer, ServerError, server_reason

FAKE = Path(__file__).resolve().parents[1] / "fake_llama_server.py"
TAG_ENV = "DSPARK_BENCH_TEST_TAG"


# ---------------------------------------------------------------------------------------------- orphans
def tagged_processes(tag: str) -> list[int]:
    """Live (not zombie) processes whose environment holds ``TAG_ENV=tag``."""
    needle = f"{TAG_ENV}={tag}".encode()
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.append(int(entry.name))
    return out


@pytest.fixture
def no_orphans(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A tag every process started in the test inherits; after the test none of them may be running."""
    tag = uuid.uuid4().hex
    monkeypatch.setenv(TAG_ENV, tag)
    yield tag
    deadline = time.monotonic() + 5
    while tagged_processes(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = tagged_processes(tag)
    assert not left, f"processes left running: {left}"


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_orphans: str) -> Callable[..., Path]:
    """``fake(mode="ok", **env)``: an executable llama-server stand-in (a script running
    tests/fake_llama_server.py under this Python) in a fresh folder; the pids it starts go to ``pids.txt``."""
    def make(mode: str = "ok", **env: str) -> Path:
        exe = tmp_path / "bin" / "llama-server"
        exe.parent.mkdir(exist_ok=True)
        exe.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setenv("FAKE_LLAMA_MODE", mode)
        monkeypatch.setenv("FAKE_LLAMA_PIDFILE", str(tmp_path / "pids.txt"))
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        return exe
    return make


def pids(tmp_path: Path) -> list[int]:
    f = tmp_path / "pids.txt"
    return [int(x) for x in f.read_text().split()] if f.is_file() else []


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A target GGUF stand-in (any GGUF: the fake server does not read it) and two converted drafts."""
    from dspark_convert.hf2gguf.conversion import convert

    out = tmp_path_factory.mktemp("bench-files")
    d1 = convert(ROOT / "fixtures" / "dspark-qwen3", TARGET, out / "dspark.bf16.gguf", outtype="bf16").path
    d2 = convert(ROOT / "fixtures" / "dspark-qwen3", TARGET, out / "dspark.q8_0.gguf", outtype="q8_0").path
    d3 = convert(ROOT / "fixtures" / "eagle3-specforge", TARGET, out / "eagle3.bf16.gguf", outtype="bf16").path
    assert d1 and d2 and d3
    return {"target": d1, "bf16": d1, "q8_0": d2, "eagle3": d3}


PROMPTS = [Prompt(text="hello there"), Prompt(tokens=(1, 2, 3, 4)), Prompt(text="two plus two")]


# ---------------------------------------------------------------------------------------------- process handling
def test_binary_that_exits_at_once_is_one_line_with_its_reason(fake: Callable[..., Path], files: dict[str, Path],
                                                                tmp_path: Path) -> None:
    exe = fake("exit")
    with pytest.raises(ServerError) as e:
        LlamaServer(exe, files["target"], timeout=20).start()
    msg = str(e.value)
    assert "\n" not in msg
    assert msg == (f"llama-server exited with code 1 loading {files['target'].name}: fake refusal of "
                   f"{files['target']}")
    assert e.value.log_tail[-1] == "srv    load_model: exiting due to model loading error"
    assert [alive(p) for p in pids(tmp_path)] == [False]


def test_binary_that_never_listens_hits_the_deadline_and_is_killed(fake: Callable[..., Path], files: dict[str, Path],
                                                                    tmp_path: Path) -> None:
    exe = fake("nolisten")
    t0 = time.monotonic()
    with pytest.raises(ServerError, match=r"did not become ready in 1.5 s loading dspark.bf16.gguf: no answer on "
                                          r"/health"):
        LlamaServer(exe, files["target"], timeout=1.5).start()
    assert time.monotonic() - t0 < 15
    assert len(pids(tmp_path)) == 1 and not alive(pids(tmp_path)[0])


class _Foreign(BaseHTTPRequestHandler):
    """Someone else's server: healthy, serving another model."""

    def log_message(self, *a: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        body = json.dumps({"status": "ok", "model_path": "/elsewhere/other.gguf"}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def foreign() -> Iterator[int]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Foreign)
    Thread(target=srv.serve_forever, daemon=True).start()
    yield int(srv.server_address[1])
    srv.shutdown()
    srv.server_close()


def test_port_in_use_fixed_port_is_refused(fake: Callable[..., Path], files: dict[str, Path], foreign: int) -> None:
    """A port held by another server (which even answers /health): ours cannot bind; never taken for ready."""
    exe = fake()
    with pytest.raises(ServerError, match=rf"could not listen on 127.0.0.1:{foreign} loading dspark.bf16.gguf: "
                                          r"srv    operator\(\): couldn't bind HTTP server socket"):
        LlamaServer(exe, files["target"], port=foreign, timeout=20).start()


def test_port_taken_after_picking_is_picked_again(fake: Callable[..., Path], files: dict[str, Path], foreign: int,
                                                  monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    exe = fake()
    ports = iter([foreign])
    real = server_mod.free_port
    monkeypatch.setattr(server_mod, "free_port", lambda: next(ports, None) or real())
    with LlamaServer(exe, files["target"], timeout=20) as srv:
        assert srv.port != foreign
        assert srv.get_json("/props")["model_path"] == str(files["target"])
    assert len(pids(tmp_path)) == 2 and not any(alive(p) for p in pids(tmp_path))


def test_server_dies_with_its_parent_even_on_sigkill(fake: Callable[..., Path], files: dict[str, Path],
                                                     tmp_path: Path) -> None:
    """PR_SET_PDEATHSIG: a parent killed with SIGKILL (no cleanup runs) does not leave the server running."""
    exe = fake()
    code = textwrap.dedent(f"""
        import os, signal, sys
        from pathlib import Path
        from dspark_convert.llamacpp.server import LlamaServer
        s = LlamaServer(Path({str(exe)!r}), Path({str(files['target'])!r}), timeout=20)
        s.start()
        print(s.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == -signal.SIGKILL
    pid = int(p.stdout.split()[0])
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid)


def test_server_reason_picks_the_specific_line() -> None:
    log = ("main: build info\nllama_model_loader: loaded meta data\n"
           "llama_model_load: error loading model: missing tensor 'blk.0.attn_q.weight'\n"
           "llama_model_load_from_file_impl: failed to load model\nsrv    load_model: exiting due to model loading error\n")
    assert server_reason(log) == "missing tensor 'blk.0.attn_q.weight'"
    assert server_reason("main: ok\nsrv  load_model: exiting due to model loading error\n") == \
        "srv  load_model: exiting due to model loading error"
    assert server_reason("all fine\n") is None


# ---------------------------------------------------------------------------------------------- parsing
def test_parse_steps_and_metrics() -> None:
    log = ("slot update_slots: id  0 | task 1 | accepted  3/ 7 draft tokens\n"
           "slot print_timing: id  0 | task 1 | draft acceptance = 0.5\n"
           "slot update_slots: id  0 | task 1 | accepted  7/ 7 draft tokens\n"
           "D slot update_slots: id  0 | task 1 | accepted 7/7 draft tokens, new n_tokens = 30\n")
    assert parse_steps(log) == [(3, 7), (7, 7)]
    m = parse_metrics("# HELP x\nllamacpp:spec_decode_num_drafts_total 2\nllamacpp:tokens_predicted_total 4.5e+01\n"
                      'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 1\n')
    assert m == {"steps": 2, "drafted": 0, "accepted": 0, "predicted": 45, "accepted_per_pos": [0, 1]}


def test_by_position_is_accepted_over_reached() -> None:
    r = Run(None, steps=[(3, 7), (7, 7), (0, 4), (2, 2)])
    # position 0 reached by all 4 steps, accepted by 3; position 2: reached by (3,7), (7,7) ((2,2) drafted 2 only)
    assert r.by_position() == [(3, 4), (3, 3), (2, 2), (1, 2), (1, 1), (1, 1), (1, 1)]


def test_compare_finds_the_first_difference_and_a_short_output() -> None:
    ref = {(0, 0): [1, 2, 3], (1, 0): [4, 5]}
    reqs = [RequestRun(0, 0, [1, 2, 3], 3, 1, 1, 0, 0), RequestRun(1, 0, [4], 1, 1, 1, 0, 0),
            RequestRun(0, 1, [1, 9, 3], 3, 1, 1, 0, 0)]
    assert [(m.prompt, m.repeat, m.index, m.plain, m.draft) for m in compare(ref, reqs)] == [(1, 0, 1, 5, None),
                                                                                            (0, 1, 1, 2, 9)]


def test_prompt_files(tmp_path: Path) -> None:
    lines = tmp_path / "p.txt"
    lines.write_text("first prompt\n\n  second {not json}\n")
    assert load_prompts(lines) == [Prompt(text="first prompt"), Prompt(text="  second {not json}")]
    jl = tmp_path / "p.jsonl"
    jl.write_text('{"prompt": "a", "kind": "chat"}\n{"prompt": [5, 6]}\n')
    assert load_prompts(jl) == [Prompt(text="a", kind="chat"), Prompt(tokens=(5, 6))]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a"}\n{"prompt": 3}\n')
    with pytest.raises(ConvertError, match=rf"^{bad}:2: \"prompt\" must be a non-empty string or a list of token "):
        load_prompts(bad)
    bad.write_text('{"prompt": "a"}\n{"prompt": \n')
    with pytest.raises(ConvertError, match=rf"^{bad}:2: not a JSON line"):
        load_prompts(bad)
    # nesting past the recursion limit and an integer past 4300 digits: one line each, not a traceback
    for line, why in [('{"prompt": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested past the interpreter's recursion"),
                      ('{"prompt": [' + "1" * 5000 + "]}", "Exceeds the limit")]:
        bad.write_text('{"prompt": "a"}\n' + line + "\n")
        with pytest.raises(ConvertError, match=rf"^{bad}:2: not a JSON line \(.*{why}") as e:
            load_prompts(bad)
        assert "\n" not in str(e.value) and len(str(e.value)) < 400
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n")
    with pytest.raises(ConvertError, match="no prompts"):
        load_prompts(empty)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConvertError, match="not a regular file"):
        load_prompts(fifo)


def test_builtin_prompts() -> None:
    ps = builtin_prompts()
    assert len(ps) == 36 and all(p.text and p.tokens is None for p in ps)
    assert {k: sum(p.kind == k for p in ps) for k in {p.kind for p in ps}} == {"chat": 9, "code": 9, "math": 9,
                                                                              "summarisation": 9}


def test_find_binary_order(fake: Callable[..., Path], tmp_path: Path) -> None:
    exe = fake()
    assert find_binary(exe).found_by == "--llama-server"
    assert find_binary(exe).version == "version: 9999 (fake)"
    assert find_binary(None, {"DSPARK_LLAMA_SERVER": str(exe)}).found_by == "$DSPARK_LLAMA_SERVER"
    assert find_binary(None, {"PATH": str(exe.parent), "DSPARK_LLAMA_CACHE": str(tmp_path / "none")}).found_by == "PATH"
    with pytest.raises(ConvertError, match="no llama-server found .*: build llama.cpp b11434 with 'python -m dspark_convert.llamacpp.build'"):
        find_binary(None, {"PATH": str(tmp_path / "nothing"), "DSPARK_LLAMA_CACHE": str(tmp_path / "none")})
    with pytest.raises(ConvertError, match="--llama-server .*nope: no executable llama-server there"):
        find_binary(tmp_path / "nope")


# ---------------------------------------------------------------------------------------------- bench, stand-in
def test_bench_report_with_the_stand_in(fake: Callable[..., Path], files: dict[str, Path], tmp_path: Path) -> None:
    exe = fake("ok", FAKE_ACCEPT="2", FAKE_TEMPLATE="{{ messages }}")
    r = bench(files["target"], [files["bf16"], files["eagle3"]], prompts=PROMPTS, n_predict=12, repeat=2,
              llama_server=exe, threads=1)
    assert r.interrupted is None and r.lossless
    assert r.settings["prompt_format"] == "chat template"
    assert r.plain.complete and len(r.plain.requests) == 6 and r.plain.predicted == 72
    bf16, eagle = r.drafts
    assert (bf16.spec_type, bf16.n_max, eagle.spec_type, eagle.n_max) == ("draft-dspark", 7, "draft-eagle3", 4)
    # 12 tokens: the first from the prompt, then steps that accept 2 (3 tokens each) of drafts trimmed to the tokens
    # still to generate minus one: 7, 7, 4, then 1
    assert bf16.steps == [(2, 7), (2, 7), (2, 4), (1, 1)] * 6
    assert (bf16.drafted, bf16.accepted) == (114, 42) and bf16.acceptance == pytest.approx(42 / 114)
    assert bf16.mean_accepted == pytest.approx(42 / 24)
    assert bf16.by_position()[:3] == [(24, 24), (18, 18), (0, 18)]
    assert bf16.server_counts == {"steps": 24, "drafted": 114, "accepted": 42, "predicted": 72,
                                  "accepted_per_pos": [24, 18, 0, 0, 0, 0, 0]}
    assert bf16.speedups(r.plain) == [pytest.approx(2.5)] * 6 and bf16.speedup(r.plain) == pytest.approx(2.5)
    assert "--spec-type" in bf16.command and bf16.command[bf16.command.index("-md") + 1] == str(files["bf16"])
    d = r.to_dict()
    assert d["schema"] == "dspark-convert.bench/1" and d["llama_server"]["found_by"] == "--llama-server"
    assert d["drafts"][0]["by_position"][2] == {"position": 2, "accepted": 0, "reached": 18, "rate": 0.0}
    assert d["drafts"][0]["speedup"] == 2.5 and d["drafts"][0]["speedup_quartiles"] == [2.5, 2.5] and d["drafts"][1]["file"]["arch"] == "eagle3"
    assert d["drafts"][0]["file"]["outtype"] == "BF16" and d["target"]["file"] == "dspark.bf16.gguf"
    assert len(pids(tmp_path)) == 6 and not any(alive(p) for p in pids(tmp_path))  # 3 servers x 2 rounds


def invoke(*args: object) -> object:
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def test_cli_json_plot_and_bars(fake: Callable[..., Path], files: dict[str, Path], tmp_path: Path) -> None:
    exe = fake("ok", FAKE_ACCEPT="7")
    plist = tmp_path / "p.jsonl"
    plist.write_text('{"prompt": [1, 2, 3]}\n{"prompt": "x"}\n')
    r = invoke("bench", files["target"], files["bf16"], files["q8_0"], "--prompts", plist, "-n", 9,
               "--llama-server", exe, "--json", "--plot", tmp_path / "acc.svg")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [x["acceptance"] for x in doc["drafts"]] == [1.0, 1.0]
    assert [x["file"]["outtype"] for x in doc["drafts"]] == ["BF16", "Q8_0"]
    assert doc["settings"]["prompt_format"] == "raw" and doc["prompts"] == 2
    svg = (tmp_path / "acc.svg").read_text()
    assert svg.startswith("<svg") and svg.count("<rect") >= 2 + 2 * 7 and "dspark.q8_0.gguf: acceptance 1.000" in svg
    r = invoke("bench", files["target"], files["bf16"], "--prompts", plist, "-n", 9, "--llama-server", exe)
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "llama-server: " in out and "(--llama-server; version: 9999 (fake))" in out
    assert "acceptance by draft position (accepted / reached) dspark.bf16.gguf" in out
    assert "   0 " + "█" * 32 + " 1.000  2/2" in out
    row = next(ln for ln in out.splitlines() if ln.startswith("dspark.bf16.gguf"))
    assert row.split()[1:8] == ["dflash", "BF16", "draft-dspark", "7", "yes", "1.000", "7.00"]


def test_cli_not_lossless_exits_1(fake: Callable[..., Path], files: dict[str, Path]) -> None:
    exe = fake("mismatch")
    r = invoke("bench", files["target"], files["bf16"], "--llama-server", exe, "-n", 8, "--raw")
    assert r.exit_code == 1, r.output
    assert ("NOT LOSSLESS: dspark.bf16.gguf: prompt 0 (round 0) differs from the plain run at generated token 3"
            in r.stdout)


def test_cli_refused_draft_is_one_line_and_the_others_run(fake: Callable[..., Path], files: dict[str, Path]) -> None:
    exe = fake("refuse-draft")
    r = invoke("bench", files["target"], files["bf16"], files["q8_0"], "--llama-server", exe, "-n", 4)
    assert r.exit_code == 2, r.output
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert errors[0] == (f"error: llama-server exited with code 1 loading dspark.bf16.gguf with draft "
                         f"dspark.bf16.gguf (draft-dspark): fake refusal of {files['bf16']}")
    assert "  | srv    load_model: exiting due to model loading error" in r.stderr


def test_cli_refused_target_is_one_line_and_the_log_tail(fake: Callable[..., Path], files: dict[str, Path]) -> None:
    exe = fake("exit")
    r = invoke("bench", files["target"], files["bf16"], "--llama-server", exe, "-n", 4)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.splitlines()[0] == (f"error: llama-server exited with code 1 loading dspark.bf16.gguf: fake "
                                        f"refusal of {files['target']}")
    assert r.stderr.splitlines()[1] == "  llama-server's log ended with:"


def test_cli_bad_inputs(fake: Callable[..., Path], files: dict[str, Path], tmp_path: Path) -> None:
    exe = fake()
    r = invoke("bench", files["target"], tmp_path / "missing.gguf", "--llama-server", exe)
    assert r.exit_code == 2 and r.stderr == f"error: {tmp_path / 'missing.gguf'}: draft: no such file\n"
    (tmp_path / "dir.svg").mkdir()
    r = invoke("bench", files["target"], files["bf16"], "--llama-server", exe, "-n", 2, "--plot", tmp_path / "dir.svg")
    assert r.exit_code == 2 and "exists and is not a regular file" in r.stderr


def test_ctrl_c_stops_the_server_and_prints_what_was_measured(fake: Callable[..., Path], files: dict[str, Path],
                                                              tmp_path: Path) -> None:
    """SIGINT during a draft's run (the real entry point, in a subprocess): the plain run and the requests done so
    far are printed, exit 130, llama-server stopped."""
    exe = fake("slow", FAKE_SLOW="0.4")
    plist = tmp_path / "p.txt"
    plist.write_text("\n".join(f"prompt {i}" for i in range(6)) + "\n")
    p = subprocess.Popen([sys.executable, "-c", "from dspark_convert.entry import main; main()", "bench",
                          str(files["target"]), str(files["bf16"]), "--prompts", str(plist), "-n", "4",
                          "--llama-server", str(exe), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env={**os.environ, "COLUMNS": "200"})
    deadline = time.monotonic() + 60
    while len(pids(tmp_path)) < 2 and time.monotonic() < deadline:  # the draft's server has started
        time.sleep(0.1)
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    doc = json.loads(out)
    assert doc["interrupted"] == "interrupted (SIGINT)"
    assert doc["plain"]["requests"] == 6 and doc["plain"]["complete"]
    assert 0 < doc["drafts"][0]["requests"] < 6 and not doc["drafts"][0]["complete"]
    assert err.splitlines()[-1] == ("error: interrupted (SIGINT): llama-server stopped; the report holds what was "
                                    "measured until then")
    assert len(pids(tmp_path)) == 2 and not any(alive(x) for x in pids(tmp_path))


# ---------------------------------------------------------------------------------------------- the llama tier
@pytest.fixture(scope="module")
def corr_files(llama_bin: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """fixtures/correlated.py's constant-token target (F32 GGUF by upstream's converter) and correlated drafts:
    dspark-qwen3 at bf16 (our layout and upstream's), q8_0; dflash-zlab, eagle3-specforge, dflash2-zlab (bf16)."""
    from llama.target import convert_target
    from llama_support import correlated

    from dspark_convert.hf2gguf.conversion import convert

    out = tmp_path_factory.mktemp("bench-corr")
    t = correlated.correlated_target(out / "target")
    files = {"target": convert_target(llama_bin[1], t, out / "target.f32.gguf")}
    for fam in ("dspark-qwen3", "dflash-zlab", "eagle3-specforge", "dflash2-zlab"):
        d = correlated.correlated_draft(fam, out / fam, t)
        for ot in (("bf16", "q8_0") if fam == "dspark-qwen3" else ("bf16",)):
            res = convert(d, t, out / f"{fam}.{ot}.gguf", outtype=ot)
            assert res.path is not None
            files[f"{fam}.{ot}"] = res.path
        if fam == "dspark-qwen3":
            res = convert(d, t, out / f"{fam}.upstream.gguf", outtype="bf16", match_upstream=True)
            assert res.path is not None
            files[f"{fam}.upstream"] = res.path
    return files


TOKEN_PROMPTS = '{"prompt": [400, 401, 72, 300, 22, 500, 12, 33]}\n{"prompt": "Write a short poem about the sea."}\n'


@pytest.mark.llama
def test_llama_correlated_drafts_fully_accepted(llama_bin: tuple[Path, Path], corr_files: dict[str, Path],
                                                tmp_path: Path, no_orphans: str) -> None:
    plist = tmp_path / "p.jsonl"
    plist.write_text(TOKEN_PROMPTS)
    names = ["dspark-qwen3.bf16", "dflash-zlab.bf16", "eagle3-specforge.bf16"]
    r = invoke("bench", corr_files["target"], *(corr_files[n] for n in names), "--prompts", plist, "-n", 24,
               "--llama-server", llama_bin[0], "--json", "--threads", 1)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["lossless"] and doc["llama_server"]["path"] == str(llama_bin[0])
    for d in doc["drafts"]:
        assert d["lossless"] and d["complete"] and d["drafted"] > 0, d["file"]["file"]
        assert d["accepted"] == d["drafted"] and d["acceptance"] == 1.0, d["file"]["file"]
        assert all(p["rate"] in (1.0, None) for p in d["by_position"]), d["by_position"]
        # our per-position figures agree with llama-server's own counter
        assert [p["accepted"] for p in d["by_position"]] == d["server_counts"]["accepted_per_pos"][:len(d["by_position"])]
        assert d["steps"] == d["server_counts"]["steps"] and d["accepted"] == d["server_counts"]["accepted"]
    assert [d["spec_type"] for d in doc["drafts"]] == ["draft-dspark", "draft-dflash", "draft-eagle3"]


@pytest.mark.llama
def test_llama_untied_upstream_layout_drop_side_by_side(llama_bin: tuple[Path, Path], corr_files: dict[str, Path],
                                                        tmp_path: Path, no_orphans: str) -> None:
    """Our layout (the target's head as output.weight) and --match-upstream's (token_embd as the head on this
    untied target), the bf16/q8_0 pair of ours, side by side: all lossless; ours accepted in full, upstream's
    only at position 0 (the anchor token, by luck of this target), about 1 in 6."""
    plist = tmp_path / "p.jsonl"
    plist.write_text(TOKEN_PROMPTS)
    r = invoke("bench", corr_files["target"], corr_files["dspark-qwen3.bf16"], corr_files["dspark-qwen3.q8_0"],
               corr_files["dspark-qwen3.upstream"], "--prompts", plist, "-n", 24, "--llama-server", llama_bin[0],
               "--json", "--threads", 1, "--plot", tmp_path / "p.svg")
    assert r.exit_code == 0, r.output
    ours, q8, up = json.loads(r.stdout)["drafts"]
    assert ours["acceptance"] == q8["acceptance"] == 1.0 and ours["lossless"] and q8["lossless"] and up["lossless"]
    assert [d["file"]["outtype"] for d in (ours, q8, up)] == ["BF16", "Q8_0", "BF16"]
    assert up["acceptance"] < 0.25 and up["mean_accepted"] == 1.0
    assert up["by_position"][0]["rate"] == 1.0 and up["by_position"][1]["rate"] == 0.0
    assert ours["mean_accepted"] > 4 * up["mean_accepted"]
    assert "dspark-qwen3.upstream.gguf: acceptance 0.1" in (tmp_path / "p.svg").read_text()


@pytest.mark.llama
def test_llama_refused_draft_reason(llama_bin: tuple[Path, Path], corr_files: dict[str, Path], tmp_path: Path,
                                    no_orphans: str) -> None:
    """A draft llama-server refuses (its output.weight has 7 rows, not the vocabulary): one line with llama-server's
    own reason; the good draft still runs."""
    import numpy as np
    from llama.layouts import relayout

    bad = relayout(corr_files["dspark-qwen3.bf16"], tmp_path / "wrong-head.gguf", drop=("output.weight",),
                   add={"output.weight": np.zeros((7, 64), np.float32)})
    plist = tmp_path / "p.jsonl"
    plist.write_text(TOKEN_PROMPTS.splitlines()[0] + "\n")
    r = invoke("bench", corr_files["target"], bad, corr_files["dspark-qwen3.bf16"], "--prompts", plist, "-n", 8,
               "--llama-server", llama_bin[0], "--threads", 1)
    assert r.exit_code == 2, r.output
    err = next(ln for ln in r.stderr.splitlines() if ln.startswith("error:"))
    assert err == ("error: llama-server exited with code 1 loading target.f32.gguf with draft wrong-head.gguf "
                   "(draft-dspark): check_tensor_dims: tensor 'output.weight' has wrong shape; expected     64,   1024, "
                   "got     64,      7,      1,      1"), err
    assert "dspark-qwen3.bf16.gguf" in r.stdout and "1.000" in r.stdout


def test_docs_example_is_one_generated_run() -> None:
    """docs/bench.md's example block and docs/bench-example.svg come from the same run of scripts/bench_docs.py:
    the command is in the block, and every draft's acceptance in the table is the one in the picture's legend."""
    import re

    doc = (ROOT / "docs" / "bench.md").read_text()
    block = doc.split("<!-- bench-example:start (scripts/bench_docs.py) -->")[1].split("<!-- bench-example:end -->")[0]
    assert block.strip().startswith("```\n$ dspark-convert bench target.f32.gguf ") and "--plot docs/bench-example.svg" in block
    rows = {ln.split()[0]: ln.split() for ln in block.splitlines() if ln.split() and ln.split()[0].endswith(".gguf")
            and len(ln.split()) == 10}
    svg = (ROOT / "docs" / "bench-example.svg").read_text()
    legend = dict(re.findall(r">([\w.-]+\.gguf): acceptance ([0-9.]+),", svg))
    assert set(rows) == set(legend) == {"dspark.bf16.gguf", "dspark.q8_0.gguf", "dspark.match-upstream.gguf"}
    assert all(rows[name][6] == legend[name] for name in rows), (rows, legend)
    assert legend["dspark.bf16.gguf"] == "1.000" and float(legend["dspark.match-upstream.gguf"]) < 0.25


def test_hub_draft_is_downloaded_to_the_hub_cache_first(fake: Callable[..., Path], files: dict[str, Path],
                                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A draft given as hf://ORG/REPO/file.gguf (a local server standing in for the Hub) is downloaded into the
    Hugging Face cache, then run; the report names where it came from."""
    from conftest import point_hub_at
    from http_server import FileServer

    exe = fake("ok", FAKE_ACCEPT="1")
    with FileServer() as hub:
        point_hub_at(hub.url, tmp_path, monkeypatch)
        hub.add_hub_file("org/draft-GGUF", "dspark.q8_0.gguf", files["q8_0"].read_bytes())
        r = bench(files["target"], ["hf://org/draft-GGUF/dspark.q8_0.gguf"], prompts=PROMPTS[:1], n_predict=6,
                  llama_server=exe)
    (d,) = r.drafts
    assert d.file is not None and d.file.source == "hf://org/draft-GGUF/dspark.q8_0.gguf"
    assert d.file.path.is_relative_to(tmp_path / "hfcache") and d.file.path.read_bytes() == files["q8_0"].read_bytes()
    assert d.file.outtype == "Q8_0" and d.complete and d.accepted > 0
