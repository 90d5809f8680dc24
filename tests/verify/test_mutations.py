"""Corrupt correct conversions on purpose and check that ``verify`` FAILS each one, at every outtype, and names the
component where the defect enters.

Each mutation edits a copy of a converted GGUF in place, never the converter: a tensor is dequantized, edited and
stored again in its own type (gguf-py's quantizers), a fixed-size metadata value is overwritten, or a key or
tensor name is renamed to one of the same length (so that it is missing). Every mutation runs on every fixture
family it applies to, at f32, f16, bf16 and q8_0, with default options; the unmutated file must pass first.
"""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import FIXTURES, TARGET, require_fixture
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT
from gguf import quants

from dspark_convert.errors import ConvertError
from dspark_convert.gguffile.reader import read_gguf
from dspark_convert.hf2gguf.conversion import convert
from dspark_convert.verify import verify

pytest.importorskip("torch", reason="verify runs the torch reference forward (torch extra)")

H, HD = 64, 16                  # fixture dims (fixtures/generate.py)
OUTTYPES = ["f32", "f16", "bf16", "q8_0"]
_PACK = {VT.UINT32: "<I", VT.INT32: "<i", VT.FLOAT32: "<f", VT.BOOL: "<?"}
_ELEM = {VT.INT32: np.int32, VT.UINT32: np.uint32, VT.BOOL: np.bool_}
#: fixture variants made in the test: (source fixture, config edit, tensor edits)
LINEAR = {"rope_type": "linear", "factor": 2.0}
VARIANTS: dict[str, tuple[str, Callable[[dict], None], dict[str, Callable[[Any], Any]]]] = {
    "dspark-qwen3+linear": ("dspark-qwen3", lambda c: c["rope_parameters"].update(LINEAR), {}),
    "eagle3-speculators+linear": ("eagle3-speculators",
                                  lambda c: c["transformer_layer_config"].update(rope_scaling=LINEAR), {}),
    # a Markov term 64x smaller than the base logits (exact in BF16): the issue's "defect hidden in a larger sum"
    "dspark-qwen3+small-markov": ("dspark-qwen3", lambda c: None,
                                  {"markov_head.markov_w2.weight": lambda t: t / 64}),
}


def make_variant(layout: str, folder: Path) -> Path:
    """Write the test variant ``layout`` of a fixture into ``folder`` (config and tensor edits)."""
    import torch
    from safetensors.torch import load_file, save_file

    src, edit_config, edit_tensors = VARIANTS[layout]
    shutil.copytree(require_fixture(src), folder)
    cfg = json.loads((folder / "config.json").read_text())
    edit_config(cfg)
    (folder / "config.json").write_text(json.dumps(cfg))
    if edit_tensors:
        tensors = load_file(str(folder / "model.safetensors"))
        for name, fn in edit_tensors.items():
            tensors[name] = fn(tensors[name]).to(tensors[name].dtype)
            assert isinstance(tensors[name], torch.Tensor)
        save_file(tensors, str(folder / "model.safetensors"))
    return folder


def source_of(layout: str) -> Path:
    return FIXTURES / VARIANTS.get(layout, (layout,))[0]


@pytest.fixture(scope="module")
def conversion(converted, tmp_path_factory: pytest.TempPathFactory):
    """``conversion(layout, outtype) -> (gguf, hf folder)``: conftest's session conversions, plus the test variants
    (made and converted here; a conversion error fails the test)."""
    out, cache = tmp_path_factory.mktemp("variants"), {}

    def get(layout: str, outtype: str) -> tuple[Path, Path]:
        if layout not in VARIANTS:
            return converted(layout, outtype), FIXTURES / layout
        if (layout, outtype) not in cache:
            hf = out / layout
            if not hf.is_dir():
                make_variant(layout, hf)
            cache[layout, outtype] = (convert(hf, TARGET, out / f"{layout}.{outtype}.gguf", outtype=outtype).path, hf)
        return cache[layout, outtype]

    return get


