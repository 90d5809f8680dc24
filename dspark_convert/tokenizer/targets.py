"""The target table: every text architecture llama.cpp b11434 registers, and how a draft borrows its tokenizer.

``data/targets-b11434.json`` is generated from an upstream tree by ``scripts/target_table.py`` (``--check`` compares
it with a tree); nothing here lists architecture names by hand. Each architecture has a ``role``:

* ``target``: a draft's target; its vocab ``method`` (the upstream ``set_vocab`` it runs, by name) decides the
  tokenizer block. Methods this package reproduces are :data:`METHOD_HANDLERS`; a target whose method is not
  among them is refused in one line naming the method;
* ``excluded``: registered upstream but not a generative target (encoders, TTS, draft classes, decision heads,
  embedding entry points);
* ``fails``: upstream b11434 crashes when a draft uses it (the reason is in the row): refused, except where the crash
  is a ``super()`` TypeError in a method this package reproduces (Qwen3-MoE, Qwen3-VL-MoE): converted as the method
  means, with a note saying upstream stops there.

The target's architecture is read as upstream's ``get_model_architecture(config, TEXT)`` reads it
(:func:`text_architecture`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from .. import schema as S
from ..errors import ConvertError
from ..notes import note

TABLE_FILE = "targets-b11434.json"
UPSTREAM = "b11434"

#: upstream vocab method (the table's ``method``) -> the handler of :mod:`.handlers` that reproduces it (data in
#: the schema package, with the other upstream names)
METHOD_HANDLERS = S.VOCAB_METHOD_HANDLERS


@dataclass(frozen=True)
class TargetArch:
    """One row of the table."""

    name: str
    role: str
    method: str | None
    why: str | None
    gguf_arch: str | None
    failure: str | None = None
    #: upstream's model class that converts it (``class``)
    model_class: str | None = None
    #: upstream b11434 writes its MTP layers with ``--mtp`` (``mtp_export``)
    mtp_export: bool = False

    @property
    def handler(self) -> str | None:
        """Our handler for this row's method (None: not reproduced)."""
        return METHOD_HANDLERS.get(self.method or "")


@lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    """The parsed table file."""
    text = resources.files(__package__ or "").joinpath("data").joinpath(TABLE_FILE).read_text(encoding="utf-8")
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("architectures"), dict):
        raise ConvertError(f"{TABLE_FILE}: not a target table (no 'architectures' object)")
    return data


def _row(name: str, row: dict[str, Any]) -> TargetArch:
    return TargetArch(name, row["role"], row.get("method"), row.get("why"), row.get("gguf_arch"), row.get("failure"),
                      row.get("class"), bool(row.get("mtp_export", False)))


def target_arch(name: str) -> TargetArch | None:
    """The table row of HF architecture ``name`` (None: upstream b11434 registers no such text architecture)."""
    row = table()["architectures"].get(name)
    return None if row is None else _row(name, row)


def target_rows() -> list[TargetArch]:
    """The table's ``target`` rows, in the table's order (sorted by architecture name).

    Example:
        >>> [r.gguf_arch for r in target_rows() if r.name == "Qwen3_5MoeForCausalLM"], len(target_rows()) > 100
        (['qwen35moe'], True)
    """
    return [_row(n, r) for n, r in table()["architectures"].items() if r["role"] == "target"]


def is_target_architecture(name: str) -> bool:
    """``name`` is a model class a draft can be made for (the table's ``target`` and ``fails`` rows, and a checkpoint
    that carries its own draft): a config naming it is a target model, not a draft.

    Example:
        >>> is_target_architecture("Qwen3_5ForConditionalGeneration"), is_target_architecture("DFlashDraftModel")
        (True, False)
    """
    if name in S.DRAFT_CARRIER_TOKENIZERS:
        return True
    row = target_arch(name)
    return row is not None and row.role in ("target", "fails")


def supported_architectures() -> list[str]:
    """The table's architectures a draft converts for, sorted: targets whose vocab method this package reproduces,
    and those upstream b11434 stops on with a TypeError (``failure: super``) whose method it reproduces (converted
    as the method means, with a note)."""
    return sorted(n for n, r in table()["architectures"].items() if r.get("method") in METHOD_HANDLERS and (
        r["role"] == "target" or (r["role"] == "fails" and r.get("failure") == "super")))


def embedding_scale_prefix() -> str:
    """Target text architectures starting with this give the draft an embedding scale of sqrt(hidden) (upstream)."""
    return str(table()["embedding_scale_prefix"])


