"""Loader rules of an MTP sidecar (b11434 ``src/models/qwen35.cpp``, ``qwen35moe.cpp``, ``qwen3next.cpp``,
``glm4-moe.cpp``, ``glm-dsa.cpp``, ``deepseek2.cpp``, ``deepseek32.cpp``, ``nemotron-h.cpp``; spec/drafts-beyond-dflash.md §1.6): what llama.cpp's loader of
the target architecture requires of a file with ``nextn_predict_layers > 0`` and no ``blk.0.attn_norm.weight``
(``mtp_only``).

The Qwen loaders:

- keys: ``block_count`` (= trunk + MTP blocks), ``nextn_predict_layers`` in ``1..block_count`` (more than 1
  breaks rule :data:`MTP_GRAPH`: every MTP graph but ``mimo2``'s asserts a single MTP block), the SSM keys
  (``conv_kernel``, ``inner_size``, ``state_size``, ``time_step_rank``, ``group_count``), for ``qwen35`` /
  ``qwen35moe`` ``rope.dimension_sections``, for the MoE archs ``expert_count`` / ``expert_used_count``;
  ``attention.recurrent_layers`` when present holds exactly ``block_count`` entries (``get_key_or_arr``);
- tensors: ``token_embd`` and ``output_norm`` required, ``output`` optional (the embedding is the head then); the
  trunk's tensors are not required, and are not expected in a sidecar; every MTP block ``n .. block_count-1``
  needs its attention (q has 2 x heads x head_dim rows: the output gate), post-attention norm, FFN (dense, or
  router + experts + shared expert) and ``nextn.eh_proj`` / ``enorm`` / ``hnorm``; ``nextn.embed_tokens``,
  ``shared_head_head`` and ``shared_head_norm`` are optional. MTP tensors are SKIP unless llama-server runs
  ``--spec-type draft-mtp``, but SKIP still requires them.

The ``glm4moe`` loader (:func:`glm_rules`):

- keys: ``nextn_predict_layers`` in ``1..block_count``, ``expert_feed_forward_length``, ``expert_shared_count``,
  ``expert_count`` / ``expert_used_count`` above 0 (its ``GGML_ASSERT``); ``leading_dense_block_count`` (default
  0) decides whether a block is MoE;
- tensors: ``token_embd`` and ``output_norm`` required, ``output`` optional; every MTP block needs ``attn_norm``,
  ``attn_q`` / ``attn_k`` / ``attn_v`` (biases optional), ``attn_output``, ``post_attention_norm`` (q/k norms
  optional), the router with ``exp_probs_b.bias``, the expert stacks and (``expert_shared_count`` > 0) the shared
  expert of ``expert_feed_forward_length x expert_shared_count`` rows, or the dense FFN for a leading dense block,
  and ``nextn.eh_proj`` / ``enorm`` / ``hnorm``; ``nextn.embed_tokens``, ``shared_head_head`` and
  ``shared_head_norm`` are optional.

The ``glm-dsa`` loader (:func:`dsa_rules`, GLM-5):

- keys: ``nextn_predict_layers`` in ``1..block_count``, ``expert_feed_forward_length``, ``layer_norm_rms_epsilon``,
  ``expert_shared_count``, ``q_lora_rank``, ``kv_lora_rank``, the indexer's ``head_count`` / ``key_length`` /
  ``top_k``; ``key_length_mla`` and ``value_length_mla`` above 0 ("GLM_DSA architecture requires MLA");
  ``attention.indexer.types`` when present holds one entry per trunk layer; ``expert_count`` above 0 for a MoE
  block;
- tensors: the root and NextN tensors as above; every MTP block needs ``attn_norm``, ``attn_q_a`` / ``attn_q_a_norm``
  / ``attn_q_b`` (heads x ``key_length_mla`` rows), ``attn_kv_a_mqa`` (``kv_lora_rank`` + ``rope.dimension_count``
  rows) / ``attn_kv_a_norm``, ``attn_k_b`` (heads x kv_lora_rank x (key_length_mla - rope.dimension_count)),
  ``attn_v_b`` (heads x value_length_mla x kv_lora_rank), ``attn_output``, ``ffn_norm``, then the MoE FFN (router,
  optional ``exp_probs_b.bias``, expert stacks, shared expert) or the dense FFN of a leading dense block; the
  indexer tensors (``indexer.k_norm`` weight and bias, ``indexer.proj``, ``indexer.attn_k``, ``indexer.attn_q_b``)
  are optional.
The ``deepseek32`` loader (DeepSeek-V3.2) is GLM-5's with three differences (:func:`dsa_rules`): it requires
``expert_gating_func``, ``expert_used_count`` above 0 for a MoE block, and the indexer tensors; it reads no
``attention.indexer.types``.
The ``deepseek2`` loader (:func:`deepseek2_rules`, GLM-4.7-Flash): as ``glm-dsa`` without the indexer keys and
tensors, and ``key_length_mla`` / ``value_length_mla`` above 0 (its MTP graph requires MLA; without them the loader
expects the unsplit ``attn_kv_b``); ``expert_used_count`` above 0; the shared expert is required in every MoE block;
a ``leading_dense_block_count`` above the trunk's layer count makes the MTP block dense, which its MTP graph
rejects (rule :data:`MTP_GRAPH`).

The ``nemotron_h_moe`` loader (:func:`nemotron_rules`):

- keys: ``nextn_predict_layers`` 1 (its MTP graph asserts a single block), the SSM keys, ``attention.layer_norm_epsilon``
  (the RMS epsilon defaults to it), ``expert_count``; the block's KV heads and expert width come from the per-block
  ``head_count_kv`` / ``feed_forward_length`` arrays and ``expert_feed_forward_length`` (else ``n_ff / n_expert_used``);
- tensors: ``token_embd`` and ``output_norm`` required, ``output`` optional; the MTP block needs ``nextn.enorm`` /
  ``hnorm`` / ``eh_proj`` / ``shared_head_norm`` (no ``nextn.embed_tokens`` or ``shared_head_head``: the loader does
  not create them), ``attn_norm``, ``attn_q`` / ``attn_k`` / ``attn_v`` / ``attn_output`` (biases optional),
  ``post_attention_norm``, the router with ``exp_probs_b.bias``, the two expert stacks (``ffn_down_exps`` /
  ``ffn_up_exps``, over ``moe_latent_size`` when set, with the optional ``ffn_latent_down`` / ``up``) and the shared
  expert ``ffn_down_shexp`` / ``ffn_up_shexp`` of ``expert_shared_feed_forward_length`` rows.

The ``mimo2`` loader (:func:`mimo2_rules`, MiMo-V2):

- keys: ``nextn_predict_layers`` in ``1..block_count``, ``attention.layer_norm_rms_epsilon``,
  ``expert_feed_forward_length``, ``attention.sliding_window`` and ``attention.sliding_window_pattern`` (an array);
  ``head_count_kv`` and ``sliding_window_pattern`` hold one entry per block;
- tensors: ``token_embd``, ``output_norm`` and ``output`` required (the loader creates ``output`` without a
  fallback); every MTP block needs ``attn_norm``, either the fused ``attn_qkv`` (heads x key_length + 2 x the
  block's KV heads x key / value length rows) or ``attn_q`` / ``attn_k`` / ``attn_v``, ``attn_output`` (ne[0] = heads x
  value_length), ``ffn_norm`` and ``nextn.eh_proj`` / ``enorm`` / ``hnorm``; without ``attn_qkv`` the file loads
  but the MTP graph asserts it when drafting (rule :data:`MTP_GRAPH`, an error ``--match-upstream`` writes anyway:
  upstream's own MiMo-V2-Flash sidecar), and likewise without the dense FFN (``feed_forward_length``); the sinks,
  the MoE FFN, ``layer_output_norm``, ``nextn.embed_tokens``, ``shared_head_head`` and
  ``shared_head_norm`` are optional.

This module is the one place those rules are written: ``check`` applies them to a sidecar made by any tool (the
``mtp`` variant of the registry), and ``hf2gguf --mtp`` checks its plan with them before writing.
"""

