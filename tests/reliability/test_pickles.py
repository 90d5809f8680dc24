"""Safe loading: pickle checkpoints only through torch's weights-only unpickler (a hostile pickle is refused and
its code never runs), a plain ``pytorch_model.bin`` converts exactly like the same weights in safetensors, and a
safetensors header over the size limit is refused before it is read.
"""

from __future__ import annotations

import os
import pickle
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from bad_inputs_kit import FIX, TARGET, assert_refused, copy_fixture, read_tensors, run_convert
from fixture_registry import names

from dspark_convert import convert
from dspark_convert.errors import ConvertError
from dspark_convert.gguffile.reader import read_gguf
from dspark_convert.hf.checkpoint import MAX_HEADER_BYTES, Checkpoint, read_safetensors_header
from dspark_convert.units import size_text

torch = pytest.importorskip("torch", reason="pickle checkpoints need torch")


class Exploit:
    """Unpickling this runs a shell command (``os.system``) that creates ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (os.system, (f"touch '{self.marker}'",))


def to_torch(dtype: str, arr: np.ndarray) -> torch.Tensor:
    if dtype == "BF16":  # stored as raw uint16 bits
        return torch.from_numpy(arr.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(arr.copy())


def bin_checkpoint(tmp: Path, fixture: str, *, order: list[str] | None = None, parts: int = 1,
                   legacy: bool = False) -> Path:
    """A copy of ``fixture`` (same folder name, so the same general.name) with its safetensors replaced by
    ``parts`` pytorch_model*.bin files holding the tensors in ``order`` (default: sorted by name)."""
    draft = copy_fixture(tmp, fixture)
    tensors = {}
    for f in sorted(draft.glob("*.safetensors")):
        tensors.update(read_tensors(f))
        f.unlink()
    (draft / "model.safetensors.index.json").unlink(missing_ok=True)
    names = order or sorted(tensors)
    size = -(-len(names) // parts)
    for i in range(parts):
        sd = {n: to_torch(*tensors[n]) for n in names[i * size:(i + 1) * size]}
        fn = "pytorch_model.bin" if parts == 1 else f"pytorch_model-{i + 1:05d}-of-{parts:05d}.bin"
        torch.save(sd, draft / fn, _use_new_zipfile_serialization=not legacy)
    return draft


# ------------------------------------------------------------------------------------------- hostile pickles
@pytest.mark.parametrize("fmt", ["torch-zip", "plain-pickle"])
def test_malicious_pickle_is_refused_and_never_runs(tmp_path: Path, fmt: str) -> None:
    marker = tmp_path / "code-ran"
    draft = copy_fixture(tmp_path, "dspark-qwen3", "draft")
    (draft / "model.safetensors").unlink()
    payload = {"fc.weight": Exploit(marker)}
    if fmt == "torch-zip":
        torch.save(payload, draft / "pytorch_model.bin")
    else:
        (draft / "pytorch_model.bin").write_bytes(pickle.dumps(payload, protocol=2))
    r = run_convert(draft, TARGET, tmp_path / "out")
    line = assert_refused(r, f"{draft / 'pytorch_model.bin'}: refused to load", "nothing in the file was run")
    assert "weights_only=False" not in line  # never advise the unsafe retry torch's own message suggests
    if fmt == "torch-zip":
        assert "it references 'posix.system', which is not a tensor type" in line
    assert not marker.exists()
    assert r.after == []


def test_pickle_with_non_tensor_entries_is_refused(tmp_path: Path) -> None:
    draft = copy_fixture(tmp_path, "dspark-qwen3", "draft")
    (draft / "model.safetensors").unlink()
    torch.save({"fc.weight": torch.zeros(2), "step": 3}, draft / "pytorch_model.bin")
    with pytest.raises(ConvertError, match=r"pytorch_model.bin: entry 'step' is a int, expected a tensor$"):
        Checkpoint(draft)


def test_truncated_pickle_is_one_line(tmp_path: Path) -> None:
    draft = bin_checkpoint(tmp_path, "dspark-qwen3")
    f = draft / "pytorch_model.bin"
    f.write_bytes(f.read_bytes()[:1000])
    r = run_convert(draft, TARGET, tmp_path / "out")
    assert_refused(r, f"{f}: cannot be read as a PyTorch checkpoint", "expected a file written by torch.save")


# ------------------------------------------------------------------------------------------- valid pickles
@pytest.mark.parametrize("fixture", names(tag="pickle"))
def test_pytorch_model_bin_converts_like_safetensors(tmp_path: Path, fixture: str) -> None:
    draft = bin_checkpoint(tmp_path / "bin", fixture)
    assert sorted(p.name for p in draft.iterdir()) == ["config.json", "pytorch_model.bin"]
    a, b = tmp_path / "bin.gguf", tmp_path / "st.gguf"
    convert(draft, TARGET, a)
    convert(FIX / fixture, TARGET, b)
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize(("parts", "legacy"), [(2, False), (1, True)], ids=["two-shards", "legacy-format"])
def test_sharded_and_legacy_bins_convert(tmp_path: Path, parts: int, legacy: bool) -> None:
    draft = bin_checkpoint(tmp_path / "bin", "dspark-qwen3", parts=parts, legacy=legacy)
    a, b = tmp_path / "bin.gguf", tmp_path / "st.gguf"
    convert(draft, TARGET, a)
    convert(FIX / "dspark-qwen3", TARGET, b)
    assert a.read_bytes() == b.read_bytes()


def test_pickle_tensors_keep_state_dict_order(tmp_path: Path) -> None:
    # contract §4.5: a pickle checkpoint is written in its state-dict order, not sorted by name
    names = sorted(read_tensors(FIX / "dspark-qwen3" / "model.safetensors"), reverse=True)
    draft = bin_checkpoint(tmp_path / "bin", "dspark-qwen3", order=names)
    out = convert(draft, TARGET, tmp_path / "rev.gguf").path
    sorted_plan = convert(FIX / "dspark-qwen3", TARGET, tmp_path / "x.gguf", dry_run=True).plan
    gguf_of = {t.source: t.name for t in sorted_plan.tensors}
    written = [t.name for t in read_gguf(out).tensors]
    assert written == [gguf_of[n] for n in names if n in gguf_of]
    # 31: token_embd kept (upstream b11434) and output.weight added (untied target)
    assert written[0] == "output_norm.weight" and written[-1] == "conf_proj.bias" and len(written) == 31


# ------------------------------------------------------------------------------------------- header size limit
def test_oversized_safetensors_header_is_refused_before_reading(tmp_path: Path) -> None:
    f = tmp_path / "model.safetensors"
    n = MAX_HEADER_BYTES + 8
    with open(f, "wb") as fh:  # the file really is that long (sparse), so only the limit can refuse it
        fh.write(struct.pack("<Q", n) + b"{")
        fh.truncate(8 + n + 64)
    tracemalloc.start()
    try:
        with pytest.raises(ConvertError) as info:
            read_safetensors_header(f)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(info.value) == f"{f}: safetensors header claims {size_text(n)}, over the limit of {size_text(MAX_HEADER_BYTES)}"
    assert peak < 1_000_000  # the 100 MB header was never read into memory


def test_header_length_beyond_file_is_refused_without_reading(tmp_path: Path) -> None:
    f = tmp_path / "model.safetensors"
    f.write_bytes(struct.pack("<Q", MAX_HEADER_BYTES) + b"{}")
    tracemalloc.start()
    try:
        with pytest.raises(ConvertError, match=r"truncated safetensors file: header claims 100.0 MiB \(104,857,600 bytes\), the file has 2 bytes after its length field$"):
            read_safetensors_header(f)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


@pytest.mark.parametrize(("sd", "line"), [
    ({5: torch.zeros(2)}, "a state dict key is 5 (a int), expected a tensor name (a string)"),
    ({("a", 1): torch.zeros(2)}, "a state dict key is ('a', 1) (a tuple), expected a tensor name (a string)"),
    ({"fc.weight": torch.zeros(2, device="meta")}, "tensor 'fc.weight' is a meta tensor (no data), expected a dense "
                                                   "tensor with its data"),
    ({"fc.weight": torch.zeros(2, 2).to_sparse()}, "tensor 'fc.weight' is a sparse_coo tensor, expected a dense "
                                                    "tensor with its data"),
], ids=["int-key", "tuple-key", "meta-tensor", "sparse-tensor"])
def test_odd_state_dicts_are_one_line(tmp_path: Path, sd: dict, line: str) -> None:
    """Issue 25.7: these were tracebacks (a key used as a str, a tensor without data read as numpy)."""
    draft = copy_fixture(tmp_path, "dspark-qwen3", "draft")
    (draft / "model.safetensors").unlink()
    torch.save(sd, draft / "pytorch_model.bin")
    with pytest.raises(ConvertError) as info:
        Checkpoint(draft)
    assert str(info.value) == f"{draft / 'pytorch_model.bin'}: {line}"
