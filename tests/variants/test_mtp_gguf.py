"""MTP cuts of target GGUFs: ``mtp-extract`` / ``mtp-strip`` / ``mtp-graft``.

Three tiers: synthetic target files written here with gguf-py (K-quant tensors, split files, refusals, the remote
path over a local HTTP server); upstream llama.cpp b11434's own conversions of the tiny MTP checkpoints of
``tests/mtp_makers.py`` (marker ``llama``: the tree comes with the llama-server build), compared with the committed
oracle manifests ``tests/data/mtp``; and llama-server running the sidecar (``test_llama_mtp.py``).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import gguf as GQ  # noqa: E402
import numpy as np
import pytest
from conftest import ROOT
from http_server import FileServer, Route
from typer.testing import CliRunner

from dspark_convert.cli import app
from dspark_convert.errors import ConvertError
from dspark_convert.gguffile.options import RemoteOptions
from dspark_convert.gguffile.reader import read_gguf
from dspark_convert.mtp.run import default_name, extract, graft, strip

MANIFESTS = ROOT / "tests" / "data" / "mtp"


# ------------------------------------------------------------------------------------------------ synthetic
def write_target(path: Path, *, arch: str = "qwen35", n: int = 3, nextn: int = 1, split: int = 0,
                 tokens: tuple[str, ...] = ("a", "b", "c", "d"), quant: bool = True, seed: int = 0,
                 loadable: bool = False) -> Path:
    """A full target GGUF of ``arch`` with ``n`` trunk + ``nextn`` MTP blocks (Q4_K and BF16-typed raw tensors
    when ``quant``), gguf-py's writer; ``split`` > 0 writes shards of that many tensors. ``loadable`` (qwen35):
    the keys and MTP-block tensors llama.cpp's qwen35 loader requires of a sidecar, so a cut of it passes ``check``
    (2 heads of 64, 1 KV head, FFN 256)."""
    rng = np.random.default_rng(seed)
    w = GQ.GGUFWriter(path, arch, split_max_tensors=split)
    w.add_string("general.name", "Tiny")
    w.add_string("general.size_label", "0")  # replaced below by the computed one
    bc = n + nextn
    w.add_uint32(f"{arch}.block_count", bc)
    w.add_uint32(f"{arch}.embedding_length", 256)
    if nextn:
        w.add_uint32(f"{arch}.nextn_predict_layers", nextn)
    w.add_array(f"{arch}.attention.recurrent_layers", [i % 2 == 0 for i in range(bc)])
    w.add_array(f"{arch}.rope.dimension_sections", [11, 11, 10, 0])
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_array("tokenizer.ggml.tokens", list(tokens))
    if loadable:
        for key, value in (("context_length", 4096), ("attention.head_count", 2), ("attention.head_count_kv", 1),
                           ("attention.key_length", 64), ("attention.value_length", 64), ("feed_forward_length", 256),
                           ("ssm.conv_kernel", 4), ("ssm.inner_size", 256), ("ssm.state_size", 16),
                           ("ssm.time_step_rank", 2), ("ssm.group_count", 1)):
            w.add_uint32(f"{arch}.{key}", value)
        w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)
        w.add_array("tokenizer.ggml.merges", ["a b"])
    q4k = GQ.GGMLQuantizationType.Q4_K
    block = GQ.GGML_QUANT_SIZES[q4k][1]  # 144 bytes per 256 values

    def add(name: str, shape: tuple[int, ...], kind: str = "f32") -> None:
        if kind == "q4k" and quant:
            w.add_tensor(name, rng.integers(0, 256, (*shape[:-1], shape[-1] // 256 * block), dtype=np.uint8),
                         raw_dtype=q4k)
        else:
            w.add_tensor(name, rng.standard_normal(shape).astype(np.float32))

    add("token_embd.weight", (len(tokens), 256), "q4k")
    for b in range(bc):
        add(f"blk.{b}.attn_norm.weight", (256,))
        add(f"blk.{b}.ffn_down.weight", (256 if loadable and b >= n else 8, 256), "q4k")
        if loadable and b >= n:
            for name, shape in (("attn_q", (256, 256)), ("attn_k", (64, 256)), ("attn_v", (64, 256)),
                                ("attn_output", (256, 128)), ("attn_q_norm", (64,)), ("attn_k_norm", (64,)),
                                ("post_attention_norm", (256,)), ("ffn_gate", (256, 256)), ("ffn_up", (256, 256)),
                                ("nextn.hnorm", (256,))):
                add(f"blk.{b}.{name}.weight", shape)
        if b >= n:
            add(f"blk.{b}.nextn.eh_proj.weight", (256, 512), "q4k")
            add(f"blk.{b}.nextn.enorm.weight", (256,))
    add("output_norm.weight", (256,))
    add("output.weight", (len(tokens), 256), "q4k")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture
def full(tmp_path: Path) -> Path:
    return write_target(tmp_path / "Tiny-Q4_K_M.gguf")


def names(p: Path) -> list[str]:
    with read_gguf(p) as f:
        return [t.name for t in f.tensors]


def test_extract_strip_graft_round_trip_on_k_quants(full: Path, tmp_path: Path) -> None:
    """graft(strip(F), extract(F)) is F byte for byte; every tensor of both halves equals the source's."""
    side = extract(full, tmp_path / "mtp.gguf", verify=True)
    trunk = strip(full, tmp_path / "trunk.gguf", verify=True)
    both = graft(trunk.path, side.path, tmp_path / "full.gguf", verify=True)
    assert side.report and side.report.passed and trunk.report and trunk.report.passed
    assert both.report and both.report.passed, both.report.problems
    assert (tmp_path / "full.gguf").read_bytes() == full.read_bytes()
    assert names(side.path) == ["token_embd.weight", "blk.3.attn_norm.weight", "blk.3.ffn_down.weight",
                                "blk.3.nextn.eh_proj.weight", "blk.3.nextn.enorm.weight", "output_norm.weight",
                                "output.weight"]
    with read_gguf(full) as f, read_gguf(side.path) as s, read_gguf(trunk.path) as t:
        assert s.value("qwen35.block_count") == 4 and s.value("qwen35.nextn_predict_layers") == 1
        assert t.value("qwen35.block_count") == 3 and "qwen35.nextn_predict_layers" not in t.kvs
        assert t.value("qwen35.attention.recurrent_layers") == [True, False, True]
        assert t.value("qwen35.rope.dimension_sections") == [11, 11, 10, 0]  # INT32[4], not per layer
        for out in (s, t):
            for x in out.tensors:
                assert bytes(out.tensor_bytes(x.name)) == bytes(f.tensor_bytes(x.name)), x.name
                assert x.type_name == f.tensor(x.name).type_name
        assert s.tensor("blk.3.ffn_down.weight").type_name == "Q4_K"
    assert side.report.to_dict()["kvs"]["changed"] == {}  # the size label "0" is not a computed one: kept
    assert trunk.report.dropped == {"qwen35.nextn_predict_layers": "a trunk has no MTP blocks"}


