"""Issue 22, the draft formats upstream b11434 learned: DFlash2 byte parity (public sample + variants of other
dimensions made by tests/new_drafts.py, manifests from upstream b11434), its loader rules in ``check``, and its
one-line refusals.

The public sample is the b11434 set's ``qwen3/`` group (conftest's ``b11434_qwen3``, made by tests/make_golden.py and
checked against ``tests/golden/inputs-b11434.sha256``); its manifests are ``tests/golden/manifests-b11434/n-*.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from golden_manifest import parity
from new_drafts import MIMO_VARIANTS, ORACLE, OUTTYPES, VARIANTS, make

from dspark_convert import convert
from dspark_convert.check import check_file, errors

DFLASH2_CASES = ("n-dflash2", "n-dflash2-scaled")
def _parity(draft: Path, target: Path, manifests: Path, stem: str, tmp: Path, *,
            match_upstream: bool = False) -> dict[str, list[str]]:
    return parity(draft, target, manifests, stem, tmp, OUTTYPES, match_upstream=match_upstream)


@pytest.mark.parametrize("case", DFLASH2_CASES)
def test_dflash2_public_sample_all_outtypes(b11434_qwen3: Path, golden_dir: Path, tmp_path: Path, case: str) -> None:
    assert _parity(b11434_qwen3 / case, b11434_qwen3 / "target", golden_dir / "manifests-b11434", case, tmp_path) == {}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_dflash2_variants_match_upstream(b11434_qwen3: Path, tmp_path: Path, variant: str) -> None:
    """--match-upstream: upstream b11434's bytes at every outtype (v-dflash2-bf16 keeps its own embed_tokens, where
    the default also adds the target's head: the next test)."""
    draft = make(tmp_path, variant)
    assert _parity(draft, b11434_qwen3 / "target", ORACLE, variant, tmp_path, match_upstream=True) == {}


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_dflash2_own_embedding_gets_the_target_head_and_verifies(b11434_qwen3: Path, tmp_path: Path,
                                                                 outtype: str) -> None:
    """A DFlash2 draft that stores embed_tokens (kept as token_embd) on an untied target: upstream writes no
    output.weight, so llama.cpp's loader scores the block and the selector with token_embd (src/models/dflash.cpp:
    TENSOR_DUPLICATED) while the checkpoint scores with the target's lm_head; verify fails that layout. The default
    adds the target's lm_head as output.weight (every other tensor and key byte-identical to upstream's manifest)
    and verifies; --match-upstream keeps upstream's layout, which verify fails on the block logits."""
    import numpy as np
    from gguf import GGUFReader
    from golden_manifest import compare, describe

    draft, target = make(tmp_path, "v-dflash2-bf16"), b11434_qwen3 / "target"
    out = tmp_path / "d.gguf"
    convert(draft, target, out, outtype=outtype)
    manifest = json.loads((ORACLE / f"v-dflash2-bf16.{outtype}.json").read_text())
    got = describe(out)
    assert {k: v for k, v in got["kv"].items() if not k.startswith("general.")} == {
        k: v for k, v in manifest["kv"].items() if not k.startswith("general.")}
    assert [t for t in got["tensors"] if t["name"] != "output.weight"] == manifest["tensors"]
    head = next(t for t in got["tensors"] if t["name"] == "output.weight")
    emb = next(t for t in got["tensors"] if t["name"] == "token_embd.weight")
    assert head["ne"] == emb["ne"] == [32, 129280] and head["type"] == emb["type"]
    if outtype == "f32":  # exactly the target's lm_head
        from safetensors import safe_open

        idx = json.loads((target / "model.safetensors.index.json").read_text())["weight_map"]
        with safe_open(target / idx["lm_head.weight"], "pt") as f:
            want = f.get_tensor("lm_head.weight").float().numpy()
        data = next(t for t in GGUFReader(out).tensors if t.name == "output.weight").data
        assert np.array_equal(np.asarray(data).reshape(want.shape), want)
    passed, rows = _verify_rows(out, draft, target)
    assert passed, rows
    up = tmp_path / "u.gguf"
    convert(draft, target, up, outtype=outtype, match_upstream=True)
    assert compare(up, manifest) == []
    passed, rows = _verify_rows(up, draft, target)
    assert not passed and rows["block logits (scaled, capped)"] is False and rows["layer 0 output"], rows


