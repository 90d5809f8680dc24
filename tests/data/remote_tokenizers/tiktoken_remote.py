"""Test data: a stand-in for a target's remote tiktoken tokenizer module (Qwen-1's tokenization_qwen.py, HunYuan's
tokenization_hy.py, Kimi's tokenization_kimi.py), with the attributes llama.cpp's vocab methods read
(``mergeable_ranks``, ``model._mergeable_ranks``, ``special_tokens``, ``eos_id``, ``vocab_size``, ``get_vocab``,
``encode``).

tests/target_kit.py copies it into a generated target with the family's facts filled in; only upstream's converter
runs it, in the oracle run of tests/target_drafts.py. dspark-convert never imports a target's code.
"""

import base64
import json
import os
import unicodedata

import tiktoken
from transformers import PreTrainedTokenizer

FAMILY = "@FAMILY@"
PATTERNS = {
    "qwen": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
            r"|\s+(?!\S)|\s+",
    "kimi": "|".join([
        r"[\p{Han}]+",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+"
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*"
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}", r" ?[^\s\p{L}\p{N}]+[\r\n]*", r"\s*[\r\n]+", r"\s+(?!\S)", r"\s+"]),
}
EXTRAS = tuple(f"<|extra_{i}|>" for i in range(205))
FILES = {"qwen": "qwen.tiktoken", "hunyuan": "hy.tiktoken", "kimi": "tiktoken.model"}


def _ranks(path, by_line):
    out = {}
    for line in open(path, "rb").read().splitlines():
        if line:
            token, rank = line.split()
            token = base64.b64decode(token)
            if by_line:
                if token not in out:
                    out[token] = len(out)
            else:
                out[token] = int(rank)
    return out


class RemoteTiktokenTokenizer(PreTrainedTokenizer):
    vocab_files_names = {"vocab_file": FILES[FAMILY]}
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(self, vocab_file, added_tokens_decoder=None, eos_token=None, **kwargs):
        self.mergeable_ranks = _ranks(vocab_file, by_line=FAMILY == "hunyuan")
        if FAMILY == "qwen":
            names = ("<|endoftext|>", "<|im_start|>", "<|im_end|>") + EXTRAS
            self.special_tokens = {t: 151643 + i for i, t in enumerate(names)}
        elif FAMILY == "hunyuan":
            names = ("<|endoftext|>", "<|startoftext|>", "<|bos|>", "<|eos|>", "<|pad|>") + EXTRAS
            self.special_tokens = {t: 127957 + i for i, t in enumerate(names)}
        else:
            config = json.load(open(os.path.join(os.path.dirname(vocab_file), "tokenizer_config.json")))
            mapping = {int(k): v["content"] for k, v in config["added_tokens_decoder"].items()}
            n = len(self.mergeable_ranks)
            self.special_tokens = {mapping.get(i, f"<|reserved_token_{i}|>"): i for i in range(n, n + 258)}
        self.model = tiktoken.Encoding("remote", pat_str=PATTERNS["kimi" if FAMILY == "kimi" else "qwen"],
                                       mergeable_ranks=self.mergeable_ranks, special_tokens=self.special_tokens)
        assert len(self.mergeable_ranks) + len(self.special_tokens) == self.model.n_vocab
        self.eos_id = self.special_tokens[str(eos_token or "[EOS]")] if FAMILY == "kimi" else None
        self._decoder = {v: k for k, v in self.mergeable_ranks.items()}
        super().__init__(**kwargs)

    @property
    def vocab_size(self):
        return self.model.n_vocab

    def __len__(self):
        return self.model.n_vocab

    def get_vocab(self):
        return self.mergeable_ranks

    def encode(self, text, **kwargs):
        if FAMILY != "kimi":
            text = unicodedata.normalize("NFC", text)
        return self.model.encode(text, allowed_special="all")

    def _tokenize(self, text, **kwargs):
        return [self._decoder.get(i, i) for i in self.encode(text)]

    def _convert_token_to_id(self, token):
        return self.special_tokens.get(token, self.mergeable_ranks.get(token))

    def _convert_id_to_token(self, index):
        return self._decoder.get(index)

    def _add_tokens(self, new_tokens, special_tokens=False):
        return 0

    def save_vocabulary(self, save_directory, filename_prefix=None):
        return ()