from __future__ import annotations

from typing import Protocol

from ... import schema as S
from ...plan import as_int
from ...roles.loader import Checker, Dims

GENERIC_LAYERS = False
#: the rule of a sidecar that loads but that llama.cpp's MTP graph cannot run (upstream b11434 writes such files)
MTP_GRAPH = "mtp-graph"

_SSM_KEYS = (S.SSM_CONV_KERNEL, S.SSM_INNER_SIZE, S.SSM_STATE_SIZE, S.SSM_TIME_STEP_RANK, S.SSM_GROUP_COUNT)



def in_what(dims: Dims) -> str:
    return f"hidden_size {dims.hidden}"


def _nextn(c: Checker, required: list[str] | None = None, *, single: bool = True) -> tuple[int, int] | None:
    """(block_count, nextn_predict_layers), or None after an error finding when the pair is unusable; when usable,
    also one finding per key of ``required`` (templates) the file lacks, and, with ``single`` (every MTP graph of
    b11434 but ``mimo2``'s: ``GGML_ASSERT(hparams.n_layer_nextn == 1)``), an error :data:`MTP_GRAPH` when there is
    more than one MTP block."""
    n_all = as_int(c.val(S.BLOCK_COUNT)) or 0
    nextn = as_int(c.val(S.NEXTN_PREDICT_LAYERS))
    if nextn is None or not 0 < nextn <= n_all:
        c.err(c.key(S.NEXTN_PREDICT_LAYERS), "required-key", f"is {nextn!r}, expected 1..block_count ({n_all}) in an "
              "MTP sidecar (the loader takes blk.{block_count - nextn}.. as the MTP blocks)")
        return None
    if single and nextn != 1:
        c.err(c.key(S.NEXTN_PREDICT_LAYERS), MTP_GRAPH, f"is {nextn}: llama.cpp b11434's {c.plan.arch} MTP graph "
              "takes a single MTP block (GGML_ASSERT n_layer_nextn == 1): the file loads, and llama-server aborts "
              "when it drafts (upstream's --mtp writes it; hf2gguf refuses it unless --match-upstream)")
    _missing_keys(c, c.plan.arch, required or [])
    return n_all, nextn


def _root_and_nextn(c: Checker, n: int, n_all: int) -> None:
    """The embedding, final norm and head, and each MTP block's NextN tensors: the same in every loader here."""
    hidden, n_tokens = c.dims.hidden, c.dims.n_tokens
    c.rules.expect(S.T_TOKEN_EMBD, (n_tokens, hidden), f"n_vocab {n_tokens} x hidden_size {hidden}",
                   required=True)
    c.rules.expect(S.T_OUTPUT_NORM, (hidden,), f"hidden_size {hidden}", required=True)
    c.rules.expect(S.T_OUTPUT, (n_tokens, hidden), f"n_vocab {n_tokens} x hidden_size {hidden}")
    for i in range(n, n_all):
        p = S.LAYER_PREFIX.format(bid=i)
        c.rules.expect(p + S.L_NEXTN_EH_PROJ, (hidden, Dims.product(hidden, 2)),
                       f"ne[0] = 2 x hidden_size {hidden} (embedding and hidden state concatenated)", required=True)
        c.rules.expect(p + S.L_NEXTN_ENORM, (hidden,), f"hidden_size {hidden}", required=True)
        c.rules.expect(p + S.L_NEXTN_HNORM, (hidden,), f"hidden_size {hidden}", required=True)
        c.rules.expect(p + S.L_NEXTN_SHARED_HEAD_NORM, (hidden,), f"hidden_size {hidden}")
        c.rules.expect(p + S.L_NEXTN_EMBED_TOKENS, (n_tokens, hidden), f"n_vocab {n_tokens} x hidden_size")
        c.rules.expect(p + S.L_NEXTN_SHARED_HEAD_HEAD, (n_tokens, hidden), f"n_vocab {n_tokens} x hidden_size")


def _missing_keys(c: Checker, arch: str, required: list[str]) -> None:
    for tpl in required:
        if c.key(tpl) not in c.kv:
            c.err(c.key(tpl), "required-key", f"is missing (llama.cpp's {arch} loader: \"key not found in model\")")


class Need(Protocol):
    """One block's expectation: tensor ``blk.{i}.<short>`` of ``shape`` (``why`` says where it comes from),
    required unless ``req`` is false."""

    def __call__(self, short: str, shape: tuple[int | None, ...] | None, why: str, *, req: bool = True) -> None: ...


def block(c: Checker, i: int) -> Need:
    """The :class:`Need` of block ``i``."""
    p = S.LAYER_PREFIX.format(bid=i)

    def need(short: str, shape: tuple[int | None, ...] | None, why: str, *, req: bool = True) -> None:
        c.rules.expect(p + short, shape, why, required=req)

    return need


