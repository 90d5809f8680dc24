"""The draft config as upstream sees it (contract §2.0), and typed readers for its values.

"What does upstream's config view look like?": the transformers config-class defaults it fills in, the nested
text configs it merges, the rope dict it builds, and the one-line refusals for values a GGUF key cannot hold.
Family modules hold a config as one :class:`HParams` (``HParams.of`` / ``HParams.draft`` for the draft,
``HParams(ctx.target_config, path)`` for the target) and read every value through its methods.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal, overload

from ..errors import ConvertError
from ..hf.checkpoint import TEXT_CONFIG_KEYS
from ..hf.values import as_float, as_fraction, as_positive, as_u32

# transformers 5.24 config-class defaults that upstream's AutoConfig view adds before any rule runs (§2.0).
_QWEN3_DEFAULTS: dict[str, Any] = {
    "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128, "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6, "use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 28,
    "attention_bias": False,
}
_LLAMA_DEFAULTS: dict[str, Any] = {
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 32, "max_position_embeddings": 2048, "rms_norm_eps": 1e-6,
}
DEFAULT_ROPE_THETA = 10000.0
#: the tokenizer list is padded to the draft vocab_size in memory; real vocabularies are far below this
MAX_VOCAB_SIZE = 2**24


# ---------------------------------------------------------------------------------------------- config view
def normalize_hparams(config: dict[str, Any], where: str = "config.json") -> dict[str, Any]:
    """The draft hparams as upstream sees them: the transformers config-class view for ``qwen3`` / ``llama``
    configs (class defaults filled in, rope moved into ``rope_parameters``), the raw dict otherwise, with a
    nested ``text_config`` (and its aliases) merged into the top level.

    Example:
        >>> normalize_hparams({"model_type": "qwen3", "hidden_size": 8})["max_position_embeddings"]
        32768
    """
    hp = copy.deepcopy(config)
    for key in TEXT_CONFIG_KEYS:
        if isinstance(hp.get(key), dict):
            hp.update(hp.pop(key))
    thinker = hp.get("thinker_config")
    if isinstance(thinker, dict) and isinstance(thinker.get("text_config"), dict):
        hp.update(thinker["text_config"])
    model_type = hp.get("model_type")
    if model_type == "qwen3":
        for k, v in _QWEN3_DEFAULTS.items():
            hp.setdefault(k, v)
        if hp.get("num_key_value_heads") is None:
            hp["num_key_value_heads"] = hp["num_attention_heads"]
        if not hp.get("use_sliding_window"):
            hp["sliding_window"] = None
        if hp.get("layer_types") is None:
            n_layers = as_u32(hp["num_hidden_layers"], "num_hidden_layers", where)
            window_from = (as_u32(hp["max_window_layers"], "max_window_layers", where)
                           if hp["sliding_window"] is not None else 0)
            hp["layer_types"] = [
                "sliding_attention" if hp["sliding_window"] is not None and i >= window_from else "full_attention"
                for i in range(n_layers)
            ]
        _move_rope(hp)
    elif model_type == "llama":
        for k, v in _LLAMA_DEFAULTS.items():
            hp.setdefault(k, v)
        if hp.get("num_key_value_heads") is None:
            hp["num_key_value_heads"] = hp["num_attention_heads"]
        if hp.get("head_dim") is None:
            hp["head_dim"] = (as_u32(hp["hidden_size"], "hidden_size", where)
                              // as_positive(hp["num_attention_heads"], "num_attention_heads", where))
        _move_rope(hp)
    return hp


def draft_hparams(raw: dict[str, Any], where: str = "config.json") -> dict[str, Any]:
    """Draft hparams for any schema: the config-class view of a known top-level ``model_type``, else the raw dict;
    then a speculators ``transformer_layer_config`` merged into the top level (§2.0). Speculators configs have no
    top-level ``model_type`` transformers knows, so upstream reads them raw and no class defaults apply."""
    hp = normalize_hparams(raw, where)
    tlc = hp.pop("transformer_layer_config", None)
    if isinstance(tlc, dict):
        hp.update(tlc)
    return hp


def _move_rope(hp: dict[str, Any]) -> None:
    """transformers >= 5 keeps rope settings in ``rope_parameters`` (an unscaled config gets ``rope_type`` default)."""
    params = hp.get("rope_parameters")
    if not isinstance(params, dict):
        scaling = hp.pop("rope_scaling", None)
        params = dict(scaling) if isinstance(scaling, dict) else {}
        if "type" in params and "rope_type" not in params:
            params["rope_type"] = params.pop("type")
        params.setdefault("rope_type", "default")
        params.setdefault("rope_theta", hp.pop("rope_theta", DEFAULT_ROPE_THETA))
        hp["rope_parameters"] = params
    hp.pop("rope_theta", None)


def find_hparam(hp: dict[str, Any], keys: Iterable[str], *, required: bool = False, where: str = "config.json") -> Any:
    """Value of the first of ``keys`` present in ``hp`` (even if null), like upstream's ``find_hparam``."""
    keys = tuple(keys)
    for k in keys:
        if k in hp:
            return hp[k]
    if required:
        raise ConvertError(f"{where}: none of the keys {', '.join(repr(k) for k in keys)} is present")
    return None


