"""Loader rules for DeepSeek-V4 DSpark files (``check FILE``; dspark_convert/dsv4_rules.py), on GGUFs written with
gguf-py's own GGUFWriter from the independent oracle (tests/dsv4_oracle.py): a good file has no finding, and each
broken rule (missing key, wrong gating function, compress ratios, extra ``output.weight``, missing or misshapen
tensors) is reported with its subject and rule."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dsv4_oracle import expected_kvs, expected_tensors
from dsv4_support import dsv4
from gguf import GGMLQuantizationType as QT
from gguf import GGUFWriter, quant_shape_to_byte_shape

from dspark_convert.check import check_file, errors

V = 1024
DIMS = dsv4.Dims(hidden=192, stages=2, experts=3, moe=64, hc=2, head_dim=64, q_lora=64, o_lora=32, markov_rank=8,
                 vocab=V)

@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], list[tuple[str, str, list[int], bytes]]]:
    ck = dsv4.write_checkpoint(tmp_path_factory.mktemp("dsv4") / "ck", DIMS, dsv4.Layout(), seed=3)
    cfg = json.loads((ck / "config.json").read_text())
    return expected_kvs(cfg, DIMS.stages), expected_tensors(ck)


def write(path: Path, kvs: dict[str, Any], tensors: list[tuple[str, str, list[int], bytes]]) -> Path:
    """A GGUF made by gguf-py alone: arch dflash, the given arch keys, a 1,024-token gpt2 tokenizer, raw tensors."""
    w = GGUFWriter(str(path), "dflash")
    for key, value in kvs.items():
        if key == "general.file_type":
            w.add_file_type(value)
        elif isinstance(value, list):
            w.add_array(key, value)
        elif isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, str):
            w.add_string(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        else:
            w.add_uint32(key, value)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(V)])
    w.add_token_merges(["t 1"])
    for name, kind, ne, blob in tensors:
        qt = QT[kind]
        data = np.frombuffer(blob, dtype=np.uint8)
        if qt == QT.F32:
            arr = data.view(np.float32).reshape(ne[::-1])
            w.add_tensor(name, arr)
        else:
            w.add_tensor(name, data.reshape(quant_shape_to_byte_shape(tuple(ne[::-1]), qt)), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def findings(tmp_path: Path, kvs: dict[str, Any], tensors: list) -> list[tuple[str, str]]:
    return [(f.subject, f.rule) for f in errors(check_file(write(tmp_path / "x.gguf", kvs, tensors)))]


def test_good_file_has_no_findings(tmp_path: Path, parts: tuple) -> None:
    kvs, tensors = parts
    assert [str(f) for f in check_file(write(tmp_path / "good.gguf", kvs, tensors))] == []


def _drop(key: str) -> Callable[[dict, list], None]:
    return lambda kvs, t: kvs.pop(key)


def _set(key: str, value: Any) -> Callable[[dict, list], None]:
    return lambda kvs, t: kvs.__setitem__(key, value)


def _remove_tensor(name: str) -> Callable[[dict, list], None]:
    return lambda kvs, t: t.remove(next(x for x in t if x[0] == name))


def _add_output(kvs: dict, t: list) -> None:
    t.append(("output.weight", "F32", [DIMS.hidden, V], np.zeros((V, DIMS.hidden), np.float32).tobytes()))


def _shrink_experts(kvs: dict, t: list) -> None:  # the stack of blk.1 up experts holds one expert less
    i = next(i for i, x in enumerate(t) if x[0] == "blk.1.ffn_up_exps.weight")
    name, kind, ne, blob = t[i]
    t[i] = (name, kind, [ne[0], ne[1], ne[2] - 1], blob[:len(blob) // ne[2] * (ne[2] - 1)])


CASES: dict[str, tuple[Callable[[dict, list], None], tuple[str, str]]] = {
    "no-hc-sinkhorn": (_drop("dflash.hyper_connection.sinkhorn_iterations"),
                       ("dflash.hyper_connection.sinkhorn_iterations", "required-key")),
    "no-q-lora": (_drop("dflash.attention.q_lora_rank"), ("dflash.attention.q_lora_rank", "required-key")),
    "no-expert-weights-norm": (_drop("dflash.expert_weights_norm"), ("dflash.expert_weights_norm", "required-key")),
    "no-swiglu-clamp": (_drop("dflash.swiglu_clamp_exp"), ("dflash.swiglu_clamp_exp", "required-key")),
    "no-output-groups": (_drop("dflash.attention.output_group_count"),
                         ("dflash.attention.output_group_count", "required-key")),
    "gating-softmax": (_set("dflash.expert_gating_func", 1), ("dflash.expert_gating_func", "dsv4")),
    "compress-ratios": (_set("dflash.attention.compress_ratios", [0, 4]), ("dflash.attention.compress_ratios", "dsv4")),
    "compress-ratios-length": (_set("dflash.attention.compress_ratios", [0, 0, 0]),
                               ("dflash.attention.compress_ratios", "shape")),
    "extra-output": (_add_output, ("output.weight", "extra-tensor")),
    "missing-hc-head": (_remove_tensor("output_hc_fn.weight"), ("output_hc_fn.weight", "required-tensor")),
    "missing-stage-tensor": (_remove_tensor("blk.1.attn_kv.weight"), ("blk.1.attn_kv.weight", "required-tensor")),
    "experts-vs-expert-count": (_shrink_experts, ("blk.1.ffn_up_exps.weight", "shape")),
    "hc-mult-vs-tensors": (_set("dflash.hyper_connection.count", 3), ("blk.0.hc_attn_fn.weight", "shape")),
    "q-lora-vs-tensors": (_set("dflash.attention.q_lora_rank", 96), ("blk.0.attn_q_a.weight", "shape")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_broken_rule_is_reported(tmp_path: Path, parts: tuple, case: str) -> None:
    kvs, tensors = dict(parts[0]), list(parts[1])
    mutate, want = CASES[case]
    mutate(kvs, tensors)
    assert want in findings(tmp_path, kvs, tensors)