def records_layer_inputs(gguf_arch: str) -> bool | None:
    """Whether llama.cpp b11434's graph for GGUF architecture ``gguf_arch`` records the layer inputs a draft that
    reads target hidden states needs (None: not known to the table). Without them llama-server aborts on the first draft block
    ("layer input tensor is null").

    Example:
        >>> records_layer_inputs("qwen35"), records_layer_inputs("glm4moe")
        (True, False)
    """
    value = table().get("layer_inputs", {}).get(gguf_arch)
    return value if isinstance(value, bool) else None


def records_final_layer_input(gguf_arch: str) -> bool | None:
    """Whether llama.cpp b11434's graph for ``gguf_arch`` also records the last layer's output as layer input
    ``n_layer`` (the table's ``final_layer_input``; None: not known to the table). A draft whose taps
    include the target's ``block_count`` reads it; on a graph without it llama-server aborts on the first draft
    block ("layer input tensor is null").

    Example:
        >>> records_final_layer_input("nemotron_h"), records_final_layer_input("qwen35")
        (True, False)
    """
    if records_layer_inputs(gguf_arch) is None:
        return None
    return gguf_arch in table().get("final_layer_input", ())


def records_wide_layer_input(gguf_arch: str) -> bool:
    """Whether llama.cpp b11434's graph for ``gguf_arch`` records its hyper-connection residual (hc_count x hidden
    values per token) as the layer inputs (the table's ``wide_layer_input``): llama-server asserts one hidden row per
    token when it hands them to a draft, and aborts.

    Example:
        >>> records_wide_layer_input("qwen4exp"), records_wide_layer_input("qwen35")
        (True, False)
    """
    return gguf_arch in table().get("wide_layer_input", ())


def final_layer_input_archs() -> list[str]:
    """The GGUF architectures of :func:`records_final_layer_input`, sorted."""
    return sorted(table().get("final_layer_input", ()))


def gguf_arch_of(config: dict[str, Any]) -> str | None:
    """The GGUF architecture upstream converts a target with this ``config.json`` to (None: not in the table)."""
    arch = text_architecture(config)
    row = target_arch(arch) if arch is not None else None
    return row.gguf_arch if row is not None else None


def text_architecture(config: dict[str, Any]) -> str | None:
    """The target's architecture as upstream's ``get_model_architecture(config, TEXT)`` picks it: ``architectures[0]``
    (or ``<ssm_cfg.layer>ForCausalLM``), replaced by ``text_config.architectures[0]`` unless the top-level name is one
    the table keeps (``top_level_architectures``).

    Example:
        >>> text_architecture({"architectures": ["A"], "text_config": {"architectures": ["B"]}})
        'B'
    """
    archs = config.get("architectures")
    arch: str | None = None
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        arch = archs[0]
    elif isinstance(config.get("ssm_cfg"), dict):
        layer = config["ssm_cfg"].get("layer", "Mamba")
        arch = f"{layer}ForCausalLM" if isinstance(layer, str) else None
    if arch is not None and arch in table()["top_level_architectures"]:
        return arch
    text = config.get("text_config")
    sub = text.get("architectures") if isinstance(text, dict) else None
    if isinstance(sub, list) and sub and isinstance(sub[0], str):
        return sub[0]
    return arch


def handler_for_architecture(arch: str, where: str) -> str:
    """Our handler for target architecture ``arch``; one line naming why when there is none.

    ``where`` names the config the architecture came from.
    """
    override = S.DRAFT_CARRIER_TOKENIZERS.get(arch)
    if override is not None:
        return override
    row = target_arch(arch)
    if row is None:
        raise ConvertError(f"{where}: architecture '{arch}' is not a text architecture llama.cpp {UPSTREAM} registers, "
                           f"so it cannot be a draft's target ({len(supported_architectures())} are supported: docs/targets.md)")
    if row.role == "excluded":
        raise ConvertError(f"{where}: architecture '{arch}' is a {row.why}; a draft needs the causal language model "
                           "it was trained for as its target")
    if row.role == "fails":
        if row.failure == "super" and row.handler is not None:
            note("tokenizer.ggml.model", "upstream-stops",
                 f"{where}: llama.cpp {UPSTREAM} stops on a draft for a '{arch}' target ({row.why}); converted "
                 f"with the vocabulary its vocab method {row.method} means to write")
            return row.handler
        raise ConvertError(f"{where}: architecture '{arch}' cannot be a draft's target in llama.cpp {UPSTREAM}: "
                           f"{row.why}")
    if row.handler is None:
        why = S.VOCAB_METHODS_NOT_REPRODUCED.get(row.method or "")
        raise ConvertError(f"{where}: target architecture '{arch}' uses llama.cpp's vocab method {row.method}, which "
                           "dspark-convert does not reproduce" + (f": {why}" if why else " yet"))
    return row.handler