def test_split_input_equals_single(full: Path, tmp_path: Path) -> None:
    (tmp_path / "split").mkdir()
    shards = write_target(tmp_path / "split" / "Tiny.gguf", split=4)
    parts = sorted((tmp_path / "split").glob("*.gguf"))
    assert [p.name for p in parts][0] == "Tiny-00001-of-00004.gguf" and shards
    extract(full, tmp_path / "a.gguf")
    many = extract(parts[2], tmp_path / "b.gguf", verify=True)  # any shard names the set
    assert many.report and many.report.passed
    assert (tmp_path / "a.gguf").read_bytes() == (tmp_path / "b.gguf").read_bytes()
    assert ("split.count", "split metadata: the output is one file") in many.plan.dropped_kvs
    strip(parts[0], tmp_path / "t1.gguf")
    strip(full, tmp_path / "t2.gguf")
    assert (tmp_path / "t1.gguf").read_bytes() == (tmp_path / "t2.gguf").read_bytes()
    assert default_name("extract", "hf://o/r/Q/M-Q4_K_M-00001-of-00003.gguf@v1").name == "mtp-M-Q4_K_M.gguf"


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize("case", ["no-mtp", "llama", "deepseek4", "glm5-next", "sidecar", "exists", "folder",
                                  "nextn-too-big"])