def test_dflash2_tensor_types(b11434_qwen3: Path, tmp_path: Path) -> None:
    """Base kernels stay F32 at q8_0; 2-D conv projections / codebooks follow the outtype (Q8_0 or F16 fallback)."""
    out = tmp_path / "d2.gguf"
    convert(b11434_qwen3 / "n-dflash2", b11434_qwen3 / "target", out, outtype="q8_0")
    from dspark_convert.gguffile.reader import read_gguf
    f = read_gguf(out)
    types = {t.name: t.type_name for t in f.tensors}
    f.close()
    assert types["blk.0.attn_conv_base"] == "F32" and types["blk.1.ffn_conv_base"] == "F32"
    assert types["selector_predecessor.weight"] == "F16"  # rank 8: rows not a multiple of 32
    assert types["blk.0.attn_conv_proj.weight"] == "Q8_0"  # rows of hidden_size 32
    assert types["selector_hidden.weight"] == "Q8_0"


# ---------------------------------------------------------------------------------------------- verify (DFlash2)
def _verify_rows(gguf: Path, hf: Path, target: Path) -> tuple[bool, dict[str, bool]]:
    from dspark_convert.verify import verify

    r = verify(gguf, hf, target, context=8, quality=False)
    acc = {r.accounting.name: r.accounting.passed} if r.accounting is not None else {}
    return r.passed, {o.name: o.passed for o in r.outputs} | {f"metadata {m.key}": m.passed for m in r.metadata} | acc


@pytest.fixture(scope="module")
def dflash2_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from conftest import FIXTURES, TARGET

    out = tmp_path_factory.mktemp("d2")
    files = {}
    for t in OUTTYPES:
        files[t] = out / f"d2.{t}.gguf"
        convert(FIXTURES / "dflash2-zlab", TARGET, files[t], outtype=t)
    return files


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_dflash2_verify_passes_every_outtype(dflash2_files: dict[str, Path], outtype: str) -> None:
    from conftest import FIXTURES, TARGET

    passed, rows = _verify_rows(dflash2_files[outtype], FIXTURES / "dflash2-zlab", TARGET)
    assert passed, rows
    assert {"layer 1 output", "selector candidates (top-k sets)", "selector scores", "tensor accounting",
            "metadata dflash.selector_top_k"} <= set(rows)


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("mutation", ["negated-predecessor-codebook", "negated-successor-codebook",
                                      "swapped-conv-kernels", "swapped-conv-projections"])
