"""Corrupt correct conversions on purpose and check that ``verify`` FAILS each one, on the expected rows.

Each mutation edits a copy of a converted f32 GGUF in place (tensor bytes or a fixed-size metadata value), never
the converter. Numeric mutations must fail an output row; metadata-only ones (tap ids, eps) must fail exactly
their metadata row while the numbers still agree, which is why verify compares metadata at all.
"""

from __future__ import annotations

import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import FIXTURES
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from dspark_convert.errors import ConvertError
from dspark_convert.gguffile.reader import read_gguf
from dspark_convert.verify import verify

pytest.importorskip("torch", reason="verify runs the torch reference forward (torch extra)")

H, HD, R = 64, 16, 8            # fixture dims (fixtures/generate.py)
_PACK = {VT.UINT32: "<I", VT.INT32: "<i", VT.FLOAT32: "<f", VT.BOOL: "<?"}
_ELEM = {VT.INT32: np.int32, VT.UINT32: np.uint32}


class Take:
    """A tensor edit that replaces the tensor by another tensor of the same file (e.g. to swap two)."""

    def __init__(self, name: str) -> None:
        self.name = name


def mutate(src: Path, dst: Path, tensors: dict[str, Callable[[np.ndarray], np.ndarray] | Take] | None = None,
           kvs: dict[str, Any] | None = None) -> Path:
    """Copy ``src`` to ``dst`` and overwrite tensors (same shape and type) and metadata values (same size)."""
    shutil.copyfile(src, dst)
    f = read_gguf(dst)
    edits: list[tuple[int, bytes]] = []
    for name, fn in (tensors or {}).items():
        t = f.tensor(name)
        assert t.qtype in (QT.F32, QT.I64), f"mutate() edits F32/I64 tensors, {name} is {t.type_name}"
        old = np.array(f.tensor_data(name))
        new = np.array(f.tensor_data(fn.name)) if isinstance(fn, Take) else fn(old.copy())
        new = np.ascontiguousarray(new, dtype=old.dtype)
        assert new.shape == old.shape and not np.array_equal(new, old), name
        edits.append((t.offset, new.tobytes()))
    for key, value in (kvs or {}).items():
        kv = f.kvs[key]
        if kv.type == VT.ARRAY:
            data = np.asarray(value, dtype=_ELEM[kv.sub_type]).tobytes()
        else:
            data = struct.pack(_PACK[kv.type], value)
        assert len(data) == kv.end - kv.value_offset, key
        edits.append((kv.value_offset, data))
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


# (id, layout, tensor edits, kv edits, rows that must fail, numbers must still agree)
MUTATIONS: list[tuple[str, str, dict, dict, set[str], bool]] = [
    ("eagle3-qk-not-permuted", "eagle3-speculators",
     {"blk.0.attn_q.weight": to_halves, "blk.0.attn_k.weight": to_halves}, {},
     {"prefill hidden (pre-norm)", "step logits"}, False),
    ("eagle3-qk-permuted-twice", "eagle3-specforge",
     {"blk.0.attn_q.weight": to_pairs, "blk.0.attn_k.weight": to_pairs}, {},
     {"prefill hidden (pre-norm)", "step logits"}, False),
    ("interleaved-not-deinterleaved", "dspark-qwen3-interleaved",
     {f"blk.{i}.{n}.weight": to_pairs for i in range(2) for n in ("attn_q", "attn_k", "attn_q_norm", "attn_k_norm")},
     {}, {"block hidden (post-norm)", "block logits"}, False),
    ("neox-draft-qk-permuted", "dspark-qwen3",
     {f"blk.{i}.{n}.weight": to_pairs for i in range(2) for n in ("attn_q", "attn_k")}, {},
     {"block hidden (post-norm)", "block logits"}, False),
    ("fc-halves-swapped", "dflash-zlab", {"fc.weight": swap_halves}, {},
     {"block hidden (post-norm)", "block logits"}, False),
    ("eagle3-fc-halves-swapped", "eagle3-angelslim", {"fc.weight": swap_halves}, {},
     {"prefill hidden (pre-norm)"}, False),
    ("markov-w1-w2-swapped", "dspark-qwen3",
     {"markov_w1.weight": Take("markov_w2.weight"), "markov_w2.weight": Take("markov_w1.weight")},
     {}, {"Markov-biased logits", "confidence (logit)"}, False),
    ("confidence-input-swapped", "dspark-speculators",
     {"conf_proj.weight": lambda w: np.concatenate([w[:, H:], w[:, :H]], axis=1)}, {},
     {"confidence (logit)"}, False),
    ("taps-without-plus-one", "dspark-qwen3", {}, {"dflash.target_layers": [1, 2, 4]},
     {"dflash.target_layers"}, True),
    ("eagle3-taps-shifted", "eagle3-speculators", {}, {"eagle3.target_layers": [1, 2, 4]},
     {"eagle3.target_layers"}, True),
    ("wrong-eps", "dspark-specforge", {}, {"dflash.attention.layer_norm_rms_epsilon": 1e-5},
     {"dflash.attention.layer_norm_rms_epsilon"}, True),
    ("wrong-rope-base", "dspark-qwen3", {}, {"dflash.rope.freq_base": 10000.0},
     {"dflash.rope.freq_base", "block hidden (post-norm)"}, False),
    ("eagle3-wrong-rope-base", "eagle3-specforge", {}, {"eagle3.rope.freq_base": 10000.0},
     {"eagle3.rope.freq_base", "step logits"}, False),
    ("block-convention-flipped", "dspark-qwen3", {}, {"dflash.sample_from_anchor": False},
     {"dflash.sample_from_anchor", "block logits"}, False),
    ("dflash-convention-flipped", "dflash-deepspec", {}, {"dflash.sample_from_anchor": False},
     {"dflash.sample_from_anchor", "block logits"}, False),
    ("wrong-mask-id", "dflash-zlab", {}, {"tokenizer.ggml.mask_token_id": 5},
     {"tokenizer.ggml.mask_token_id", "block hidden (post-norm)"}, False),
    ("wrong-block-size", "dspark-specforge", {}, {"dflash.block_size": 6},
     {"dflash.block_size", "block logits"}, False),
    ("d2t-entries-swapped", "dspark-reduced", {"d2t": lambda d: np.concatenate([d[1::-1], d[2:]])}, {},
     {"d2t (absolute ids)"}, False),
    ("reduced-lm-head-rows-rolled", "dspark-reduced", {"output.weight": lambda w: np.roll(w, 1, axis=0)}, {},
     {"block logits"}, False),
]

