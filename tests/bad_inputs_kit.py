"""Helpers that build bad inputs from the committed fixtures, run the CLI on them, and check the refusal.

Every helper works on a copy under a test's ``tmp_path``; the fixtures themselves are never modified.

Example:
    >>> draft = copy_fixture(tmp_path, "dspark-qwen3")  # doctest: +SKIP
    >>> drop_tensor(draft, "layers.1.mlp.up_proj.weight")  # doctest: +SKIP
    >>> outcome = run_convert(draft, FIX / "target-qwen3", tmp_path / "out")  # doctest: +SKIP
    >>> assert_refused(outcome, "blk.1.ffn_up.weight")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from typer.testing import CliRunner

from dspark_convert.cli import app

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
TARGET = FIX / "target-qwen3"
OUT_NAME = "draft.gguf"

#: safetensors dtype -> numpy storage dtype (BF16 is kept as raw uint16 bits)
ST_NUMPY = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I64": np.int64,
            "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
DELETE = object()  # sentinel for edit_config: remove the key


# ------------------------------------------------------------------------------------------- folders
def copy_fixture(tmp: Path, name: str, dest: str | None = None) -> Path:
    """Copy fixture folder ``name`` to ``tmp/dest`` (default: the same name) and return the copy."""
    out = tmp / (dest or name)
    shutil.copytree(FIX / name, out)
    return out


def listing(folder: Path) -> list[str]:
    """Every entry of ``folder`` (hidden ones included), sorted: what a refusal must leave unchanged."""
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def read_config(folder: Path, name: str = "config.json") -> dict[str, Any]:
    return json.loads((folder / name).read_text(encoding="utf-8"))


def write_config(folder: Path, config: dict[str, Any], name: str = "config.json") -> None:
    (folder / name).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def edit_config(folder: Path, name: str = "config.json", **changes: Any) -> dict[str, Any]:
    """Set (or, with the value :data:`DELETE`, remove) top-level keys of a JSON file; returns the new dict."""
    cfg = read_config(folder, name)
    for k, v in changes.items():
        if v is DELETE:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    write_config(folder, cfg, name)
    return cfg


def set_config_value(folder: Path, path: tuple[str, ...], value: Any, name: str = "config.json") -> None:
    """Set the value at ``path`` (a key, or keys into nested objects) of a JSON file of ``folder``."""
    cfg = read_config(folder, name)
    node = cfg
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    write_config(folder, cfg, name)


# ------------------------------------------------------------------------------------------- safetensors
@dataclass
class RawSafetensors:
    """A safetensors file split into its parsed header and its data section (bytes after the header)."""

    header: dict[str, Any]
    data: bytes


def load_raw(path: Path) -> RawSafetensors:
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    return RawSafetensors(json.loads(blob[8:8 + n]), blob[8 + n:])


def save_raw(path: Path, st: RawSafetensors) -> None:
    """Write ``st`` back verbatim (no validation): offsets in the header are trusted as given."""
    raw = json.dumps(st.header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + st.data)


def read_tensors(path: Path) -> dict[str, tuple[str, np.ndarray]]:
    """``{name: (dtype, array)}`` of one safetensors file, in header order."""
    st = load_raw(path)
    out = {}
    for name, info in st.header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        arr = np.frombuffer(st.data[a:b], dtype=ST_NUMPY[info["dtype"]]).reshape(info["shape"])
        out[name] = (info["dtype"], arr.copy())
    return out


def write_tensors(path: Path, tensors: dict[str, tuple[str, np.ndarray]]) -> None:
    """Write a valid safetensors file (tensors packed in the given order)."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    blobs, off = [], 0
    for name, (dtype, arr) in tensors.items():
        data = np.ascontiguousarray(arr, dtype=ST_NUMPY[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    save_raw(path, RawSafetensors(header, b"".join(blobs)))


def shard_of(folder: Path, name: str) -> Path:
    """The safetensors file of ``folder`` that holds tensor ``name``."""
    for f in sorted(folder.glob("*.safetensors")):
        if name in load_raw(f).header:
            return f
    raise KeyError(name)


def drop_tensor(folder: Path, name: str) -> None:
    """Remove tensor ``name`` from the checkpoint (a single-file checkpoint: no index to update)."""
    f = shard_of(folder, name)
    tensors = read_tensors(f)
    del tensors[name]
    write_tensors(f, tensors)


def set_tensor(folder: Path, name: str, dtype: str, arr: np.ndarray) -> None:
    """Replace (or add, in model.safetensors) tensor ``name`` with ``arr`` stored as ``dtype``."""
    try:
        f = shard_of(folder, name)
    except KeyError:
        f = folder / "model.safetensors"
    tensors = read_tensors(f)
    tensors[name] = (dtype, arr)
    write_tensors(f, tensors)


def get_tensor(folder: Path, name: str) -> tuple[str, np.ndarray]:
    return read_tensors(shard_of(folder, name))[name]


# ------------------------------------------------------------------------------------------- CLI
@dataclass
class Outcome:
    """What one CLI run did: exit code, stdout, stderr, and the output folder listing before and after."""

    exit_code: int
    stdout: str
    stderr: str
    before: list[str]
    after: list[str]
    exception: BaseException | None

    @property
    def error_lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.startswith("error:")]


def run_cli(args: list[str], out_dir: Path) -> Outcome:
    """Run ``dspark-convert ARGS`` in-process; ``out_dir`` is the folder whose listing must not change."""
    before = listing(out_dir)
    r = CliRunner().invoke(app, args, catch_exceptions=True)
    return Outcome(r.exit_code, r.stdout, r.stderr, before, listing(out_dir),
                   None if isinstance(r.exception, SystemExit) else r.exception)


def run_convert(draft: Path, target: Path, out_dir: Path, *extra: str, name: str = OUT_NAME) -> Outcome:
    """``dspark-convert hf2gguf DRAFT -t TARGET -o OUT_DIR/NAME EXTRA...`` (creates ``out_dir``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return run_cli(["hf2gguf", str(draft), "-t", str(target), "-o", str(out_dir / name), *extra], out_dir)


def assert_refused(outcome: Outcome, *fragments: str, code: int = 2) -> str:
    """Exit ``code`` (2), no traceback, exactly one ``error:`` line holding every fragment, output folder unchanged.

    Returns the error line without its ``error: `` prefix (for the troubleshooting catalogue).
    """
    assert outcome.exception is None, f"unexpected exception {outcome.exception!r}\n{outcome.stderr}"
    assert outcome.exit_code == code, f"exit code {outcome.exit_code}\nstdout: {outcome.stdout}\nstderr: {outcome.stderr}"
    assert "Traceback" not in outcome.stderr + outcome.stdout
    assert len(outcome.error_lines) == 1, outcome.stderr
    line = outcome.error_lines[0].removeprefix("error: ")
    for frag in fragments:
        assert frag in line, f"{frag!r} not in {line!r}"
    assert outcome.after == outcome.before, f"output folder changed: {outcome.before} -> {outcome.after}"
    return line
