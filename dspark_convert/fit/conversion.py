"""Fit checks at conversion time: does the draft checkpoint belong to the target passed with ``--target-model-dir``?

:func:`conversion_findings` compares what the planned GGUF says about the draft (its taps, ``fc`` width, vocabulary,
``d2t``, rope) and what the draft's ``config.json`` says about its target, with the target's ``config.json`` and
name. Errors stop the conversion (``--ignore-target-mismatch`` turns them into warnings); warnings are shown in the
summary and in ``--json`` findings. Each finding is one line naming both sides and the values.

Rule ids: ``target-hidden-size``, ``target-layers``, ``target-vocab``, ``target-d2t`` (errors); ``target-name``,
``mask-embedding``, ``target-rope`` (warnings). docs/troubleshooting.md shows each with an example.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import schema as S
from ..findings import Finding
from ..gguffile.packed import PackedStrings
from ..plan import as_int
from ..roles.convert import TargetFacts

IGNORE_HINT = "pass --ignore-target-mismatch to convert anyway"
#: a file next to the checkpoint holding a learned mask embedding, which a GGUF cannot carry (tensors holding one
#: are named by the family's name table, ``NameTable.mask_embedding``, and reach us as ``TargetFacts``)
MASK_EMBEDDING_FILE = "mask_embedding.pt"


@dataclass
class Pair:
    """The draft/target pair as the conversion sees it.

    ``arch`` is the planned file's GGUF architecture and ``facts`` what the family says about the draft's target
    (:class:`~dspark_convert.roles.convert.TargetFacts`: taps, rope, mask embedding); ``draft_config`` the raw
    draft ``config.json``; ``target`` the target's label (repo id or folder, as given) and ``target_config`` its
    ``config.json`` with any ``text_config`` merged in; ``draft_files`` maps GGUF tensor names to the checkpoint
    file holding their source.
    """

    arch: str
    facts: TargetFacts
    plan_kvs: dict[str, Any]
    plan_tensors: dict[str, tuple[int, ...]]
    d2t_max: int | None
    draft_dir: Path
    draft_config: dict[str, Any]
    draft_files: dict[str, str]
    target: str
    target_dir: Path
    target_config: dict[str, Any]
    target_rope: dict[str, Any] = field(default_factory=dict)

    @property
    def draft_where(self) -> str:
        return str(self.draft_dir / "config.json")

    @property
    def target_where(self) -> str:
        return str(self.target_dir / "config.json")


def _err(subject: str, rule: str, msg: str) -> Finding:
    return Finding("error", subject, rule, msg)


def _warn(subject: str, rule: str, msg: str) -> Finding:
    return Finding("warning", subject, rule, msg)


# ---------------------------------------------------------------------------------------------- errors
def check_hidden_size(p: Pair) -> list[Finding]:
    """The draft's target hidden size (``fc``'s input width over the ``TargetFacts.n_taps`` target layers it
    concatenates) = target ``hidden_size``."""
    want = as_int(p.target_config.get("hidden_size"))
    fc = p.plan_tensors.get(S.T_FC)
    n_taps = p.facts.n_taps
    if want is None or not fc or not n_taps:
        return []
    if fc[-1] % n_taps:
        return []
    ht = fc[-1] // n_taps
    if ht == want:
        return []
    where = p.draft_files.get(S.T_FC, str(p.draft_dir))
    return [_err(S.T_FC, "target-hidden-size",
                 f"{where}: fc.weight takes {n_taps} target layers x {ht} = {fc[-1]} inputs (a target of hidden size "
                 f"{ht}), but {p.target_where} has hidden_size {want}")]


def check_vocab(p: Pair) -> list[Finding]:
    """Full-vocabulary drafts: the draft's ``vocab_size`` (its token count) = the target's ``vocab_size``;
    reduced-vocabulary drafts: every ``d2t`` entry < the target's ``vocab_size``."""
    want = as_int(p.target_config.get("vocab_size"))
    if want is None:
        return []
    if p.d2t_max is not None:
        if p.d2t_max < want:
            return []
        return [_err(S.T_D2T, "target-d2t", f"{p.draft_where}: d2t maps draft tokens to target id {p.d2t_max}, outside "
                                            f"the {want} tokens of {p.target_where} (vocab_size {want})")]
    tokens = p.plan_kvs.get(S.TOKENIZER_TOKENS)
    have = as_int(p.draft_config.get("vocab_size")) or (len(tokens) if isinstance(tokens, (list, PackedStrings)) else None)
    if have is None or have == want:
        return []
    return [_err("vocab_size", "target-vocab", f"{p.draft_where}: vocab_size {have}, but {p.target_where} has "
                                               f"vocab_size {want}; the draft predicts ids of another vocabulary")]


