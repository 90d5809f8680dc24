"""The upgrade rules of ``dflash`` files (this variant's, and those of the variants refining it): what upstream's
DFlash / DSpark converter wrote differently before b11434, and how ``upgrade`` rewrites it (facts:
spec/upstream-b11434.md §2.2, §2.3; the table of docs/upgrade.md). The driver (:mod:`dspark_convert.upgrade`) and
``check`` reach them through the registry: the ``upgrade`` role's :data:`RULES`.

- a DSpark file (``dflash.sample_from_anchor``: only upstream's DSpark classes write it, Gemma4 DSpark's too):
  ``dflash.has_confidence_head`` (b10705); a full-vocabulary draft's own ``embed_tokens`` (b10705: older
  converters dropped it); the head ``hf2gguf`` adds on an untied target (llama.cpp b11223+ would draft with
  ``token_embd``); the q/k rows an interleaved-RoPE draft had permuted to NeoX order twice (b10662-b11104);
- every ``dflash`` file: attention sinks named without ``.weight`` (b10705); an M-RoPE target's
  ``dflash.rope.dimension_sections`` (b10662); a Gemma target's ``dflash.embedding_scale`` (b11401); a DFlash
  (not DSpark) checkpoint's ``mask_embedding.pt`` (b11334: refused, reconvert) and interleaved q/k row order
  (b10662: permuted once);
- a file whose keys follow the lineage's config schema (``lineage_config``; not Gemma4 DSpark, whose class
  arrived with its own keys at b11223, nor DeepSeek-V4 DSpark, not a ``DFlashModel`` upstream): the
  :data:`CONFIG_KEYS` a checkpoint's config decides (b10705, b11223, b11334), set from ``--hf`` as ``hf2gguf``
  writes them, and, for a DFlash draft, a MiMo draft's missing ``token_embd`` / ``output`` (not checked without
  ``--hf``).

Example:
    >>> RULES.lineage_config, CONFIG_KEYS[0]
    (True, 'dflash.rope.dimension_count')
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import schema as S
from ...errors import ConvertError, clip_value
from ...gguf_constants import QT, VT
from ...plan import KV, TensorSpec
from ...roles.upgrade import Detection, Header, Stale, UpgradeRules, Upgrading

#: the revisions whose DSpark converter permuted interleaved-RoPE q/k rows twice (§2.3): b10662 up to b11223
DOUBLE_NEOX = ("b10662", "b11223")  # [first affected, first fixed)
HAS_CONFIDENCE_HEAD = S.DFLASH_HAS_CONFIDENCE_HEAD  # b10705+ (§2.3)
DIMENSION_SECTIONS = S.ROPE_DIMENSION_SECTIONS.format(arch=S.ARCH_DFLASH)  # b10662+ for M-RoPE targets (§2.2)
EMBEDDING_SCALE = S.EMBEDDING_SCALE.format(arch=S.ARCH_DFLASH)  # b11401+ for Gemma targets (§2.2)
#: the dflash keys a checkpoint's config.json decides (upstream b10705+: SWA from dflash_config.use_swa, causal;
#: b11223+: use_swa without layer_types; b11334+: partial_rotary_factor, attention_value_scale, spec §2.2)
CONFIG_KEYS = (S.ROPE_DIMENSION_COUNT.format(arch=S.ARCH_DFLASH), S.ATTN_VALUE_SCALE.format(arch=S.ARCH_DFLASH),
               S.DFLASH_SLIDING_WINDOW, S.DFLASH_SLIDING_WINDOW_PATTERN, S.CAUSAL.format(arch=S.ARCH_DFLASH))
SINKS = "blk.*.attn_sinks.weight"  # b10705+: '.weight' added to any tensor named '*sink*' (spec §2.2)
_ROPE_TENSORS = (".attn_q.weight", ".attn_k.weight", ".attn_q_norm.weight", ".attn_k_norm.weight")
_QK = "blk.*.attn_{q,k}{,_norm}.weight"
_HEAD_DIM = "dflash.attention.key_length"


def is_dspark(f: Header) -> bool:
    """A file of upstream's DSpark class (it alone writes ``dflash.sample_from_anchor``)."""
    return S.DFLASH_SAMPLE_FROM_ANCHOR in f.kvs


