"""``upgrade``: 749f688-era golden files brought to upstream b11434's layout (manifests-b11434), refusals, the
double NeoX permutation, and ``check``'s staleness warning.

The 749f688-era files are made by this checkout's ``hf2gguf`` and first compared with ``tests/golden/manifests-749f688/``:
if ``hf2gguf`` itself moves to b11434's layout, that comparison fails here with a clear message.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
import pytest
from fixture_registry import SELF, select
from golden_manifest import compare

from dspark_convert.errors import ConvertError
from dspark_convert.gguffile.reader import read_gguf
from dspark_convert.plan import TensorSpec
from dspark_convert.roles.upgrade import REVISIONS, Piece
from dspark_convert.staleness import detect_staleness
from dspark_convert.upgrade import plan_upgrade, upgrade, write_upgrade

#: the golden layouts (tests/fixture_registry.py), sorted, the self-target ones last
LAYOUTS = tuple(f.name for f in sorted(select(source="golden"), key=lambda f: (f.target == SELF, f.name)))
#: full-vocabulary DSpark layouts: whether the checkpoint stored embed_tokens is not in the 749f688 file
NEEDS_CHECKPOINT = {"dflash-deepspec", "dspark-deepspec", "dspark-interleaved", "dspark-speculators", "dspark-specforge"}


def _target(inputs: Path, layout: str) -> Path:
    return inputs / ("dspark-dsv4" if layout == "dspark-dsv4" else "target")


@pytest.fixture(scope="module")
def old_file(golden_inputs: Path, golden_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """``old_file(layout, outtype)``: the 749f688-era conversion, checked against manifests-749f688/."""
    from dspark_convert.hf2gguf.conversion import convert

    out, cache = tmp_path_factory.mktemp("old"), {}

    extra = {"match_upstream": True} if "match_upstream" in inspect.signature(convert).parameters else {}

    def get(layout: str, outtype: str) -> Path:
        if (layout, outtype) not in cache:
            p = out / f"{layout}.{outtype}.gguf"
            convert(golden_inputs / layout, _target(golden_inputs, layout), p, outtype=outtype,
                    dspark=layout == "dspark-dsv4", **extra)
            expected = json.loads((golden_dir / "manifests-749f688" / f"{layout}.{outtype}.json").read_text())
            if compare(p, expected):  # hf2gguf writes the b11434 layout: take out what b10705 added
                p = _as_749f688(p, out / f"{layout}.{outtype}.old.gguf")
            diffs = compare(p, expected)
            assert diffs == [], f"not the 749f688 layout of {layout}: {diffs[:3]}"
            cache[layout, outtype] = p
        return cache[layout, outtype]

    return get


def _as_749f688(path: Path, out: Path, drop_keys: tuple[str, ...] = ()) -> Path:
    """``path`` (upstream b11434's layout) without what b10705 added: ``dflash.has_confidence_head``, a
    full-vocabulary DSpark's ``token_embd.weight`` and the ``.weight`` of attention sinks (gguf-py's name map
    gives ``blk.N.attn_sinks`` for ``self_attn.sinks``), and without the keys ``drop_keys``. The caller checks the
    result against manifests-749f688/."""
    from dspark_convert.plan import TensorSpec

    with read_gguf(path) as f:
        plan = plan_upgrade(f, match_upstream=True)
        plan.kvs = [k for k in plan.kvs if k.name != "dflash.has_confidence_head" and k.name not in drop_keys]
        if "d2t" not in [t.name for t in f.tensors]:
            plan.pieces = [p for p in plan.pieces if p.spec.name != "token_embd.weight"]
        for p in plan.pieces:
            if ".attn_sinks." in p.spec.name:
                p.spec = TensorSpec(p.spec.name.removesuffix(".weight"), p.spec.shape, p.spec.ggml_type)
        _relabel(plan)
        write_upgrade(plan, f, out)
    return out


def _relabel(plan) -> None:  # type: ignore[no-untyped-def]
    """``general.size_label`` as gguf-py computes it over the plan's tensors (what the older converter wrote)."""
    import gguf

    from dspark_convert.hf2gguf.metadata import param_counts
    from dspark_convert.plan import KV

    for i, kv in enumerate(plan.kvs):
        if kv.name == "general.size_label":
            label = gguf.size_label(*param_counts((p.spec.name, p.spec.shape) for p in plan.pieces))
            plan.kvs[i] = KV(kv.name, kv.type, label)