def dense_ffn(need: Need, d: Dims) -> None:
    """A dense block's FFN: gate / up / down of ``feed_forward_length``."""
    need(S.L_FFN_GATE, (d.n_ff, d.hidden), f"ne[1] = feed_forward_length {d.n_ff}")
    need(S.L_FFN_UP, (d.n_ff, d.hidden), f"ne[1] = feed_forward_length {d.n_ff}")
    need(S.L_FFN_DOWN, (d.hidden, d.n_ff), f"ne[0] = feed_forward_length {d.n_ff}")


def expert_stacks(need: Need, experts: int | None, n_ff_exp: int | None, hidden: int | None) -> None:
    """The routed experts' stacks: gate and up ``(experts, n_ff_exp, hidden)``, down ``(experts, hidden, n_ff_exp)``."""
    for short in (S.L_FFN_GATE_EXPS, S.L_FFN_UP_EXPS):
        need(short, (experts, n_ff_exp, hidden), f"experts {experts} x expert_feed_forward_length "
             f"{n_ff_exp} x hidden_size {hidden}")
    need(S.L_FFN_DOWN_EXPS, (experts, hidden, n_ff_exp), f"experts {experts} x hidden_size {hidden} x "
         f"expert_feed_forward_length {n_ff_exp}")


def glm_ffn(c: Checker, need: Need, i: int, *, dsa: bool, always_shared: bool = False) -> None:
    """Block ``i``'s FFN in the ``glm4moe``, ``glm-dsa`` and ``deepseek2`` loaders: the dense FFN below
    ``leading_dense_block_count``, else the router, ``exp_probs_b.bias`` (required by ``glm4moe``, optional for
    the MLA loaders, which also refuse ``expert_count`` 0 here: ``dsa``), the expert stacks and, when
    ``expert_shared_count`` > 0 (always, with ``always_shared``: ``deepseek2`` creates it whatever the count), the
    shared expert of ``expert_feed_forward_length x expert_shared_count`` rows."""
    d = c.dims
    hidden = d.hidden
    experts = as_int(c.val(S.EXPERT_COUNT))
    n_ff_exp = as_int(c.val(S.EXPERT_FEED_FORWARD_LENGTH))
    shared = as_int(c.val(S.EXPERT_SHARED_COUNT)) or 0
    if i < (as_int(c.val(S.LEADING_DENSE_BLOCK_COUNT)) or 0):
        dense_ffn(need, d)
        return
    if dsa and not experts:
        c.err(c.key(S.EXPERT_COUNT), "required-key", f"is {experts!r}, expected > 0 (llama.cpp's {c.plan.arch} "
              "loader: \"n_expert must be > 0\")")
    used = as_int(c.val(S.EXPERT_USED_COUNT))
    if c.plan.arch == S.ARCH_DEEPSEEK32 and not used:
        c.err(c.key(S.EXPERT_USED_COUNT), "required-key", f"is {used!r}, expected > 0 (llama.cpp's deepseek32 "
              "loader: \"n_expert_used must be > 0\")")
    need(S.L_FFN_GATE_INP, (experts, hidden), f"expert_count {experts} x hidden_size {hidden}")
    need(S.L_EXP_PROBS_B, (experts,), f"expert_count {experts}", req=not dsa)
    expert_stacks(need, experts, n_ff_exp, hidden)
    if shared > 0 or always_shared:
        n_ff_sh = Dims.product(n_ff_exp, shared)
        why = f"expert_feed_forward_length {n_ff_exp} x expert_shared_count {shared}"
        need(S.L_FFN_GATE_SHEXP, (n_ff_sh, hidden), why)
        need(S.L_FFN_UP_SHEXP, (n_ff_sh, hidden), why)
        need(S.L_FFN_DOWN_SHEXP, (hidden, n_ff_sh), why)


def glm_rules(c: Checker) -> int | None:
    """The ``mtp_only`` branch of llama.cpp's ``glm4moe`` loader (see the module docstring)."""
    if (got := _nextn(c, [S.EXPERT_FEED_FORWARD_LENGTH, S.EXPERT_SHARED_COUNT, S.EXPERT_COUNT,
                                   S.EXPERT_USED_COUNT])) is None:
        return None
    n_all, nextn = got
    for tpl in (S.EXPERT_COUNT, S.EXPERT_USED_COUNT):
        v = as_int(c.val(tpl))
        if v is not None and v <= 0:
            c.err(c.key(tpl), "required-key", f"is {v}, expected > 0 (llama.cpp's glm4moe loader asserts it)")
    n = n_all - nextn
    d = c.dims
    hidden, heads, head_dim = d.hidden, d.n_head, d.head_dim
    q_rows, kv_rows = Dims.product(heads, head_dim), Dims.product(d.n_head_kv, head_dim)
    _root_and_nextn(c, n, n_all)
    for i in range(n, n_all):
        need = block(c, i)
        need(S.L_ATTN_NORM, (hidden,), f"hidden_size {hidden}")
        need(S.L_ATTN_Q, (q_rows, hidden), f"ne[1] = heads {heads} x head_dim {head_dim}")
        need(S.L_ATTN_K, (kv_rows, hidden), "ne[1] = kv heads x head_dim")
        need(S.L_ATTN_V, (kv_rows, hidden), "ne[1] = kv heads x head_dim")
        need("attn_q.bias", (q_rows,), "heads x head_dim", req=False)
        need("attn_k.bias", (kv_rows,), "kv heads x head_dim", req=False)
        need("attn_v.bias", (kv_rows,), "kv heads x head_dim", req=False)
        need(S.L_ATTN_OUT, (hidden, q_rows), "ne[0] = heads x head_dim")
        need(S.L_ATTN_Q_NORM, (head_dim,), f"head_dim {head_dim}", req=False)
        need(S.L_ATTN_K_NORM, (head_dim,), f"head_dim {head_dim}", req=False)
        need(S.L_POST_ATTENTION_NORM, (hidden,), f"hidden_size {hidden}")
        glm_ffn(c, need, i, dsa=False)
    return None


def dsa_rules(c: Checker) -> int | None:
    """The ``mtp_only`` branch of llama.cpp's ``glm-dsa`` loader (``src/models/glm-dsa.cpp``) and of its
    ``deepseek32`` twin (``src/models/deepseek32.cpp``; see the module docstring)."""
    return mla_rules(c, dsa=True)


def deepseek2_rules(c: Checker) -> int | None:
    """The ``mtp_only`` branch of llama.cpp's ``deepseek2`` loader (``src/models/deepseek2.cpp``, GLM-4.7-Flash; see
    the module docstring)."""
    return mla_rules(c, dsa=False)


