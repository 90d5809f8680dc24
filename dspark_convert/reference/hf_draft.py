"""The torch side's view of an ORIGINAL Hugging Face draft folder: its config, typed, and its weights, as stored
in the GGUF.

- :func:`open_draft` reads ``config.json`` in every layout users bring (flat, nested, speculators
  ``transformer_layer_config``, one-layer drafts) into a frozen hyperparameter record: the fields every draft has
  (:class:`HFHParams`), extended by the calling variant's ``torch_forward`` (its :data:`ConfigReader` and its own
  subclass for its variant's fields). It is written from ``spec/checkpoints.md`` and shares no code with the
  converter.
- :class:`TorchCheckpoint` reads tensors with safetensors' own reader, one short-lived handle per read (a kept
  handle keeps its memory map, and every page it touched stays in the RSS), as float32.
- **Storage rounding** (exact mode): given the GGML type each tensor has in the GGUF, a read applies exactly the
  rounding that type implies (:mod:`.storage`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
import torch
from safetensors import safe_open

from .. import schema as S
from ..errors import ConvertError, clip_value
from ..hf.checkpoint import Checkpoint, read_config
from ..hf.values import as_float, as_positive, as_u32
from .compare import MetadataCheck
from .storage import SAME_TYPE, Rounding, round_to_storage, widen

if TYPE_CHECKING:
    from .weights import GGUFWeights

TARGET_EMBED_NAMES = ("model.embed_tokens.weight", "model.language_model.embed_tokens.weight", "embed_tokens.weight")


# ============================================================================================== weights
class TorchCheckpoint:
    """Tensors of a checkpoint folder through ``safetensors.safe_open(framework="pt")``, as float32.

    With ``storage`` (checkpoint name -> GGML type name), every floating-point read is rounded the way that
    type stores it (:func:`round_to_storage`) and recorded in :attr:`rounding`.
    """

    def __init__(self, folder: Path, storage: Mapping[str, str] | None = None,
                 _index: dict[str, tuple[Path, list[int]]] | None = None) -> None:
        self.folder, self.storage = folder, dict(storage or {})
        self.rounding: dict[str, Rounding] = {}
        #: every tensor whose data was read, shared by the copies :meth:`with_storage` makes (tensor accounting)
        self.read: set[str] = set()
        fresh = _index is None
        if _index is None:  # the converter's reader finds and checks the shards (members, headers, index)
            ck = Checkpoint(folder, need_config=False)
            if not ck.names or any(f.suffix != ".safetensors" for f in ck.files):
                raise ConvertError(f"{folder}: no safetensors files")
            _index = {n: (ck.ref(n).file, list(ck.ref(n).shape)) for n in ck.names}
        self.index = _index
        #: names as read in the files, for names :meth:`without_prefix` or :meth:`_compressed_tensors` changed
        self.real: dict[str, str] = {}
        #: per-tensor scales stored as their reciprocal (compressed-tensors global scales), read as ``1 / value``
        self.reciprocal: set[str] = set()
        if fresh:
            self._compressed_tensors()

    def with_storage(self, storage: Mapping[str, str] | None) -> TorchCheckpoint:
        """The same folder read with another storage rounding (None: the unrounded values)."""
        copy = TorchCheckpoint(self.folder, storage, self.index)
        copy.read, copy.real, copy.reciprocal = self.read, self.real, self.reciprocal
        return copy

    def without_prefix(self, prefix: str) -> TorchCheckpoint:
        """The same folder with ``prefix`` dropped from the tensor names that carry it (a name without it wins)."""
        index: dict[str, tuple[Path, list[int]]] = {}
        real: dict[str, str] = {}
        reciprocal: set[str] = set()
        for n, where in self.index.items():
            bare = n[len(prefix):] if n.startswith(prefix) and n[len(prefix):] not in self.index else n
            index[bare] = where
            real[bare] = self.real.get(n, n)
            if n in self.reciprocal:
                reciprocal.add(bare)
        copy = TorchCheckpoint(self.folder, self.storage, index)
        copy.real, copy.reciprocal = real, reciprocal
        return copy

    def _compressed_tensors(self) -> None:
        """Read a compressed-tensors NVFP4 linear (``X.weight_packed`` beside ``X.weight_global_scale``) under
        ModelOpt's names: ``X.weight``, ``X.weight_scale_2`` and ``X.input_scale``, the two global scales as their
        reciprocals (compressed-tensors stores ``1 / scale``)."""
        for packed in [n for n in self.index if n.endswith(".weight_packed")]:
            base = packed.removesuffix(".weight_packed")
            if base + ".weight_global_scale" not in self.index:
                continue
            names = {packed: base + ".weight", base + ".weight_global_scale": base + ".weight_scale_2",
                     base + ".input_global_scale": base + ".input_scale"}
            self.rename(names)
            self.reciprocal.update(new for old, new in names.items() if old.endswith("global_scale")
                                   and self.real.get(new) == old)

    def rename(self, names: Mapping[str, str]) -> None:
        """Read tensor ``old`` as ``new`` for each pair of ``names`` the folder holds (in place: a draft whose layout
        spells a tensor its own way, read under the name the forward uses; accounting reports the new name)."""
        for old, new in names.items():
            if old in self.index and new not in self.index:
                self.index[new] = self.index.pop(old)
                self.real[new] = self.real.pop(old, old)

    def _name(self, name: str) -> str:
        """The name in the safetensors file (:meth:`without_prefix` renames)."""
        return self.real.get(name, name)

    @property
    def names(self) -> list[str]:
        return list(self.index)

    def has(self, name: str) -> bool:
        return name in self.index

    def shape(self, name: str) -> list[int]:
        """The logical shape (an NVFP4 weight's ``[out, in]``, not its packed ``[out, in/2]``)."""
        shape = list(self._where(name)[1])
        return [shape[0], 2 * shape[1]] if self.nvfp4_companions(name) else shape

    def _where(self, name: str) -> tuple[Path, list[int]]:
        if name not in self.index:
            raise ConvertError(f"{self.folder}: tensor '{name}' not found")
        return self.index[name]

    def _finish(self, name: str, t: torch.Tensor, record: bool = True) -> torch.Tensor:
        if record:
            self.read.add(name)
        if not t.is_floating_point():
            return t
        src, t = t.dtype, widen(t)
        kind = self.storage.get(name)
        if kind is None:
            return t
        rec = self.rounding.setdefault(name, Rounding(kind))
        rec.values += t.numel()
        if kind == "NVFP4" and self.nvfp4_companions(name):  # decoded NVFP4: the GGUF's blocks hold these values
            return t
        if kind == "F32" or SAME_TYPE.get(str(src)) == kind:     # the checkpoint's own type (or wider): nothing to round
            return t
        r = round_to_storage(t, kind)
        if t.numel():
            diff = r.sub(t).abs_()                     # one temporary, freed before the next read
            rec.changed += int(torch.count_nonzero(diff))
            rec.max_change = max(rec.max_change, float(diff.max()))
        return r

    def dtype_of(self, name: str) -> torch.dtype:
        """The stored floating-point dtype of ``name`` (BF16 / F16; F32 for anything else)."""
        path, _ = self._where(name)
        with safe_open(str(path), framework="pt") as h:
            kind = h.get_slice(self._name(name)).get_dtype()
        return {"BF16": torch.bfloat16, "F16": torch.float16}.get(kind, torch.float32)

    def nvfp4_companions(self, name: str) -> tuple[str, ...]:
        """For a ModelOpt NVFP4 weight (``X.weight`` with a 2-D ``X.weight_scale``): its block and per-tensor
        scale names, which reading the weight reads too; empty for any other tensor."""
        base = name.removesuffix(".weight")
        if not name.endswith(".weight") or base + ".weight_scale" not in self.index:
            return ()
        if len(self.index[base + ".weight_scale"][1]) != 2:
            return ()
        return (base + ".weight_scale", base + ".weight_scale_2")

    def fp8_scale(self, name: str) -> str | None:
        """For a ModelOpt FP8 weight (``X.weight`` beside a scalar or per-row ``X.weight_scale``): the scale's name,
        which reading the weight reads too (the codes times the scale, in float32); None for any other tensor."""
        scale = name.removesuffix(".weight") + ".weight_scale"
        if not name.endswith(".weight") or scale not in self.index or len(self.index[scale][1]) >= 2:
            return None
        return scale

    def _fp8(self, name: str, t: torch.Tensor, rows: slice | list[int] = slice(None)) -> torch.Tensor:
        """``t`` (rows ``rows`` of ``name``) dequantized when ``name`` is a ModelOpt FP8 weight, else as it is: the
        codes times the scale, or row ``i`` times ``scale[i]`` for per-channel scales."""
        scale = self.fp8_scale(name)
        if scale is None:
            return t
        path, _ = self._where(scale)
        with safe_open(str(path), framework="pt") as h:
            s = h.get_tensor(self._name(scale)).float()
        self.read.add(scale)
        if s.numel() > 1:  # one per output row
            s = s.reshape(-1)[rows].unsqueeze(-1)
        return t.float() * s

    def _nvfp4_rows(self, name: str, a: int | None = None, b: int | None = None,
                    ids: list[int] | None = None) -> torch.Tensor:
        """Rows of an NVFP4 weight decoded by the torch side's own code (:mod:`.nvfp4_torch`)."""
        from .nvfp4_torch import dequant_modelopt_nvfp4

        scale, scale2 = self.nvfp4_companions(name)
        parts = []
        for n in (name, scale):
            path, _ = self._where(n)
            with safe_open(str(path), framework="pt") as h:
                sl = h.get_slice(self._name(n))
                parts.append(torch.cat([sl[i:i + 1] for i in ids]) if ids is not None else sl[a:b])
        path, _ = self._where(scale2)
        with safe_open(str(path), framework="pt") as h:
            s2 = self._scale(scale2, h.get_tensor(self._name(scale2)))
        return dequant_modelopt_nvfp4(parts[0], parts[1], s2)

    def _scale(self, name: str, t: torch.Tensor) -> torch.Tensor:
        """A per-tensor scale's value: ``1 / stored`` (float32) where it is stored as its reciprocal."""
        return 1.0 / t.float() if name in self.reciprocal else t

    def get(self, name: str, *, record: bool = True) -> torch.Tensor:
        """The whole tensor as float32 (rounded as stored; integers keep their type). ``record=False``: a bulk load
        whose caller records the names it uses itself (not counted in :attr:`read`)."""
        if self.nvfp4_companions(name):
            return self._finish(name, self._nvfp4_rows(name), record)
        path, _ = self._where(name)
        with safe_open(str(path), framework="pt") as h:
            return self._finish(name, self._scale(name, self._fp8(name, h.get_tensor(self._name(name)))), record)

    def rows(self, name: str, ids: list[int]) -> torch.Tensor:
        """Rows ``ids`` (axis 0) as float32."""
        if self.nvfp4_companions(name):
            return self._finish(name, self._nvfp4_rows(name, ids=ids))
        path, _ = self._where(name)
        with safe_open(str(path), framework="pt") as h:
            sl = h.get_slice(self._name(name))
            return self._finish(name, self._fp8(name, torch.cat([sl[i:i + 1] for i in ids]), ids))

    def row_chunks(self, name: str, chunk: int = 8192) -> Iterator[tuple[int, torch.Tensor]]:
        """``(first_row, float32 rows)``, ``chunk`` rows at a time, each read through a fresh handle."""
        path, shape = self._where(name)
        for a in range(0, shape[0], chunk):
            if self.nvfp4_companions(name):
                yield a, self._finish(name, self._nvfp4_rows(name, a, min(shape[0], a + chunk)))
                continue
            with safe_open(str(path), framework="pt") as h:
                b = min(shape[0], a + chunk)
                yield a, self._finish(name, self._fp8(name, h.get_slice(self._name(name))[a:b], slice(a, b)))


# ============================================================================================== config
@dataclass(frozen=True)
class RopeParams:
    """RoPE settings of the checkpoint (HF ``rope_parameters`` / ``rope_scaling`` and ``rope_theta``)."""

    type: str = "default"
    theta: float = 10000.0
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: float = 8192.0
    partial: float = 1.0  # partial_rotary_factor: the first head_dim * partial dims rotate


@dataclass(frozen=True)
class HFHParams:
    """The hyperparameters every draft has, normalised across layouts (the torch twin of the GGUF side's
    ``CommonHParams``). A variant's ``torch_forward`` extends it with its own fields (a frozen dataclass
    subclass in its ``torch_forward`` module), as each numpy forward extends ``CommonHParams``."""

    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim: int
    eps: float
    rope: RopeParams
    vocab_size: int
    draft_vocab_size: int
    target_layers: list[int]
    own_embed: bool                      # embeddings from the draft (else the target's)


#: the hyperparameter record of a draft (its reader's subclass of :class:`HFHParams`)
H = TypeVar("H", bound=HFHParams)


@dataclass
class HFDraft(Generic[H]):
    """The draft checkpoint's config, normalised across layouts, plus lazy weights and the target's."""

    path: Path
    family: str                                  # the reader's family word (a converter family's name)
    layout: str
    raw: dict[str, Any]
    hp: H
    weights: TorchCheckpoint
    target: TorchCheckpoint
    prefix: str = ""                             # per-layer prefix of a one-layer draft ("midlayer." / "layers.0.")
    notes: list[str] = field(default_factory=list)
    #: (mask id, learned mask vector) replacing that row of the embedding table (a variant's ``open`` sets it from
    #: a mask embedding its drafts ship beside their weights)
    mask_vector: tuple[int, torch.Tensor] | None = None

    @property
    def w(self) -> TorchCheckpoint:
        """The draft's weights (a torch side's checkpoint object's ``.w``)."""
        return self.weights

    def d2t_rows(self, g: GGUFWeights, *, always: bool = False) -> list[MetadataCheck]:
        """The ``d2t (absolute ids)`` row: the GGUF's draft -> target ids against this checkpoint's offsets plus
        their index, when it has a ``d2t`` and the draft's vocabulary is reduced (``always``: whenever it has one)."""
        hp = self.hp
        if not (self.weights.has("d2t") and (always or hp.draft_vocab_size < hp.vocab_size)):
            return []
        expected = self.weights.get("d2t").long().numpy().reshape(-1)
        expected = expected + np.arange(expected.size)
        got = g.ints("d2t") if g.has("d2t") else None
        same = got is not None and got.shape == expected.shape and bool((got == expected).all())
        return [MetadataCheck("d2t (absolute ids)", "equal" if same else ("absent" if got is None else "different"),
                              f"{expected.size} ids", same)]

    def round_target(self, gguf_types: Mapping[str, str]) -> None:
        """Round the target's embedding / head as ``token_embd`` / ``output`` (``gguf_types``: GGUF tensor name ->
        GGML type name) when the file stores them in place of tensors the draft lacks (``--with-target-embeddings``,
        the target's head added on an untied target, a patched mask row); other target tensors stay unrounded."""
        tstore = {}
        if "token_embd.weight" in gguf_types and not self.weights.has("embed_tokens.weight"):
            tstore[self.target_embed_name()] = gguf_types["token_embd.weight"]   # target embeddings copied in
        if ("output.weight" in gguf_types and not self.weights.has("lm_head.weight")
                and self.target.has("lm_head.weight")):
            tstore["lm_head.weight"] = gguf_types["output.weight"]      # the target's head added as output
        if tstore:
            self.target = self.target.with_storage(tstore)

    def target_embed_name(self) -> str:
        for n in TARGET_EMBED_NAMES:
            if self.target.has(n):
                return n
        raise ConvertError(f"{self.target.folder}: no target embedding tensor ({' / '.join(TARGET_EMBED_NAMES)})")

    # ------------------------------------------------------------------------------------------ a forward's reads
    def token_embeddings(self, ids: list[int]) -> torch.Tensor:
        """Embedding rows of ``ids``: the draft's own table (``hp.own_embed``) or the target's, with the learned
        mask vector (:attr:`mask_vector`) in place of the mask token's row."""
        own = self.hp.own_embed
        table, name = (self.weights, "embed_tokens.weight") if own else (self.target, self.target_embed_name())
        x = table.rows(name, ids)
        if self.mask_vector is not None:  # the learned mask vector, cast to the dtype of the table it patches
            mask_id, vec = self.mask_vector  # (upstream: the draft's own embed_tokens when it has one, else the target's)
            row = vec.to(table.dtype_of(name)).to(torch.float32)[None]
            kind = table.storage.get(name)
            if kind is not None:  # rounded as the GGUF stores the patched table
                row = round_to_storage(row, kind)
            x[torch.tensor(ids) == mask_id] = row[0]
        return x

    def output_logits(self, h: torch.Tensor, own: bool) -> torch.Tensor:
        """``h @ W_lm.T`` streamed over row chunks: the draft's lm_head (``own``) or the target's (tied: embeddings)."""
        if own:
            ck, name = self.weights, "lm_head.weight"
        else:
            ck, name = self.target, "lm_head.weight" if self.target.has("lm_head.weight") else self.target_embed_name()
        return torch.cat([h @ w.T for _, w in ck.row_chunks(name)], dim=1)

    def decoder_layer(self, p: str) -> dict[str, torch.Tensor]:
        """The draft's tensors named ``p...`` (one layer's), loaded in bulk; a lookup counts as read by the forward."""
        return _Used({n: self.weights.get(n, record=False) for n in self.weights.names if n.startswith(p)},
                     self.weights.read)

    def to_target(self, reduced: bool) -> Callable[[int], int]:
        """Draft id -> target id through ``d2t`` offsets (identity without a reduced vocabulary)."""
        if not (reduced and self.weights.has("d2t")):
            return int
        off = self.weights.get("d2t").long()
        return lambda i: int(i) + int(off[int(i)])

    @contextmanager
    def threads(self) -> Iterator[None]:
        """One intra-op thread for tiny drafts: thread-pool wake-ups cost 10x the matmuls on a loaded 2-core box."""
        old = torch.get_num_threads()
        if self.hp.n_embd * self.hp.n_ff < 1 << 20:
            torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(old)


class _Used(dict[str, torch.Tensor]):
    """A layer's tensors, loaded in bulk; a lookup records the name as read by the forward (verify's tensor
    accounting counts what the forward used, not what it loaded)."""

    def __init__(self, items: dict[str, torch.Tensor], read: set[str]) -> None:
        super().__init__(items)
        self._read = read

    def __getitem__(self, name: str) -> torch.Tensor:
        self._read.add(name)
        return super().__getitem__(name)


def read_json_config(folder: Path, merge_text: bool = True) -> dict[str, Any]:
    """``folder``'s ``config.json`` (``merge_text``: its ``text_config`` merged over the top level); a folder without
    one is a ConvertError."""
    cfg = read_config(folder)
    text = cfg.get("text_config")
    return {**cfg, **text} if merge_text and isinstance(text, dict) else cfg


def rope_params(c: dict[str, Any], where: str = "config.json") -> RopeParams:
    """The RoPE settings of a config (``rope_parameters`` / ``rope_scaling``, its ``full_attention`` part when nested
    by layer kind, and the top-level ``rope_theta`` / ``partial_rotary_factor``); a section that is not an object, a
    value that is not a number, and llama3 factors the scaling cannot divide by are refused in one line naming
    ``where``."""
    rope = c.get("rope_parameters") or c.get("rope_scaling") or {}
    rope = rope.get("full_attention", rope) if isinstance(rope, dict) else rope
    if not isinstance(rope, dict):
        raise ConvertError(f"{where}: key 'rope_parameters' / 'rope_scaling' is {clip_value(rope)}, expected a JSON "
                           "object")
    kind = str(rope.get("rope_type", rope.get("type", "default")) or "default").lower()

    def number(key: str, default: Any) -> float:
        return as_float(rope.get(key, default), f"rope_scaling.{key}", where)

    params = RopeParams(type=kind, theta=number("rope_theta", c.get("rope_theta", 10000.0)), factor=number("factor", 1.0),
                        low_freq_factor=number("low_freq_factor", 1.0), high_freq_factor=number("high_freq_factor", 4.0),
                        original_max_position_embeddings=number("original_max_position_embeddings", 8192),
                        partial=number("partial_rotary_factor", c.get("partial_rotary_factor", 1.0)))
    if kind == "llama3" and not 0 < params.low_freq_factor < params.high_freq_factor:
        raise ConvertError(f"{where}: rope_scaling low_freq_factor {params.low_freq_factor} and high_freq_factor "
                           f"{params.high_freq_factor}: expected 0 < low_freq_factor < high_freq_factor (llama3 scaling "
                           "divides by both and by their difference)")
    return params


def common_hparams(c: dict[str, Any], where: str) -> dict[str, Any]:
    """The fields every draft config gives the torch forwards (layers, widths, heads, eps, RoPE, vocabulary), typed
    as the converter types them (:mod:`dspark_convert.hf.values`: one line naming the key for a value of another
    type, a zero divisor or a layer count past llama.cpp's ``LLAMA_MAX_LAYERS``)."""
    H = as_positive(c.get("hidden_size"), "hidden_size", where)
    nh = as_positive(c.get("num_attention_heads"), "num_attention_heads", where)
    n_layer = as_positive(c.get("num_hidden_layers"), "num_hidden_layers", where)
    if n_layer > S.MAX_LAYERS:
        raise ConvertError(f"{where}: key 'num_hidden_layers' is {n_layer}, expected at most {S.MAX_LAYERS} "
                           "(llama.cpp's LLAMA_MAX_LAYERS)")
    default_hd = 128 if c.get("model_type") == "qwen3" else H // nh       # Qwen3Config's default head_dim is 128
    return {"n_layer": n_layer, "n_embd": H, "n_ff": as_u32(c.get("intermediate_size"), "intermediate_size", where),
            "n_head": nh, "n_head_kv": as_positive(c.get("num_key_value_heads") or nh, "num_key_value_heads", where),
            "head_dim": as_positive(c.get("head_dim") or default_hd, "head_dim", where),
            "eps": as_float(c.get("rms_norm_eps", 1e-6), "rms_norm_eps", where), "rope": rope_params(c, where),
            "vocab_size": as_u32(c.get("vocab_size") or 0, "vocab_size", where)}


#: a variant's config reader: (folder, architectures[0], raw config, config with ``transformer_layer_config``
#: merged, draft weights, target config, the common fields, notes) -> (family, layout, per-layer prefix,
#: hyperparameters: an :class:`HFHParams`, usually of the variant's own subclass)
ConfigReader = Callable[[Path, str, dict[str, Any], dict[str, Any], TorchCheckpoint, dict[str, Any], dict[str, Any],
                         list[str]], tuple[str, str, str, HFHParams]]


def open_draft(draft_dir: str | Path, target_dir: str | Path, read_config: ConfigReader,
               storage: Mapping[str, str] | None = None) -> HFDraft[Any]:
    """Read and normalise a draft folder (any layout ``read_config`` reads) and open the target's weights; the
    draft's weights rounded as ``storage`` says (checkpoint name -> GGML type; None: unrounded). The draft's ``hp``
    is of the reader's hyperparameter type (hence ``HFDraft[Any]``).

    Example:
        >>> d = open_draft("draft_qwen3_4b_block7", "Qwen3-4B", read_config)  # doctest: +SKIP
        >>> d.family, d.hp.block_size, d.hp.sample_from_anchor       # doctest: +SKIP
        ('dspark', 7, True)
    """
    folder, tfolder = Path(draft_dir), Path(target_dir)
    where = f"{folder / 'config.json'}"
    raw = read_json_config(folder, merge_text=False)
    arch = (raw.get("architectures") or [""])[0]
    layer_config = raw.get("transformer_layer_config", {})
    if not isinstance(layer_config, dict):
        raise ConvertError(f"{where}: key 'transformer_layer_config' is {clip_value(layer_config)}, expected a JSON "
                           "object")
    c = {**raw, **layer_config}
    weights, target, tcfg = TorchCheckpoint(folder, storage), TorchCheckpoint(tfolder), read_json_config(tfolder)
    common = common_hparams(c, where)
    notes: list[str] = []
    if not weights.has("fc.weight") and weights.has("model.fc.weight"):   # model.-prefixed names (upstream
        weights = weights.without_prefix("model.")                        # adds "model." then maps)
        notes.append("checkpoint names carry a 'model.' prefix: read without it")
    family, layout, prefix, hp = read_config(folder, arch, raw, c, weights, tcfg, common, notes)
    return HFDraft(folder, family, layout, raw, hp, weights, target, prefix, notes)