_GOOD: dict[str, bool] = {}


@pytest.mark.parametrize("mid,layout,tensors,kvs,must_fail,numbers_agree", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_verify_fails_each_mutation(converted, tmp_path: Path, mid: str, layout: str, tensors: dict, kvs: dict,
                                    must_fail: set[str], numbers_agree: bool) -> None:
    src = converted(layout)
    if layout not in _GOOD:                              # the unmutated file passes with the same inputs
        _GOOD[layout] = verify(src, FIXTURES / layout, FIXTURES / "target-qwen3").passed
    assert _GOOD[layout]
    bad = verify(mutate(src, tmp_path / f"{mid}.gguf", tensors, kvs), FIXTURES / layout, FIXTURES / "target-qwen3")
    assert not bad.passed
    failed = {o.name for o in bad.outputs if not o.passed} | {m.key for m in bad.metadata if not m.passed}
    assert must_fail <= failed, failed
    if numbers_agree:                                    # invisible to the math: only the metadata row catches it
        assert all(o.passed for o in bad.outputs) and failed == must_fail
    for o in bad.outputs:
        if o.name in must_fail and o.nmse is not None:
            assert o.nmse >= 1e-2


def test_mutated_metadata_reads_back(converted, tmp_path: Path) -> None:
    src = converted("dspark-qwen3")
    out = mutate(src, tmp_path / "m.gguf", kvs={"dflash.target_layers": [7, 8, 9], "dflash.rope.freq_base": 2.5,
                                                 "dflash.sample_from_anchor": False})
    f = read_gguf(out)
    assert f.value("dflash.target_layers") == [7, 8, 9]
    assert f.value("dflash.rope.freq_base") == 2.5 and f.value("dflash.sample_from_anchor") is False
    assert f.value("dflash.block_size") == read_gguf(src).value("dflash.block_size")


def test_permutation_helpers_are_inverse() -> None:
    w = np.arange(2 * HD * 3, dtype=np.float32).reshape(2 * HD, 3)
    assert np.array_equal(to_halves(to_pairs(w)), w)
    assert to_pairs(w)[:4, 0].tolist() == [0.0, 24.0, 3.0, 27.0]    # rows 0, hd/2, 1, hd/2+1 of head 0


def test_missing_gguf_tensor_fails_the_report(converted, tmp_path: Path) -> None:
    src = converted("dflash-zlab")
    dst = tmp_path / "renamed.gguf"
    shutil.copyfile(src, dst)
    info = read_gguf(dst).tensor("blk.1.ffn_up.weight").info_offset
    with open(dst, "r+b") as fh:                       # same-length rename: the tensor is no longer found
        fh.seek(info + 8)
        assert fh.read(19) == b"blk.1.ffn_up.weight"
        fh.seek(info + 8)
        fh.write(b"blk.1.ffn_uX.weight")
    r = verify(dst, FIXTURES / "dflash-zlab", FIXTURES / "target-qwen3")
    assert not r.passed
    assert [(o.name, o.grade) for o in r.outputs] == [("GGUF forward", "error")]
    assert "ffn_up" in r.outputs[0].detail


def test_broken_hf_checkpoint_is_an_input_error(converted, tmp_path: Path) -> None:
    src = converted("dflash-zlab")
    hf = tmp_path / "hf"
    shutil.copytree(FIXTURES / "dflash-zlab", hf)
    data = (hf / "model.safetensors").read_bytes()
    assert data.count(b'"layers.1.mlp.up_proj.weight"') == 1
    (hf / "model.safetensors").write_bytes(data.replace(b'"layers.1.mlp.up_proj.weight"', b'"layers.1.mlp.up_proj.weighX"'))
    with pytest.raises(ConvertError, match="reference forward failed"):
        verify(src, hf, FIXTURES / "target-qwen3")