def mla_rules(c: Checker, *, dsa: bool) -> int | None:
    """The MLA loaders: ``glm-dsa`` / ``deepseek32`` (``dsa``: with the indexer keys and indexer tensors, optional
    for ``glm-dsa``, required with ``expert_gating_func`` for ``deepseek32``) and ``deepseek2`` (whose MTP graph
    also asserts a MoE block, ``n_layer_dense_lead`` <= the trunk's layer count, and the q LoRA: ``q_lora_rank`` is
    required here even where the loader lets a 26 / 27-layer lite model omit it)."""
    arch = c.plan.arch
    ds32 = arch == S.ARCH_DEEPSEEK32
    required = [S.EXPERT_FEED_FORWARD_LENGTH, S.RMS_EPS, S.EXPERT_SHARED_COUNT, S.Q_LORA_RANK, S.KV_LORA_RANK]
    if dsa:
        required += [S.INDEXER_HEAD_COUNT, S.INDEXER_KEY_LENGTH, S.INDEXER_TOP_K]
    if ds32:
        required.append(S.EXPERT_GATING_FUNC)
    if (got := _nextn(c, required)) is None:
        return None
    n_all, nextn = got
    label = "DEEPSEEK32" if ds32 else "GLM_DSA"
    for tpl in (S.KEY_LENGTH_MLA, S.VALUE_LENGTH_MLA):
        v = as_int(c.val(tpl))
        if v is None or v <= 0:
            c.err(c.key(tpl), "required-key", f"is {v!r}, expected > 0 (llama.cpp: \"{label} architecture requires "
                  "MLA\")" if dsa else f"is {v!r}, expected > 0 (llama.cpp's deepseek2 MTP graph: \"GLM4 MTP "
                  "requires MLA\"; without it the loader expects the unsplit attn_kv_b)")
    n = n_all - nextn
    lead = as_int(c.val(S.LEADING_DENSE_BLOCK_COUNT)) or 0
    if not dsa and lead > n:
        c.err(c.key(S.LEADING_DENSE_BLOCK_COUNT), MTP_GRAPH, f"is {lead}, above the trunk's {n} layers: the MTP "
              "block is dense, and llama.cpp b11434's deepseek2 MTP graph asserts a MoE block (\"GLM4 MTP block "
              "expected to use MoE FFN\")")
    if not dsa:
        used = as_int(c.val(S.EXPERT_USED_COUNT))
        if used is not None and used <= 0:
            c.err(c.key(S.EXPERT_USED_COUNT), "required-key", f"is {used}, expected > 0 (llama.cpp's {arch} "
                  "loader: \"n_expert_used must be > 0\")")
    types = c.val(S.INDEXER_TYPES)
    if dsa and types is not None and (not isinstance(types, (list, tuple)) or len(types) != n):
        count = len(types) if isinstance(types, (list, tuple)) else types
        c.err(c.key(S.INDEXER_TYPES), "array-length", f"has {count} entries, expected block_count - "
              f"nextn_predict_layers = {n} (get_key_or_arr reads one per trunk layer)")
    d = c.dims
    hidden, heads = d.hidden, d.n_head
    q_lora, kv_lora = as_int(c.val(S.Q_LORA_RANK)), as_int(c.val(S.KV_LORA_RANK))
    k_mla, v_mla = as_int(c.val(S.KEY_LENGTH_MLA)), as_int(c.val(S.VALUE_LENGTH_MLA))
    rot = as_int(c.val(S.ROPE_DIMENSION_COUNT))
    nope = k_mla - rot if k_mla is not None and rot is not None else None
    kv_a = kv_lora + rot if kv_lora is not None and rot is not None else None
    idx_heads, idx_dim = as_int(c.val(S.INDEXER_HEAD_COUNT)), as_int(c.val(S.INDEXER_KEY_LENGTH))
    _root_and_nextn(c, n, n_all)
    for i in range(n, n_all):
        need = block(c, i)
        need(S.L_ATTN_NORM, (hidden,), f"hidden_size {hidden}")
        need(S.L_ATTN_Q_A_NORM, (q_lora,), f"q_lora_rank {q_lora}")
        need(S.L_ATTN_KV_A_NORM, (kv_lora,), f"kv_lora_rank {kv_lora}")
        need(S.L_ATTN_Q_A, (q_lora, hidden), f"q_lora_rank {q_lora} x hidden_size {hidden}")
        need(S.L_ATTN_Q_B, (Dims.product(heads, k_mla), q_lora), f"heads {heads} x key_length_mla {k_mla}")
        need(S.L_ATTN_KV_A_MQA, (kv_a, hidden), f"kv_lora_rank {kv_lora} + rope.dimension_count {rot}")
        need(S.L_ATTN_K_B, (heads, kv_lora, nope), f"heads {heads} x kv_lora_rank {kv_lora} x (key_length_mla "
             f"- rope.dimension_count) {nope}")
        need(S.L_ATTN_V_B, (heads, v_mla, kv_lora), f"heads {heads} x value_length_mla {v_mla} x kv_lora_rank "
             f"{kv_lora}")
        need(S.L_ATTN_OUT, (hidden, Dims.product(heads, v_mla)), f"ne[0] = heads {heads} x value_length_mla {v_mla}")
        need(S.L_FFN_NORM, (hidden,), f"hidden_size {hidden}")
        if dsa:
            need(S.L_INDEXER_K_NORM, (idx_dim,), f"indexer key_length {idx_dim}", req=ds32)
            need(S.L_INDEXER_K_NORM_B, (idx_dim,), f"indexer key_length {idx_dim}", req=ds32)
            need(S.L_INDEXER_PROJ, (idx_heads, hidden), f"indexer head_count {idx_heads} x hidden_size", req=ds32)
            need(S.L_INDEXER_ATTN_K, (idx_dim, hidden), f"indexer key_length {idx_dim} x hidden_size", req=ds32)
            need(S.L_INDEXER_ATTN_Q_B, (Dims.product(idx_heads, idx_dim), q_lora), f"indexer head_count "
                 f"{idx_heads} x key_length {idx_dim}", req=ds32)
        glm_ffn(c, need, i, dsa=True, always_shared=not dsa)
    return None