def unsuffixed_sinks(f: Header) -> list[str]:
    """Attention-sink tensors as converters before upstream b10705 named them: gguf-py's name map gives
    ``blk.N.attn_sinks`` for ``self_attn.sinks`` / ``attention_sink_bias`` (no suffix to keep), a name llama.cpp
    b11434's DFlash loader does not know; b10705+ appends ``.weight``."""
    return [t.name for t in f.tensors if "sink" in t.name and not t.name.endswith((".weight", ".bias"))]


@dataclass(frozen=True)
class DFlashRules(UpgradeRules):
    """The rules of a ``dflash`` file (see the module doc). ``lineage_config``: its keys follow the DFlash
    lineage's config schema, so the :data:`CONFIG_KEYS` rules (and a DFlash draft's MiMo and row-order facts,
    listed as not checked) apply."""

    lineage_config: bool = True

    @property
    def config_keys(self) -> tuple[str, ...]:
        """:data:`CONFIG_KEYS` when the lineage's config rules apply."""
        return CONFIG_KEYS if self.lineage_config else ()

    def detect(self, d: Detection) -> None:
        """A DSpark file without ``dflash.has_confidence_head`` predates b10705, and so does a full-vocabulary one
        (no ``d2t``) without ``token_embd.weight`` (b10705 keeps the draft's ``embed_tokens``); sinks without
        ``.weight`` predate b10705; with the target: an M-RoPE target needs ``dflash.rope.dimension_sections``
        (b10662), a Gemma target ``dflash.embedding_scale`` (b11401)."""
        f, target = d.f, d.target
        dspark = is_dspark(f)
        if dspark:
            has_conf_tensor = d.has_tensor(S.T_CONF_W)
            present = HAS_CONFIDENCE_HEAD in f.kvs
            d.seen(present, "b10705")
            if not present:
                d.stale.append(Stale(HAS_CONFIDENCE_HEAD, f"missing; b10705+ writes it ({str(has_conf_tensor).lower()}"
                                     f": {'a' if has_conf_tensor else 'no'} confidence head in the file)", "b10705",
                                     "file"))
            if not d.has_tensor(S.T_D2T):
                kept = d.has_tensor(S.T_TOKEN_EMBD)
                if kept:
                    d.seen(True, "b10705")
                elif not present:  # older than b10705 (no has_confidence_head): its embed_tokens may have been dropped
                    d.stale.append(Stale(S.T_TOKEN_EMBD, "missing if the checkpoint stores embed_tokens; b10705+ keeps "
                                         "a full-vocabulary DSpark draft's own embed_tokens, older converters dropped "
                                         "it", "b10705", "checkpoint"))
        if bare := unsuffixed_sinks(f):
            d.seen(False, "b10705")
            d.stale.append(Stale(SINKS, f"{', '.join(bare[:2])}{' ...' if len(bare) > 2 else ''} without '.weight'; "
                                 "b10705+ names attention sinks blk.N.attn_sinks.weight (the name llama.cpp loads)",
                                 "b10705", "file"))
        if self.lineage_config:
            d.unchecked.append("config keys " + ", ".join(k.removeprefix("dflash.") for k in CONFIG_KEYS) + " (--hf)")
            if not dspark:
                if not d.has_tensor(S.T_TOKEN_EMBD):
                    d.unchecked.append(f"{S.T_TOKEN_EMBD} + {S.T_OUTPUT} of a MiMo draft (b11334+: built from the "
                                       "checkpoint's mask_embedding.pt; --hf)")
                d.unchecked.append("q/k row order of an interleaved-RoPE draft (rope_is_neox_style: false; --hf)")
        if target is None:
            d.unchecked += [DIMENSION_SECTIONS + " (M-RoPE target?)", EMBEDDING_SCALE + " (Gemma target?)"]
            return
        head_dim = f.value(_HEAD_DIM)
        if target.uses_mrope():
            present = DIMENSION_SECTIONS in f.kvs
            d.seen(present, "b10662")
            want = [int(head_dim) // 2, 0, 0, 0] if isinstance(head_dim, int) else None
            if not present or (want is not None and list(f.value(DIMENSION_SECTIONS)) != want):
                d.stale.append(Stale(DIMENSION_SECTIONS, f"{'missing' if not present else 'differs'}; b10662+ writes "
                                     f"{want} for an M-RoPE target", "b10662", "target"))
        if target.is_gemma() and EMBEDDING_SCALE not in f.kvs:
            d.seen(False, "b11401")
            d.stale.append(Stale(EMBEDDING_SCALE, "missing; b11401+ writes sqrt(target hidden_size) for a Gemma "
                                 "target", "b11401", "target"))

    def fix(self, s: Stale, u: Upgrading) -> bool:
        f = u.f
        if s.subject == HAS_CONFIDENCE_HEAD:
            u.insert_kv(KV(HAS_CONFIDENCE_HEAD, VT.BOOL, u.has_tensor(S.T_CONF_W)), (S.DFLASH_SAMPLE_FROM_ANCHOR,))
        elif s.subject == S.T_TOKEN_EMBD:
            return _embed_tokens(u)
        elif s.subject == SINKS:
            bare = set(unsuffixed_sinks(f))
            names = {t.name for t in f.tensors}
            for p in u.pieces:
                if p.spec.name in bare:
                    if p.spec.name + ".weight" in names:
                        raise ConvertError(f"{u.where}: tensors '{p.spec.name}' and '{p.spec.name}.weight' both "
                                           "present; reconvert with 'dspark-convert hf2gguf'")
                    p.spec = TensorSpec(p.spec.name + ".weight", p.spec.shape, p.spec.ggml_type, origin="file")
        elif s.subject == DIMENSION_SECTIONS:
            hd = f.value(_HEAD_DIM)
            if isinstance(hd, bool) or not isinstance(hd, int) or not 0 < hd < 2**32:
                raise ConvertError(f"{u.where}: {_HEAD_DIM} is {clip_value(hd)}, expected a positive integer (an "
                                   "M-RoPE target's dimension sections are written from it); reconvert with "
                                   "'dspark-convert hf2gguf'")
            after = [k.name for k in u.kvs if k.name.startswith("dflash.") and k.name not in
                     (S.DFLASH_SAMPLE_FROM_ANCHOR, HAS_CONFIDENCE_HEAD)]
            u.insert_kv(KV(DIMENSION_SECTIONS, VT.ARRAY, [hd // 2, 0, 0, 0], VT.INT32), tuple(after))
        elif s.subject == EMBEDDING_SCALE:
            assert u.target is not None
            hidden = u.target.hidden_size()
            if not isinstance(hidden, int) or isinstance(hidden, bool) or not 0 < hidden < 2**32:
                raise ConvertError(f"--target {u.target.source}: hidden size {clip_value(hidden)}, expected a positive "
                                   "integer below 2^32")
            u.insert_kv(KV(EMBEDDING_SCALE, VT.FLOAT32, float(math.sqrt(hidden))),
                        (S.DFLASH_BLOCK_SIZE, "dflash.logit_scale", "dflash.final_logit_softcapping"))
        else:
            return super().fix(s, u)
        return True

    def refuses_checkpoint(self, f: Header, family: str) -> str | None:
        """A DSpark file (``dflash.sample_from_anchor``) never comes from a z-lab DFlash checkpoint."""
        if is_dspark(f) and family == "dflash":
            where = getattr(f, "path", "the file")
            return (f"a checkpoint of family {family}, but {where} is a DSpark file; pass the checkpoint the file was "
                    "converted from")
        return None

    def complete(self, u: Upgrading) -> None:
        """With ``--hf``: a MiMo checkpoint is refused, the config keys are set, a DFlash draft's interleaved q/k
        rows are put in NeoX order; a DSpark file's double NeoX permutation is undone (``--hf``, or the user's
        ``--from-revision`` + ``--rope-interleaved``), and a file that keeps ``token_embd`` without ``output`` (a
        b10705+ DSpark, a DFlash / DFlash2 draft with its own ``embed_tokens``) gets the head ``hf2gguf`` adds."""
        f, hf = u.f, u.hf
        dspark = is_dspark(f)
        if hf is not None and not dspark and not u.has_tensor(S.T_TOKEN_EMBD):
            from .mask_embedding import MASK_FILE

            if (hf / MASK_FILE).is_file():
                raise ConvertError(f"{u.where}: {S.T_TOKEN_EMBD}: --hf {hf} has {MASK_FILE}, and upstream b11334+ "
                                   f"writes the target's embedding with its mask row replaced as {S.T_TOKEN_EMBD} (and "
                                   f"the target head as {S.T_OUTPUT}); upgrade does not build them: reconvert with "
                                   "'dspark-convert hf2gguf'")
        if hf is not None and self.lineage_config:
            _config_keys(u, hf)
        if hf is not None and not dspark:
            _dflash_neox(u, hf)
        if dspark:
            _double_neox(u)
        if u.match_upstream and self.lineage_config:  # (Gemma4 DSpark, DeepSeek-V4: upstream's own head layouts)
            _drop_added_head(u, dspark)
        # any file of the lineage that keeps token_embd without output.weight (a b10705+ DSpark, a DFlash or DFlash2
        # draft with its own embed_tokens): its head as hf2gguf has it
        if (u.has_tensor(S.T_TOKEN_EMBD) and not u.has_tensor(S.T_D2T)
                and not any(c.subject == S.T_TOKEN_EMBD for c in u.changes)):  # a b10705+ file: its head as hf2gguf has it
            n = len(u.pieces)
            _add_output_head(u, f.tensor(S.T_TOKEN_EMBD).qtype or QT.F32)
            if len(u.pieces) > n:
                u.changes.append(Stale(S.T_OUTPUT, "missing on an untied target; hf2gguf adds the draft's or the "
                                       "target's head (llama.cpp b11223+ would draft with token_embd as the head)",
                                       "b11223", "target"))


#: the rules of a ``dflash`` file
RULES = DFlashRules()


# ------------------------------------------------------------------------------------------------ DSpark's head
def _embed_tokens(u: Upgrading) -> bool:
    """A full-vocabulary DSpark draft's own ``embed_tokens`` (b10705+), from ``--hf`` or (the user's word) the
    target; False when the user or the checkpoint says there is none."""
    f, hf, target, where = u.f, u.hf, u.target, u.where
    if u.no_embed_tokens:
        return False
    if hf is None and not u.embed_tokens_from_target:
        raise ConvertError(f"{where}: token_embd.weight: upstream b10705+ keeps a full-vocabulary DSpark "
                           "draft's own embed_tokens, and the file does not say whether its checkpoint had one; "
                           "pass --hf CHECKPOINT (the draft's folder), --embed-tokens-from-target with --target "
                           "if it stores the target's (frozen) copy, --no-embed-tokens if it has none, or "
                           "reconvert with 'dspark-convert hf2gguf'")
    file_qt = u.file_qt
    if file_qt is None:
        raise ConvertError(f"{where}: general.file_type {f.value(S.GENERAL_FILE_TYPE)!r}: cannot tell which "
                           "type token_embd.weight takes; reconvert with 'dspark-convert hf2gguf'")
    if hf is not None:
        from ...hf.checkpoint import Checkpoint

        emb = ("embed_tokens.weight", "model.embed_tokens.weight")
        if not any(n in Checkpoint(hf, select=set(emb).__contains__) for n in emb):
            return False  # the checkpoint has none: upstream b11434 writes none either
        shape, data = u.checkpoint_tensor(emb, file_qt, "token_embd.weight")
    else:
        if target is None:
            raise ConvertError(f"{where}: --embed-tokens-from-target needs --target TARGET (the target whose "
                               "embedding the draft stores)")
        from ...roles.convert import INPUT_EMBEDDING

        shape = (_n_vocab(u), int(f.value(f"{f.arch}.embedding_length", 0)))
        data = target.tensor(S.T_TOKEN_EMBD, INPUT_EMBEDDING.candidates, file_qt, shape, "token_embd.weight")
        u.notes.append(f"token_embd.weight from the target {target.source} (--embed-tokens-from-target: the "
                       "checkpoint's embed_tokens is the target's frozen copy)")
    # upstream writes it in the checkpoint's (sorted) order: after conf_proj.*, before fc.weight
    pieces = u.pieces
    pos = next((i for i, p in enumerate(pieces) if not p.spec.name.startswith("conf_proj.")), len(pieces))
    u.add_tensor(pos, TensorSpec(S.T_TOKEN_EMBD, shape, file_qt, origin="draft"), data)
    _add_output_head(u, file_qt)
    return True


def _n_vocab(u: Upgrading) -> int:
    """The draft's vocabulary size: its tokenizer's token count (hf2gguf pads it to the config's vocab_size)."""
    f = u.f
    kv = f.kvs.get("tokenizer.ggml.tokens")
    if kv is None or kv.count is None:
        raise ConvertError(f"{f.path}: no tokenizer.ggml.tokens; cannot tell the vocabulary size token_embd.weight needs")
    return int(kv.count)


def _add_output_head(u: Upgrading, qt: QT) -> None:
    """The output head of a file that keeps ``token_embd``, as ``hf2gguf`` decides it
    (:func:`dspark_convert.variants.dflash.lineage.choose_head_layout`): on an untied target, by default, the draft's
    ``lm_head`` (from ``hf``) or else the target's head is added as ``output.weight``, or llama.cpp b11223+ drafts
    with token_embd as the head; ``match_upstream`` keeps upstream b11434's layout (none)."""
    from typing import cast

    from ...roles.convert import OUTPUT_HEAD, Context
    from .lineage import choose_head_layout

    target, hf, pieces, where = u.target, u.hf, u.pieces, u.where
    if u.has_tensor(S.T_OUTPUT) or u.match_upstream:
        return
    if target is None:
        raise ConvertError(f"{where}: output.weight: whether the target ties its embeddings decides it; pass --target "
                           "TARGET (or --match-upstream for upstream b11434's layout)")
    head_in_draft = False
    if hf is not None:
        from ...hf.checkpoint import Checkpoint

        head_in_draft = "lm_head.weight" in Checkpoint(hf, select={"lm_head.weight"}.__contains__)
    config = target.config if target.folder is not None else {"tie_word_embeddings": target.ties_embeddings()}
    ctx = Context(draft=cast(Any, None), target_dir=target.path, target_config=config)  # (not --match-upstream)
    layout = choose_head_layout(ctx, keeps_embedding=True, head_in_draft=head_in_draft, upstream_drops_head=True)
    if layout not in ("keep", "from-target"):
        return
    embd = next(p for p in pieces if p.spec.name == S.T_TOKEN_EMBD)
    shape = tuple(embd.spec.shape)
    if layout == "keep":
        assert hf is not None
        got, data = u.checkpoint_tensor(("lm_head.weight",), qt, "output.weight")
        if tuple(got) != shape:
            raise ConvertError(f"--hf {hf}: lm_head.weight has shape {list(got)}, expected {list(shape)} (as "
                               "token_embd.weight)")
        # source order: lm_head sorts after layers.*, before markov_head.* / norm
        pos = next((i for i, p in enumerate(pieces) if p.spec.name.startswith(("markov_", "output_norm"))), len(pieces))
    else:
        data = target.tensor(S.T_OUTPUT, OUTPUT_HEAD.candidates, qt, shape, "output.weight")
        pos = len(pieces) - (1 if pieces and pieces[-1].spec.name == S.T_D2T else 0)  # before d2t (last)
    u.add_tensor(pos, TensorSpec(S.T_OUTPUT, shape, qt, origin="draft" if layout == "keep" else "target"), data)
    u.notes.append(f"output.weight from the {'draft' if layout == 'keep' else 'target'}'s head: the file keeps "
                   "token_embd and the target is untied (--match-upstream leaves it out, as upstream b11434 does)")


def _drop_added_head(u: Upgrading, dspark: bool) -> None:
    """``--match-upstream`` on a file that keeps ``token_embd`` and has ``output.weight`` where upstream b11434
    writes none: a full-vocabulary DSpark draft (upstream drops its ``lm_head``), or, proved by ``--hf``, a DFlash
    draft whose checkpoint has no ``lm_head`` (the head was the target's, added by ``hf2gguf``). The head goes."""
    if not (u.has_tensor(S.T_OUTPUT) and u.has_tensor(S.T_TOKEN_EMBD)) or u.has_tensor(S.T_D2T):
        return
    if not dspark:
        if u.hf is None:
            return
        from ...hf.checkpoint import Checkpoint
        from .mask_embedding import MASK_FILE

        if (u.hf / MASK_FILE).is_file():  # MiMo-style: upstream b11334+ writes the target's head itself
            return
        if "lm_head.weight" in Checkpoint(u.hf, select={"lm_head.weight"}.__contains__):
            return
    u.pieces[:] = [p for p in u.pieces if p.spec.name != S.T_OUTPUT]
    u.changes.append(Stale(S.T_OUTPUT, "present (the head hf2gguf adds on an untied target); upstream b11434 writes "
                           "none for this draft (--match-upstream: its layout, which drafts with token_embd as the "
                           "head on an untied target)", "b10705", "file"))


# ------------------------------------------------------------------------------------------------ config keys
def _config_keys(u: Upgrading, hf: Path) -> None:
    """The :data:`CONFIG_KEYS` a DFlash / DFlash2 / DSpark draft's config gives today (``variants.kit.common.base_kvs``
    and ``variants.dflash.lineage.dflash_kvs``, the keys ``hf2gguf`` writes; a key written twice keeps its first
    place), set where the file lacks them or holds another value, in that order: after the nearest key of that list
    the file has (else before the nearest following one)."""
    from types import SimpleNamespace
    from typing import cast

    from ...kit.common import base_kvs
    from ...kit.hparams import HParams
    from ...roles.convert import Context
    from .lineage import dflash_config, dflash_kvs

    f, kvs, target = u.f, u.kvs, u.target
    where = str(hf / "config.json")
    if is_dspark(f):  # upstream's DSparkModel extends DFlashModel: the same keys, from its normalized schema
        from .dspark import normalize_schema

        hp, _ = normalize_schema(u.checkpoint_config(), where)
    else:
        hp = HParams.of(u.checkpoint_config(), where)
    taps = f.value(S.DFLASH_TARGET_LAYERS)
    if not isinstance(taps, list):
        raise ConvertError(f"{f.path}: no {S.DFLASH_TARGET_LAYERS}; not a DFlash draft upgrade can complete")
    ctx = Context(draft=cast(Any, SimpleNamespace(path=hf)), target_dir=target.path if target else hf,
                  target_config=target.config if target is not None else {})
    ft = f.value(S.GENERAL_FILE_TYPE, 0)
    written = base_kvs(S.ARCH_DFLASH, hp, ft if isinstance(ft, int) else 0, where)
    written += dflash_kvs(ctx, hp, dflash_config(hp, where), list(taps))
    last = {kv.name: kv for kv in written}  # a key written twice keeps its first place, with the second value
    order = list(dict.fromkeys(kv.name for kv in written))
    want = [last[n] for n in order]
    for i, kv in enumerate(want):
        if kv.name not in CONFIG_KEYS:
            continue
        old = f.kvs.get(kv.name)
        if old is not None and old.type == kv.type and f.value(kv.name) == kv.value:
            continue
        names = [k.name for k in kvs]
        if kv.name in names:
            kvs[names.index(kv.name)] = kv
        else:
            before = [n for n in order[:i] if n in names]
            after = [n for n in order[i + 1:] if n in names]
            pos = names.index(before[-1]) + 1 if before else names.index(after[0]) if after else len(kvs)
            kvs.insert(pos, kv)
        u.changes.append(Stale(kv.name, f"{'missing' if old is None else repr(f.value(kv.name))}; hf2gguf (upstream "
                               f"b11434) writes {kv.value!r} from --hf {hf}'s config", "b10705", "checkpoint"))


# ------------------------------------------------------------------------------------------------ q/k row order
def _neox_inverse_rows(n_rows: int, head_dim: int) -> Any:
    """Row order that undoes one NeoX permutation (``reshape(-1, hd/2, 2).transpose(1, 2)``) of ``n_rows`` rows."""
    import numpy as np

    idx = np.arange(n_rows).reshape(-1, head_dim // 2, 2).transpose(0, 2, 1).reshape(-1)  # new[i] = old[idx[i]]
    inv = np.empty_like(idx)
    inv[idx] = np.arange(n_rows)
    return inv


def _double_neox(u: Upgrading) -> None:
    """Undo upstream b10662-b11104's second NeoX permutation of q/k rows and norms when the user says the file
    came from there (``from_revision`` + ``rope_interleaved``, or ``hf``'s ``rope_is_neox_style: false``), or
    when ``hf``'s tensors prove it."""
    f, hf, from_revision = u.f, u.hf, u.from_revision
    affected = u.from_revision_in(*DOUBLE_NEOX)
    interleaved = u.rope_interleaved or (hf is not None and u.checkpoint_config().get("rope_is_neox_style", True) is False)
    hd = f.value(_HEAD_DIM)
    if not isinstance(hd, int) or hd < 2 or hd % 2:
        return
    if affected and not interleaved:
        if hf is None:
            raise ConvertError(f"{f.path}: --from-revision {from_revision}: that revision permuted q/k twice only for "
                               "interleaved-RoPE drafts (rope_is_neox_style: false), which the file does not record; "
                               "add --rope-interleaved if the checkpoint says so, or pass --hf CHECKPOINT")
        return
    if hf is not None and interleaved:
        proven = _prove_double(u, hd)
        if affected is False and proven:
            raise ConvertError(f"{f.path}: --from-revision {from_revision} says one permutation, but the checkpoint's "
                               "q_proj shows two (upstream b10662-b11104); drop --from-revision")
        affected = proven
    if not affected:
        return
    for p in u.pieces:
        if p.copy is not None and p.spec.name.endswith(_ROPE_TENSORS):
            rows = int(p.copy.shape[0])
            p.perm = _neox_inverse_rows(rows, hd)
    u.changes.append(Stale(_QK, "q/k rows permuted to NeoX order twice; one permutation undone", DOUBLE_NEOX[1],
                           "user" if hf is None else "checkpoint"))
    if hf is None:  # nothing in the file proves it: a wrong word permutes a correct file
        u.notes.append("the q/k rows were permuted on your word (--from-revision, --rope-interleaved), which the file "
                       "cannot confirm; check the result with 'dspark-convert verify NEW.gguf --hf CHECKPOINT "
                       "--target-model-dir TARGET' (or upgrade with --hf CHECKPOINT, which proves it)")


def _prove_double(u: Upgrading, hd: int) -> bool:
    """Whether ``blk.0.attn_q.weight`` equals the ``--hf`` checkpoint's q_proj permuted twice (True) or once
    (False); anything else is refused."""
    return _neox_permutations(u, hd, (1, 2)) == 2


def _neox_permutations(u: Upgrading, hd: int, choices: tuple[int, ...]) -> int:
    """How many NeoX permutations (one of ``choices``) turn the ``--hf`` checkpoint's ``q_proj`` into the file's
    ``blk.0.attn_q.weight`` (to the file's rounding); anything else is refused in one line."""
    import numpy as np

    f, hf = u.f, u.hf
    if not u.has_tensor("blk.0.attn_q.weight"):
        raise ConvertError(f"{f.path}: no blk.0.attn_q.weight to compare with --hf {hf}'s q_proj")
    _, data = u.checkpoint_tensor(("layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.q_proj.weight"),
                                  QT.F32, "the q/k permutation check")
    w = np.frombuffer(data(), np.float32)
    got = f.tensor_array("blk.0.attn_q.weight").astype(np.float32)
    if w.size != got.size:
        raise ConvertError(f"--hf {hf}: layer 0's q_proj has {w.size} values, blk.0.attn_q.weight {got.size}; "
                           "not the same draft")
    w = w.reshape(got.shape)
    idx = np.arange(len(w)).reshape(-1, hd // 2, 2).transpose(0, 2, 1).reshape(-1)
    candidates = {0: w, 1: w[idx], 2: w[idx][idx]}
    with np.errstate(invalid="ignore"):  # (inf - inf: a NaN error, refused below)
        err = {n: float(np.abs(got - candidates[n]).max()) for n in choices}
    best = min(choices, key=lambda n: err[n])
    tol = 0.02 * float(np.abs(w).max()) + 1e-6
    if not err[best] <= tol:  # (a NaN in either tensor proves nothing)
        words = " nor ".join({0: "no", 1: "one", 2: "two"}[n] for n in choices)
        diff = "a NaN in either" if np.isnan(err[best]) else f"max diff {err[best]:.3g}"
        raise ConvertError(f"{f.path}: blk.0.attn_q.weight matches neither {words} NeoX permutation of --hf "
                           f"{hf}'s q_proj ({diff}); is it the same draft?")
    return best


def _dflash_neox(u: Upgrading, hf: Path) -> None:
    """A DFlash (not DSpark) draft with interleaved RoPE (``rope_is_neox_style: false``) converted before upstream
    b10662 kept the checkpoint's q/k row order; b10662+ (and hf2gguf) permute the rows to NeoX order once. The
    checkpoint's q_proj tells which the file has; a file without the permutation gets it (a row permutation of the
    stored bytes)."""
    f = u.f
    if u.checkpoint_config().get("rope_is_neox_style", True) is not False:
        return
    hd = f.value(_HEAD_DIM)
    if not isinstance(hd, int) or hd < 4 or hd % 2 or _neox_permutations(u, hd, (0, 1)) == 1:
        return
    import numpy as np

    for p in u.pieces:
        if p.copy is not None and p.spec.name.endswith(_ROPE_TENSORS):
            p.perm = np.arange(int(p.copy.shape[0])).reshape(-1, hd // 2, 2).transpose(0, 2, 1).reshape(-1)
    u.changes.append(Stale(_QK, "q/k rows in the checkpoint's interleaved order; upstream b10662+ permutes them to "
                           "NeoX order once (llama.cpp ropes NeoX-style)", "b10662", "checkpoint"))