@pytest.mark.parametrize("outtype", ["bf16", "q8_0"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_upgrade_match_upstream_equals_b11434(layout: str, outtype: str, old_file, golden_inputs: Path,
                                              golden_dir: Path, tmp_path: Path) -> None:
    old = old_file(layout, outtype)
    expected = json.loads((golden_dir / "manifests-b11434" / f"{layout}.{outtype}.json").read_text())
    new = tmp_path / "new.gguf"
    target = _target(golden_inputs, layout)
    if layout in NEEDS_CHECKPOINT:
        with pytest.raises(ConvertError) as e:
            upgrade(old, new, target=target, match_upstream=True)
        assert "token_embd.weight" in str(e.value) and "--hf CHECKPOINT" in str(e.value)
        assert "\n" not in str(e.value)
        assert not new.exists() and list(tmp_path.iterdir()) == []
        upgrade(old, new, target=target, hf=golden_inputs / layout, match_upstream=True)
    else:
        upgrade(old, new, target=target, match_upstream=True)
    assert compare(new, expected) == []


def test_current_file_is_copied_byte_for_byte(old_file, golden_inputs: Path, tmp_path: Path) -> None:
    old = old_file("dflash-zlab", "q8_0")
    r = upgrade(old, tmp_path / "new.gguf", target=golden_inputs / "target")
    assert r.changes == []
    assert (tmp_path / "new.gguf").read_bytes() == old.read_bytes()


def test_staleness_of_749f688_dspark(old_file) -> None:
    with read_gguf(old_file("dspark-reduced", "bf16")) as f:
        st = detect_staleness(f)
    assert [s.subject for s in st.stale] == ["dflash.has_confidence_head"]
    assert st.revisions == ("749f688", "b10705")
    assert st.stale[0].needs == "file"


def test_check_reports_stale_layout(old_file, tmp_path: Path) -> None:
    """``check FILE`` reports each stale item as a warning finding (also in --json), with the upgrade command;
    ``upgrade --dry-run`` lists the same items. The loader rules still pass: exit 0."""
    from typer.testing import CliRunner

    from dspark_convert.check import check_file, stale_layout
    from dspark_convert.cli import app

    old = old_file("dspark-reduced", "bf16")
    findings = stale_layout(old)
    assert [(f.level, f.subject, f.rule) for f in findings] == [("warning", "dflash.has_confidence_head", "stale-layout")]
    assert "upstream b10705+" in findings[0].message
    assert f"'dspark-convert upgrade {old} -o NEW.gguf'" in findings[0].message
    assert check_file(old) == []  # the loader rules pass: stale is not broken
    r = CliRunner().invoke(app, ["check", str(old), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["ok"] is True and [f["rule"] for f in doc["findings"]] == ["stale-layout"]
    assert doc["findings"][0]["message"] == findings[0].message
    r = CliRunner().invoke(app, ["upgrade", str(old), "--dry-run", "--json"])
    assert r.exit_code == 0 and [c["subject"] for c in json.loads(r.stdout)["changes"]] == [f.subject for f in findings]
    # a full-vocabulary file: check lists token_embd too; the dry run lists the same and the refusal, exit 2
    full = old_file("dspark-deepspec", "bf16")
    subjects = [f.subject for f in stale_layout(full)]
    assert subjects == ["dflash.has_confidence_head", "token_embd.weight"]
    assert "--hf CHECKPOINT" in stale_layout(full)[1].message
    r = CliRunner().invoke(app, ["upgrade", str(full), "-o", str(tmp_path / "n.gguf"), "--dry-run", "--json"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 2 and [c["subject"] for c in doc["changes"]] == subjects
    assert "token_embd.weight" in doc["refused"] and "--hf CHECKPOINT" in doc["refused"]
    assert list(tmp_path.iterdir()) == []


def test_check_with_target_reports_stale_layout(old_file, golden_inputs: Path, tmp_path: Path) -> None:
    """``check FILE --target TARGET`` (the fit path) reports the same stale-layout warnings as ``check FILE`` (one
    function, in its JSON's ``loader_findings`` too), plus the items only the target decides (here an M-RoPE target
    GGUF: ``dflash.rope.dimension_sections``), each naming the target in its fix; the upgrade's dry run with that
    target lists the same subjects. Stale is not broken: the fit's verdict is unchanged."""
    from typer.testing import CliRunner

    from dspark_convert.check import stale_layout
    from dspark_convert.cli import app
    from dspark_convert.fit import check_fit

    old = old_file("dspark-reduced", "bf16")
    plain = stale_layout(old)
    rep = check_fit(old, golden_inputs / "target")
    stale = [f for f in rep.loader_findings if f.rule == "stale-layout"]
    assert [f.to_dict() for f in stale] == [f.to_dict() for f in plain]  # nothing target-specific for this target
    assert rep.ok is True
    r = CliRunner().invoke(app, ["check", str(old), "--target", str(golden_inputs / "target"), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [f for f in doc["loader_findings"] if f["rule"] == "stale-layout"] == [f.to_dict() for f in plain]
    # M-RoPE targets (a folder with mrope_section; a target GGUF with its sections key): the fit path also says
    # the draft's sections key is missing, as the upgrade's dry run with that target does
    vl = tmp_path / "vl"
    vl.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (vl / name).write_bytes((golden_inputs / "target" / name).read_bytes())
    cfg = json.loads((golden_inputs / "target" / "config.json").read_text())
    cfg.setdefault("rope_parameters", {})["mrope_section"] = [2, 1, 1]
    (vl / "config.json").write_text(json.dumps(cfg))
    with read_gguf(old) as f:
        hidden, tokens = f.value("dflash.embedding_length"), list(f.value("tokenizer.ggml.tokens"))
    tgt = _target_gguf(tmp_path / "t.gguf", "qwen3vl", hidden=hidden, sections=True, tokens=tokens)
    for target in (vl, tgt):
        got = [f for f in check_fit(old, target).loader_findings if f.rule == "stale-layout"]
        assert [f.subject for f in got] == ["dflash.has_confidence_head", "dflash.rope.dimension_sections"], target
        assert f"--target {target}'" in got[1].message and "b10662+" in got[1].message
        # the target narrows the revision window: no sections key => made before b10662
        assert got[0].message == plain[0].message.replace("up to before b10705", "up to before b10662")
        dry = upgrade(old, tmp_path / "x.gguf", target=target, dry_run=True)
        assert [c.subject for c in dry.changes] == [f.subject for f in got]


def test_plain_upgrade_adds_output_head_on_untied_target(old_file, golden_inputs: Path, tmp_path: Path) -> None:
    old = old_file("dspark-deepspec", "f32")
    upgrade(old, tmp_path / "new.gguf", target=golden_inputs / "target", hf=golden_inputs / "dspark-deepspec")
    with read_gguf(tmp_path / "new.gguf") as f:
        names = [t.name for t in f.tensors]
        head = np.asarray(f.tensor_data("output.weight"))
        assert f.value("dflash.has_confidence_head") is True
    from dspark_convert.hf.checkpoint import Checkpoint

    ck = Checkpoint(golden_inputs / "dspark-deepspec")
    from gguf import GGMLQuantizationType as QT

    from dspark_convert.formats.transforms import convert_chunk

    want = np.frombuffer(convert_chunk(np.asarray(ck.read("lm_head.weight")), ck.ref("lm_head.weight").dtype,
                                       QT.F32).tobytes(), np.float32).reshape(head.shape)
    assert np.array_equal(head, want)
    assert names.index("token_embd.weight") < names.index("fc.weight") < names.index("output.weight") < \
        names.index("markov_w1.weight")


def test_mrope_target_gets_dimension_sections(old_file, golden_inputs: Path, tmp_path: Path) -> None:
    target = tmp_path / "vl"
    target.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (target / name).write_bytes((golden_inputs / "target" / name).read_bytes())
    cfg = json.loads((golden_inputs / "target" / "config.json").read_text())
    cfg["rope_scaling"] = {"mrope_section": [2, 1, 1], "rope_type": "default"}
    (target / "config.json").write_text(json.dumps(cfg))
    # upstream reads the first non-empty of rope_parameters / rope_scaling: this one has no mrope_section
    r = upgrade(old_file("dflash-zlab", "bf16"), tmp_path / "no.gguf", target=target, match_upstream=True, dry_run=True)
    assert r.changes == []
    cfg["rope_parameters"]["mrope_section"] = [2, 1, 1]
    (target / "config.json").write_text(json.dumps(cfg))
    r = upgrade(old_file("dflash-zlab", "bf16"), tmp_path / "new.gguf", target=target, match_upstream=True)
    assert [c.subject for c in r.changes] == ["dflash.rope.dimension_sections"]
    with read_gguf(tmp_path / "new.gguf") as f:
        hd = f.value("dflash.attention.key_length")
        assert list(f.value("dflash.rope.dimension_sections")) == [hd // 2, 0, 0, 0]
        order = list(f.kvs)
        assert order.index("dflash.target_layers") < order.index("dflash.rope.dimension_sections")


def _forward_neox(n: int, hd: int) -> np.ndarray:
    return np.arange(n).reshape(-1, hd // 2, 2).transpose(0, 2, 1).reshape(-1)


@pytest.fixture
def double_file(old_file, golden_inputs: Path, tmp_path: Path) -> tuple[Path, Path]:
    """(749f688 file of dspark-interleaved after b10662-b11104's extra permutation, the correct b11434 file)."""
    good = tmp_path / "good.gguf"
    upgrade(old_file("dspark-interleaved", "f32"), good, target=golden_inputs / "target",
            hf=golden_inputs / "dspark-interleaved", match_upstream=True)
    with read_gguf(good) as f:
        hd = f.value("dflash.attention.key_length")
        plan = plan_upgrade(f, match_upstream=True)
        for p in plan.pieces:
            if p.spec.name.endswith((".attn_q.weight", ".attn_k.weight", ".attn_q_norm.weight", ".attn_k_norm.weight")):
                assert isinstance(p, Piece) and p.copy is not None
                p.perm = _forward_neox(p.copy.shape[0], hd)
        write_upgrade(plan, f, tmp_path / "double.gguf")
    return tmp_path / "double.gguf", good


def test_double_neox_undone_when_checkpoint_proves_it(double_file, golden_inputs: Path, tmp_path: Path) -> None:
    double, good = double_file
    assert double.read_bytes() != good.read_bytes()
    r = upgrade(double, tmp_path / "fixed.gguf", hf=golden_inputs / "dspark-interleaved", match_upstream=True)
    assert [c.needs for c in r.changes] == ["checkpoint"]
    assert (tmp_path / "fixed.gguf").read_bytes() == good.read_bytes()
    with pytest.raises(ConvertError, match="--from-revision b11300 says one permutation"):
        upgrade(double, tmp_path / "x.gguf", hf=golden_inputs / "dspark-interleaved", from_revision="b11300",
                match_upstream=True)


def test_double_neox_undone_on_users_word(double_file, tmp_path: Path) -> None:
    double, good = double_file
    with pytest.raises(ConvertError, match="--rope-interleaved") as e:
        upgrade(double, tmp_path / "fixed.gguf", from_revision="b10900", match_upstream=True)
    assert "\n" not in str(e.value) and not (tmp_path / "fixed.gguf").exists()
    upgrade(double, tmp_path / "fixed.gguf", from_revision="b10900", rope_interleaved=True, match_upstream=True)
    assert (tmp_path / "fixed.gguf").read_bytes() == good.read_bytes()
    # an unaffected revision leaves the rows alone
    upgrade(double, tmp_path / "same.gguf", from_revision="b11223", rope_interleaved=True, match_upstream=True)
    assert (tmp_path / "same.gguf").read_bytes() == double.read_bytes()


def test_bad_revision_is_one_line(old_file, tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match="--from-revision 'latest': expected an upstream tag"):
        upgrade(old_file("dspark-reduced", "bf16"), tmp_path / "n.gguf", from_revision="latest")
    assert REVISIONS[0] == "749f688" and REVISIONS[-1] == "b11434"


# ------------------------------------------------------------------------------------------- --target forms
def _raw_safetensors(folder: Path, name: str) -> tuple[bytes, str, list[int]]:
    """The stored bytes, dtype and shape of tensor ``name`` in ``folder``'s safetensors (read here by hand)."""
    import struct

    for shard in sorted(folder.glob("*.safetensors")):
        with open(shard, "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            header = json.loads(fh.read(n))
            if name in header:
                a, b = header[name]["data_offsets"]
                fh.seek(8 + n + a)
                return fh.read(b - a), header[name]["dtype"], header[name]["shape"]
    raise AssertionError(f"{name} not in {folder}")


def _target_gguf(path: Path, arch: str, *, hidden: int = 32, add: dict[str, bool] | None = None,
                 sections: bool = False, tensors: tuple[tuple[str, tuple[int, ...], str, bytes], ...] = (),
                 tokens: list[str] | None = None) -> Path:
    """A target GGUF header (plus the given tensors, and a ``gpt2`` vocabulary of ``tokens``) as upstream's
    converter writes one for ``arch``."""
    from gguf import GGMLQuantizationType as QT
    from gguf import GGUFValueType as VT

    from dspark_convert.gguffile.header import pad, write_header
    from dspark_convert.plan import KV, TensorSpec

    kvs = [KV(f"{arch}.embedding_length", VT.UINT32, hidden)]
    if sections:
        kvs.append(KV(f"{arch}.rope.dimension_sections", VT.ARRAY, [2, 1, 1, 0], VT.INT32))
    if tokens is not None:
        kvs += [KV("tokenizer.ggml.model", VT.STRING, "gpt2"),
                KV("tokenizer.ggml.tokens", VT.ARRAY, tokens, VT.STRING)]
    kvs += [KV(f"tokenizer.ggml.add_{t}_token", VT.BOOL, v) for t, v in (add or {}).items()]
    specs = [TensorSpec(n, s, QT[t]) for n, s, t, _ in tensors]
    with open(path, "wb") as fh:
        write_header(fh, arch, kvs, specs)
        for spec, (_, _, _, data) in zip(specs, tensors, strict=True):
            assert len(data) == spec.nbytes
            fh.write(data + b"\0" * pad(len(data)))
    return path


def _manifest_add_flags(golden_dir: Path, layout: str, outtype: str) -> dict[str, bool]:
    kv = json.loads((golden_dir / "manifests-b11434" / f"{layout}.{outtype}.json").read_text())["kv"]
    return {t: kv[f"tokenizer.ggml.add_{t}_token"]["value"] for t in ("bos", "eos")
            if f"tokenizer.ggml.add_{t}_token" in kv}


def test_target_gguf_gives_upstream_b11434(old_file, golden_dir: Path, tmp_path: Path) -> None:
    """A target GGUF (header only) in place of the folder: the same b11434 file (tokenizer flags from its keys)."""
    expected = json.loads((golden_dir / "manifests-b11434" / "dspark-reduced.bf16.json").read_text())
    tgt = _target_gguf(tmp_path / "target.gguf", "qwen3", add=_manifest_add_flags(golden_dir, "dspark-reduced", "bf16"))
    r = upgrade(old_file("dspark-reduced", "bf16"), tmp_path / "new.gguf", target=tgt, match_upstream=True)
    assert compare(tmp_path / "new.gguf", expected) == []
    assert [c.subject for c in r.changes] == ["dflash.has_confidence_head"]  # 749f688 had these flags already
    other = _target_gguf(tmp_path / "other.gguf", "qwen3", add={"bos": True, "eos": True})
    r = upgrade(old_file("dspark-reduced", "bf16"), tmp_path / "o.gguf", target=other, match_upstream=True)
    assert [c.subject for c in r.changes] == ["dflash.has_confidence_head", "tokenizer.ggml.add_bos_token",
                                              "tokenizer.ggml.add_eos_token"]
    with read_gguf(tmp_path / "o.gguf") as f:
        assert f.value("tokenizer.ggml.add_bos_token") is True and f.value("tokenizer.ggml.add_eos_token") is True
    with pytest.raises(ConvertError, match="is a draft GGUF") as e:  # a draft given as the target
        upgrade(old_file("dspark-reduced", "bf16"), tmp_path / "x.gguf", target=tmp_path / "new.gguf")
    assert "\n" not in str(e.value) and not (tmp_path / "x.gguf").exists()


def test_target_hub_id_fetches_config_and_tokenizer(old_file, golden_inputs: Path, golden_dir: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``org/name`` target: its config and tokenizer files from the Hub cache (offline here), no weights."""
    from test_hub import make_cached_repo

    cache = tmp_path / "hf-cache"
    files = {n: (golden_inputs / "target" / n).read_text() for n in ("config.json", "tokenizer.json",
                                                                     "tokenizer_config.json")}
    make_cached_repo(cache, "org/target", files)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    expected = json.loads((golden_dir / "manifests-b11434" / "dflash-zlab.q8_0.json").read_text())
    upgrade(old_file("dflash-zlab", "q8_0"), tmp_path / "new.gguf", target="org/target", match_upstream=True)
    assert compare(tmp_path / "new.gguf", expected) == []


def test_remote_target_gguf_mrope_and_gemma(old_file, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``hf://`` target GGUF (header fetched from a local server as the Hub): M-RoPE sections and a Gemma
    target's embedding scale, equal to the upgrade with the local copy."""
    import math

    from conftest import point_hub_at
    from http_server import FileServer

    old = old_file("dflash-zlab", "bf16")
    vl = _target_gguf(tmp_path / "vl.gguf", "qwen3vl", sections=True, add={"bos": False, "eos": False})
    gemma = _target_gguf(tmp_path / "gemma.gguf", "gemma3", hidden=1152, add={"bos": True, "eos": False})
    with FileServer() as server:
        point_hub_at(server.url, tmp_path, monkeypatch)
        server.add_hub_file("org/vl-GGUF", "vl.gguf", vl)
        r = upgrade(old, tmp_path / "remote.gguf", target="hf://org/vl-GGUF/vl.gguf", match_upstream=True)
    assert "dflash.rope.dimension_sections" in [c.subject for c in r.changes]
    upgrade(old, tmp_path / "local.gguf", target=vl, match_upstream=True)
    assert (tmp_path / "remote.gguf").read_bytes() == (tmp_path / "local.gguf").read_bytes()
    with read_gguf(tmp_path / "remote.gguf") as f:
        assert list(f.value("dflash.rope.dimension_sections")) == [f.value("dflash.attention.key_length") // 2, 0, 0, 0]
    upgrade(old, tmp_path / "g.gguf", target=gemma, match_upstream=True)
    with read_gguf(tmp_path / "g.gguf") as f:
        assert f.value("dflash.embedding_scale") == pytest.approx(math.sqrt(1152), rel=1e-7)
        assert f.value("tokenizer.ggml.add_bos_token") is True


def test_embed_tokens_from_target_gguf(old_file, golden_inputs: Path, tmp_path: Path) -> None:
    """--embed-tokens-from-target: token_embd (and, plain, output) copied byte for byte from a target GGUF, the
    same bytes as from the target folder; a type that differs from the draft's is refused in one line."""
    old = old_file("dspark-deepspec", "bf16")
    emb, dtype, shape = _raw_safetensors(golden_inputs / "target", "model.embed_tokens.weight")
    head, _, _ = _raw_safetensors(golden_inputs / "target", "lm_head.weight")
    assert dtype == "BF16"
    tgt = _target_gguf(tmp_path / "t.gguf", "qwen3", add={"bos": False, "eos": False},
                       tensors=(("token_embd.weight", tuple(shape), "BF16", emb),
                                ("output.weight", tuple(shape), "BF16", head)))
    r = upgrade(old, tmp_path / "up.gguf", target=tgt, embed_tokens_from_target=True, match_upstream=True)
    assert "token_embd.weight" in [c.subject for c in r.changes]
    with read_gguf(tmp_path / "up.gguf") as f:
        assert bytes(f.tensor_bytes("token_embd.weight")) == emb and "output.weight" not in list(f.kvs) + [
            t.name for t in f.tensors]
    upgrade(old, tmp_path / "plain.gguf", target=tgt, embed_tokens_from_target=True)
    with read_gguf(tmp_path / "plain.gguf") as f:
        assert bytes(f.tensor_bytes("output.weight")) == head
        assert bytes(f.tensor_bytes("token_embd.weight")) == emb
    upgrade(old, tmp_path / "folder.gguf", target=golden_inputs / "target", embed_tokens_from_target=True)
    assert (tmp_path / "folder.gguf").read_bytes() == (tmp_path / "plain.gguf").read_bytes()
    f16 = _target_gguf(tmp_path / "f16.gguf", "qwen3", tensors=(("token_embd.weight", tuple(shape), "F16", emb),))
    with pytest.raises(ConvertError, match=r"tensor 'token_embd.weight' is F16 .* needs BF16") as e:
        upgrade(old, tmp_path / "bad.gguf", target=f16, embed_tokens_from_target=True, match_upstream=True)
    assert "\n" not in str(e.value) and not (tmp_path / "bad.gguf").exists()


def test_spliced_header_equals_gguf_py_header(old_file, tmp_path: Path) -> None:
    """The upgrade's header (old records copied, new ones packed here) is byte for byte what gguf-py writes for
    the same keys and tensor infos, with every kind of key an upgrade adds (bool, f32, int32 array, string)."""
    import io

    from dspark_convert.gguffile.header import write_header
    from dspark_convert.upgrade import header_bytes, load_target

    gemma = _target_gguf(tmp_path / "g.gguf", "gemma3", hidden=640, sections=True, add={"bos": True, "eos": True})
    for layout in ("dspark-reduced", "dflash-zlab", "eagle3-specforge"):
        with read_gguf(old_file(layout, "q8_0")) as f:
            plan = plan_upgrade(f, target=load_target(gemma), match_upstream=True)
            plan.kvs.append(plan.kvs.pop(1))  # a kept key moved: still its stored record
            from dspark_convert.plan import KV

            label = KV("general.size_label", plan.kvs[0].type, "1.5K")  # a string key, replaced or added
            names = [k.name for k in plan.kvs]
            if label.name in names:
                plan.kvs[names.index(label.name)] = label
            else:
                plan.kvs.append(label)
            with open(f.path, "rb") as fh:
                ours = header_bytes(plan, f, fh.read(f.data_offset))
            buf = io.BytesIO()
            write_header(buf, plan.arch, plan.kvs[1:], [p.spec for p in plan.pieces])
            assert ours is not None and len(plan.changes) >= (2 if layout.startswith("eagle3") else 4)
            assert ours == buf.getvalue(), layout


# ------------------------------------------------------------------------------------------- config keys (--hf)
@pytest.fixture(scope="module")
def qwen3_group(b11434_qwen3: Path) -> Path:
    """The b11434 set's ``qwen3/`` group (drafts of the layouts upstream learned up to b11434, and their target)."""
    return b11434_qwen3


def _without_keys(path: Path, out: Path, names: tuple[str, ...]) -> Path:
    """``path`` without the keys ``names``: the file an older revision wrote before it learned them."""
    with read_gguf(path) as f:
        plan = plan_upgrade(f, match_upstream=True)
        assert plan.changes == []
        plan.kvs = [k for k in plan.kvs if k.name not in names]
        write_upgrade(plan, f, out)
    return out


@pytest.mark.parametrize("case", ["n-dflash-swa-cfg", "n-dflash2"])
def test_config_keys_from_checkpoint(case: str, qwen3_group: Path, golden_dir: Path, tmp_path: Path) -> None:
    """A DFlash / DFlash2 file made before upstream read SWA (dflash_config.use_swa), causal, value scale and
    partial rotary from the config: not detectable from the file (listed as not checked), completed from --hf's
    config.json in hf2gguf's order: equal to upstream b11434's file."""
    from dspark_convert import convert
    from dspark_convert.upgrade import config_keys

    CONFIG_KEYS = config_keys()

    today = tmp_path / "today.gguf"
    convert(qwen3_group / case, qwen3_group / "target", today, outtype="q8_0")
    expected = json.loads((golden_dir / "manifests-b11434" / f"{case}.q8_0.json").read_text())
    assert compare(today, expected) == []
    with read_gguf(today) as f:
        present = tuple(k for k in CONFIG_KEYS if k in f.kvs)
    assert present  # the case shows at least one of them
    old = _without_keys(today, tmp_path / "old.gguf", CONFIG_KEYS)
    dry = upgrade(old, tmp_path / "x.gguf", target=qwen3_group / "target", dry_run=True)
    assert dry.changes == [] and any("value_scale" in u and "--hf" in u for u in dry.staleness.unchecked)
    r = upgrade(old, tmp_path / "new.gguf", target=qwen3_group / "target", hf=qwen3_group / case, match_upstream=True)
    assert sorted(c.subject for c in r.changes) == sorted(present)
    assert compare(tmp_path / "new.gguf", expected) == []
    assert (tmp_path / "new.gguf").read_bytes() == today.read_bytes()


@pytest.mark.parametrize("outtype", ["bf16", "q8_0"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_plain_upgrade_equals_hf2gguf_today(layout: str, outtype: str, old_file, golden_inputs: Path,
                                            tmp_path: Path) -> None:
    """Plain ``upgrade --target [--hf]`` of the 749f688-era file: byte for byte what ``hf2gguf`` writes today."""
    from dspark_convert.hf2gguf.conversion import convert

    today = tmp_path / "today.gguf"
    target = _target(golden_inputs, layout)
    convert(golden_inputs / layout, target, today, outtype=outtype, dspark=layout == "dspark-dsv4")
    hf = golden_inputs / layout if layout in NEEDS_CHECKPOINT else None
    upgrade(old_file(layout, outtype), tmp_path / "new.gguf", target=target, hf=hf)
    assert (tmp_path / "new.gguf").read_bytes() == today.read_bytes()


def test_nvfp4_without_prec_a4(qwen3_group: Path, tmp_path: Path) -> None:
    """NVFP4 tensors without general.tensor_extra.prec_a4 (a file older than b11223, otherwise loadable): not
    decidable from the file (a W4A4 checkpoint gets none either): listed as not checked; with --hf naming a
    W4A16_NVFP4 checkpoint the upgrade is refused in one line, nothing written."""
    from dspark_convert import convert

    fresh, old = tmp_path / "fresh.gguf", tmp_path / "old.gguf"
    convert(qwen3_group / "n-dspark-nvfp4", qwen3_group / "target", fresh)
    with read_gguf(fresh) as f:
        assert "NVFP4" in {t.type_name for t in f.tensors}
        plan = plan_upgrade(f)
        kept = [k for k in plan.kvs if not k.name.startswith("general.tensor_extra.prec_a4")]
        assert len(kept) == len(plan.kvs) - 1
        plan.kvs = kept
        write_upgrade(plan, f, old)
    dry = upgrade(old, tmp_path / "x.gguf", dry_run=True)
    assert any(u.startswith("general.tensor_extra.prec_a4") for u in dry.staleness.unchecked)
    assert dry.refused == (f"{old}: the upgraded file would fail llama.cpp's loader rules (general.tensor_extra.prec_a4"
                           ": is missing; llama.cpp throws \"general.tensor_extra.prec_a4 must be a bool array\") "
                           "unless the upgrade is given what it cannot read from the file: general.tensor_extra.prec_a4"
                           " (NVFP4 tensors: whether they are W4A16 is in the checkpoint's quant_algo; --hf)")
    with pytest.raises(ConvertError, match=r"unless the upgrade is given .* general.tensor_extra.prec_a4 \(NVFP4"):
        upgrade(old, tmp_path / "y.gguf")
    assert not (tmp_path / "y.gguf").exists()
    with pytest.raises(ConvertError, match=r"general.tensor_extra.prec_a4: --hf .* W4A16_NVFP4") as e:
        upgrade(old, tmp_path / "new.gguf", hf=qwen3_group / "n-dspark-nvfp4")
    assert "\n" not in str(e.value) and "hf2gguf" in str(e.value) and not (tmp_path / "new.gguf").exists()


@pytest.mark.parametrize("case", ["n-dspark-conf", "n-dspark-noconf", "n-dspark-interleaved-b", "n-dspark-sinks"])
def test_b11434_dspark_layouts_from_pre_b10705(case: str, qwen3_group: Path, golden_dir: Path, tmp_path: Path) -> None:
    """The DSpark layouts of the b11434 set as a pre-b10705 converter wrote them (no has_confidence_head, the draft's
    embed_tokens dropped): refused without --hf (one line), upstream b11434's file with it."""
    from dspark_convert import convert

    today = tmp_path / "today.gguf"
    convert(qwen3_group / case, qwen3_group / "target", today, outtype="bf16", match_upstream=True)
    expected = json.loads((golden_dir / "manifests-b11434" / f"{case}.bf16.json").read_text())
    assert compare(today, expected) == []
    old = _as_749f688(today, tmp_path / "old.gguf")
    sinks = case == "n-dspark-sinks"  # pre-b10705: blk.N.attn_sinks (no .weight), unknown to llama.cpp b11434
    with read_gguf(old) as f:
        names = [t.name for t in f.tensors]
        assert "dflash.has_confidence_head" not in f.kvs and "token_embd.weight" not in names
        assert ("blk.0.attn_sinks" in names) == sinks and "blk.0.attn_sinks.weight" not in names
    with pytest.raises(ConvertError, match="token_embd.weight") as e:
        upgrade(old, tmp_path / "new.gguf", target=qwen3_group / "target", match_upstream=True)
    assert "\n" not in str(e.value) and not (tmp_path / "new.gguf").exists()
    r = upgrade(old, tmp_path / "new.gguf", target=qwen3_group / "target", hf=qwen3_group / case, match_upstream=True)
    kept = "token_embd.weight" in [t["name"] for t in expected["tensors"]]  # the checkpoint stores embed_tokens
    assert [c.subject for c in r.changes] == (["dflash.has_confidence_head"] + ["token_embd.weight"] * kept
                                              + ["blk.*.attn_sinks.weight"] * sinks)
    assert compare(tmp_path / "new.gguf", expected) == []
    assert (tmp_path / "new.gguf").read_bytes() == today.read_bytes()


@pytest.fixture
def dflash_interleaved(golden_inputs: Path, tmp_path: Path) -> tuple[Path, Path]:
    """(a DFlash draft with rope_is_neox_style: false, its bf16 conversion today)."""
    import shutil

    from dspark_convert.hf2gguf.conversion import convert

    draft = tmp_path / "dflash-interleaved"
    shutil.copytree(golden_inputs / "dflash-zlab", draft)
    cfg = json.loads((draft / "config.json").read_text())
    cfg["rope_is_neox_style"] = False
    (draft / "config.json").write_text(json.dumps(cfg))
    today = tmp_path / "today.gguf"
    convert(draft, golden_inputs / "target", today, outtype="bf16")
    return draft, today


def test_dflash_interleaved_gets_its_neox_permutation(dflash_interleaved: tuple[Path, Path], golden_inputs: Path,
                                                      tmp_path: Path) -> None:
    """A DFlash draft with rope_is_neox_style: false as a pre-b10662 converter wrote it (q/k rows in the checkpoint's
    order): --hf's q_proj shows it, and the upgrade permutes the rows once, as upstream b10662+ and hf2gguf do;
    a file that has the permutation is left alone."""
    draft, today = dflash_interleaved
    with read_gguf(today) as f:
        hd = f.value("dflash.attention.key_length")
        plan = plan_upgrade(f, match_upstream=True)
        permuted = [p for p in plan.pieces if p.spec.name.endswith((".attn_q.weight", ".attn_k.weight",
                                                                     ".attn_q_norm.weight", ".attn_k_norm.weight"))]
        assert permuted
        for p in permuted:  # undo the one permutation: the rows as the checkpoint has them
            assert p.copy is not None
            idx = _forward_neox(p.copy.shape[0], hd)
            inv = np.empty_like(idx)
            inv[idx] = np.arange(len(idx))
            p.perm = inv
        write_upgrade(plan, f, tmp_path / "old.gguf")
    assert (tmp_path / "old.gguf").read_bytes() != today.read_bytes()
    r = upgrade(tmp_path / "old.gguf", tmp_path / "new.gguf", target=golden_inputs / "target", hf=draft)
    assert [(c.subject, c.since) for c in r.changes] == [("blk.*.attn_{q,k}{,_norm}.weight", "b10662")]
    assert (tmp_path / "new.gguf").read_bytes() == today.read_bytes()
    r = upgrade(today, tmp_path / "same.gguf", target=golden_inputs / "target", hf=draft)
    assert r.changes == [] and (tmp_path / "same.gguf").read_bytes() == today.read_bytes()


def test_dflash_neox_check_refuses_another_checkpoint(dflash_interleaved: tuple[Path, Path], golden_inputs: Path,
                                                      tmp_path: Path) -> None:
    """The q/k permutation check reads --hf's layer-0 q_proj once: a checkpoint without it, one of another width and
    one whose q_proj is not the file's (in either row order) are each refused in one line, with no output."""
    from bad_inputs_kit import drop_tensor, get_tensor, set_tensor

    draft, today = dflash_interleaved
    q = "layers.0.self_attn.q_proj.weight"
    dtype, w = get_tensor(draft, q)
    assert dtype == "BF16" and w.dtype == np.uint16  # (bit patterns)
    other = np.random.default_rng(0).standard_normal(w.shape).astype(np.float32)
    with_nan = w.copy()
    with_nan[3, 5] = 0x7FC0  # one NaN: nothing can be proved equal to it
    cases = {"no-q": (None, "no tensor layers.0.self_attn.q_proj.weight / model.layers.0.self_attn.q_proj.weight; "
                            "the q/k permutation check cannot be taken from it"),
             "narrow": (w[:, :-32], r"layer 0's q_proj has \d+ values, blk.0.attn_q.weight \d+; not the same draft"),
             "other": ((other.view(np.uint32) >> 16).astype(np.uint16),
                       r"blk.0.attn_q.weight matches neither no nor one NeoX permutation of --hf .*'s q_proj \(max "
                       r"diff \d"),
             "nan": (with_nan, r"matches neither no nor one NeoX permutation of --hf .*'s q_proj \(a NaN in either\)")}
    import shutil

    for name, (arr, message) in cases.items():
        hf = tmp_path / name
        shutil.copytree(draft, hf)
        if arr is None:
            drop_tensor(hf, q)
        else:
            set_tensor(hf, q, dtype, arr)
        out = tmp_path / f"{name}.gguf"
        with pytest.raises(ConvertError, match=message) as e:
            upgrade(today, out, target=golden_inputs / "target", hf=hf)
        assert "\n" not in str(e.value) and not out.exists(), name


def _dspark_with_config_keys(qwen3_group: Path, tmp_path: Path, case: str) -> Path:
    """A b11434-set DSpark draft whose config gives the keys upstream's DFlashModel reads for DSpark too (b10705+
    SWA and causal, b11334+ partial rotary and value scale): ``sf-swa`` (SpecForge nested: ``dflash_config.use_swa``
    without ``layer_types``, causal, value scale, partial_rotary_factor) or ``flat-swa`` (flat DeepSpec:
    ``use_sliding_window`` + ``layer_types``, ``is_causal: false``; embed_tokens and lm_head stored)."""
    import shutil

    src = "n-dspark-interleaved-b" if case == "sf-swa" else "n-dspark-conf"
    d = tmp_path / case
    shutil.copytree(qwen3_group / src, d)
    cfg = json.loads((d / "config.json").read_text())
    if case == "sf-swa":
        cfg.pop("rope_is_neox_style")
        cfg.pop("layer_types", None)
        cfg["dflash_config"].update(use_swa=True, swa_window_size=48, causal=True, attention_value_scale=0.5)
        cfg["rope_parameters"]["partial_rotary_factor"] = 0.5
    else:
        cfg.update(use_sliding_window=True, sliding_window=32, layer_types=["sliding_attention", "full_attention"],
                   is_causal=False)
    (d / "config.json").write_text(json.dumps(cfg))
    return d


@pytest.mark.parametrize("case", ["sf-swa", "flat-swa"])
def test_dspark_config_keys_from_checkpoint(case: str, qwen3_group: Path, tmp_path: Path) -> None:
    """A DSpark file as a pre-b10705 converter wrote it (no SWA / causal / partial-rotary / value-scale keys, no
    has_confidence_head, the draft's embed_tokens dropped): ``check`` lists the config keys as not checked; with
    --hf the upgrade completes them in hf2gguf's order: byte-identical to today's hf2gguf (default layout, and
    --match-upstream's, which equals upstream b11434's conversion up to hf2gguf's general.base_model keys)."""
    from dspark_convert import convert
    from dspark_convert.upgrade import config_keys

    CONFIG_KEYS = config_keys()

    draft = _dspark_with_config_keys(qwen3_group, tmp_path, case)
    target = qwen3_group / "target"
    up, today = tmp_path / "up.gguf", tmp_path / "today.gguf"
    convert(draft, target, up, outtype="bf16", match_upstream=True)
    convert(draft, target, today, outtype="bf16")
    with read_gguf(up) as f:
        present = [k for k in CONFIG_KEYS if k in f.kvs]
    expected = {"sf-swa": 5, "flat-swa": 3}[case]  # dimension_count, value_scale, window, pattern, causal
    assert len(present) == expected, present
    old = _as_749f688(up, tmp_path / "old.gguf", tuple(CONFIG_KEYS))
    dry = upgrade(old, tmp_path / "x.gguf", target=target, dry_run=True)
    assert any(u.startswith("config keys ") and "sliding_window" in u for u in dry.staleness.unchecked)
    assert not any(c.subject in CONFIG_KEYS for c in dry.changes)
    r = upgrade(old, tmp_path / "new.gguf", target=target, hf=draft, match_upstream=True)
    assert sorted(c.subject for c in r.changes if c.subject in CONFIG_KEYS) == sorted(present)
    assert (tmp_path / "new.gguf").read_bytes() == up.read_bytes()
    upgrade(old, tmp_path / "plain.gguf", target=target, hf=draft)
    assert (tmp_path / "plain.gguf").read_bytes() == today.read_bytes()


# ------------------------------------------------------------------------------- the families added since 749f688
_NEW_FAMILY_CASES = ("v-gemma4-f32", "v-gemma4-tied", "n-dspark-nvfp4", "n-dspark-nvfp4-mixed", "n-dflash-mimo-mask",
                     "n-dflash2", "n-dflash2-scaled")


@pytest.mark.parametrize("case", _NEW_FAMILY_CASES)
def test_new_family_file_of_today_is_copied(case: str, qwen3_group: Path, tmp_path: Path) -> None:
    """Gemma4 DSpark (b11223+, the class arrived with its keys: the generic DFlash config rules must not touch it;
    v-gemma4-f32's proportional partial rotary is its own), ModelOpt NVFP4 DSpark, MiMo DFlash and DFlash2: a file
    hf2gguf writes today (plain and --match-upstream) upgrades to itself byte for byte, with --target and --hf."""
    from gemma4_drafts import make

    from dspark_convert import convert

    if case.startswith("v-gemma4"):
        draft, target = make(tmp_path, case)
    else:
        draft, target = qwen3_group / case, qwen3_group / "target"
    for mu in (False, True):
        today = tmp_path / f"today.{mu}.gguf"
        convert(draft, target, today, outtype="bf16", match_upstream=mu)
        for hf in (None, draft):
            new = tmp_path / f"new.{mu}.{hf is None}.gguf"
            r = upgrade(today, new, target=target, hf=hf, match_upstream=mu)
            assert r.changes == [], (mu, hf, [str(c) for c in r.changes])
            assert new.read_bytes() == today.read_bytes(), (mu, hf)


def test_mimo_before_b11334_is_refused(qwen3_group: Path, tmp_path: Path) -> None:
    """A MiMo DFlash file as converters before b11334 wrote it (no token_embd / output built from mask_embedding.pt,
    no partial-rotary dimension count): the file alone cannot tell it from a plain DFlash file (listed as not
    checked); with --hf the checkpoint's mask_embedding.pt shows it, and the upgrade is refused in one line naming
    the missing tensor, the file that gives it and the command; nothing is written."""
    from dspark_convert import convert

    case = qwen3_group / "n-dflash-mimo-mask"
    today = tmp_path / "today.gguf"
    convert(case, qwen3_group / "target", today, outtype="bf16", match_upstream=True)
    with read_gguf(today) as f:
        plan = plan_upgrade(f, match_upstream=True)
        assert plan.changes == [] and {"token_embd.weight", "output.weight"} <= {t.name for t in f.tensors}
        plan.pieces = [p for p in plan.pieces if p.spec.name not in ("token_embd.weight", "output.weight")]
        plan.kvs = [k for k in plan.kvs if k.name != "dflash.rope.dimension_count"]
        _relabel(plan)
        write_upgrade(plan, f, tmp_path / "old.gguf")
    dry = upgrade(tmp_path / "old.gguf", tmp_path / "x.gguf", target=qwen3_group / "target", dry_run=True)
    assert any(u.startswith("token_embd.weight + output.weight of a MiMo draft") for u in dry.staleness.unchecked)
    new = tmp_path / "new.gguf"
    with pytest.raises(ConvertError) as e:
        upgrade(tmp_path / "old.gguf", new, target=qwen3_group / "target", hf=case, match_upstream=True)
    msg = str(e.value)
    assert "\n" not in msg and "token_embd.weight" in msg and "mask_embedding.pt" in msg and "hf2gguf" in msg
    assert not new.exists()


@pytest.mark.parametrize("era", ["b10662", "b10705"])
def test_interleaved_b_from_double_permutation_eras(era: str, qwen3_group: Path, golden_dir: Path,
                                                    tmp_path: Path) -> None:
    """n-dspark-interleaved-b (SpecForge nested, rope_is_neox_style: false) as upstream b10662-b10704 wrote it (q/k
    rows permuted twice, no has_confidence_head) and as b10705-b11222 did (twice, with has_confidence_head): --hf
    proves the double permutation and the upgrade is upstream b11434's file; the user's word (--from-revision
    b10900 --rope-interleaved) gives the same bytes."""
    from dspark_convert import convert

    case = qwen3_group / "n-dspark-interleaved-b"
    today = tmp_path / "today.gguf"
    convert(case, qwen3_group / "target", today, outtype="bf16", match_upstream=True)
    expected = json.loads((golden_dir / "manifests-b11434" / "n-dspark-interleaved-b.bf16.json").read_text())
    assert compare(today, expected) == []
    base = _as_749f688(today, tmp_path / "a.gguf") if era == "b10662" else today
    with read_gguf(base) as f:
        hd = f.value("dflash.attention.key_length")
        plan = plan_upgrade(f, match_upstream=True) if era == "b10705" else None
        if plan is None:  # the b10662 base is stale (has_confidence_head): copy it as it is
            from dspark_convert.staleness import detect_staleness
            from dspark_convert.upgrade import UpgradePlan, _kv_of

            kvs = [_kv_of(f, n) for n in f.kvs]
            pieces = [Piece(TensorSpec(t.name, t.shape, t.qtype), copy=t) for t in f.tensors]
            plan = UpgradePlan(f.arch or "", kvs, pieces, [], detect_staleness(f), kept={k.name: k for k in kvs})
        for p in plan.pieces:
            if p.spec.name.endswith((".attn_q.weight", ".attn_k.weight", ".attn_q_norm.weight", ".attn_k_norm.weight")):
                assert p.copy is not None
                p.perm = _forward_neox(p.copy.shape[0], hd)
        write_upgrade(plan, f, tmp_path / "old.gguf")
    r = upgrade(tmp_path / "old.gguf", tmp_path / "new.gguf", target=qwen3_group / "target", hf=case,
                match_upstream=True)
    assert [c.subject for c in r.changes] == (["dflash.has_confidence_head"] * (era == "b10662")
                                              + ["blk.*.attn_{q,k}{,_norm}.weight"])
    assert (tmp_path / "new.gguf").read_bytes() == today.read_bytes()
    upgrade(tmp_path / "old.gguf", tmp_path / "user.gguf", target=qwen3_group / "target", from_revision="b10900",
            rope_interleaved=True, match_upstream=True, no_embed_tokens=True)
    assert (tmp_path / "user.gguf").read_bytes() == today.read_bytes()


def test_dsv4_dspark_with_checkpoint_is_left_alone(old_file, golden_inputs: Path, tmp_path: Path) -> None:
    """A DeepSeek-V4 DSpark file: upstream's converter for it is not a DFlashModel, so --hf adds no DFlash config
    key: the upgrade with --hf is the one without (byte for byte), and a file of today is copied as it is."""
    old = old_file("dspark-dsv4", "bf16")
    target = _target(golden_inputs, "dspark-dsv4")
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    ra = upgrade(old, a, target=target)
    rb = upgrade(old, b, target=target, hf=golden_inputs / "dspark-dsv4")
    assert rb.changes == ra.changes == []  # the 749f688 layout of this family is today's
    assert b.read_bytes() == a.read_bytes()
    r = upgrade(a, tmp_path / "c.gguf", target=target, hf=golden_inputs / "dspark-dsv4")
    assert r.changes == [] and (tmp_path / "c.gguf").read_bytes() == a.read_bytes()
    assert not any(u.startswith("config keys") for u in r.staleness.unchecked)


# ---------------------------------------------------------------------------------------------- the rules' home
def test_every_variant_has_upgrade_rules() -> None:
    """The driver asks the registry: a variant's rules are its ``upgrade`` role's, else the refined variant's, else
    the base rules (none); the lineage's config-key rules belong to the variants whose converters follow the
    lineage's config schema, and ``upgrade.config_keys()`` is their union."""
    from dspark_convert.registry import BY_NAME, VARIANTS
    from dspark_convert.roles.upgrade import UpgradeRules
    from dspark_convert.staleness import variant_rules
    from dspark_convert.upgrade import config_keys

    CONFIG_KEYS = config_keys()

    assert all(isinstance(variant_rules(v.name), UpgradeRules) for v in VARIANTS)
    rules = {v.name: variant_rules(v.name) for v in VARIANTS}
    assert type(rules["eagle3"]) is UpgradeRules and not BY_NAME["eagle3"].has_role("upgrade")     # the base rules
    assert rules["dflash2"] is BY_NAME["dflash"].role("upgrade").RULES                              # the refined's
    keys = {v.name: variant_rules(v.name).config_keys for v in VARIANTS}
    assert {n: len(k) for n, k in keys.items()} == {"dsv4": 0, "gemma4": 0, "dflash2": 5, "dflash": 5,
                                                       "gemma4_assistant": 0, "eagle3": 0, "mtp": 0}
    assert CONFIG_KEYS == keys["dflash"] == keys["dflash2"]
    assert CONFIG_KEYS[0] == "dflash.rope.dimension_count" and CONFIG_KEYS[-1] == "dflash.attention.causal"


class _Header:
    """A header from a dict (the :class:`~dspark_convert.staleness.Header` protocol)."""

    def __init__(self, kvs: dict[str, object], tensors: tuple[str, ...] = ()) -> None:
        from types import SimpleNamespace

        self.kvs = kvs
        self.tensors = [SimpleNamespace(name=n) for n in tensors]
        self.arch = kvs.get("general.architecture")

    def value(self, key: str, default: object = None) -> object:
        return self.kvs.get(key, default)


def test_a_file_no_variant_loads_gets_only_the_items_of_every_file() -> None:
    """A ``llama`` file: no variant's rules apply (the base rules: nothing), only the tokenizer flags."""
    from dspark_convert.roles.upgrade import TargetInfo, UpgradeRules
    from dspark_convert.staleness import rules_for

    h = _Header({"general.architecture": "llama", "tokenizer.ggml.model": "gpt2"}, ("token_embd.weight",))
    assert type(rules_for(h)) is UpgradeRules
    st = detect_staleness(h)
    assert st.stale == [] and st.unchecked == ["tokenizer add_bos/add_eos (post-processor rule)"]
    assert st.revisions == ("749f688", None)
    target = TargetInfo("t", config={"architectures": ["Gemma3ForCausalLM"]}, _add={"bos": True})
    st = detect_staleness(h, target)  # a Gemma target decides nothing for a file no variant loads but the flags
    assert [(s.subject, s.since, s.needs) for s in st.stale] == [("tokenizer.ggml.add_bos_token", "b11223", "target")]
    assert st.revisions == ("749f688", "b11223")


def test_refining_variants_keep_their_own_keys() -> None:
    """The same ``dflash`` header lists the lineage's config keys as unchecked, unless a refining variant whose
    converter writes its own keys (the registry's answer: hyper-connections) loads it."""
    kvs = {"general.architecture": "dflash", "dflash.attention.key_length": 8}
    plain = detect_staleness(_Header(kvs, ("fc.weight",)))
    assert plain.unchecked[0].startswith("config keys rope.dimension_count, attention.value_scale")
    assert plain.unchecked[-2:] == ["dflash.rope.dimension_sections (M-RoPE target?)",
                                    "dflash.embedding_scale (Gemma target?)"]
    own = detect_staleness(_Header({**kvs, "dflash.hyper_connection.count": 4}, ("fc.weight",)))
    assert own.unchecked == plain.unchecked[-2:] and own.stale == []


def test_check_does_not_import_the_conversion(old_file) -> None:
    """``check FILE``'s staleness warning comes from :mod:`dspark_convert.staleness` (below check): neither
    ``upgrade`` nor ``hf2gguf`` is imported (the import cycle check -> upgrade -> hf2gguf -> check is gone)."""
    import subprocess
    import sys

    old = old_file("dspark-reduced", "bf16")
    code = ("import sys; from dspark_convert.check import stale_layout; "
            f"print([f.subject for f in stale_layout({str(old)!r})]); "
            "print(sorted(m for m in ('dspark_convert.upgrade', 'dspark_convert.hf2gguf') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.splitlines() == ["['dflash.has_confidence_head']", "[]"]


def test_dflash2_with_own_embedding_gets_the_head_hf2gguf_adds(tmp_path: Path) -> None:
    """An upstream-layout DFlash2 file that keeps its own token_embd without output.weight, on an untied target:
    ``check --target`` says to add output.weight with upgrade, and upgrade does: the result equals a fresh default
    conversion in every key and tensor; --match-upstream leaves the file as it is."""
    import shutil

    from conftest import FIXTURES, TARGET
    from golden_manifest import describe
    from safetensors.torch import load_file, save_file

    from dspark_convert import convert

    own = tmp_path / "own"
    shutil.copytree(FIXTURES / "dflash2-zlab", own)

    w = load_file(own / "model.safetensors")
    w["embed_tokens.weight"] = load_file(TARGET / "model.safetensors")["model.embed_tokens.weight"].clone()
    save_file(w, own / "model.safetensors", metadata={"format": "pt"})
    up, fresh = tmp_path / "up.gguf", tmp_path / "fresh.gguf"
    convert(own, TARGET, up, outtype="bf16", match_upstream=True)
    convert(own, TARGET, fresh, outtype="bf16")
    assert "output.weight" not in [t["name"] for t in describe(up)["tensors"]]
    new = tmp_path / "new.gguf"
    r = upgrade(up, new, target=TARGET)
    assert [c.subject for c in r.changes] == ["output.weight"]
    a, b = describe(new), describe(fresh)
    assert a["tensors"] == b["tensors"]
    assert {k: v for k, v in a["kv"].items() if not k.startswith("general.")} == {
        k: v for k, v in b["kv"].items() if not k.startswith("general.")}
    same = tmp_path / "same.gguf"
    upgrade(up, same, target=TARGET, match_upstream=True)
    assert same.read_bytes() == up.read_bytes()
