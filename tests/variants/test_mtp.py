"""MTP sidecars from the checkpoint (``hf2gguf TARGET --mtp``): byte parity with upstream b11434's ``--mtp`` on the
tiny checkpoints of tests/mtp_checkpoints.py (Qwen3.5 dense BF16 / F32-tied, ConditionalGeneration, Qwen3.5 MoE with
per-expert MTP experts, Qwen3-Next) and on three of tests/mtp_makers.py (transformers' fused MTP experts, F16
checkpoints; manifests ``tests/data/mtp/<family>-<outtype>-mtp.json``), reading only the shards that hold the head, the loader rules, the one-line
refusals, and (``llama`` tier) speculative greedy == plain greedy in llama-server with ``--spec-type draft-mtp``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from golden_manifest import compare
from mtp_checkpoints import CASES, ORACLE, OUTTYPES, make, upstream
from mtp_family_kit import (
    assert_head_required,
    assert_identical_to_upstream,
    assert_verify_proves_and_catches,
    checkpoints,
)

from dspark_convert import convert
from dspark_convert.check import check_file, check_plan, errors
from dspark_convert.errors import ConvertError
from dspark_convert.gguffile.reader import read_gguf
from dspark_convert.hf2gguf.conversion import plan_conversion
from dspark_convert.registry import gguf_variant
from dspark_convert.roles.convert import ConvertOptions


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mtp")
    for name in CASES:
        make(out, name)
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_sidecar_is_byte_identical_to_upstream_mtp(ckpts: Path, case: str, tmp_path: Path) -> None:
    """Every tensor (bytes, type, shape, order) and every non-informational key, at the four outtypes."""
    for outtype in OUTTYPES:
        out = tmp_path / f"{case}.{outtype}.gguf"
        r = convert(ckpts / case, None, out, outtype=outtype, mtp=True)
        assert errors(r.findings) == []
        assert compare(out, json.loads((ORACLE / f"{case}.{outtype}.json").read_text())) == [], (case, outtype)
        assert errors(check_file(out)) == []
        f = read_gguf(out)
        names = [t.name for t in f.tensors]
        assert gguf_variant(lambda k, f=f: f.kvs[k].value if k in f.kvs else None, names).name == "mtp"
        f.close()


def test_only_the_shards_holding_the_head_are_read(ckpts: Path, tmp_path: Path) -> None:
    """Shard 2 holds only trunk layers: deleted, the conversion is the same file, and the summary says so."""
    src = ckpts / "mtp-qwen35-moe"
    cut = tmp_path / "cut"
    cut.mkdir()
    for p in src.iterdir():
        if p.name != "model-00002-of-00004.safetensors":
            shutil.copyfile(p, cut / p.name)
    out = tmp_path / "cut.gguf"
    r = convert(cut, None, out, outtype="bf16", mtp=True)
    assert compare(out, json.loads((ORACLE / "mtp-qwen35-moe.bf16.json").read_text())) == []
    note = next(n for n in r.notes if n.startswith("read "))
    assert note.startswith("read 3 of 4 shards") and "skipped 1" in note


def test_default_name_has_the_mtp_prefix(ckpts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = convert(ckpts / "mtp-qwen35-dense", None, outtype="q8_0", mtp=True)
    assert r.path is not None and r.path.name == "mtp-qwen35-dense-Q8_0.gguf"  # the prefix is not doubled
    assert r.path.is_file()


def test_without_the_flag_it_is_a_target(ckpts: Path, tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match=r"is a target model checkpoint with an MTP head; pass --mtp"):
        convert(ckpts / "mtp-qwen35-dense", None, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists()


def test_mtp_on_a_draft_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match=r"^--mtp: .* is not a target checkpoint whose MTP head is written here"):
        convert("fixtures/dspark-qwen3", "fixtures/target-qwen3", tmp_path / "x.gguf", mtp=True)


def test_a_class_not_written_yet_is_refused_naming_it(tmp_path: Path) -> None:
    ck = tmp_path / "step"
    ck.mkdir()
    (ck / "config.json").write_text(json.dumps({"architectures": ["Step3p5ForCausalLM"], "num_hidden_layers": 1}))
    from draft_kit import Maker, save_safetensors

    save_safetensors(ck / "model.safetensors", {"model.layers.1.eh_proj.weight": Maker(0, "BF16").t(4, 8)})
    with pytest.raises(ConvertError, match=r"Step3p5ForCausalLM: the MTP sidecar of Step-3.5/3.7 \(step35\) is not "
                                           r"written by this version"):
        convert(ck, None, tmp_path / "x.gguf", mtp=True)


def test_written_and_refused_classes_are_the_tables_mtp_exports() -> None:
    """Every target class upstream exports with ``--mtp`` is either written (the Qwen mixin's classes, GLM-4.5's
    ``Glm4MoeModel``, GLM-5's ``GlmMoeDsaModel``, GLM-4.7-Flash's ``Glm4MoeLiteModel``, DeepSeek-V3.2's ``DeepseekV32Model``, Nemotron-H's ``NemotronHModel``,
    DeepSeek-V4's ``DeepseekV4Model``, MiMo-V2's ``MimoV2Model``) or refused with a reason; nothing else is claimed.
    The 26 classes and 16 GGUF architectures of b11434: 14 classes (10 architectures) written, 12 refused. DeepSeek-V4's class is recognised by
    its MTP head, not by name (its DSpark drafts declare the same class)."""
    from dspark_convert.tokenizer.targets import table
    from dspark_convert.variants.mtp import deepseek4, deepseek32, glm, glm_dsa, glm_lite, mimo2, mtp, nemotron, qwen

    rows = table()["architectures"]
    exported = {n for n, r in rows.items() if r.get("mtp_export") and r["role"] == "target"}
    families = (qwen, glm, glm_dsa, glm_lite, deepseek32, nemotron, deepseek4, mimo2)
    written = {a for fam in families for a in fam.ARCHS}
    assert written | set(mtp.REFUSED) == exported and not written & set(mtp.REFUSED)
    assert set(mtp.ARCHITECTURES) == written - set(deepseek4.ARCHS) and set(mtp.WRITTEN) == written
    assert len(written) == sum(len(fam.ARCHS) for fam in families)  # no class in two
    assert sorted(qwen.ARCHS.values()) == ["qwen35", "qwen35", "qwen35moe", "qwen35moe", "qwen3next"]
    assert glm.ARCHS == {"Glm4MoeForCausalLM": "glm4moe", "Glm4vMoeForConditionalGeneration": "glm4moe"}
    assert glm_dsa.ARCHS == {"GlmMoeDsaForCausalLM": "glm-dsa"}
    assert glm_lite.ARCHS == {"Glm4MoeLiteForCausalLM": "deepseek2"}
    assert deepseek32.ARCHS == {"DeepseekV32ForCausalLM": "deepseek32"}
    # the table's gguf_arch is nemotron_h (upstream picks nemotron_h_moe at run time): only the MoE one has MTP
    assert nemotron.ARCHS == {"NemotronHForCausalLM": "nemotron_h_moe"}
    assert deepseek4.ARCHS == {"DeepseekV4ForCausalLM": "deepseek4"}
    assert mimo2.ARCHS == {"MiMoV2FlashForCausalLM": "mimo2", "MiMoV2ForCausalLM": "mimo2"}
    assert len(exported) == 26 and len({rows[n]["gguf_arch"] for n in exported}) == 16
    assert len(written) == 14 and len(mtp.REFUSED) == 12
    assert len({rows[n]["gguf_arch"] for n in written}) == 10
    assert not {"glm4moe", "glm-dsa", "deepseek2", "deepseek32", "nemotron_h", "deepseek4", "mimo2"} & {
        rows[n]["gguf_arch"] for n in mtp.REFUSED}
    assert all("(" in why and not why.startswith(n) for n, why in mtp.REFUSED.items())  # a written reason each


def test_declared_mtp_layers_must_match_the_tensors(ckpts: Path, tmp_path: Path) -> None:
    ck = tmp_path / "bad"
    ck.mkdir()
    for p in (ckpts / "mtp-qwen35-dense").iterdir():
        if p.name != "config.json":
            shutil.copyfile(p, ck / p.name)
    cfg = json.loads((ckpts / "mtp-qwen35-dense" / "config.json").read_text())
    cfg["mtp_num_hidden_layers"] = 2
    (ck / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConvertError, match=r"mtp_num_hidden_layers is 2 but the checkpoint has mtp.layers.\* tensors "
                                           r"for 1 layer"):
        convert(ck, None, tmp_path / "x.gguf", mtp=True)


@pytest.mark.parametrize("drop", ["blk.4.nextn.eh_proj.weight", "blk.4.ffn_down_exps.weight", "token_embd.weight"])
def test_loader_rules_require_the_head(ckpts: Path, drop: str) -> None:
    assert_head_required(ckpts / "mtp-qwen35-moe", drop)


def test_loader_rules_check_the_recurrent_array_and_nextn(ckpts: Path) -> None:
    from gguf import GGUFValueType as VT

    from dspark_convert.plan import KV

    planned = plan_conversion(ckpts / "mtp-qwen35-dense", None, options=ConvertOptions(outtype="bf16",
                                                                                     upstream_flags=frozenset({"mtp"})))
    try:
        plan = planned.plan
        i = next(i for i, k in enumerate(plan.kvs) if k.name == "qwen35.attention.recurrent_layers")
        plan.kvs[i] = KV("qwen35.attention.recurrent_layers", VT.ARRAY, [True, True, True, False], VT.BOOL)
        assert ("qwen35.attention.recurrent_layers", "array-length") in [(f.subject, f.rule) for f in check_plan(plan)]
    finally:
        planned.close()


@pytest.mark.llama
@pytest.mark.parametrize("case", ["mtp-qwen35-dense", "mtp-qwen35-moe"])
def test_llama_server_drafts_with_the_sidecar(ckpts: Path, case: str, tmp_path: Path,
                                              llama_bin: tuple[Path, Path]) -> None:
    """Target: upstream's ``--no-mtp`` file of the same checkpoint; draft: our sidecar. The head drafts (draft_n > 0)
    and speculative greedy equals plain greedy."""
    from llama_support import N_PREDICT, PROMPT

    from dspark_convert.llamacpp.server import LlamaServer

    binary, tree = llama_bin
    trunk = upstream(tree, ckpts / case, tmp_path / "trunk.gguf", "f32", "--no-mtp")
    side = tmp_path / "mtp.gguf"
    convert(ckpts / case, None, side, outtype="f32", mtp=True)
    with LlamaServer(binary, trunk) as s:
        plain = s.complete(PROMPT, N_PREDICT)
    with LlamaServer(binary, trunk, draft=side, spec_type="draft-mtp", n_max=2) as s:
        spec = s.complete(PROMPT, N_PREDICT)
    assert spec.tokens == plain.tokens
    assert len(spec.tokens) == N_PREDICT and spec.draft_n > 0


@pytest.mark.parametrize("case", ["mtp-qwen35-moe", "mtp-qwen35-cg"])
def test_verify_proves_every_tensor_and_catches_a_changed_one(ckpts: Path, case: str, tmp_path: Path) -> None:
    """verify: every tensor exact against the checkpoint (bytes after the type's rounding), full accounting; one
    changed value in the MTP attention fails that tensor by name."""
    assert_verify_proves_and_catches(ckpts / case, tmp_path, ("q8_0", "bf16"), lambda n: n.endswith("attn_q.weight"))


def test_verify_reports_a_renamed_or_reshaped_tensor_in_its_row(ckpts: Path, tmp_path: Path) -> None:
    """A sidecar whose ``token_embd.weight`` is renamed (a name upstream's ``--mtp`` never writes) or declares half its
    rows: verify fails on that tensor with a row that says why (no checkpoint tensor becomes the name; the value
    counts), not with an exception."""
    import struct

    from dspark_convert.verify import verify

    out = tmp_path / "mtp.gguf"
    convert(ckpts / "mtp-qwen35-dense", None, out, outtype="f32", mtp=True)
    data = out.read_bytes()
    key = struct.pack("<Q", len("token_embd.weight")) + b"token_embd.weight"
    at = data.index(key) + len(key)
    n_dims, ne0, ne1 = struct.unpack_from("<IQQ", data, at)
    assert n_dims == 2 and ne0 > 0 and ne1 % 2 == 0

    renamed = tmp_path / "renamed.gguf"
    renamed.write_bytes(data.replace(key, key[:-1] + b"x", 1))
    r = verify(renamed, ckpts / "mtp-qwen35-dense", None, quality=False)
    bad = [(o.name, o.detail) for o in r.outputs if not o.passed]
    assert not r.passed and ("tensors", "token_embd.weighx: no checkpoint tensor becomes it under upstream's --mtp "
                             "rules") in bad

    half = bytearray(data)
    struct.pack_into("<Q", half, at + 12, ne1 // 2)
    halved = tmp_path / "half.gguf"
    halved.write_bytes(bytes(half))
    r = verify(halved, ckpts / "mtp-qwen35-dense", None, quality=False)
    bad = [(o.name, o.detail) for o in r.outputs if not o.passed]
    assert not r.passed and bad == [("token_embd.weight", f"{ne0 * ne1 // 2:,} values; the checkpoint's "
                                     f"model.embed_tokens.weight make {ne0 * ne1:,}")]


# ------------------------------------------------------------------------------------------------ tests/mtp_makers.py
#: tests/mtp_makers.py families whose upstream ``--mtp`` files tests/data/mtp describes at the four outtypes (made with
#: ``python tests/mtp_makers.py OUT --only FAMILY --outtype bf16 --outtype f16 --outtype f32 --outtype q8_0 --mode mtp
#: --manifests``) -> what each proves
MAKER_CASES = {
    "qwen3next": "transformers' fused MTP experts (mlp.experts.gate_up_proj halved into gate / up, down_proj kept)",
    "qwen35-f16": "an F16 checkpoint: the norms' + 1 taken in float16 (rounded to half); tied embeddings, no output",
    "qwen35moe-f16-fused": "F16, fused MTP experts of width 48 (the down stack F16 under q8_0), top 4 of 8, tied",
}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return checkpoints(tmp_path_factory, MAKER_CASES, "mtp-makers")


@pytest.mark.parametrize("fam", sorted(MAKER_CASES))
def test_maker_layouts_are_byte_identical_to_upstream_mtp(made: dict[str, Path], fam: str, tmp_path: Path) -> None:
    """Every KV and tensor equal to upstream's ``--mtp`` file at bf16, f16, f32 and q8_0."""
    assert_identical_to_upstream(made[fam], fam, tmp_path)


def test_f16_norms_add_one_in_half_precision(made: dict[str, Path], tmp_path: Path) -> None:
    """``output_norm`` of the F16 checkpoint is ``float16(w + 1)`` widened (upstream keeps F16 tensors F16 until the
    F32 write), which differs from ``w + 1`` in float32 on most values."""
    import numpy as np
    from safetensors.numpy import load_file

    w = load_file(str(made["qwen35-f16"] / "model.safetensors"))["model.norm.weight"]
    assert w.dtype == np.float16
    out = tmp_path / "f16.gguf"
    convert(made["qwen35-f16"], None, out, outtype="f32", mtp=True)
    f = read_gguf(out)
    got = np.frombuffer(bytes(f.tensor_bytes("output_norm.weight")), np.float32)
    f.close()
    half = (w + np.float16(1)).astype(np.float32)
    assert got.tolist() == half.tolist()
    assert (half != w.astype(np.float32) + np.float32(1)).sum() > len(w) // 2


def test_fused_mtp_experts_are_split_in_halves(made: dict[str, Path], tmp_path: Path) -> None:
    """``gate_up_proj`` ``[8, 96, 192]`` -> ``ffn_gate_exps`` = each expert's first 48 rows, ``ffn_up_exps`` its last
    48; ``down_proj`` ``[8, 192, 48]`` -> ``ffn_down_exps`` as it is (F32 outtype: the values themselves)."""
    import numpy as np
    from safetensors.numpy import load_file

    st = load_file(str(made["qwen35moe-f16-fused"] / "model.safetensors"))
    gate_up, down = st["mtp.layers.0.mlp.experts.gate_up_proj"], st["mtp.layers.0.mlp.experts.down_proj"]
    assert gate_up.shape == (8, 96, 192) and down.shape == (8, 192, 48)
    out = tmp_path / "fused.gguf"
    convert(made["qwen35moe-f16-fused"], None, out, outtype="f32", mtp=True)
    f = read_gguf(out)
    got = {n: np.frombuffer(bytes(f.tensor_bytes(f"blk.2.ffn_{n}_exps.weight")), np.float32) for n in ("gate", "up", "down")}
    ne = {t.name: list(t.ne) for t in f.tensors}
    f.close()
    assert ne["blk.2.ffn_gate_exps.weight"] == ne["blk.2.ffn_up_exps.weight"] == [192, 48, 8]
    assert ne["blk.2.ffn_down_exps.weight"] == [48, 192, 8]
    assert got["gate"].tolist() == gate_up[:, :48].astype(np.float32).ravel().tolist()
    assert got["up"].tolist() == gate_up[:, 48:].astype(np.float32).ravel().tolist()
    assert got["down"].tolist() == down.astype(np.float32).ravel().tolist()


def test_verify_proves_f16_norms_and_fused_experts(made: dict[str, Path], tmp_path: Path) -> None:
    """verify rebuilds the half-precision ``+ 1`` and the fused halves: exact at q8_0 and f16, and one changed value
    of ``ffn_up_exps`` fails that tensor by name."""
    assert_verify_proves_and_catches(made["qwen35moe-f16-fused"], tmp_path, ("q8_0", "f16"),
                                     lambda n: n.endswith("ffn_up_exps.weight"))


def test_more_than_one_qwen_mtp_layer_is_refused_in_one_line(tmp_path: Path) -> None:
    """Two MTP layers in the Qwen layout: the one ``mtp.fc`` makes block n's NextN tensors only, which llama.cpp's
    loader requires of every MTP block; upstream writes that unloadable file, we refuse it and write nothing."""
    import mtp_makers

    ck = mtp_makers.make_qwen35_dense(tmp_path / "two", 0, mtp_makers.QwenDims(layers=2, full_interval=2, mtp_layers=2))
    with pytest.raises(ConvertError, match=r": 2 MTP layers: .* llama.cpp's qwen35 loader requires them in every MTP "
                                           r"block \(upstream b11434's --mtp writes that file; it does not load\)$") as e:
        convert(ck, None, tmp_path / "x.gguf", mtp=True)
    assert "\n" not in str(e.value) and not (tmp_path / "x.gguf").exists()