def rope_dict(hp: dict[str, Any]) -> dict[str, Any]:
    """The rope dict of §2.1: rope_parameters / rope_scaling (its full_attention part), completed from the top level."""
    rd = hp.get("rope_parameters") or hp.get("rope_scaling") or {}
    rd = dict(rd.get("full_attention", rd)) if isinstance(rd, dict) else {}
    if "rope_theta" not in rd:
        theta = find_hparam(hp, ("global_rope_theta", "rope_global_theta", "rope_theta_global", "rope_theta",
                                 "rotary_emb_base"))
        if theta is not None:
            rd["rope_theta"] = theta
    if "rope_type" not in rd and "type" in rd:
        rd["rope_type"] = rd["type"]
    for k in ("partial_rotary_factor", "original_max_position_embeddings"):
        if k not in rd and k in hp:
            rd[k] = hp[k]
    return rd


@overload
def vocab_size_of(hp: dict[str, Any], key: str, where: str, *, required: Literal[True]) -> int: ...


@overload
def vocab_size_of(hp: dict[str, Any], key: str, where: str, *, required: bool = False) -> int | None: ...


def vocab_size_of(hp: dict[str, Any], key: str, where: str, *, required: bool = False) -> int | None:
    """The vocab size under ``key``: a positive integer up to :data:`MAX_VOCAB_SIZE`, or None when absent.

    This is the one check of a config vocab size on the conversion path; callers pass the value on.

    Example:
        >>> vocab_size_of({"vocab_size": 1024}, "vocab_size", "config.json")
        1024
    """
    value = hp.get(key)
    if value is None:
        if required:
            raise ConvertError(f"{where}: key '{key}' is missing, expected the vocabulary size (a positive integer)")
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_VOCAB_SIZE:
        raise ConvertError(f"{where}: key '{key}' is {value!r}, expected a positive integer up to {MAX_VOCAB_SIZE}")
    return value


