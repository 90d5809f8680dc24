"""The registry: which variant is this? One table for a GGUF file and for a Hugging Face checkpoint.

A *GGUF variant* is one way llama.cpp loads a draft file (the unit is the file, not the HF family: DSpark and
DFlash checkpoints both write a ``dflash`` file, and so does DeepSeek-V4 DSpark, told apart by its
hyper-connection count). Each variant is one :class:`Variant` row of :data:`VARIANTS`, in match order (a variant
ahead of the one it ``refines``); its code is the package ``dspark_convert/variants/<name>/``, one module per role
(:meth:`Variant.role`):

- ``matches(value, tensor_names)``: the numpy-free predicate every GGUF-side question asks through
  :func:`gguf_variant` (``check``, ``fit``, ``verify``, ``upgrade``);
- ``families``: its converter family modules (``variants/<name>/<family>.py``, each a
  :class:`dspark_convert.roles.convert.Family`), in the order they are asked; :mod:`.families` recognises a
  checkpoint through them;
- ``gguf_drops`` / ``checkpoint_drops``: verify's tensor accounting (:mod:`dspark_convert.verify.accounting`). Every
  tensor on either side must be read by a forward, compared at tensor level, or dropped by one of these rules,
  which says why; anything else fails ``verify`` with the tensor's name (a tensor no rule names and no forward
  reads is a defect).

Beside the table: :mod:`.spectype`, the ``--spec-type`` llama-server needs for a file of each variant (and the
file-name keywords ``-hf`` finds it by); :mod:`.words`, the variants' words on the command line.

Only names and predicates live here: no numpy, no torch, no variant module is imported (a role is imported when a
verb first asks for it).

Example:
    >>> gguf_variant({"general.architecture": "dflash", "dflash.hyper_connection.count": 4}.get, []).name
    'dsv4'
    >>> gguf_variant({"general.architecture": "eagle3"}.get, []).name
    'eagle3'
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .. import schema as S
from ..plan import as_int

#: the package holding one subpackage per variant
VARIANTS_PACKAGE = "dspark_convert.variants"

Value = Callable[[str], Any]          # metadata key -> value (None when absent): a GGUFWeights/Plan/dict getter


@dataclass(frozen=True)
class DropRule:
    """A tensor ``verify`` may leave unread, and why. ``pattern`` matches the whole name (``{n}`` stands for a
    layer or stage number, ``{path}`` for any dotted module path). The rule applies only while the other side agrees: ``if_gguf_has`` names a GGUF tensor
    that must be present (``t2d`` is dropped because ``d2t`` was written), ``if_gguf_lacks`` one that must be
    absent (the draft's ``embed_tokens`` copy is dropped because the GGUF reads the target's)."""

    pattern: str
    reason: str
    if_gguf_has: str | None = None
    if_gguf_lacks: str | None = None

    def covers(self, name: str, gguf_names: Collection[str]) -> bool:
        import re

        rx = re.escape(self.pattern).replace(r"\{n\}", r"\d+").replace(r"\{path\}", r"[^.]+(?:\.[^.]+)*")
        if re.fullmatch(rx, name) is None:
            return False
        if self.if_gguf_has is not None and self.if_gguf_has not in gguf_names:
            return False
        return not (self.if_gguf_lacks is not None and self.if_gguf_lacks in gguf_names)


@dataclass(frozen=True)
class Variant:
    """One GGUF variant: its name, the arch it writes, its predicate, its family modules, what it refines and its
    tensor-accounting rules (see the module docstring)."""

    name: str
    arch: str
    matches: Callable[[Value, Collection[str]], bool]
    families: tuple[str, ...]
    refines: str | None = None
    gguf_drops: tuple[DropRule, ...] = ()
    checkpoint_drops: tuple[DropRule, ...] = ()
    #: whether a file of ``arch`` is this variant's by its arch alone (a draft arch); False when ``arch`` is a
    #: target architecture too and only the predicate tells the variant's files from the target's own
    by_arch: bool = True

    def role(self, name: str) -> ModuleType:
        """This variant's module for one role (``loader``, ``fit``, ``numpy_forward``, ``torch_forward``,
        ``verify``, ``upgrade``; the contracts are :mod:`dspark_convert.roles`):
        ``dspark_convert.variants.<variant>.<role>``, imported when a verb first asks (mlx-lm style; a variant
        package's ``__init__`` imports nothing)."""
        return importlib.import_module(f"{VARIANTS_PACKAGE}.{self.name}.{name}")

    def has_role(self, name: str) -> bool:
        """Whether this variant has a module for the role (a ``dsv4`` variant has no forward modules)."""
        return importlib.util.find_spec(f"{VARIANTS_PACKAGE}.{self.name}.{name}") is not None


_T2D = DropRule("t2d", "the target -> draft mask is the inverse of d2t; the GGUF keeps d2t only (llama.cpp reads d2t)",
                if_gguf_has=S.T_D2T)
_FULL_VOCAB_EMBED = DropRule("embed_tokens.weight", "the GGUF has no token_embd: the draft's stored copy is "
                             "replaced by the target's embeddings (full-vocab draft)", if_gguf_lacks=S.T_TOKEN_EMBD)
_FULL_VOCAB_HEAD = DropRule("lm_head.weight", "the GGUF has no output: the draft's stored copy is replaced by the "
                            "target's lm_head (full-vocab draft)", if_gguf_lacks=S.T_OUTPUT)

#: ModelOpt KV-cache scales: the converter drops them, as upstream does (llama.cpp has no such tensor)
_KV_CACHE_SCALES = tuple(DropRule(f"{p}layers.{{n}}.self_attn.{proj}", "a ModelOpt KV-cache scale: not part of the "
                                  "GGUF (upstream drops it too)")
                         for p in ("", "model.") for proj in ("k_proj.k_scale", "v_proj.v_scale"))
#: ModelOpt FP8 linears' activation scales: upstream drops every input_scale but an NVFP4 linear's (those are
#: compared by verify's NVFP4 rows, before any rule applies); the weight and its weight_scale are read by the forward
_FP8_INPUT_SCALES = tuple(DropRule(f"{p}{m}.input_scale", "a ModelOpt FP8 activation scale: not part of the GGUF "
                                   "(upstream drops it too)")
                          for p in ("", "model.") for m in ("fc", *(f"layers.{{n}}.{x}" for x in (
                              "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                              "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"))))

#: the activation and KV-cache scales of a ModelOpt or block-scaled FP8 checkpoint's MTP layers: upstream drops them
#: (its weights are read, dequantized, with their weight scales)
_MTP_UNUSED_SCALES = tuple(DropRule(f"{{path}}{suffix}", "an FP8 activation / KV-cache scale: not part of the GGUF "
                                    "(upstream drops it too)")
                           for suffix in (".input_scale", ".k_scale", ".v_scale", ".activation_scale",
                                          "_activation_scale"))

#: the Gemma 4 E2B/E4B assistants' ordered-embedding sampler: upstream drops it, llama.cpp scores every token
_MASKED_EMBEDDING = DropRule("masked_embedding.centroids.weight", "the ordered-embedding sampler (centroids) of the "
                             "E2B/E4B assistants: upstream drops it; llama.cpp scores the full vocabulary")
_MASKED_ORDERING = DropRule("masked_embedding.token_ordering", "the ordered-embedding sampler's token order: "
                            "upstream drops it; llama.cpp scores the full vocabulary")

VARIANTS: tuple[Variant, ...] = (
    Variant("dsv4", S.ARCH_DFLASH, lambda v, _n: v("general.architecture") == S.ARCH_DFLASH
            and (as_int(v(S.HC_COUNT.format(arch=S.ARCH_DFLASH))) or 0) > 0, ("dspark_dsv4",), refines="dflash"),
    Variant("gemma4", S.ARCH_DFLASH, lambda v, n: v("general.architecture") == S.ARCH_DFLASH
            and S.LAYER_PREFIX.format(bid=0) + S.L_LAYER_OUT_SCALE in n, ("dspark_gemma4",), refines="dflash",
            checkpoint_drops=(_FULL_VOCAB_EMBED,)),   # only the Gemma 4 block has a per-layer output scale
    Variant("dflash2", S.ARCH_DFLASH, lambda v, n: v("general.architecture") == S.ARCH_DFLASH
            and S.T_SELECTOR_HIDDEN in n, ("dflash2",), refines="dflash"),
    Variant("dflash", S.ARCH_DFLASH, lambda v, _n: v("general.architecture") == S.ARCH_DFLASH,
            ("dspark", "dflash", "muse_glimmer"),
            checkpoint_drops=(_T2D, _FULL_VOCAB_EMBED, _FULL_VOCAB_HEAD, *_KV_CACHE_SCALES, *_FP8_INPUT_SCALES)),
    Variant("gemma4_assistant", S.ARCH_GEMMA4_ASSISTANT,
            lambda v, _n: v("general.architecture") == S.ARCH_GEMMA4_ASSISTANT, ("gemma4_assistant",),
            checkpoint_drops=(_MASKED_EMBEDDING, _MASKED_ORDERING)),
    Variant("eagle3", S.ARCH_EAGLE3, lambda v, _n: v("general.architecture") == S.ARCH_EAGLE3, ("eagle3",),
            checkpoint_drops=(_T2D, _FULL_VOCAB_EMBED)),
    # an MTP sidecar: a target arch with nextn_predict_layers > 0 and no trunk (the loaders' mtp_only test)
    Variant("mtp", S.ARCH_QWEN35, lambda v, n: v("general.architecture") in S.MTP_ARCHES
            and (as_int(v(S.NEXTN_PREDICT_LAYERS.format(arch=v("general.architecture")))) or 0) > 0
            and S.LAYER_PREFIX.format(bid=0) + S.L_ATTN_NORM not in n, ("mtp",), by_arch=False,
            checkpoint_drops=_MTP_UNUSED_SCALES),
)
BY_NAME: dict[str, Variant] = {v.name: v for v in VARIANTS}


def gguf_variant(value: Value, tensor_names: Iterable[str] = ()) -> Variant | None:
    """The first variant of :data:`VARIANTS` whose predicate accepts this file's metadata (``value``: key ->
    value) and tensor names; None for a file no variant loads."""
    names = frozenset(tensor_names)
    return next((v for v in VARIANTS if v.matches(value, names)), None)


def base_variant(arch: str) -> Variant | None:
    """The variant that loads a file of this arch when nothing refines it (the one the others refine); None for
    an arch no variant writes.

    Example:
        >>> base_variant("dflash").name, base_variant("llama")
        ('dflash', None)
    """
    return next((v for v in VARIANTS if v.arch == arch and v.refines is None and v.by_arch), None)


def variant_of_family(family: str) -> Variant:
    """The variant a converter family (its module name: ``dspark``, ``dflash``, ``eagle3``, ``dspark_dsv4``) writes.

    Example:
        >>> variant_of_family("dspark").name, variant_of_family("dspark_dsv4").name
        ('dflash', 'dsv4')
    """
    for v in VARIANTS:
        if family in v.families:
            return v
    raise KeyError(family)