def test_refusals_are_one_line_and_leave_nothing(case: str, tmp_path: Path) -> None:
    out = tmp_path / "out.gguf"
    src = tmp_path / "in.gguf"
    if case == "no-mtp":
        write_target(src, nextn=0)
        want = "holds no MTP layers"
    elif case in ("llama", "deepseek4", "glm5-next"):
        write_target(src, arch=case)
        want = {"llama": "has no MTP (NextN) path", "deepseek4": "convert the checkpoint with upstream's "
                "convert_hf_to_gguf.py --mtp", "glm5-next": "a sidecar would not run"}[case]
    elif case == "nextn-too-big":
        write_target(src)
        src.write_bytes(src.read_bytes().replace(  # nextn_predict_layers 1 -> 9 (block_count 4)
            b"qwen35.nextn_predict_layers" + (4).to_bytes(4, "little") + (1).to_bytes(4, "little"),
            b"qwen35.nextn_predict_layers" + (4).to_bytes(4, "little") + (9).to_bytes(4, "little")))
        want = "qwen35.nextn_predict_layers = 9 with qwen35.block_count = 4: expected 0 <"
    elif case == "sidecar":
        extract(write_target(tmp_path / "f.gguf"), src)
        want = "is an MTP sidecar"
    else:
        write_target(src)
        if case == "exists":
            out.write_bytes(b"keep")
            want = "exists"
        else:
            out.mkdir()
            want = "folder"
    before = sorted(p.name for p in tmp_path.iterdir())
    r = _cli("mtp-extract", str(src), "-o", str(out))
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and want in lines[0], r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    if case == "exists":
        assert out.read_bytes() == b"keep"


