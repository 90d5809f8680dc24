"""The checks every MTP family's test file runs on its tiny checkpoints (tests/mtp_makers.py): byte parity with
upstream's ``--mtp`` manifests at the four outtypes, ``verify`` exact on every tensor and failing a one-byte change
by the tensor's name, and (``llama`` tier) speculative greedy == plain greedy in llama-server beside upstream's
``--no-mtp`` trunk. Each family's file keeps what is its own (cases, refusals, loader rules, the manifests' facts).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from golden_manifest import describe

from dspark_convert import convert
from dspark_convert.check import check_file, errors
from dspark_convert.gguffile.reader import read_gguf
from dspark_convert.registry import gguf_variant

MANIFESTS = Path(__file__).resolve().parent / "data" / "mtp"
OUTTYPES = ("bf16", "f16", "f32", "q8_0")


def manifest(name: str) -> dict[str, Any]:
    """The committed oracle manifest ``tests/data/mtp/NAME.json`` (upstream's own file, described)."""
    return json.loads((MANIFESTS / f"{name}.json").read_text())


def checkpoints(factory: pytest.TempPathFactory, families: Iterable[str], label: str) -> dict[str, Path]:
    """family -> its tiny checkpoint (made from a seed by tests/mtp_makers.py, as the manifests' were)."""
    import mtp_makers

    root = factory.mktemp(label)
    out = {}
    for fam in families:
        maker, folder = mtp_makers.MAKERS[fam]
        out[fam] = maker(root / folder)
    return out


def assert_identical_to_upstream(ckpt: Path, fam: str, tmp_path: Path, *, match_upstream: bool = False) -> None:
    """Every KV (general.* included, in order) and every tensor (bytes, type, shape, order) equal to upstream's
    ``--mtp`` file at the four outtypes; ``check`` passes and the file is the ``mtp`` variant. ``match_upstream``:
    converted with ``--match-upstream``, where ``check``'s only errors are those upstream's own layout has."""
    from dspark_convert.check import upstream_writes_unloadable

    for outtype in OUTTYPES:
        out = tmp_path / f"{fam}.{outtype}.gguf"
        r = convert(ckpt, None, out, outtype=outtype, mtp=True, match_upstream=match_upstream)
        assert [f for f in errors(r.findings) if not (match_upstream and upstream_writes_unloadable(f))] == []
        assert describe(out) == manifest(f"{fam}-{outtype}-mtp"), (fam, outtype)
        assert [f for f in errors(check_file(out)) if not (match_upstream and upstream_writes_unloadable(f))] == []
        f = read_gguf(out)
        names = [t.name for t in f.tensors]
        assert gguf_variant(lambda k, f=f: f.kvs[k].value if k in f.kvs else None, names).name == "mtp"
        f.close()


def assert_head_required(ckpt: Path, drop: str, want: str | None = None) -> None:
    """The bf16 ``--mtp`` plan of ``ckpt`` passes the loader rules; without tensor ``drop`` the rules find a
    ``required-tensor`` naming ``want`` (``drop`` unless given)."""
    from dspark_convert.check import check_plan
    from dspark_convert.hf2gguf.conversion import plan_conversion
    from dspark_convert.roles.convert import ConvertOptions

    planned = plan_conversion(ckpt, None, options=ConvertOptions(outtype="bf16", upstream_flags=frozenset({"mtp"})))
    try:
        plan = planned.plan
        assert errors(check_plan(plan)) == []
        plan.tensors = [t for t in plan.tensors if t.name != drop]
        found = [(f.subject, f.rule) for f in errors(check_plan(plan))]
        assert (want or drop, "required-tensor") in found
    finally:
        planned.close()


def assert_verify_proves_and_catches(ckpt: Path, tmp_path: Path, outtypes: Iterable[str],
                                     pick: Callable[[str], bool], *, match_upstream: bool = False) -> None:
    """``verify``: every tensor exact against the checkpoint at each outtype, full accounting; one BF16 value's low
    bits changed in the first tensor ``pick`` selects fail that tensor, and only it, by name (``match_upstream``:
    files converted with ``--match-upstream``)."""
    from dspark_convert.verify import verify

    out = tmp_path / "none.gguf"
    for outtype in outtypes:
        out = tmp_path / f"{outtype}.gguf"
        convert(ckpt, None, out, outtype=outtype, mtp=True, match_upstream=match_upstream)
        r = verify(out, ckpt, None, quality=False)
        assert r.passed and all(o.passed and o.grade == "exact" for o in r.outputs), outtype
        assert len(r.outputs) == len(read_gguf(out).tensors)
    f = read_gguf(out)
    name = next(t.name for t in f.tensors if pick(t.name))
    blob = bytes(f.tensor_bytes(name))
    f.close()
    data = bytearray(out.read_bytes())
    at = data.find(blob)
    assert at > 0 and data.find(blob, at + 1) == -1
    data[at + 1] ^= 0x01  # one BF16 value's low bits
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(bytes(data))
    r = verify(bad, ckpt, None, quality=False)
    assert not r.passed
    assert [o.name for o in r.outputs if not o.passed] == [name]


def assert_llama_server_drafts_losslessly(ckpt: Path, tmp_path: Path, llama_bin: tuple[Path, Path]) -> None:
    """Target: upstream's ``--no-mtp`` f32 file of the checkpoint; draft: our f32 sidecar. The MTP block drafts
    (draft_n > 0) and speculative greedy equals plain greedy."""
    import mtp_makers

    from dspark_convert.llamacpp.server import LlamaServer

    binary, tree = llama_bin
    trunk = mtp_makers.upstream_convert(ckpt, tmp_path / "trunk.gguf", "f32", ("--no-mtp",), tree=tree)
    side = tmp_path / "mtp.gguf"
    convert(ckpt, None, side, outtype="f32", mtp=True)
    prompt = [400, 401, 72, 300, 22, 500, 12, 33]
    mtp_flags = ["--spec-type", "draft-mtp", "--spec-draft-p-min", "0", "--spec-draft-n-max", "3"]
    with LlamaServer(binary, trunk) as s:
        plain = s.complete(prompt, 16)
    with LlamaServer(binary, trunk, extra=["-md", str(side), *mtp_flags]) as s:
        spec = s.complete(prompt, 16)
    assert len(plain.tokens) == 16
    assert spec.tokens == plain.tokens and spec.draft_n > 0


def assert_cli_writes_the_manifest(ckpt: Path, fam: str, tmp_path: Path, summary: str, *, outtype: str = "q8_0",
                                   flags: tuple[str, ...] = ()) -> str:
    """``dspark-convert hf2gguf CKPT --mtp -o OUT --outtype T [flags]`` exits 0, writes the bytes of manifest
    ``<fam>-<T>-mtp`` and says ``summary`` (whitespace folded, as the console wraps it); returns the folded output."""
    from typer.testing import CliRunner

    from dspark_convert.cli import app

    out = tmp_path / "mtp.gguf"
    r = CliRunner().invoke(app, ["hf2gguf", str(ckpt), "--mtp", "-o", str(out), "--outtype", outtype, *flags])
    assert r.exit_code == 0, r.output
    assert describe(out) == manifest(f"{fam}-{outtype}-mtp")
    text = " ".join(r.output.split())
    assert summary in text, text
    return text


def assert_default_name(ckpt: Path, fam: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, *,
                        outtype: str = "q8_0") -> None:
    """Without ``-o`` the sidecar is written in the working folder as ``name``, with the bytes of manifest
    ``<fam>-<outtype>-mtp``."""
    monkeypatch.chdir(tmp_path)
    r = convert(ckpt, None, outtype=outtype, mtp=True)
    assert r.path is not None and r.path.name == name
    assert describe(tmp_path / name) == manifest(f"{fam}-{outtype}-mtp")


def copy_checkpoint(src: Path, dst: Path, config: dict[str, Any] | None = None,
                    edit: Callable[[dict[str, Any]], None] | None = None, *, delete: object = ...,
                    shard: str = "model-00003-of-00003.safetensors") -> Path:
    """A copy of sharded checkpoint ``src`` at ``dst``: ``config`` merged into its config.json (a value ``delete``
    removes the key), ``edit`` applied to the tensors of ``shard`` in place (their index entries follow)."""
    import shutil

    dst.mkdir()
    for p in src.iterdir():
        shutil.copyfile(p, dst / p.name)
    cfg = json.loads((src / "config.json").read_text())
    for k, v in (config or {}).items():
        if v is delete:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    (dst / "config.json").write_text(json.dumps(cfg))
    if edit is not None:
        from safetensors.torch import load_file, save_file

        tensors = load_file(str(dst / shard))
        edit(tensors)
        save_file(tensors, str(dst / shard), metadata={"format": "pt"})
        index = json.loads((dst / "model.safetensors.index.json").read_text())
        wm = {k: v for k, v in index["weight_map"].items() if v != shard or k in tensors}
        wm.update({k: shard for k in tensors})
        (dst / "model.safetensors.index.json").write_text(json.dumps({**index, "weight_map": wm}))
    return dst
