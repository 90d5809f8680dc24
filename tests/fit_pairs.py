"""Draft/target pairs for tests/check/test_fit.py: drafts converted from the fixtures, and target GGUFs holding only what
``check --target`` reads (the header: ``{arch}.*`` sizes and the tokenizer KVs), written with gguf's writer.

Example:
    >>> kvs = hf_target_kvs()  # the tokenizer KVs of fixtures/target-qwen3, as upstream would write them
    >>> write_target_gguf(tmp_path / "t.gguf", kvs, block_count=4)  # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT
from gguf import GGUFWriter

from dspark_convert import convert
from dspark_convert.plan import KV
from dspark_convert.tokenizer.handlers import target_vocab_kvs

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
TARGET = FIX / "target-qwen3"
TOKENS = "tokenizer.ggml.tokens"

#: target-qwen3's sizes: 6 layers, hidden 64, 40960 positions, rope theta 1e6
TARGET_HP = {"block_count": 6, "embedding_length": 64, "context_length": 40960, "rope.freq_base": 1e6}


def convert_draft(fixture: str, out: Path, target: Path = TARGET) -> Path:
    """``hf2gguf fixtures/FIXTURE -t TARGET`` into ``out`` (bf16); a target other than target-qwen3 does not fit the
    fixtures' 1024-token vocabulary, so the fit errors are lifted (``ignore_target_mismatch``)."""
    convert(FIX / fixture, target, out, outtype="bf16", ignore_target_mismatch=target != TARGET)
    return out


def hf_target_kvs(folder: Path = TARGET, vocab_size: int = 1024, handler: str = "qwen") -> list[KV]:
    """The tokenizer KVs of an HF target folder, padded to ``vocab_size`` (what a converted target GGUF holds)."""
    return target_vocab_kvs(folder, vocab_size, handler)


def edit_kvs(kvs: list[KV], **changes: Any) -> list[KV]:
    """``kvs`` with some values replaced (``tokenizer.ggml.bos_token_id`` is spelled ``bos_token_id``); a value of
    None removes the key; a key that is absent is appended with a type guessed from the value."""
    out = list(kvs)
    for short, value in changes.items():
        name = short if short.startswith("tokenizer.") else f"tokenizer.ggml.{short}"
        pos = next((i for i, kv in enumerate(out) if kv.name == name), None)
        if value is None:
            if pos is not None:
                del out[pos]
            continue
        if pos is not None:
            old = out[pos]
            out[pos] = KV(name, old.type, value, old.sub_type)
        elif isinstance(value, bool):
            out.append(KV(name, VT.BOOL, value))
        elif isinstance(value, int):
            out.append(KV(name, VT.UINT32, value))
        else:
            out.append(KV(name, VT.STRING, value))
    return out


def tokens_of(kvs: list[KV]) -> list[str]:
    return list(next(kv.value for kv in kvs if kv.name == TOKENS))


def write_target_gguf(path: Path, kvs: list[KV], *, arch: str = "qwen3", big_tensor_bytes: int = 0,
                      **hp: Any) -> Path:
    """A target GGUF with ``{arch}.*`` sizes (:data:`TARGET_HP`, overridden by ``hp``; a None value leaves the key
    out) and the tokenizer KVs ``kvs``. ``big_tensor_bytes`` > 0 declares one F32 tensor of that size whose data
    is a hole in a sparse file (nothing is allocated or written for it)."""
    w = GGUFWriter(path, arch)
    sizes = {**TARGET_HP, **{k.replace("__", "."): v for k, v in hp.items()}}
    for key, value in sizes.items():
        if value is None:
            continue
        if isinstance(value, float):
            w.add_key_value(f"{arch}.{key}", value, VT.FLOAT32)
        elif isinstance(value, str):
            w.add_key_value(f"{arch}.{key}", value, VT.STRING)
        else:
            w.add_key_value(f"{arch}.{key}", value, VT.UINT32)
    for kv in kvs:
        w.add_key_value(kv.name, kv.value, kv.type, sub_type=kv.sub_type)
    n = big_tensor_bytes // 256 * 64  # F32 elements, whole rows of 64
    if n:
        w.add_tensor_info("token_embd.weight", (n // 64, 64), np.dtype(np.float32), n * 4, raw_dtype=QT.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    if n:
        size = path.stat().st_size  # the data starts at the next multiple of 32; all of it is a hole
        os.truncate(path, size + (-size) % 32 + n * 4)
    return path