# ---------------------------------------------------------------------------------------------- warnings
_NAME_RE = re.compile(r"[^a-z0-9]+")


def _norm(name: str) -> str:
    """``Qwen/Qwen3-8B@main`` -> ``qwen38b``: the last path part, lower case, letters and digits only."""
    return _NAME_RE.sub("", name.split("@")[0].rstrip("/").rsplit("/", 1)[-1].lower())


def _named_targets(p: Pair) -> list[tuple[str, str, str]]:
    """(config key, kind, value) of every statement the draft config makes about its target; kind is ``name``,
    ``arch`` or ``model_type``."""
    c = p.draft_config
    out: list[tuple[str, str, str]] = []
    spec = c.get("speculators_config")
    verifier = spec.get("verifier") if isinstance(spec, dict) else None
    if isinstance(verifier, dict):
        if isinstance(verifier.get("name_or_path"), str):
            out.append(("speculators_config.verifier.name_or_path", "name", verifier["name_or_path"]))
        archs = verifier.get("architectures")
        if isinstance(archs, list) and archs and isinstance(archs[0], str):
            out.append(("speculators_config.verifier.architectures", "arch", archs[0]))
    for key in ("target_model_name_or_path", "target_model"):
        if isinstance(c.get(key), str):
            out.append((key, "name", c[key]))
    if isinstance(c.get("target_model_type"), str):
        out.append(("target_model_type", "model_type", c["target_model_type"]))
    eagle = c.get("eagle_config")
    if isinstance(eagle, dict):
        for key, kind in (("target_model_name_or_path", "name"), ("target_model", "name"),
                          ("target_model_type", "model_type")):
            if isinstance(eagle.get(key), str):
                out.append((f"eagle_config.{key}", kind, eagle[key]))
    return out


def _target_names(p: Pair) -> list[str]:
    names = [p.target, str(p.target_dir)]
    np_ = p.target_config.get("_name_or_path")
    if isinstance(np_, str) and np_:
        names.append(np_)
    return [n for n in (_norm(x) for x in names) if n]


def check_target_name(p: Pair) -> list[Finding]:
    """The target named in the draft config (speculators verifier, the target keys at the top level or in
    ``eagle_config``) is the one given."""
    out = []
    archs = p.target_config.get("architectures")
    target_arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    model_type = p.target_config.get("model_type")
    names = _target_names(p)
    for key, kind, value in _named_targets(p):
        if kind == "name":
            want = _norm(value)
            if not want or any(want in n or n in want for n in names):
                continue
            shown = f"'{p.target}'" + (f" (_name_or_path '{p.target_config['_name_or_path']}')"
                                       if isinstance(p.target_config.get("_name_or_path"), str) else "")
            out.append(_warn(key, "target-name", f"{p.draft_where}: {key} names the target '{value}', but the target "
                                                 f"given is {shown}"))
        elif kind == "arch" and target_arch is not None and value != target_arch:
            out.append(_warn(key, "target-name", f"{p.draft_where}: {key} is '{value}', but {p.target_where} declares "
                                                 f"'{target_arch}'"))
        elif (kind == "model_type" and isinstance(model_type, str) and value != model_type
              and p.draft_config.get("target_text_model_type") != model_type):  # a multimodal target's text part
            out.append(_warn(key, "target-name", f"{p.draft_where}: {key} is '{value}', but {p.target_where} has "
                                                 f"model_type '{model_type}'"))
    return out


def mask_embedding_sources(draft_dir: Path, tensors: Sequence[str], *, file_written: bool = False) -> list[str]:
    """The checkpoint tensors (``TargetFacts.mask_embedding``) and files that hold a learned mask embedding the
    GGUF does not hold (empty: none); ``file_written``: the family wrote the file's vector into the GGUF
    (``TargetFacts.mask_file_written``)."""
    found = list(tensors)
    if not file_written and (draft_dir / MASK_EMBEDDING_FILE).is_file():
        found.append(MASK_EMBEDDING_FILE)
    return found