def qwen_rules(c: Checker) -> int | None:
    """The ``mtp_only`` branch of llama.cpp's ``qwen35`` / ``qwen35moe`` / ``qwen3next`` loaders (see the module
    docstring)."""
    arch = c.plan.arch
    moe = arch in (S.ARCH_QWEN35MOE, S.ARCH_QWEN3NEXT)
    d = c.dims
    required = list(_SSM_KEYS)
    if arch in (S.ARCH_QWEN35, S.ARCH_QWEN35MOE):
        required.append(S.ROPE_DIMENSION_SECTIONS)
    if moe:
        required += [S.EXPERT_COUNT, S.EXPERT_USED_COUNT]
    if (got := _nextn(c, required)) is None:
        return None
    n_all, nextn = got
    recurrent = c.val(S.RECURRENT_LAYERS)
    if recurrent is not None and (not isinstance(recurrent, (list, tuple)) or len(recurrent) != n_all):
        count = len(recurrent) if isinstance(recurrent, (list, tuple)) else recurrent
        c.err(c.key(S.RECURRENT_LAYERS), "array-length", f"has {count} entries, expected block_count {n_all} "
              "(get_key_or_arr reads one per block)")
    n = n_all - nextn
    hidden, heads, head_dim = d.hidden, d.n_head, d.head_dim
    kv_rows = Dims.product(d.n_head_kv, head_dim)
    _root_and_nextn(c, n, n_all)
    q_rows = Dims.product(Dims.product(heads, head_dim), 2)
    experts = as_int(c.val(S.EXPERT_COUNT))
    n_ff_exp = as_int(c.val(S.EXPERT_FEED_FORWARD_LENGTH))
    n_ff_sh = as_int(c.val(S.EXPERT_SHARED_FEED_FORWARD_LENGTH)) or d.n_ff
    for i in range(n, n_all):
        need = block(c, i)
        need(S.L_ATTN_NORM, (hidden,), f"hidden_size {hidden}")
        need(S.L_POST_ATTENTION_NORM, (hidden,), f"hidden_size {hidden}")
        need(S.L_ATTN_Q, (q_rows, hidden), f"ne[1] = 2 x heads {heads} x head_dim {head_dim} (query + gate)")
        need(S.L_ATTN_K, (kv_rows, hidden), "ne[1] = kv heads x head_dim")
        need(S.L_ATTN_V, (kv_rows, hidden), "ne[1] = kv heads x head_dim")
        need(S.L_ATTN_OUT, (hidden, Dims.product(heads, head_dim)),
             "ne[0] = heads x head_dim")
        need(S.L_ATTN_Q_NORM, (head_dim,), f"head_dim {head_dim}")
        need(S.L_ATTN_K_NORM, (head_dim,), f"head_dim {head_dim}")
        if moe:
            need(S.L_FFN_GATE_INP, (experts, hidden), f"expert_count {experts} x hidden_size {hidden}")
            expert_stacks(need, experts, n_ff_exp, hidden)
            need(S.L_FFN_GATE_INP_SHEXP, (1, hidden), f"hidden_size {hidden}")
            need(S.L_FFN_GATE_SHEXP, (n_ff_sh, hidden), f"shared expert length {n_ff_sh}")
            need(S.L_FFN_UP_SHEXP, (n_ff_sh, hidden), f"shared expert length {n_ff_sh}")
            need(S.L_FFN_DOWN_SHEXP, (hidden, n_ff_sh), f"shared expert length {n_ff_sh}")
        else:
            dense_ffn(need, d)
    return None


def nemotron_rules(c: Checker) -> int | None:
    """The ``mtp_only`` branch of llama.cpp's ``nemotron_h_moe`` loader (see the module docstring)."""
    if (got := _nextn(c, [*_SSM_KEYS, S.LAYER_NORM_EPS, S.EXPERT_COUNT])) is None:
        return None
    n_all, nextn = got
    for tpl in (S.HEAD_COUNT_KV, S.FEED_FORWARD_LENGTH, S.EXPERT_USED_COUNT):
        _arr_len(c, tpl, n_all, "get_key_or_arr reads one per block")
    n = n_all - nextn
    d = c.dims
    hidden, heads, head_dim = d.hidden, d.n_head, d.head_dim
    v_dim = as_int(c.val(S.VALUE_LENGTH)) or head_dim
    experts = as_int(c.val(S.EXPERT_COUNT))
    latent = as_int(c.val(S.MOE_LATENT_SIZE)) or hidden
    n_ff_sh = as_int(c.val(S.EXPERT_SHARED_FEED_FORWARD_LENGTH)) or 0

    def per_layer(tpl: str, i: int) -> int | None:
        v = c.val(tpl)
        if isinstance(v, (list, tuple)):
            return as_int(v[i]) if i < len(v) else None
        return as_int(v)

    hidden_norm = (hidden,)
    c.rules.expect(S.T_TOKEN_EMBD, (d.n_tokens, hidden), f"n_vocab {d.n_tokens} x hidden_size {hidden}",
                   required=True)
    c.rules.expect(S.T_OUTPUT_NORM, hidden_norm, f"hidden_size {hidden}", required=True)
    c.rules.expect(S.T_OUTPUT, (d.n_tokens, hidden), f"n_vocab {d.n_tokens} x hidden_size {hidden}")
    for i in range(n, n_all):
        p = S.LAYER_PREFIX.format(bid=i)
        need = block(c, i)
        kv_heads = per_layer(S.HEAD_COUNT_KV, i)
        n_ff_exp = as_int(c.val(S.EXPERT_FEED_FORWARD_LENGTH))
        used = per_layer(S.EXPERT_USED_COUNT, i)
        if not n_ff_exp:
            n_ff = per_layer(S.FEED_FORWARD_LENGTH, i)
            if not used:
                c.err(p + S.L_FFN_DOWN_EXPS, "required-key", "neither expert_feed_forward_length nor "
                      "expert_used_count is set: llama.cpp's loader cannot size the MTP block's experts")
            n_ff_exp = n_ff // used if n_ff is not None and used else None
        need(S.L_NEXTN_ENORM, hidden_norm, f"hidden_size {hidden}")
        need(S.L_NEXTN_HNORM, hidden_norm, f"hidden_size {hidden}")
        need(S.L_NEXTN_EH_PROJ, (hidden, Dims.product(hidden, 2)),
             f"ne[0] = 2 x hidden_size {hidden} (embedding and hidden state concatenated)")
        need(S.L_NEXTN_SHARED_HEAD_NORM, hidden_norm, f"hidden_size {hidden}")
        need(S.L_ATTN_NORM, hidden_norm, f"hidden_size {hidden}")
        q_rows, k_rows, v_rows = Dims.product(heads, head_dim), Dims.product(kv_heads, head_dim), Dims.product(kv_heads, v_dim)
        need(S.L_ATTN_Q, (q_rows, hidden), f"ne[1] = heads {heads} x head_dim {head_dim}")
        need(S.L_ATTN_K, (k_rows, hidden), f"ne[1] = head_count_kv[{i}] {kv_heads} x head_dim {head_dim}")
        need(S.L_ATTN_V, (v_rows, hidden), f"ne[1] = head_count_kv[{i}] {kv_heads} x value_length {v_dim}")
        need("attn_q.bias", (q_rows,), "heads x head_dim", req=False)
        need("attn_k.bias", (k_rows,), "kv heads x head_dim", req=False)
        need("attn_v.bias", (v_rows,), "kv heads x value_length", req=False)
        need(S.L_ATTN_OUT, (hidden, q_rows), "ne[0] = heads x head_dim")
        need("attn_output.bias", hidden_norm, f"hidden_size {hidden}", req=False)
        need(S.L_POST_ATTENTION_NORM, hidden_norm, f"hidden_size {hidden}")
        need(S.L_FFN_GATE_INP, (experts, hidden), f"expert_count {experts} x hidden_size {hidden}")
        need(S.L_EXP_PROBS_B, (experts,), f"expert_count {experts}")
        need(S.L_FFN_LATENT_DOWN, (latent, hidden), f"moe_latent_size {latent} x hidden_size", req=False)
        need(S.L_FFN_LATENT_UP, (hidden, latent), f"hidden_size x moe_latent_size {latent}", req=False)
        need(S.L_FFN_DOWN_EXPS, (experts, latent, n_ff_exp), f"experts {experts} x width {latent} x "
             f"expert_feed_forward_length {n_ff_exp}")
        need(S.L_FFN_UP_EXPS, (experts, n_ff_exp, latent), f"experts {experts} x expert_feed_forward_length "
             f"{n_ff_exp} x width {latent}")
        need(S.L_FFN_DOWN_SHEXP, (hidden, n_ff_sh), f"expert_shared_feed_forward_length {n_ff_sh}")
        need(S.L_FFN_UP_SHEXP, (n_ff_sh, hidden), f"expert_shared_feed_forward_length {n_ff_sh}")
    return None