def test_strip_refuses_a_remote_file(tmp_path: Path) -> None:
    r = _cli("mtp-strip", "hf://org/repo/model-Q4_K_M.gguf", "-o", str(tmp_path / "t.gguf"))
    assert r.exit_code == 2 and "download it first" in r.output and len(r.output.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("what", ["vocab", "header", "blocks"])
def test_graft_refuses_another_models_sidecar(what: str, tmp_path: Path) -> None:
    full = write_target(tmp_path / "a.gguf")
    other = write_target(tmp_path / "b.gguf", tokens=("a", "b", "c", "x") if what == "vocab" else ("a", "b", "c", "d"),
                         n=4 if what == "blocks" else 3, seed=1)
    trunk = strip(full, tmp_path / "t.gguf").path
    if what == "header":
        other = write_target(tmp_path / "c.gguf")  # its sidecar lacks the trunk's embedding_length key
        other.write_bytes(other.read_bytes().replace(b"qwen35.embedding_length", b"qwen35.embedding_lengtX"))
    side = extract(other, tmp_path / "s.gguf").path
    with pytest.raises(ConvertError) as e:
        graft(trunk, side, tmp_path / "g.gguf")
    msg = str(e.value)
    assert {"vocab": "tokenizer.ggml.tokens differs from the trunk's", "header": "qwen35.embedding_length",
            "blocks": "follows a trunk of 4 blocks"}[what] in msg, msg
    assert "\n" not in msg and not (tmp_path / "g.gguf").exists()


# ------------------------------------------------------------------------------------------------ remote
def _sidecar_ranges(path: Path) -> tuple[int, list[tuple[int, int]]]:
    with read_gguf(path) as f:
        keep = {"token_embd.weight", "output_norm.weight", "output.weight"}
        ranges = [(t.offset, t.offset + (t.nbytes or 0)) for t in f.tensors
                  if t.name in keep or t.name.startswith("blk.3.")]
        return f.data_offset, ranges


def _gets(server: FileServer, path: str) -> list[tuple[int, int]]:
    out = []
    for e in server.gets(path):
        lo, _, hi = e.headers["range"].removeprefix("bytes=").partition("-")
        out.append((int(lo), int(hi) + 1))
    return out


def test_remote_extract_fetches_only_the_sidecar(full: Path, tmp_path: Path) -> None:
    data = full.read_bytes()
    data_offset, ranges = _sidecar_ranges(full)
    opts = RemoteOptions(first_window=4096)
    with FileServer() as s:
        s.routes["/Tiny-Q4_K_M.gguf"] = Route(data)
        r = extract(f"{s.url}/Tiny-Q4_K_M.gguf", tmp_path / "mtp.gguf", remote=opts)
        served = s.sent()
        asked = _gets(s, "/Tiny-Q4_K_M.gguf")
    local = extract(full, tmp_path / "local.gguf")
    assert (tmp_path / "mtp.gguf").read_bytes() == local.path.read_bytes()
    header_gets = [g for g in asked if g[0] < data_offset]
    data_gets = [g for g in asked if g[0] >= data_offset]
    held = max(b for _, b in header_gets)  # the header's windows (they also hold the first tensor's bytes)
    assert all(any(a <= x and y <= b for a, b in ranges) for x, y in data_gets)  # only sidecar tensor bytes
    covered = sorted([(max(a, held), b) for a, b in ranges if b > held])
    assert sorted(data_gets) == covered  # every sidecar byte not in the header windows, once
    assert served == sum(min(b, len(data)) - a for a, b in header_gets) + sum(b - a for a, b in data_gets)
    assert r.fetch is not None and r.fetch.bytes_fetched == served and r.fetch.file_bytes == len(data)
    assert served < len(data) and not (tmp_path / "mtp.gguf.part").exists()


def test_remote_survives_a_dropped_connection(full: Path, tmp_path: Path) -> None:
    with FileServer() as s:
        s.routes["/f.gguf"] = Route(full.read_bytes(), truncate_at=3000)
        extract(f"{s.url}/f.gguf", tmp_path / "mtp.gguf", remote=RemoteOptions(first_window=2048, backoff=0.01))
    assert (tmp_path / "mtp.gguf").read_bytes() == extract(full, tmp_path / "l.gguf").path.read_bytes()


def test_remote_deadline_then_restart_fetches_only_what_is_missing(full: Path, tmp_path: Path) -> None:
    out = tmp_path / "mtp.gguf"
    data = full.read_bytes()
    data_offset, ranges = _sidecar_ranges(full)
    with FileServer() as s:
        route = Route(data)
        s.routes["/f.gguf"] = route
        calls = {"n": 0}
        real_read = route.read

        def slow_fourth(start: int, stop: int) -> bytes:  # the fourth sidecar tensor hangs past the deadline
            if start == ranges[3][0]:
                calls["n"] += 1
                if calls["n"] == 1:
                    threading.Event().wait(1.5)
            return real_read(start, stop)

        route.read = slow_fourth  # type: ignore[method-assign]
        with pytest.raises(ConvertError) as e:
            extract(f"{s.url}/f.gguf", out, remote=RemoteOptions(first_window=2048, deadline=1.0, timeout=5.0))
        assert "deadline" in str(e.value) and "\n" not in str(e.value)
        assert not out.exists() and (tmp_path / "mtp.gguf.part").is_file()
        state = json.loads((tmp_path / "mtp.gguf.part.json").read_text())
        assert state["tensors_done"] == 3
        route.read = real_read  # type: ignore[method-assign]
        before = len(_gets(s, "/f.gguf"))
        res = extract(f"{s.url}/f.gguf", out, remote=RemoteOptions(first_window=2048))
        again = [g for g in _gets(s, "/f.gguf")[before:] if g[0] >= data_offset]
    assert all(any(a <= x and y <= b for a, b in ranges[3:]) for x, y in again)  # the first three not again
    assert {b for _, b in again} == {b for _, b in ranges[3:]}
    assert res.fetch is not None and res.fetch.resumed_tensors == 3
    assert out.read_bytes() == extract(full, tmp_path / "l.gguf").path.read_bytes()
    assert not (tmp_path / "mtp.gguf.part").exists() and not (tmp_path / "mtp.gguf.part.json").exists()


def test_remote_split_file_on_the_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """hf://ORG/REPO/NAME-00002-of-0000N.gguf@REV: every shard's header, then the sidecar's tensors of whichever
    shard holds them; the result equals the local extraction of the same shards."""
    from conftest import point_hub_at

    (tmp_path / "split").mkdir()
    write_target(tmp_path / "split" / "T.gguf", split=4)
    shards = sorted((tmp_path / "split").glob("*.gguf"))
    with FileServer() as s:
        for p in shards:
            s.add_hub_file("org/T-GGUF", p.name, p.read_bytes(), revision="v1")
        point_hub_at(s.url, tmp_path, monkeypatch)
        r = extract(f"hf://org/T-GGUF/{shards[1].name}@v1", tmp_path / "mtp.gguf",
                    remote=RemoteOptions(first_window=4096))
        served = s.sent()
    local = extract(shards[0], tmp_path / "local.gguf")
    assert (tmp_path / "mtp.gguf").read_bytes() == local.path.read_bytes()
    assert r.fetch is not None and r.fetch.file_bytes == sum(p.stat().st_size for p in shards)
    assert r.fetch.bytes_fetched == served <= r.fetch.file_bytes  # tiny shards: the header windows hold most
    assert r.fetch.source["kind"] == "hub" and r.fetch.source["revision"] == "v1"


# ------------------------------------------------------------------------------------------------ oracle
FAMILIES = ("qwen35", "qwen35moe", "qwen3next", "glm4moe", "nemotron_h_moe", "deepseek32", "deepseek32-fp8")
#: the oracle cases: every family, and a Qwen3.5 whose folder name carries a size (general.finetune in the sidecar)
ORACLES = (*FAMILIES, "qwen35-sized")


def _manifest(name: str) -> dict[str, Any]:
    return json.loads((MANIFESTS / f"{name}.json").read_text())


def _host_free(desc: dict[str, Any]) -> dict[str, Any]:
    """``desc`` without the bytes of the ``ssm_a`` tensors: upstream's converter writes ``-torch.exp(A_log)``, whose
    last bits follow the host's exp kernel (two of four values differ between hosts), so a committed manifest
    pins them only on the host that made it. Their names, types and shapes stay; the cuts' bytes are compared with
    the full file of the same run instead."""
    return {**desc, "tensors": [{k: v for k, v in t.items() if not (k == "sha256" and t["name"].endswith(".ssm_a"))}
                                for t in desc["tensors"]]}


@pytest.fixture(scope="module")
def upstream_full(llama_bin: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``(family, outtype) -> upstream b11434's full conversion`` of the family's tiny MTP checkpoint."""
    import mtp_makers

    tree = llama_bin[1]
    root = tmp_path_factory.mktemp("mtp-oracle")
    made: dict[tuple[str, str], Path] = {}

    def get(family: str, outtype: str) -> Path:
        if (family, outtype) not in made:
            maker, folder = mtp_makers.MAKERS[family]
            ckpt = root / folder
            if not ckpt.exists():
                maker(ckpt)
            made[family, outtype] = mtp_makers.upstream_convert(ckpt, root / f"{folder}-{outtype}.gguf", outtype,
                                                                tree=tree)
        return made[family, outtype]

    return get


@pytest.mark.llama
@pytest.mark.parametrize("outtype", ["bf16", "q8_0"])
@pytest.mark.parametrize("family", ORACLES)
def test_cuts_equal_upstreams_conversions(family: str, outtype: str, upstream_full: Any, tmp_path: Path) -> None:
    """extract == ``--mtp``, strip == ``--no-mtp``, graft == the full conversion: every KV (``general.*``
    included), every tensor's bytes, the order of both."""
    from golden_manifest import describe

    full = upstream_full(family, outtype)
    # the input is the oracle's full file
    assert _host_free(describe(full)) == _host_free(_manifest(f"{family}-{outtype}-full"))
    side = extract(full, tmp_path / "mtp.gguf", verify=True)
    trunk = strip(full, tmp_path / "trunk.gguf", verify=True)
    both = graft(trunk.path, side.path, tmp_path / "full.gguf", verify=True)
    assert _host_free(describe(side.path)) == _host_free(_manifest(f"{family}-{outtype}-mtp"))
    assert _host_free(describe(trunk.path)) == _host_free(_manifest(f"{family}-{outtype}-nomtp"))
    ssm_a = {t["name"]: t["sha256"] for t in describe(full)["tensors"] if t["name"].endswith(".ssm_a")}
    assert {t["name"]: t["sha256"] for t in describe(trunk.path)["tensors"] if t["name"] in ssm_a} == ssm_a
    assert both.path.read_bytes() == full.read_bytes()
    for r in (side, trunk, both):
        assert r.report is not None and r.report.passed, r.report.problems if r.report else None


@pytest.mark.llama
@pytest.mark.parametrize("outtype", ["bf16", "q8_0"])
def test_cuts_of_upstreams_split_conversion(outtype: str, llama_bin: tuple[Path, Path], tmp_path: Path) -> None:
    """Upstream's full conversion split by ``--split-max-tensors 16``: extract == ``--mtp`` and strip ==
    ``--no-mtp`` (the single-file manifests: the cut is one file), from any shard."""
    import mtp_makers
    from golden_manifest import describe

    maker, folder = mtp_makers.MAKERS["qwen35"]
    ckpt = maker(tmp_path / folder)
    mtp_makers.upstream_convert(ckpt, tmp_path / "full.gguf", outtype, tree=llama_bin[1],
                                extra=("--split-max-tensors", "16"))  # writes full-0000i-of-0000N.gguf
    shards = sorted(tmp_path.glob("full-*-of-*.gguf"))
    assert len(shards) == 5
    side = extract(shards[-1], tmp_path / "mtp.gguf", verify=True)
    trunk = strip(shards[0], tmp_path / "trunk.gguf", verify=True)
    assert _host_free(describe(side.path)) == _host_free(_manifest(f"qwen35-{outtype}-mtp"))
    assert _host_free(describe(trunk.path)) == _host_free(_manifest(f"qwen35-{outtype}-nomtp"))
    assert side.report is not None and side.report.passed and "split.count" in side.report.dropped


def test_oracle_manifests_are_committed() -> None:
    """Every family x outtype x mode manifest is there, and the sidecars hold MTP blocks only after the trunk."""
    for fam in ORACLES:
        for outtype in ("bf16", "q8_0"):
            m = {mode: _manifest(f"{fam}-{outtype}-{mode}") for mode in ("full", "mtp", "nomtp")}
            arch = m["full"]["kv"]["general.architecture"]["value"]
            bc = m["full"]["kv"][f"{arch}.block_count"]["value"]
            nx = m["full"]["kv"][f"{arch}.nextn_predict_layers"]["value"]
            assert m["nomtp"]["kv"][f"{arch}.block_count"]["value"] == bc - nx
            assert f"{arch}.nextn_predict_layers" not in m["nomtp"]["kv"]
            blocks = {int(t["name"].split(".")[1]) for t in m["mtp"]["tensors"] if t["name"].startswith("blk.")}
            assert blocks == set(range(bc - nx, bc))
    sized = _manifest("qwen35-sized-bf16-mtp")["kv"]
    assert (sized["general.finetune"]["value"], sized["general.size_label"]["value"]) == ("350k", "181K")


# ------------------------------------------------------------------------------------------------ llama-server
PROMPT = [400, 401, 72, 300, 22, 500, 12, 33]


@pytest.mark.llama
@pytest.mark.parametrize("family", FAMILIES)
def test_llama_server_runs_the_cut_sidecar_losslessly(family: str, upstream_full: Any, llama_bin: tuple[Path, Path],
                                                      tmp_path: Path) -> None:
    """The trunk from mtp-strip with the sidecar from mtp-extract (``-md … --spec-type draft-mtp``) and the full
    file drafting with its own MTP block: llama-server b11434 loads both, drafts, and its greedy completion equals
    the plain one token for token."""
    from dspark_convert.llamacpp.server import LlamaServer

    binary = llama_bin[0]
    full = upstream_full(family, "bf16")
    side = extract(full, tmp_path / "mtp.gguf").path
    trunk = strip(full, tmp_path / "trunk.gguf").path
    mtp_flags = ["--spec-type", "draft-mtp", "--spec-draft-p-min", "0", "--spec-draft-n-max", "3"]
    with LlamaServer(binary, trunk) as s:
        plain = s.complete(PROMPT, 16)
    with LlamaServer(binary, trunk, extra=["-md", str(side), *mtp_flags]) as s:
        spec = s.complete(PROMPT, 16)
    with LlamaServer(binary, full, extra=mtp_flags) as s:
        own = s.complete(PROMPT, 16)
    assert len(plain.tokens) == 16
    assert spec.tokens == plain.tokens and own.tokens == plain.tokens
    assert spec.draft_n > 0 and own.draft_n > 0  # the MTP block drafted (random weights: acceptance is not asserted)


# ------------------------------------------------------------------------------------------------ check
def _findings(path: Path) -> list[tuple[str, str, str]]:
    from dspark_convert.check import check_file

    return [(f.level, f.rule, f.message) for f in check_file(path)]


def test_check_says_what_an_mtp_file_is(tmp_path: Path) -> None:
    full = write_target(tmp_path / "Tiny-Q4_K_M.gguf", loadable=True)
    side = extract(full, tmp_path / "mtp.gguf").path
    trunk = strip(full, tmp_path / "trunk.gguf").path
    (lv, rule, msg), = _findings(full)
    assert (lv, rule) == ("note", "mtp-kind") and msg.startswith("full target: 3 trunk + 1 MTP block(s)")
    (lv, rule, msg), = _findings(side)
    assert (lv, rule) == ("note", "mtp-kind") and "--spec-type draft-mtp" in msg and msg.startswith("MTP sidecar")
    (lv, rule, msg), = _findings(trunk)
    assert (lv, rule) == ("note", "mtp-kind") and msg.startswith("target without MTP blocks (3 blocks)")


def test_a_sidecar_of_two_mtp_blocks_is_flagged_by_check_and_extract(tmp_path: Path) -> None:
    """llama.cpp b11434's qwen35 MTP graph asserts a single MTP block: ``check`` says so of a two-block sidecar
    (every tensor there), and ``mtp-extract`` copies such a source's blocks as they are, with a note naming the
    loader error; a one-block sidecar gets neither."""
    one = extract(write_target(tmp_path / "one.gguf", loadable=True), tmp_path / "mtp-one.gguf")
    two = extract(write_target(tmp_path / "two.gguf", loadable=True, nextn=2), tmp_path / "mtp-two.gguf")
    assert [n for n in one.plan.notes if "loader error" in n] == []
    errors = [(rule, msg) for lv, rule, msg in _findings(two.path) if lv == "error"]
    message = ("is 2: llama.cpp b11434's qwen35 MTP graph takes a single MTP block (GGML_ASSERT n_layer_nextn == 1): "
               "the file loads, and llama-server aborts when it drafts (upstream's --mtp writes it; hf2gguf refuses it "
               "unless --match-upstream)")
    assert errors == [("mtp-graph", message)]
    note, = [n for n in two.plan.notes if "loader error" in n]
    assert note == ("check finds 1 loader error(s) in this sidecar, copied from the source's MTP blocks (first: "
                    f"qwen35.nextn_predict_layers: {message} [mtp-graph]); llama-server b11434 does not run it as a "
                    "draft")
    assert [n for n in two.plan.notes if "loader error" not in n] == one.plan.notes


@pytest.mark.parametrize("arch", ["qwen35", "glm4moe"])
def test_check_a_trunk_that_keeps_the_nextn_key(arch: str, tmp_path: Path) -> None:
    """A trunk keeping ``nextn_predict_layers`` without the MTP tensors: qwen35's loader still requires them (the
    file does not load), glm4moe's detects a trunk-only file."""
    full = write_target(tmp_path / "f.gguf", arch=arch)
    with read_gguf(full) as f:  # the trunk's tensors, the full header: what a careless cut writes
        import gguf

        w = gguf.GGUFWriter(tmp_path / "bad.gguf", arch)
        for name in f.kvs:
            if name == "general.architecture" or name.startswith("GGUF."):
                continue
            kv = f.kvs[name]
            if kv.type == gguf.GGUFValueType.ARRAY:
                w.add_array(name, f.value(name))
            elif kv.type == gguf.GGUFValueType.STRING:
                w.add_string(name, f.value(name))
            else:
                w.add_key_value(name, f.value(name), kv.type)
        for t in f.tensors:
            if not t.name.startswith("blk.3."):
                w.add_tensor(t.name, np.asarray(f.tensor_data(t.name)), raw_dtype=gguf.GGMLQuantizationType(t.ggml_type))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    found = _findings(tmp_path / "bad.gguf")
    if arch == "qwen35":
        assert [(lv, r) for lv, r, _ in found] == [("error", "mtp-kind")]
        assert "tensor 'blk.3.attn_norm.weight' not found" in found[0][2] and "mtp-strip" in found[0][2]
    else:
        assert [(lv, r) for lv, r, _ in found] == [("note", "mtp-kind")] and "trunk-only" in found[0][2]


def test_check_target_matches_a_sidecar_with_its_trunk(tmp_path: Path) -> None:
    from dspark_convert.fit import check_fit

    full = write_target(tmp_path / "Tiny-Q4_K_M.gguf", loadable=True)
    side = extract(full, tmp_path / "mtp.gguf").path
    trunk = strip(full, tmp_path / "trunk.gguf").path
    ok = check_fit(side, trunk)
    assert ok.ok
    by = {r.id: r for r in ok.results}
    assert (by["mtp-trunk"].status, by["mtp-trunk"].draft, by["mtp-trunk"].target) == ("pass", 3, 3)
    assert by["mtp-header"].status == "pass" and by["mtp-spec-type"].status == "info"
    assert check_fit(side, full).ok  # the full file is a target too
    other = strip(write_target(tmp_path / "o.gguf", n=4), tmp_path / "o-trunk.gguf").path
    bad = check_fit(side, other)
    assert not bad.ok
    by = {r.id: r for r in bad.results}
    assert (by["mtp-trunk"].status, by["mtp-trunk"].draft, by["mtp-trunk"].target) == ("fail", 3, 4)


def test_inspect_says_what_the_file_is_and_how_to_run_it(full: Path, tmp_path: Path) -> None:
    from dspark_convert.inspect import inspect_gguf

    side = extract(full, tmp_path / "mtp.gguf").path
    trunk = strip(full, tmp_path / "trunk.gguf").path
    got = {p.name: inspect_gguf(p, tensors=False)["mtp"] for p in (full, side, trunk)}
    assert got["mtp.gguf"] == {"kind": "sidecar", "block_count": 4, "trunk_blocks": 3, "nextn_predict_layers": 1,
                               "serve": "llama-server -m TARGET.gguf -md FILE --spec-type draft-mtp"}
    assert got[full.name]["kind"] == "full" and got["trunk.gguf"]["kind"] == "trunk"
    assert got["trunk.gguf"]["nextn_predict_layers"] == 0 and got["trunk.gguf"]["block_count"] == 3
    assert inspect_gguf(write_target(tmp_path / "l.gguf", arch="llama"), tensors=False)["mtp"] is None


def test_cli_summary_json_and_default_names(full: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = _cli("mtp-extract", str(full), "--verify", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["output"] == "mtp-Tiny-Q4_K_M.gguf" and doc["kind"] == "sidecar" and doc["trunk_blocks"] == 3
    assert doc["verify"]["passed"] is True and doc["verify"]["tensors_byte_equal"] == doc["tensors"] == 7
    assert doc["serve"] == "llama-server -m TARGET.gguf -md mtp-Tiny-Q4_K_M.gguf --spec-type draft-mtp"
    assert doc["remote"] is None and (tmp_path / "mtp-Tiny-Q4_K_M.gguf").is_file()
    r = _cli("mtp-strip", str(full))
    assert r.exit_code == 0, r.output
    first, *rest = r.stdout.splitlines()
    assert first.startswith("wrote Tiny-Q4_K_M-trunk.gguf: trunk without MTP blocks (qwen35), 9 tensors")
    assert "  changed: qwen35.block_count: trunk blocks only (4 -> 3)" in rest
    assert "  dropped: qwen35.nextn_predict_layers: a trunk has no MTP blocks (a qwen35-style loader refuses it " \
           "with the key)" in rest
    r = _cli("mtp-graft", "Tiny-Q4_K_M-trunk.gguf", "mtp-Tiny-Q4_K_M.gguf", "--verify")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "Tiny-Q4_K_M-trunk-grafted.gguf").read_bytes() == full.read_bytes()
    assert r.stdout.splitlines()[-1].startswith("  verify passed: 13 tensors byte-equal to their source")