def test_dflash2_mutations_fail_verify(dflash2_files: dict[str, Path], tmp_path: Path, outtype: str,
                                       mutation: str) -> None:
    from conftest import FIXTURES, TARGET
    from test_mutations import mutate, swap

    edits = {
        "negated-predecessor-codebook": ({"selector_predecessor.weight": lambda w: -w}, "selector scores"),
        "negated-successor-codebook": ({"selector_successor.weight": lambda w: -w}, "selector scores"),
        "swapped-conv-kernels": (swap("blk.0.attn_conv_base", "blk.0.ffn_conv_base"), "layer 0 output"),
        "swapped-conv-projections": (swap("blk.1.attn_conv_proj.weight", "blk.1.ffn_conv_proj.weight"),
                                     "layer 1 output"),
    }
    tensors, row = edits[mutation]
    bad = mutate(dflash2_files[outtype], tmp_path / "bad.gguf", tensors=tensors)
    passed, rows = _verify_rows(bad, FIXTURES / "dflash2-zlab", TARGET)
    assert not passed and rows[row] is False, rows
    if row == "selector scores":  # the codebooks feed only the selector: everything before it still agrees
        assert rows["block logits (scaled, capped)"] and rows["layer 1 output"]


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_dflash2_scaled_verify_and_wrong_scales(b11434_qwen3: Path, tmp_path: Path, outtype: str) -> None:
    """n-dflash2-scaled (logit scale 1.25, softcapping 15, embedding scale 5.5) verifies; a wrong embedding_scale or
    logit_scale in the file fails, at the block input / the logits and in the metadata."""
    from test_mutations import mutate

    draft, target = b11434_qwen3 / "n-dflash2-scaled", b11434_qwen3 / "target"
    good = tmp_path / "good.gguf"
    convert(draft, target, good, outtype=outtype)
    passed, rows = _verify_rows(good, draft, target)
    assert passed, rows
    bad = mutate(good, tmp_path / "emb.gguf", kvs={"dflash.embedding_scale": 5.0})
    passed, rows = _verify_rows(bad, draft, target)
    assert not passed and not rows["block input (embeddings)"] and not rows["metadata dflash.embedding_scale"]
    bad = mutate(good, tmp_path / "logit.gguf", kvs={"dflash.logit_scale": 1.0})
    passed, rows = _verify_rows(bad, draft, target)
    assert not passed and rows["layer 1 output"] and not rows["block logits (scaled, capped)"]


def test_dflash2_variant_verify(b11434_qwen3: Path, tmp_path: Path) -> None:
    """Causal attention, all-SWA from dflash_config.use_swa, kernel 4 > 1: verifies at q8_0."""
    draft = make(tmp_path, "v-dflash2-f32")
    out = tmp_path / "v.gguf"
    convert(draft, b11434_qwen3 / "target", out, outtype="q8_0")
    passed, rows = _verify_rows(out, draft, b11434_qwen3 / "target")
    assert passed, rows


# ---------------------------------------------------------------------------------------------- MiMo mask_embedding.pt
def test_mimo_mask_public_sample_all_outtypes(b11434_qwen3: Path, golden_dir: Path, tmp_path: Path) -> None:
    case = "n-dflash-mimo-mask"
    assert _parity(b11434_qwen3 / case, b11434_qwen3 / "target", golden_dir / "manifests-b11434", case, tmp_path) == {}


@pytest.mark.parametrize("variant", sorted(MIMO_VARIANTS))
def test_mimo_variants_match_upstream(b11434_qwen3: Path, tmp_path: Path, variant: str) -> None:
    """Other dimensions, sink aliases, partial RoPE, SWA, the index-only layout, the draft's own F32 table; the mask
    row at the first row of a streamed chunk (65536) and at the last (65535): byte-identical at every outtype."""
    draft = make(tmp_path, variant)
    assert _parity(draft, b11434_qwen3 / "target", ORACLE, variant, tmp_path) == {}