def check_mask_embedding(p: Pair, sources: Sequence[str]) -> list[Finding]:
    """A learned mask embedding cannot be written: llama.cpp embeds the mask token with the target's row. A mask
    id among the target's padding rows alone is normal for released drafts and is not reported."""
    if not sources:
        return []
    mask = p.plan_kvs.get(S.TOKENIZER_MASK_ID)
    what = ", ".join(f"tensor '{s}'" if s != MASK_EMBEDDING_FILE else f"file {s}" for s in sources)
    return [_warn(sources[0], "mask-embedding",
                  f"{p.draft_dir}: the checkpoint carries a learned mask embedding ({what}) that a GGUF cannot hold; "
                  f"llama.cpp embeds the mask token {mask} with the target's row for it instead, which lowers "
                  "acceptance")]


def _theta(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def check_rope(p: Pair) -> list[Finding]:
    """Drafts that attend at the target's positions (``TargetFacts.shares_rope``): rope theta and scaling must be
    the target's."""
    if not p.facts.shares_rope or not p.target_rope:
        return []
    out = []
    ours = _theta(p.plan_kvs.get(S.ROPE_FREQ_BASE.format(arch=p.arch)))
    theirs = _theta(p.target_rope.get("rope_theta"))
    if ours is not None and theirs is not None and abs(ours - theirs) > 1e-6 * max(abs(theirs), 1.0):
        out.append(_warn("rope_theta", "target-rope", f"{p.draft_where}: rope theta {ours:g} "
                                                      f"({S.ROPE_FREQ_BASE.format(arch=p.arch)}), "
                                                      f"but {p.target_where} has rope theta {theirs:g}; the draft "
                                                      "inherits the target's rope"))
    kind = p.plan_kvs.get(S.ROPE_SCALING_TYPE.format(arch=p.arch))
    kind = None if kind in (None, "none") else kind
    t_kind = p.target_rope.get("rope_type")
    t_kind = None if t_kind in (None, "default", "none") else t_kind
    factor = _theta(p.plan_kvs.get(S.ROPE_SCALING_FACTOR.format(arch=p.arch)))
    t_factor = _theta(p.target_rope.get("factor")) if t_kind else None
    if (kind, factor if kind else None) != (t_kind, t_factor):
        mine = f"{kind} x{factor:g}" if kind and factor is not None else (kind or "none")
        other = f"{t_kind} x{t_factor:g}" if t_kind and t_factor is not None else (t_kind or "none")
        out.append(_warn("rope_scaling", "target-rope", f"{p.draft_where}: rope scaling {mine}, but {p.target_where} "
                                                        f"has rope scaling {other}; the draft inherits the target's rope"))
    return out


def check_target_graph(p: Pair) -> list[Finding]:
    """A draft that reads the target's layer inputs, for a target whose llama.cpp b11434 graph records none (the
    target table's ``layer_inputs``), or a draft of :data:`schema.FINAL_LAYER_TAP_ARCHES` tapping the last layer of
    a target whose graph does not record its output (``final_layer_input``), or whose recorded rows are its
    hyper-connection residual (``wide_layer_input``): the file is right, but llama-server aborts on its first draft
    block."""
    from ..tokenizer.targets import (
        gguf_arch_of,
        records_final_layer_input,
        records_layer_inputs,
        records_wide_layer_input,
    )
    from .rules import LAYER_INPUT_ARCHS, final_layer_message, last_layer_tap, wide_layer_message

    if p.arch not in LAYER_INPUT_ARCHS:
        return []
    arch = gguf_arch_of(p.target_config)
    if arch is None or records_layer_inputs(arch) is None:
        return []
    if records_wide_layer_input(arch):
        return [_warn("architectures", "target-graph", f"{p.target_where}: {wide_layer_message(arch)}")]
    if records_layer_inputs(arch):
        last = last_layer_tap(p.arch, p.plan_kvs, p.target_config.get("num_hidden_layers"))
        if last is None or records_final_layer_input(arch):
            return []
        return [_warn("architectures", "target-graph", f"{p.target_where}: {final_layer_message(p.arch, arch, last)}")]
    return [_warn("architectures", "target-graph", f"{p.target_where}: llama.cpp b11434's {arch} graph records no "
                  "layer inputs, so llama-server aborts on this draft's first block (\"layer input tensor is null\"); "
                  "the file is what upstream's converter writes, for a llama.cpp that adds them")]


def conversion_findings(p: Pair, *, mask_sources: Sequence[str] = ()) -> list[Finding]:
    """Every fit finding of the pair: errors first (hidden size, vocabulary), then warnings."""
    return [*check_hidden_size(p), *check_vocab(p), *check_target_name(p), *check_mask_embedding(p, mask_sources),
            *check_rope(p), *check_target_graph(p)]