# ---------------------------------------------------------------------------------------------- upstream views
def rope_parameters_view(hp: dict[str, Any]) -> dict[str, Any]:
    """Upstream's ``ModelBase.rope_parameters`` (b11434 ``conversion/base.py``): ``rope_parameters`` (or
    ``rope_scaling``) as is, and, unless it is split by layer kind (``full_attention`` / ``sliding_attention``),
    the top-level ``rope_theta``, ``partial_rotary_factor`` (or ``rope_pct`` / ``rope_percent``) and
    ``original_max_position_embeddings`` mirrored into it.

    Example:
        >>> rope_parameters_view({"partial_rotary_factor": 0.5, "rope_parameters": {"rope_theta": 1e6}})
        {'rope_theta': 1000000.0, 'partial_rotary_factor': 0.5}
    """
    rp = hp.get("rope_parameters", hp.get("rope_scaling")) or {}
    rp = dict(rp) if isinstance(rp, dict) else {}
    if "full_attention" in rp or "sliding_attention" in rp:
        return rp
    mirrored = {
        "rope_theta": find_hparam(hp, ("global_rope_theta", "rope_global_theta", "rope_theta_global", "rope_theta",
                                       "rotary_emb_base")),
        "partial_rotary_factor": find_hparam(hp, ("partial_rotary_factor", "rope_pct", "rope_percent")),
        "original_max_position_embeddings": find_hparam(hp, ("original_max_position_embeddings",)),
    }
    for key, value in mirrored.items():
        if key not in rp and value is not None:
            rp[key] = value
    return rp


def target_text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The target's config with its text config (``text_config`` or an alias) merged over the top level."""
    merged = dict(config)
    for key in TEXT_CONFIG_KEYS:
        if isinstance(config.get(key), dict):
            merged.update(config[key])
            break
    return merged


def target_text_architecture(config: dict[str, Any]) -> str | None:
    """The target's text architecture as upstream's ``get_model_architecture(..., TEXT)`` picks it: the text
    config's ``architectures[0]`` when it names one, else the top-level ``architectures[0]`` (some top-level names
    win, per the target table: :func:`~dspark_convert.tokenizer.targets.text_architecture`).

    Example:
        >>> target_text_architecture({"architectures": ["Gemma4ForConditionalGeneration"], "text_config": {}})
        'Gemma4ForConditionalGeneration'
    """
    from ..tokenizer.targets import text_architecture

    return text_architecture(config)


def target_uses_mrope(config: dict[str, Any]) -> bool:
    """The target ropes with M-RoPE: its text config's (or its own) ``rope_parameters`` / ``rope_scaling`` holds
    ``mrope_section`` (upstream's draft converter, ``_target_uses_mrope``)."""
    cfg = config.get("text_config", config)
    cfg = cfg if isinstance(cfg, dict) else {}
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    return isinstance(rope, dict) and "mrope_section" in rope


def target_ties_embeddings(config: dict[str, Any]) -> bool:
    """The target's output head is its input embedding (``tie_word_embeddings``, text config first; absent:
    the transformers default of the family, true for Gemma and false for Qwen / Llama)."""
    merged = target_text_config(config)
    tie = merged.get("tie_word_embeddings")
    if isinstance(tie, bool):
        return tie
    arch = target_text_architecture(config) or ""
    return arch.startswith("Gemma") or str(merged.get("model_type", "")).startswith("gemma")


# ---------------------------------------------------------------------------------------------- typed view
_OWN: Final = object()  # "read the value under the key" (``None`` is a value a caller may pass)