def _arr_len(c: Checker, tpl: str, want: int, why: str, *, at_least: bool = False) -> None:
    """A per-block array key (``get_key_or_arr`` / ``get_arr``) must hold ``want`` entries (at least, for
    ``at_least``); a scalar is fine where the loader takes one (not for ``at_least``). ``why`` closes the finding's
    message, in parentheses."""
    v = c.val(tpl)
    if v is None:
        return
    n = len(v) if isinstance(v, (list, tuple)) else None
    if n is None and not at_least:
        return
    if n is None or (n < want if at_least else n != want):
        c.err(c.key(tpl), "array-length", f"has {n if n is not None else v!r} entries, expected "
              f"{'at least ' if at_least else ''}block_count {want} ({why})")


#: how a deepseek4 per-block array finding ends
_DS4_WHY = "llama.cpp's deepseek4 loader reads one per block"


def deepseek4_rules(c: Checker) -> int | None:
    """The ``mtp_only`` branch of llama.cpp's ``deepseek4`` loader (``src/models/deepseek4.cpp``): the keys it reads,
    ``expert_gating_func`` 4 (sqrtsoftplus), one MTP block (its MTP graph asserts it), the per-block arrays
    (``compress_ratios`` at least ``block_count`` entries, ``swiglu_clamp_*`` / ``expert_feed_forward_length``
    exactly when arrays); the embedding, final norm, head (required here: no fallback to the embedding) and
    ``output_hc_*``; every MTP block's DeepSeek-V4 tensors (with the compressor and indexer of a block whose compress
    ratio is 4 or 128) and its ``nextn.eh_proj`` / ``enorm`` / ``hnorm`` (``nextn.embed_tokens``, ``shared_head_head``,
    ``shared_head_norm`` and ``exp_probs_b_vl.bias`` optional)."""
    if (got := _nextn(c, [S.RMS_EPS, S.Q_LORA_RANK, S.SLIDING_WINDOW, S.EXPERT_FEED_FORWARD_LENGTH,
                                 S.EXPERT_SHARED_COUNT, S.EXPERT_WEIGHTS_SCALE, S.EXPERT_WEIGHTS_NORM, S.SWIGLU_CLAMP_EXP,
                                 S.INDEXER_HEAD_COUNT, S.INDEXER_KEY_LENGTH, S.INDEXER_TOP_K, S.OUTPUT_GROUP_COUNT,
                                 S.OUTPUT_LORA_RANK, S.COMPRESS_ROPE_FREQ_BASE, S.HC_COUNT, S.HC_SINKHORN_ITERATIONS,
                                 S.HC_EPSILON, S.HASH_LAYER_COUNT, S.COMPRESS_RATIOS, S.EXPERT_GATING_FUNC,
                                 S.EXPERT_COUNT, S.EXPERT_USED_COUNT])) is None:
        return None
    n_all, nextn = got
    if nextn != 1:
        c.err(c.key(S.NEXTN_PREDICT_LAYERS), "required-key", f"is {nextn}; llama.cpp's deepseek4 MTP graph asserts a "
              "single MTP block")
    gating = c.val(S.EXPERT_GATING_FUNC)
    if gating is not None and gating != S.EXPERT_GATING_SQRTSOFTPLUS:
        c.err(c.key(S.EXPERT_GATING_FUNC), "required-key", f"is {gating!r}; llama.cpp's deepseek4 loader expects "
              f"{S.EXPERT_GATING_SQRTSOFTPLUS} (sqrtsoftplus)")
    for tpl in (S.EXPERT_COUNT, S.EXPERT_USED_COUNT):
        v = as_int(c.val(tpl))
        if v is not None and v <= 0:
            c.err(c.key(tpl), "required-key", f"is {v}, expected > 0 (the MTP block is a MoE block)")
    _arr_len(c, S.COMPRESS_RATIOS, n_all, _DS4_WHY, at_least=True)
    for tpl in (S.SWIGLU_CLAMP_EXP, S.SWIGLU_CLAMP_SHEXP, S.EXPERT_FEED_FORWARD_LENGTH):
        _arr_len(c, tpl, n_all, _DS4_WHY)
    n = n_all - nextn
    d = c.dims
    hidden, heads, hd, n_tokens = d.hidden, d.n_head, d.head_dim, d.n_tokens
    q_lora, o_groups, o_lora = (as_int(c.val(t)) for t in (S.Q_LORA_RANK, S.OUTPUT_GROUP_COUNT, S.OUTPUT_LORA_RANK))
    hc = as_int(c.val(S.HC_COUNT))
    hc_dim, mix = Dims.product(hc, hidden), (hc + 2) * hc if hc else None
    experts, used = as_int(c.val(S.EXPERT_COUNT)), as_int(c.val(S.EXPERT_USED_COUNT))
    ff_exp = c.val(S.EXPERT_FEED_FORWARD_LENGTH)
    shared = as_int(c.val(S.EXPERT_SHARED_COUNT))
    idx_heads, idx_dim = as_int(c.val(S.INDEXER_HEAD_COUNT)), as_int(c.val(S.INDEXER_KEY_LENGTH))
    hash_layers = as_int(c.val(S.HASH_LAYER_COUNT)) or 0
    ratios = c.val(S.COMPRESS_RATIOS)
    qd = Dims.product(heads, hd)
    vec = (hidden,)
    c.rules.expect(S.T_TOKEN_EMBD, (n_tokens, hidden), f"n_vocab {n_tokens} x hidden_size {hidden}",
                   required=True)
    c.rules.expect(S.T_OUTPUT_NORM, vec, f"hidden_size {hidden}", required=True)
    c.rules.expect(S.T_OUTPUT, (n_tokens, hidden), f"n_vocab {n_tokens} x hidden_size {hidden} (the deepseek4 "
                   "loader requires it)", required=True)
    c.rules.expect(S.T_OUTPUT_HC_FN, (hc, hc_dim), f"hc {hc} x hc * hidden_size {hc_dim}", required=True)
    c.rules.expect(S.T_OUTPUT_HC_BASE, (hc,), f"hc {hc}", required=True)
    c.rules.expect(S.T_OUTPUT_HC_SCALE, (1,), "1", required=True)
    for i in range(n, n_all):
        need = block(c, i)
        n_ff = as_int(ff_exp[i] if isinstance(ff_exp, (list, tuple)) and i < len(ff_exp) else ff_exp)
        ratio = as_int(ratios[i]) if isinstance(ratios, (list, tuple)) and i < len(ratios) else 0
        need(S.L_ATTN_NORM, vec, f"hidden_size {hidden}")
        need("attn_sinks.weight", (heads,), f"heads {heads}")
        need(S.L_ATTN_Q_A, (q_lora, hidden), f"q_lora_rank {q_lora} x hidden_size {hidden}")
        need(S.L_ATTN_Q_A_NORM, (q_lora,), f"q_lora_rank {q_lora}")
        need(S.L_ATTN_Q_B, (qd, q_lora), f"heads {heads} x head_dim {hd} x q_lora_rank {q_lora}")
        need("attn_kv.weight", (hd, hidden), f"head_dim {hd} x hidden_size {hidden}")
        need(S.L_ATTN_KV_A_NORM, (hd,), f"head_dim {hd}")
        need("attn_output_a.weight", (Dims.product(o_groups, o_lora), qd // o_groups if qd and o_groups else None),
             f"output_group_count {o_groups} x output_lora_rank {o_lora} x heads x head_dim / groups")
        need("attn_output_b.weight", (hidden, Dims.product(o_groups, o_lora)),
             f"hidden_size {hidden} x output_group_count {o_groups} x output_lora_rank {o_lora}")
        for k in ("attn", "ffn"):
            need(f"hc_{k}_fn.weight", (mix, hc_dim), f"(2 + hc) x hc {mix} x hc * hidden_size {hc_dim}")
            need(f"hc_{k}_base.weight", (mix,), f"(2 + hc) x hc {mix}")
            need(f"hc_{k}_scale.weight", (3,), "3")
        if ratio:
            if ratio not in (4, 128):
                c.err(c.key(S.COMPRESS_RATIOS), "key-range", f"entry {i} is {ratio}; llama.cpp's deepseek4 loader "
                      "supports compression ratios 0, 4 and 128")
            coff = 2 if ratio == 4 else 1
            why = f"compress ratio {ratio}: {coff} x head_dim {hd}"
            need("attn_compressor_kv.weight", (Dims.product(coff, hd), hidden), why)
            need("attn_compressor_gate.weight", (Dims.product(coff, hd), hidden), why)
            need("attn_compressor_ape.weight", (ratio, Dims.product(coff, hd)), why)
            need("attn_compressor_norm.weight", (hd,), f"head_dim {hd}")
            if ratio == 4:
                why = f"indexer heads {idx_heads} x key_length {idx_dim}"
                need(S.L_INDEXER_PROJ, (idx_heads, hidden), why)
                need(S.L_INDEXER_ATTN_Q_B, (Dims.product(idx_heads, idx_dim), q_lora), why)
                need("indexer_compressor_kv.weight", (Dims.product(2, idx_dim), hidden), why)
                need("indexer_compressor_gate.weight", (Dims.product(2, idx_dim), hidden), why)
                need("indexer_compressor_ape.weight", (ratio, Dims.product(2, idx_dim)), why)
                need("indexer_compressor_norm.weight", (idx_dim,), why)
        need(S.L_FFN_GATE_INP, (experts, hidden), f"expert_count {experts} x hidden_size {hidden}")
        if i < hash_layers:
            need("ffn_gate_tid2eid.weight", (n_tokens, used), f"n_vocab x expert_used_count {used}")
        else:
            need(S.L_EXP_PROBS_B, (experts,), f"expert_count {experts}")
        need("exp_probs_b_vl.bias", (experts,), f"expert_count {experts}", req=False)
        need("ffn_norm.weight", vec, f"hidden_size {hidden}")
        expert_stacks(need, experts, n_ff, hidden)
        sh = Dims.product(n_ff, shared)
        why = f"expert_feed_forward_length {n_ff} x expert_shared_count {shared}"
        need(S.L_FFN_GATE_SHEXP, (sh, hidden), why)
        need(S.L_FFN_DOWN_SHEXP, (hidden, sh), why)
        need(S.L_FFN_UP_SHEXP, (sh, hidden), why)
        need(S.L_NEXTN_EH_PROJ, (hidden, Dims.product(hidden, 2)),
             f"ne[0] = 2 x hidden_size {hidden} (embedding and hidden state concatenated)")
        need(S.L_NEXTN_ENORM, vec, f"hidden_size {hidden}")
        need(S.L_NEXTN_HNORM, vec, f"hidden_size {hidden}")
        need(S.L_NEXTN_EMBED_TOKENS, (n_tokens, hidden), f"n_vocab {n_tokens} x hidden_size", req=False)
        need(S.L_NEXTN_SHARED_HEAD_HEAD, (n_tokens, hidden), f"n_vocab {n_tokens} x hidden_size", req=False)
        need(S.L_NEXTN_SHARED_HEAD_NORM, vec, f"hidden_size {hidden}", req=False)
    return None


def mimo2_rules(c: Checker) -> int | None:
    """The ``mtp_only`` branch of llama.cpp's ``mimo2`` loader (see the module docstring)."""
    if (got := _nextn(c, [S.RMS_EPS, S.EXPERT_FEED_FORWARD_LENGTH, S.SLIDING_WINDOW, S.SLIDING_WINDOW_PATTERN],
                      single=False)) is None:  # (its MTP graph runs any of the blocks: nextn_layer_offset)
        return None
    n_all, nextn = got
    _arr_len(c, S.HEAD_COUNT_KV, n_all, "one per block")
    pattern = c.val(S.SLIDING_WINDOW_PATTERN)
    if pattern is not None and not isinstance(pattern, (list, tuple)):
        c.err(c.key(S.SLIDING_WINDOW_PATTERN), "required-key",
              f"is {pattern!r}, expected an array (llama.cpp's get_arr)")
    _arr_len(c, S.SLIDING_WINDOW_PATTERN, n_all, "one per block")
    n = n_all - nextn
    d = c.dims
    hidden, heads, k_dim = d.hidden, d.n_head, d.head_dim
    v_dim = as_int(c.val(S.VALUE_LENGTH)) or k_dim
    kv_arr = c.val(S.HEAD_COUNT_KV)
    experts = as_int(c.val(S.EXPERT_COUNT))
    n_ff_exp = as_int(c.val(S.EXPERT_FEED_FORWARD_LENGTH))
    _root_and_nextn(c, n, n_all)
    c.rules.expect(S.T_OUTPUT, (d.n_tokens, hidden), f"n_vocab {d.n_tokens} x hidden_size {hidden}",
                   required=True)
    names = {t.name for t in c.plan.tensors}
    for i in range(n, n_all):
        need = block(c, i)
        p = S.LAYER_PREFIX.format(bid=i)
        kv = as_int(kv_arr[i]) if isinstance(kv_arr, (list, tuple)) and i < len(kv_arr) else as_int(kv_arr)
        q_rows, k_rows, v_rows = Dims.product(heads, k_dim), Dims.product(kv, k_dim), Dims.product(kv, v_dim)
        fused = p + S.L_ATTN_QKV in names
        if not fused:
            c.err(p + S.L_ATTN_QKV, MTP_GRAPH, "is missing: llama.cpp b11434's mimo2 MTP graph requires the fused "
                  "q/k/v (GGML_ASSERT \"MIMO2 MTP requires fused attn_qkv\"): the file loads, and llama-server aborts "
                  "when it drafts (upstream's --mtp writes attn_q / attn_k / attn_v for MiMo-V2-Flash; hf2gguf fuses "
                  "them unless --match-upstream)")
        qkv_rows = None if q_rows is None or k_rows is None or v_rows is None else q_rows + k_rows + v_rows
        need(S.L_ATTN_NORM, (hidden,), f"hidden_size {hidden}")
        need(S.L_ATTN_QKV, (qkv_rows, hidden), f"ne[1] = heads {heads} x key_length {k_dim} + 2 x "
             f"head_count_kv[{i}] {kv} x key / value length", req=False)
        need("attn_qkv.bias", (qkv_rows,), "q + k + v rows", req=False)
        need(S.L_ATTN_Q, (q_rows, hidden), f"ne[1] = heads {heads} x key_length {k_dim}", req=not fused)
        need(S.L_ATTN_K, (k_rows, hidden), f"ne[1] = head_count_kv[{i}] {kv} x key_length {k_dim}",
             req=not fused)
        need(S.L_ATTN_V, (v_rows, hidden), f"ne[1] = head_count_kv[{i}] {kv} x value_length {v_dim}",
             req=not fused)
        need("attn_q.bias", (q_rows,), "heads x key_length", req=False)
        need("attn_k.bias", (k_rows,), "kv heads x key_length", req=False)
        need("attn_v.bias", (v_rows,), "kv heads x value_length", req=False)
        need(S.L_ATTN_OUT, (hidden, Dims.product(heads, v_dim)), f"ne[0] = heads {heads} x value_length {v_dim}")
        need(S.L_ATTN_SINKS, (heads,), f"heads {heads}", req=False)
        need(S.L_FFN_NORM, (hidden,), f"hidden_size {hidden}")
        for short, shape in ((S.L_FFN_GATE, (d.n_ff, hidden)), (S.L_FFN_UP, (d.n_ff, hidden)),
                             (S.L_FFN_DOWN, (hidden, d.n_ff))):
            need(short, shape, f"feed_forward_length {d.n_ff}", req=False)
            if p + short not in names:
                c.err(p + short, MTP_GRAPH, "is missing: llama.cpp b11434's mimo2 MTP graph requires a dense FFN "
                      "(GGML_ASSERT \"MIMO2 MTP requires dense FFN tensors\"): the file loads, and llama-server "
                      "aborts when it drafts")
        need(S.L_FFN_GATE_INP, (experts, hidden), f"expert_count {experts} x hidden_size {hidden}", req=False)
        need(S.L_EXP_PROBS_B, (experts,), f"expert_count {experts}", req=False)
        for short in (S.L_FFN_GATE_EXPS, S.L_FFN_UP_EXPS):
            need(short, (experts, n_ff_exp, hidden), f"experts {experts} x expert_feed_forward_length "
                 f"{n_ff_exp} x hidden_size {hidden}", req=False)
        need(S.L_FFN_DOWN_EXPS, (experts, hidden, n_ff_exp), f"experts {experts} x hidden_size {hidden} x "
             f"expert_feed_forward_length {n_ff_exp}", req=False)
        need(S.L_LAYER_OUT_NORM, (hidden,), f"hidden_size {hidden}", req=False)
    return None


def rules(c: Checker) -> int | None:
    """The ``mtp_only`` branch of the target arch's loader (see the module docstring)."""
    if c.plan.arch == S.ARCH_MIMO2:
        return mimo2_rules(c)
    if c.plan.arch in (S.ARCH_GLM_DSA, S.ARCH_DEEPSEEK32):
        return dsa_rules(c)
    if c.plan.arch == S.ARCH_DEEPSEEK2:
        return deepseek2_rules(c)
    if c.plan.arch == S.ARCH_NEMOTRON_H_MOE:
        return nemotron_rules(c)
    if c.plan.arch == S.ARCH_DEEPSEEK4:
        return deepseek4_rules(c)
    return glm_rules(c) if c.plan.arch == S.ARCH_GLM4MOE else qwen_rules(c)