@pytest.mark.parametrize(("outtype", "causal"), [("f16", False), ("q8_0", False), ("bf16", True)])
def test_mimo_variant_verifies_and_a_wrong_value_scale_fails(b11434_qwen3: Path, tmp_path: Path, outtype: str,
                                                             causal: bool) -> None:
    """MiMo's dflash_config keys reach both forwards: use_swa with a window (24) shorter than the verify context,
    attention_value_scale (llama.cpp scales wo(attn) by it), causal; a wrong value scale in the file fails."""
    from test_mutations import mutate

    draft = make(tmp_path, "v-mimo-boundary")
    if causal:
        cfg = json.loads((draft / "config.json").read_text())
        cfg["dflash_config"]["causal"] = True
        (draft / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "v.gguf"
    convert(draft, b11434_qwen3 / "target", out, outtype=outtype)
    passed, rows = _verify_rows(out, draft, b11434_qwen3 / "target")
    assert passed, rows
    bad = mutate(out, tmp_path / "bad.gguf", kvs={"dflash.attention.value_scale": 0.5})
    passed, rows = _verify_rows(bad, draft, b11434_qwen3 / "target")
    assert not passed and rows["block input (embeddings)"] and rows["layer 0 output"] is False, rows


def test_mimo_mask_row_is_patched_and_output_is_the_target_head(tmp_path: Path) -> None:
    """token_embd = the target's embedding with row mask_token_id replaced by the vector (F32 file: exact values);
    output = the target's lm_head; the tensors come first, as upstream yields them."""
    import shutil

    import torch
    from bad_inputs_kit import get_tensor
    from conftest import FIXTURES, TARGET

    from dspark_convert.gguffile.reader import read_gguf

    draft = tmp_path / "draft"
    shutil.copytree(FIXTURES / "dflash-zlab", draft)
    vec = torch.linspace(-1, 1, 64)
    torch.save({"mask_token_id": 1016, "embedding": vec}, draft / "mask_embedding.pt")
    out = tmp_path / "m.gguf"
    convert(draft, TARGET, out, outtype="f32")
    f = read_gguf(out)
    names = [t.name for t in f.tensors]
    emb = np.frombuffer(bytes(f.tensor_bytes("token_embd.weight")), np.float32).reshape(1024, 64)
    head = np.frombuffer(bytes(f.tensor_bytes("output.weight")), np.float32).reshape(1024, 64)
    f.close()
    assert names[:2] == ["output.weight", "token_embd.weight"]

    def bf16(name: str) -> np.ndarray:
        _, bits = get_tensor(TARGET, name)
        return (bits.astype(np.uint32) << 16).view(np.float32)

    want = bf16("model.embed_tokens.weight")
    want[1016] = (((vec.numpy().view(np.uint32).astype(np.uint64) + 0x7FFF + ((vec.numpy().view(np.uint32) >> 16) & 1))
                   >> 16).astype(np.uint32) << 16).view(np.float32)
    assert np.array_equal(emb, want) and not np.array_equal(emb[1016], bf16("model.embed_tokens.weight")[1016])
    assert np.array_equal(head, bf16("lm_head.weight"))
    assert errors(check_file(out)) == []


@pytest.fixture(scope="module")
def mimo_draft(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fixtures/dflash-zlab plus a mask_embedding.pt (mask id 1016, a ramp over hidden 64)."""
    import shutil

    import torch
    from conftest import FIXTURES

    draft = tmp_path_factory.mktemp("mimo") / "draft"
    shutil.copytree(FIXTURES / "dflash-zlab", draft)
    torch.save({"mask_token_id": 1016, "embedding": torch.linspace(-1, 1, 64)}, draft / "mask_embedding.pt")
    return draft


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_mimo_verify_passes_and_unpatched_mask_row_fails(mimo_draft: Path, tmp_path: Path, outtype: str) -> None:
    from bad_inputs_kit import get_tensor
    from conftest import TARGET
    from test_mutations import mutate

    good = tmp_path / "good.gguf"
    convert(mimo_draft, TARGET, good, outtype=outtype)
    passed, rows = _verify_rows(good, mimo_draft, TARGET)
    assert passed, rows
    _, bits = get_tensor(TARGET, "model.embed_tokens.weight")
    original = (bits[1016].astype(np.uint32) << 16).view(np.float32)

    def unpatch(w: np.ndarray) -> np.ndarray:
        w[1016] = original
        return w

    bad = mutate(good, tmp_path / "bad.gguf", tensors={"token_embd.weight": unpatch})
    passed, rows = _verify_rows(bad, mimo_draft, TARGET)
    assert not passed and rows["block input (embeddings)"] is False and rows["context projection"], rows


# ---------------------------------------------------------------------------------------------- check (DFlash2)
@pytest.mark.parametrize(("kvs", "renames", "subject", "rule"), [
    ({"dflash.conv_group_size": 24}, {}, "dflash.conv_group_size", "dflash2"),
    ({"dflash.selector_top_k": 8}, {}, "dflash.selector_top_k", "dflash2"),
    ({"dflash.selector_rank": 0}, {}, "dflash.selector_rank", "required-key"),
    ({"dflash.selector_rank": 9}, {}, "selector_predecessor.weight", "shape"),
    ({"dflash.conv_kernel_size": 3}, {}, "blk.0.attn_conv_base", "shape"),
    ({}, {"blk.1.ffn_conv_base": "blk.1.ffn_conv_bXse"}, "blk.1.ffn_conv_base", "required-tensor"),
])
def test_dflash2_check_rules(dflash2_files: dict[str, Path], tmp_path: Path, kvs: dict, renames: dict, subject: str,
                             rule: str) -> None:
    """check applies the b11434 DFlash2 loader rules to a file whoever made it."""
    from test_mutations import mutate

    assert errors(check_file(dflash2_files["bf16"])) == []
    bad = mutate(dflash2_files["bf16"], tmp_path / "bad.gguf", kvs=kvs, renames=renames)
    found = {(f.subject, f.rule) for f in errors(check_file(bad))}
    assert (subject, rule) in found, found


def test_dflash2_check_refuses_d2t_and_accepts_sinks() -> None:
    """A DFlash2 plan with d2t is refused; per-head sinks are an optional b11434 tensor."""
    from conftest import FIXTURES, TARGET
    from gguf import GGMLQuantizationType as QT

    from dspark_convert.check import check_plan
    from dspark_convert.hf2gguf.conversion import plan_conversion
    from dspark_convert.plan import TensorSpec

    p = plan_conversion(FIXTURES / "dflash2-zlab", TARGET).plan
    p.tensors.append(TensorSpec("blk.0.attn_sinks.weight", (4,), QT.F32))
    assert [f for f in check_plan(p) if f.level == "error"] == []
    p.tensors.append(TensorSpec("d2t", (1024,), QT.I64))
    assert ("d2t", "dflash2") in {(f.subject, f.rule) for f in check_plan(p) if f.level == "error"}


def test_mimo_public_sample_verifies_and_wrong_sinks_fail(b11434_qwen3: Path, tmp_path: Path) -> None:
    """n-dflash-mimo-mask (partial RoPE 0.5, per-head attention_sink_bias, the patched mask row) verifies at q8_0;
    negated sinks in the file fail from layer 0 on."""
    from test_mutations import mutate

    draft, target = b11434_qwen3 / "n-dflash-mimo-mask", b11434_qwen3 / "target"
    good = tmp_path / "good.gguf"
    convert(draft, target, good, outtype="q8_0")
    passed, rows = _verify_rows(good, draft, target)
    assert passed, rows
    bad = mutate(good, tmp_path / "bad.gguf", tensors={"blk.0.attn_sinks.weight": lambda w: -w - 1.0})
    passed, rows = _verify_rows(bad, draft, target)
    assert not passed and rows["layer 0 output"] is False and rows["block input (embeddings)"], rows


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_mimo_own_table_verifies_every_outtype(b11434_qwen3: Path, tmp_path: Path, outtype: str) -> None:
    """v-mimo-own-embed patches the draft's own F32 embed_tokens with a float32 mask vector: the file holds the vector
    exactly (upstream casts it to the dtype of the table it patches), and verify's torch side does the same (it cast
    to the target's BF16 and failed the f32 / f16 / q8_0 files on the block input)."""
    import numpy as np
    import torch
    from gguf import GGUFReader

    draft, target = make(tmp_path, "v-mimo-own-embed"), b11434_qwen3 / "target"
    out = tmp_path / "m.gguf"
    convert(draft, target, out, outtype=outtype)
    if outtype == "f32":
        vec = torch.load(draft / "mask_embedding.pt", weights_only=True)["embedding"].numpy()
        emb = next(t for t in GGUFReader(out).tensors if t.name == "token_embd.weight")
        assert np.array_equal(np.asarray(emb.data)[65535], vec)
    passed, rows = _verify_rows(out, draft, target)
    assert passed, rows