class HParams(dict[str, Any]):
    """A config dict that knows the file it came from (``where``, the prefix of every refusal) and reads its
    values typed: ``hp.u32(key)`` is the value under ``key`` as a UINT32 or a one-line refusal naming the key.
    Each reader takes a ``default`` for an absent key, or an explicit ``value`` (found another way, refused under
    ``key``).

    Example:
        >>> hp = HParams.of({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4}, "c.json")
        >>> hp.u32("head_dim"), hp.positive("num_attention_heads"), hp.rope()["rope_theta"]
        (16, 4, 10000.0)
    """

    def __init__(self, values: Mapping[str, Any], where: str = "config.json") -> None:
        super().__init__(values)
        self.where = where

    @classmethod
    def of(cls, config: Mapping[str, Any], where: str = "config.json") -> HParams:
        """The config-class view of ``config`` (:func:`normalize_hparams`)."""
        return cls(normalize_hparams(dict(config), where), where)

    @classmethod
    def draft(cls, config: Mapping[str, Any], where: str = "config.json") -> HParams:
        """The draft view of any schema, a speculators ``transformer_layer_config`` merged (:func:`draft_hparams`)."""
        return cls(draft_hparams(dict(config), where), where)

    def _value(self, key: str, value: Any, default: Any) -> Any:
        return self.get(key, default) if value is _OWN else value

    def find(self, keys: Iterable[str], *, required: bool = False) -> Any:
        """The value of the first of ``keys`` present (even if null), like upstream's ``find_hparam``."""
        return find_hparam(self, keys, required=required, where=self.where)

    def require(self, key: str, needs: str) -> Any:
        """The value under ``key``, refused in one line when it is absent or null: ``<where>: key 'K' is missing;
        <needs>`` (``needs`` says who reads it).

        Example:
            >>> HParams({"a": 1}, "c.json").require("b", "the family reads it")
            Traceback (most recent call last):
            dspark_convert.errors.ConvertError: c.json: key 'b' is missing; the family reads it
        """
        value = self.get(key)
        if value is None:
            raise ConvertError(f"{self.where}: key '{key}' is missing; {needs}")
        return value

    def u32(self, key: str, value: Any = _OWN, *, default: Any = None) -> int:
        """The value (default: under ``key``) as a UINT32 (:func:`as_u32`)."""
        return as_u32(self._value(key, value, default), key, self.where)

    def positive(self, key: str, value: Any = _OWN, *, default: Any = None) -> int:
        """The value (default: under ``key``) as a UINT32 of at least 1 (:func:`as_positive`)."""
        return as_positive(self._value(key, value, default), key, self.where)

    def number(self, key: str, value: Any = _OWN, *, default: Any = None) -> float:
        """The value (default: under ``key``), an int or float, as a float (:func:`as_float`)."""
        return as_float(self._value(key, value, default), key, self.where)

    def fraction(self, key: str, value: Any = _OWN, *, default: Any = None) -> float:
        """The value (default: under ``key``) as a number in (0, 1] (:func:`as_fraction`)."""
        return as_fraction(self._value(key, value, default), key, self.where)

    @overload
    def vocab_size(self, key: str = ..., *, required: Literal[True]) -> int: ...

    @overload
    def vocab_size(self, key: str = ..., *, required: bool = False) -> int | None: ...

    def vocab_size(self, key: str = "vocab_size", *, required: bool = False) -> int | None:
        """The vocab size under ``key`` (:func:`vocab_size_of`)."""
        return vocab_size_of(self, key, self.where, required=required)

    def rope(self) -> dict[str, Any]:
        """The rope dict of §2.1 (:func:`rope_dict`)."""
        return rope_dict(self)

    def rope_view(self) -> dict[str, Any]:
        """Upstream's ``ModelBase.rope_parameters`` (:func:`rope_parameters_view`)."""
        return rope_parameters_view(self)

    # ------------------------------------------------------------------ a target's config
    @property
    def text(self) -> HParams:
        """The text config (``text_config`` or an alias) merged over the top level (:func:`target_text_config`)."""
        return HParams(target_text_config(self), self.where)

    @property
    def text_architecture(self) -> str | None:
        """The text architecture upstream picks for this (target) config (:func:`target_text_architecture`)."""
        return target_text_architecture(self)

    @property
    def scales_embeddings(self) -> bool:
        """This (target) config's text architecture scales the embeddings a draft shares by sqrt(hidden_size): its
        name starts with the target table's prefix (:func:`~dspark_convert.tokenizer.targets.embedding_scale_prefix`,
        upstream b11401+)."""
        from ..tokenizer.targets import embedding_scale_prefix

        return (self.text_architecture or "").startswith(embedding_scale_prefix())

    @property
    def uses_mrope(self) -> bool:
        """This (target) config ropes with M-RoPE (:func:`target_uses_mrope`)."""
        return target_uses_mrope(self)

    @property
    def ties_embeddings(self) -> bool:
        """This (target) config's output head is its input embedding (:func:`target_ties_embeddings`)."""
        return target_ties_embeddings(self)
