"""Runs upstream's ``convert_hf_to_gguf.py`` unchanged except for one fact: a pre-tokenizer name for a generated
target whose tokenizer hash upstream's table cannot know (a tiny or rebuilt vocabulary stands in for one only
the real checkpoint has).

    python tests/oracle_shim.py LLAMA_CPP_TREE PRE -- CONVERT_ARGS...

Upstream's ``get_vocab_base_pre`` runs first; only where it stops with "not recognized" on a tokenizer of
:data:`STAND_INS` is ``PRE`` returned. The
test that compares with such an oracle registers the target's hash for dspark-convert alike.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path
from typing import Any

#: the tokenizer classes whose hash the stand-in name replaces: the remote-code stand-in of
#: tests/data/remote_tokenizers/tiktoken_remote.py, and transformers' own tokenizer.json reader (the generated
#: byte-level targets); never transformers' conversion of a tiktoken file, which upstream tries first for Kimi
STAND_INS = ("RemoteTiktokenTokenizer", "Qwen2Tokenizer")


def main(argv: list[str]) -> None:
    tree, pre = Path(argv[0]), argv[1]
    rest = argv[argv.index("--") + 1:]
    sys.path[:0] = [str(tree), str(tree / "gguf-py")]
    from conversion import base

    original = base.TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self: Any, tokenizer: Any) -> str:
        try:
            return original(self, tokenizer)
        except NotImplementedError as e:
            if "not recognized" not in str(e) or type(tokenizer).__name__ not in STAND_INS:
                raise
            return pre

    base.TextModel.get_vocab_base_pre = get_vocab_base_pre
    sys.argv = [str(tree / "convert_hf_to_gguf.py"), *rest]
    runpy.run_path(str(tree / "convert_hf_to_gguf.py"), run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
