"""MTP sidecars: ``hf2gguf TARGET_CHECKPOINT --mtp`` writes the MTP (NextN) head of a target checkpoint as its own
file of the target's architecture, as upstream b11434's ``convert_hf_to_gguf.py --mtp`` does
(spec/drafts-beyond-dflash.md §1). llama-server runs it with ``--spec-type draft-mtp`` next to the target.

The head lives inside the target checkpoint, so only the shards holding it (``mtp.*``, or GLM-4.5's / GLM-4.7-Flash's /
GLM-5's / DeepSeek-V3.2's layers after the trunk), the embedding, the final norm and the output head are opened (or
downloaded); the tokenizer is the checkpoint's own. Each family's header and name knowledge is one module of this
package (:mod:`.qwen`, :mod:`.glm`, :mod:`.glm_dsa`, :mod:`.glm_lite`, :mod:`.deepseek32`, :mod:`.nemotron`,
:mod:`.deepseek4`, :mod:`.mimo2`: :data:`FAMILIES`, each handing back a :class:`~.head.Head`); the classes upstream
also exports that are not written here are refused in one line (:data:`REFUSED`).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ...errors import ConvertError
from ...hf.checkpoint import Select
from ...kit.common import finish_plan
from ...kit.hparams import HParams
from ...plan import Plan
from ...roles.convert import Context, TargetFacts, TargetTensor
from ...tokenizer.targets import handler_for_architecture, target_rows
from . import deepseek4, deepseek32, glm, glm_dsa, glm_lite, mimo2, nemotron, qwen
from .specs import adopt_fp8, hf_names_of

#: the family modules, each with ``ARCHS`` (HF class -> GGUF arch), ``reads``, ``sidecar``, and ``HF_ROOTS`` /
#: ``HF_LAYER`` (checkpoint names by GGUF name, for messages)
FAMILIES: tuple[ModuleType, ...] = (qwen, glm, glm_dsa, glm_lite, deepseek32, nemotron, deepseek4, mimo2)
#: default output names: ``mtp-<name>-<TYPE>.gguf`` (upstream's ``prepare_metadata`` of these classes); llama.cpp's
#: ``-hf`` finds the file beside its target by this file-name keyword (``common/download.cpp``)
FILE_PREFIX = "mtp-"
#: the classes recognised by name; a family with ``BY_CLAIM`` (DeepSeek-V4, whose DSpark drafts declare the same
#: class) is recognised by :func:`claims` instead
ARCHITECTURES: tuple[str, ...] = tuple(a for fam in FAMILIES if not getattr(fam, "BY_CLAIM", False) for a in fam.ARCHS)
#: every class whose sidecar is written
WRITTEN: tuple[str, ...] = tuple(a for fam in FAMILIES for a in fam.ARCHS)
#: the file carries the target's embedding and head itself
TARGET_TENSORS: tuple[TargetTensor, ...] = ()
#: the tokenizer is the checkpoint's own (--target-model-dir may name another folder to take it from)
TOKENIZER_IN_CHECKPOINT = True
DSPARK_FLAG = False
#: upstream's ``--mtp`` selects this family, and is required (without it these checkpoints are target models)
MTP_FLAG = True
__all__ = ["ARCHITECTURES", "DSPARK_FLAG", "FILE_PREFIX", "MTP_FLAG", "TARGET_TENSORS", "TOKENIZER_IN_CHECKPOINT",
           "build_plan", "claims", "draft_tensors", "hf_names", "target_facts"]

#: why this version does not write the sidecar of the other architectures upstream b11434 exports with ``--mtp``,
#: by the GGUF architecture upstream converts them to
NOT_WRITTEN_BECAUSE: dict[str, str] = {
    "qwen4exp": "Qwen4Exp (qwen4exp: eh_proj concatenated from fc_embedding/fc_hidden, hyper-connection head, "
                "PLE keys dropped)",
    "qwen35": "MiniCPM-V 4.6 (upstream's sidecar holds no MTP tensors and cannot load as an MTP head)",
    "dots3note": "Dots3 (dots3note: upstream's loader has no MTP graph)",
    "glm5-next": "GLM-5.3 (glm5-next: upstream's loader cannot run its NextN graph)",
    "hy_v3": "HunYuan-V3 (hy_v3)",
    "step35": "Step-3.5/3.7 (step35)",
    "bailingmoe3": "Ling-3 (bailingmoe3)",
}
#: every target class upstream b11434 exports with ``--mtp`` (``mtp_export`` in the target table) that this version
#: does not write -> the one-line reason a checkpoint of it is refused with
REFUSED: dict[str, str] = {
    row.name: NOT_WRITTEN_BECAUSE.get(str(row.gguf_arch), f"{row.name} ({row.gguf_arch})")
    for row in target_rows() if row.mtp_export and row.name not in WRITTEN}


def _arch(config: dict[str, Any]) -> str | None:
    archs = config.get("architectures")
    return archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None


def _family(arch: str | None) -> ModuleType:
    fam = next((f for f in FAMILIES if arch in f.ARCHS), None)
    if fam is None:
        raise ConvertError(f"{arch}: not a class whose MTP sidecar is written here (expected one of "
                           f"{', '.join(WRITTEN)})")
    return fam


def claims(config: dict[str, Any], tensor_names: list[str]) -> bool:
    """A DeepSeek-V4 checkpoint with an MTP head and no DSpark draft (:func:`.deepseek4.is_mtp_checkpoint`); a
    class upstream exports with ``--mtp`` but this version does not write: refused here, naming it."""
    if deepseek4.is_mtp_checkpoint(config, tensor_names):
        return True
    arch = _arch(config)
    if arch in REFUSED and any(n.startswith(("mtp.", "model.mtp.")) or ".layers." in n for n in tensor_names):
        raise ConvertError(f"{arch}: the MTP sidecar of {REFUSED[arch]} is not written by this version of "
                           "dspark-convert (use llama.cpp's convert_hf_to_gguf.py --mtp)")
    return False


def draft_tensors(config: dict[str, Any]) -> Select | None:
    """Only the MTP layers and the embedding, final norm and head: the trunk's shards are never opened or
    downloaded."""
    sel: Select = _family(_arch(config)).reads(config)
    return sel


def hf_names(gguf_name: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n for fam in FAMILIES
                               for n in hf_names_of(gguf_name, fam.HF_ROOTS, fam.HF_LAYER)))


def target_facts(ctx: Context, plan: Plan) -> TargetFacts:
    """None: the head is part of its target (no taps, its rope is the target's by construction)."""
    return TargetFacts()


def build_plan(ctx: Context) -> Plan:
    """The sidecar: the target's header, its tokenizer, and the MTP block(s) with the embedding, norm and head."""
    ck, where = ctx.draft, ctx.where
    arch_name = _arch(ck.config) or ""
    if ctx.options.embed_from_target:
        raise ConvertError("--with-target-embeddings: an MTP sidecar already holds its target's embedding and head")
    hp = HParams.of(ck.config, where)
    fam = _family(arch_name)
    if not getattr(fam, "OWN_FP8", False):
        adopt_fp8(ck, where)  # block-scaled FP8 weights read as float32, as upstream dequantizes them first
    # MiMo-V2 fuses the MTP layers' q / k / v for llama.cpp's graph unless --match-upstream asks for upstream's bytes
    extra = {"match_upstream": ctx.options.match_upstream} if fam is mimo2 else {}
    q = fam.sidecar(arch_name, hp, ck, ctx.out_type, ctx.file_type, where, **extra)
    tensors = q.tensors
    # the class's own vocab method, from the target table (byte-level BPE for the Qwen mixin, _set_vocab_glm)
    vocab = ctx.target_vocab(hp.vocab_size("vocab_size"), handler_for_architecture(arch_name, where), draft=hp)
    n_mtp = sum(1 for t in tensors if t.name.startswith("blk."))
    ctx.differs_from_upstream.extend(q.differs)
    notes = [f"MTP sidecar ({arch_name} -> {q.arch}): {q.nextn} MTP block(s) after {q.n} trunk layers "
             f"(block_count {q.n + q.nextn}), {n_mtp} block tensors + embedding, norm, head; run with llama-server "
             "--spec-type draft-mtp next to the target"] + ([q.why] if q.why else [])
    return finish_plan(q.arch, q.lead, q.base, q.fam, vocab, [], tensors, notes)