# ---------------------------------------------------------------------------------------------- editing a GGUF
class Take:
    """A tensor edit that replaces the tensor by another tensor of the same file (e.g. to swap two)."""

    def __init__(self, name: str) -> None:
        self.name = name


def _values(f: Any, name: str) -> np.ndarray:
    t = f.tensor(name)
    raw = np.array(f.tensor_data(name))
    if t.qtype in (QT.F32, QT.I64):
        return raw
    return quants.dequantize(raw, t.qtype).reshape(t.shape)


def _encode(values: np.ndarray, qt: QT) -> bytes:
    if qt == QT.I64:
        return np.ascontiguousarray(values, np.int64).tobytes()
    return np.ascontiguousarray(quants.quantize(np.ascontiguousarray(values, np.float32), qt)).tobytes()


def mutate(src: Path, dst: Path, tensors: dict[str, Callable[[np.ndarray], np.ndarray] | Take] | None = None,
           kvs: dict[str, Any] | None = None, renames: dict[str, str] | None = None) -> Path:
    """Copy ``src`` to ``dst``; overwrite tensors (same shape, stored again in their own GGML type), metadata values
    (same size) and key or tensor names (same length: the old name is then missing)."""
    shutil.copyfile(src, dst)
    f = read_gguf(dst)
    edits: list[tuple[int, bytes]] = []
    for name, fn in (tensors or {}).items():
        t = f.tensor(name)
        old = _values(f, name)
        new = _values(f, fn.name) if isinstance(fn, Take) else fn(old.copy())
        assert new.shape == old.shape, name
        data = _encode(new, t.qtype)
        assert len(data) == t.nbytes and data != np.array(f.tensor_bytes(name)).tobytes(), name
        edits.append((t.offset, data))
    for key, value in (kvs or {}).items():
        kv = f.kvs[key]
        data = (np.asarray(value, dtype=_ELEM[kv.sub_type]).tobytes() if kv.type == VT.ARRAY
                else struct.pack(_PACK[kv.type], value))
        assert len(data) == kv.end - kv.value_offset, key
        edits.append((kv.value_offset, data))
    for old_name, new_name in (renames or {}).items():
        assert len(old_name) == len(new_name), old_name
        at = f.kvs[old_name].offset if old_name in f.kvs else f.tensor(old_name).info_offset
        edits.append((at + 8, new_name.encode()))                  # after the u64 length of the name
    f.close()
    with open(dst, "r+b") as fh:
        for offset, data in edits:
            fh.seek(offset)
            fh.write(data)
    return dst


def to_pairs(w: np.ndarray) -> np.ndarray:
    """Per head, rotate-half order -> interleaved pairs (the EAGLE-3 permutation; also re-interleaves)."""
    return w.reshape(-1, 2, HD // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def to_halves(w: np.ndarray) -> np.ndarray:
    """Per head, interleaved pairs -> rotate-half order (the DSpark de-interleave; undoes :func:`to_pairs`)."""
    return w.reshape(-1, HD // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def swap_halves(w: np.ndarray) -> np.ndarray:
    """Swap the two halves of the input axis (a transposed-looking fc that still loads)."""
    n = w.shape[1] // 2
    return np.concatenate([w[:, n:], w[:, :n]], axis=1)


def swap_taps(w: np.ndarray) -> np.ndarray:
    """Swap the column blocks of the first two taps of ``fc`` (tap order 1, 0, 2)."""
    return np.concatenate([w[:, H:2 * H], w[:, :H], w[:, 2 * H:]], axis=1)


def swap(a: str, b: str) -> dict[str, Take]:
    return {a: Take(b), b: Take(a)}


# ---------------------------------------------------------------------------------------------- the defects
@dataclass
class Mutation:
    """A defect, the fixtures it applies to, and what the report must say: the rows that fail (exact-mode output
    names or ``metadata KEY``) and the first divergence (None: not pinned, e.g. when round-off-sized numbers and
    a metadata row could both come first)."""

    id: str
    layouts: tuple[str, ...]
    tensors: dict = field(default_factory=dict)
    kvs: dict = field(default_factory=dict)
    renames: dict = field(default_factory=dict)
    must_fail: frozenset[str] = frozenset()
    first: str | None = None


DSPARK, DFLASH, EAGLE = "dspark-qwen3", "dflash-zlab", "eagle3-speculators"
L0, PREFILL = "layer 0 output", "prefill output (layer 0, pre-norm)"
BLOCK_FIRST = {"dspark-qwen3": L0, "dflash-zlab": L0, "dspark-specforge": L0}


def each(mid: str, layouts: dict[str, str], **kw: Any) -> list[Mutation]:
    """One mutation per fixture: ``layouts`` maps fixture -> expected first divergence."""
    return [Mutation(f"{mid}[{lay}]", (lay,), first=first, must_fail=frozenset({first}), **kw) for lay, first in layouts.items()]


def per_family(mid: str, block: Callable[[str], dict], eagle: Callable[[str], dict], block_first: str, eagle_first: str,
               block_layouts: tuple[str, ...] = (DSPARK, DFLASH), eagle_layout: str = EAGLE) -> list[Mutation]:
    """The same defect on a DSpark, a DFlash and an EAGLE-3 fixture (tensor edits built per layout)."""
    out = [Mutation(f"{mid}[{lay}]", (lay,), tensors=block(lay), first=block_first, must_fail=frozenset({block_first}))
           for lay in block_layouts]
    out.append(Mutation(f"{mid}[{eagle_layout}]", (eagle_layout,), tensors=eagle(eagle_layout), first=eagle_first,
                        must_fail=frozenset({eagle_first})))
    return out


MUTATIONS: list[Mutation] = [
    # ---- the original suite
    Mutation("eagle3-qk-not-permuted", ("eagle3-speculators",),
             {"blk.0.attn_q.weight": to_halves, "blk.0.attn_k.weight": to_halves}, first=PREFILL),
    Mutation("eagle3-qk-permuted-twice", ("eagle3-specforge",),
             {"blk.0.attn_q.weight": to_pairs, "blk.0.attn_k.weight": to_pairs}, first=PREFILL),
    Mutation("interleaved-not-deinterleaved", ("dspark-qwen3-interleaved",),
             {f"blk.{i}.{n}.weight": to_pairs for i in range(2) for n in ("attn_q", "attn_k", "attn_q_norm", "attn_k_norm")},
             first=L0),
    Mutation("neox-draft-qk-permuted", (DSPARK,),
             {f"blk.{i}.{n}.weight": to_pairs for i in range(2) for n in ("attn_q", "attn_k")}, first=L0),
    Mutation("fc-halves-swapped", (DFLASH,), {"fc.weight": swap_halves}, first="context projection"),
    Mutation("eagle3-fc-halves-swapped", ("eagle3-angelslim",), {"fc.weight": swap_halves}, first="fc output"),
    Mutation("markov-w1-w2-swapped", (DSPARK,), swap("markov_w1.weight", "markov_w2.weight"),
             first="Markov bias W2 W1[prev]"),
    Mutation("confidence-input-swapped", ("dspark-speculators",),
             {"conf_proj.weight": lambda w: np.concatenate([w[:, H:], w[:, :H]], axis=1)}, first="confidence (logit)"),
    Mutation("taps-without-plus-one", (DSPARK,), kvs={"dflash.target_layers": [1, 2, 4]},
             first="metadata dflash.target_layers"),
    Mutation("eagle3-taps-shifted", (EAGLE,), kvs={"eagle3.target_layers": [1, 2, 4]}, first="metadata eagle3.target_layers"),
    Mutation("wrong-eps", ("dspark-specforge",), kvs={"dflash.attention.layer_norm_rms_epsilon": 1e-5},
             must_fail=frozenset({"metadata dflash.attention.layer_norm_rms_epsilon"})),
    Mutation("wrong-rope-base", (DSPARK,), kvs={"dflash.rope.freq_base": 10000.0},
             must_fail=frozenset({"metadata dflash.rope.freq_base"}), first=L0),
    Mutation("eagle3-wrong-rope-base", ("eagle3-specforge",), kvs={"eagle3.rope.freq_base": 10000.0},
             must_fail=frozenset({"metadata eagle3.rope.freq_base", "step 1 logits"}), first=PREFILL),
    Mutation("block-convention-flipped", (DSPARK,), kvs={"dflash.sample_from_anchor": False},
             must_fail=frozenset({"metadata dflash.sample_from_anchor"}), first="block logits"),
    Mutation("dflash-convention-flipped", ("dflash-deepspec",), kvs={"dflash.sample_from_anchor": False},
             must_fail=frozenset({"metadata dflash.sample_from_anchor"}), first="block logits"),
    Mutation("wrong-mask-id", (DFLASH,), kvs={"tokenizer.ggml.mask_token_id": 5},
             must_fail=frozenset({"metadata tokenizer.ggml.mask_token_id"}), first="block input (embeddings)"),
    Mutation("wrong-block-size", ("dspark-specforge",), kvs={"dflash.block_size": 6},
             must_fail=frozenset({"metadata dflash.block_size"}), first="block input (embeddings)"),
    Mutation("d2t-entries-swapped", ("dspark-reduced",), {"d2t": lambda d: np.concatenate([d[1::-1], d[2:]])},
             must_fail=frozenset({"metadata d2t (absolute ids)"})),
    Mutation("reduced-lm-head-rows-rolled", ("dspark-reduced",), {"output.weight": lambda w: np.roll(w, 1, axis=0)},
             first="block logits"),
    # ---- issue 11: signs, one-sided RoPE layouts, norms, transposes, taps, rope settings
    *[Mutation(f"markov-{n}-negated[{lay}]", (lay,), {f"markov_{n}.weight": np.negative}, first="Markov bias W2 W1[prev]")
      for n in ("w2", "w1") for lay in (DSPARK, "dspark-specforge", "dspark-reduced", "dspark-qwen3+small-markov")],
    *per_family("q-only-interleave", lambda lay: {"blk.0.attn_q.weight": to_pairs},
                lambda lay: {"blk.0.attn_q.weight": to_pairs}, L0, PREFILL),
    *per_family("k-only-interleave", lambda lay: {"blk.0.attn_k.weight": to_pairs},
                lambda lay: {"blk.0.attn_k.weight": to_halves}, L0, PREFILL),
    *[Mutation(f"eagle3-attn-norms-swapped[{lay}]", (lay,), swap("blk.0.attn_norm.weight", "blk.0.attn_norm_2.weight"),
               first=PREFILL) for lay in (EAGLE, "eagle3-specforge", "eagle3-llama")],
    *per_family("attn-ffn-norms-swapped", lambda lay: swap("blk.0.attn_norm.weight", "blk.0.ffn_norm.weight"),
                lambda lay: swap("blk.0.attn_norm.weight", "blk.0.ffn_norm.weight"), L0, PREFILL),
    *per_family("enc-norm-scaled-1.01", lambda lay: {"enc.output_norm.weight": lambda w: w * np.float32(1.01)},
                lambda lay: {"enc.output_norm.weight": lambda w: w * np.float32(1.01)}, "context projection", "fc output",
                eagle_layout="eagle3-normfc"),
    *per_family("square-projection-transposed", lambda lay: {"blk.0.attn_output.weight": np.transpose},
                lambda lay: {"blk.0.attn_output.weight": np.transpose}, L0, PREFILL, eagle_layout="eagle3-angelslim"),
    *per_family("fc-tap-blocks-swapped", lambda lay: {"fc.weight": swap_taps}, lambda lay: {"fc.weight": swap_taps},
                "context projection", "fc output", block_layouts=("dspark-specforge", DFLASH)),
    *[Mutation(f"target-layers-off-by-one[{lay}]", (lay,), kvs={key: [2, 3, 6]}, first=f"metadata {key}")
      for lay, key in (("dspark-speculators", "dflash.target_layers"), (DFLASH, "dflash.target_layers"),
                       (EAGLE, "eagle3.target_layers"))],
    *[Mutation(f"rope-base-plus-1pct[{lay}]", (lay,), kvs={f"{arch}.rope.freq_base": float(np.float32(base * 1.01))},
               must_fail=frozenset({f"metadata {arch}.rope.freq_base"}))
      for lay, arch, base in ((DSPARK, "dflash", 1e6), (DFLASH, "dflash", 1e6), ("eagle3-specforge", "eagle3", 1e6),
                              ("eagle3-llama", "eagle3", 5e5))],
    Mutation("rope-freqs-missing[eagle3-llama]", ("eagle3-llama",), renames={"rope_freqs.weight": "rope_freqX.weight"},
             must_fail=frozenset({"metadata rope_freqs.weight (llama3 scaling)"}), first=PREFILL),
    *[Mutation(f"rope-scaling-{part}-missing[{lay}]", (lay,),
               renames={f"{arch}.rope.scaling.{part}": f"{arch}.rope.scalinX.{part}"},
               must_fail=frozenset({f"metadata {arch}.rope.scaling.{part}"}), first=first)
      for part in ("type", "factor")
      for lay, arch, first in (("dspark-qwen3+linear", "dflash", L0), ("eagle3-speculators+linear", "eagle3", PREFILL))],
]
DEFECTS = sorted({m.id.split("[")[0] for m in MUTATIONS})


def failed_rows(report: Any) -> set[str]:
    return {o.name for o in report.outputs if not o.passed} | {f"metadata {m.key}" for m in report.metadata if not m.passed}


_GOOD: dict[tuple[str, str], bool] = {}


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("m", MUTATIONS, ids=[m.id for m in MUTATIONS])
def test_verify_fails_each_mutation(conversion, tmp_path: Path, m: Mutation, outtype: str) -> None:
    (layout,) = m.layouts
    src, hf = conversion(layout, outtype)
    if (layout, outtype) not in _GOOD:                   # the unmutated file passes with the same inputs
        _GOOD[layout, outtype] = verify(src, hf, TARGET).passed
    assert _GOOD[layout, outtype]
    bad = verify(mutate(src, tmp_path / "m.gguf", m.tensors, m.kvs, m.renames), hf, TARGET)
    assert not bad.passed
    failed = failed_rows(bad)
    assert m.must_fail <= failed, failed
    if m.first is not None:
        assert bad.first_divergence is not None and bad.first_divergence["component"] == m.first, bad.first_divergence
    diverging = [o.nmse for o in bad.outputs if not o.passed and o.nmse is not None]
    if diverging:                                        # a clear margin over the bound, not a borderline call
        assert max(diverging) > 100 * bad.bound, diverging


def test_suite_size() -> None:
    """The issue asks for at least 20 distinct defects, and one-sided RoPE layouts on every family."""
    assert len(DEFECTS) >= 20, DEFECTS
    for d in ("q-only-interleave", "k-only-interleave", "attn-ffn-norms-swapped"):
        assert {m.layouts[0].split("-")[0] for m in MUTATIONS if m.id.startswith(d)} == {"dspark", "dflash", "eagle3"}


def test_mutate_requantizes_in_the_files_own_type(conversion, tmp_path: Path) -> None:
    src, _ = conversion(DSPARK, "q8_0")
    f = read_gguf(src)
    assert f.tensor("blk.0.attn_q.weight").qtype == QT.Q8_0
    out = read_gguf(mutate(src, tmp_path / "m.gguf", {"blk.0.attn_q.weight": np.negative, "blk.0.attn_k.weight": to_pairs}))
    assert np.array_equal(out.tensor_array("blk.0.attn_q.weight"), -f.tensor_array("blk.0.attn_q.weight"))
    assert np.array_equal(out.tensor_array("blk.0.attn_k.weight"), to_pairs(f.tensor_array("blk.0.attn_k.weight")))
    assert np.array_equal(out.tensor_array("blk.1.attn_q.weight"), f.tensor_array("blk.1.attn_q.weight"))


def test_mutated_metadata_reads_back(conversion, tmp_path: Path) -> None:
    src, _ = conversion(DSPARK, "f32")
    out = mutate(src, tmp_path / "m.gguf", kvs={"dflash.target_layers": [7, 8, 9], "dflash.rope.freq_base": 2.5,
                                                 "dflash.sample_from_anchor": False},
                 renames={"dflash.block_size": "dflash.block_sizX"})
    f = read_gguf(out)
    assert f.value("dflash.target_layers") == [7, 8, 9]
    assert f.value("dflash.rope.freq_base") == 2.5 and f.value("dflash.sample_from_anchor") is False
    assert f.value("dflash.block_size") is None and f.value("dflash.block_sizX") == read_gguf(src).value("dflash.block_size")


def test_permutation_helpers_are_inverse() -> None:
    w = np.arange(2 * HD * 3, dtype=np.float32).reshape(2 * HD, 3)
    assert np.array_equal(to_halves(to_pairs(w)), w)
    assert to_pairs(w)[:4, 0].tolist() == [0.0, 24.0, 3.0, 27.0]    # rows 0, hd/2, 1, hd/2+1 of head 0
    fc = np.arange(3 * H, dtype=np.float32)[None]
    assert swap_taps(fc)[0, [0, H, 2 * H]].tolist() == [H, 0, 2 * H]


def test_missing_gguf_tensor_fails_the_report(conversion, tmp_path: Path) -> None:
    src, hf = conversion(DFLASH, "f32")
    dst = mutate(src, tmp_path / "renamed.gguf", renames={"blk.1.ffn_up.weight": "blk.1.ffn_uX.weight"})
    r = verify(dst, hf, TARGET)
    assert not r.passed
    assert [(o.name, o.grade) for o in r.outputs] == [("GGUF forward", "error")]
    assert "ffn_up" in r.outputs[0].detail


def test_broken_hf_checkpoint_is_an_input_error(conversion, tmp_path: Path) -> None:
    src, _ = conversion(DFLASH, "f32")
    hf = tmp_path / "hf"
    shutil.copytree(FIXTURES / DFLASH, hf)
    data = (hf / "model.safetensors").read_bytes()
    assert data.count(b'"layers.1.mlp.up_proj.weight"') == 1
    (hf / "model.safetensors").write_bytes(data.replace(b'"layers.1.mlp.up_proj.weight"', b'"layers.1.mlp.up_proj.weighX"'))
    with pytest.raises(ConvertError, match="reference forward failed"):
        verify(src, hf, TARGET)


# ---------------------------------------------------------------------------------------------- tensor accounting
#: DFlash2's selector and a per-layer convolution (research/upstream-2026-11.md §1.3): tensors a DFlash forward
#: does not read, so a file carrying them must not pass (issue 20)
EXTRA_GGUF = ("selector_hidden.weight", "blk.0.attn_conv_proj.weight")


def add_gguf_tensors(src: Path, dst: Path, names: tuple[str, ...]) -> Path:
    """Rewrite ``src`` with gguf-py's writer, every key and tensor as they are, plus an F32 ``[8, n_embd]`` tensor
    for each of ``names``."""
    from gguf import GGUFReader, GGUFWriter

    r = GGUFReader(src)
    arch = str(r.fields["general.architecture"].contents())
    w = GGUFWriter(dst, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if f.types[0] == VT.ARRAY:
            w.add_key_value(name, f.contents(), VT.ARRAY, sub_type=f.types[1])
        else:
            w.add_key_value(name, f.contents(), f.types[0])
    for t in r.tensors:
        w.add_tensor(t.name, np.array(t.data), raw_dtype=t.tensor_type)
    h = int(r.fields[f"{arch}.embedding_length"].contents())
    for n in names:
        w.add_tensor(n, np.ones((8, h), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def accounting_row(report: Any) -> Any:
    assert report.accounting is not None and report.accounting.name == "tensor accounting"
    return report.accounting


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_extra_gguf_tensors_fail_verify_by_name(conversion, tmp_path: Path, outtype: str) -> None:
    """The review's repro: a converted dflash-zlab file plus two tensors no forward reads FAILS, naming both,
    while the same file without them passes with every tensor read by the forward."""
    src, hf = conversion(DFLASH, outtype)
    good = verify(src, hf, TARGET)
    assert good.passed and accounting_row(good).passed
    n = len(read_gguf(src).tensors)
    assert good.tensors["counts"]["gguf"] == {"total": n, "read_by_forward": n, "compared": 0, "dropped": 0,
                                              "unaccounted": 0}
    bad = verify(add_gguf_tensors(src, tmp_path / "extra.gguf", EXTRA_GGUF), hf, TARGET)
    assert not bad.passed
    assert failed_rows(bad) == set()                                    # the numbers still agree
    assert not accounting_row(bad).passed and accounting_row(bad).grade == "unaccounted"
    assert bad.first_divergence is not None and bad.first_divergence["component"] == "tensor accounting"
    row = accounting_row(bad)
    assert all(f"GGUF {t}" in row.detail for t in EXTRA_GGUF), row.detail
    assert bad.tensors["unaccounted"] == {"gguf": list(EXTRA_GGUF), "checkpoint": []}
    assert bad.tensors["counts"]["gguf"]["total"] == n + 2 and bad.tensors["counts"]["gguf"]["read_by_forward"] == n


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_checkpoint_tensor_the_converter_ignored_fails_verify(conversion, tmp_path: Path, outtype: str) -> None:
    """The checkpoint-side twin: a checkpoint tensor that reached no GGUF tensor (here: the GGUF was made from the
    checkpoint without it, as a converter that silently skips an unknown name would make it) FAILS by name."""
    import torch
    from safetensors.torch import load_file, save_file

    src, _ = conversion(DFLASH, outtype)
    hf = tmp_path / "hf"
    shutil.copytree(FIXTURES / DFLASH, hf)
    tensors = load_file(str(hf / "model.safetensors"))
    tensors["layers.0.self_attn.conv_proj.weight"] = torch.ones((8, H), dtype=torch.bfloat16)
    save_file(tensors, str(hf / "model.safetensors"))
    r = verify(src, hf, TARGET)
    assert not r.passed and failed_rows(r) == set() and not accounting_row(r).passed
    assert "checkpoint layers.0.self_attn.conv_proj.weight" in accounting_row(r).detail
    assert r.tensors["unaccounted"] == {"gguf": [], "checkpoint": ["layers.0.self_attn.conv_proj.weight"]}


@pytest.mark.parametrize(("layout", "dropped"), [(DSPARK, set()),
                                                 ("dspark-reduced", {"t2d"}), (EAGLE, {"t2d"})])
def test_dropped_checkpoint_tensors_name_their_rule(conversion, layout: str, dropped: set[str]) -> None:
    """Checkpoint tensors the GGUF legitimately leaves out are dropped by a rule whose reason the report carries
    (a full-vocabulary DSpark keeps embed_tokens and its lm_head since b11434: nothing of it is dropped)."""
    src, hf = conversion(layout, "f32")
    r = verify(src, hf, TARGET)
    assert r.passed
    got = r.tensors["dropped"]["checkpoint"]
    assert set(got) == dropped
    assert all(("d2t" in why) if n == "t2d" else ("target's" in why) for n, why in got.items())
