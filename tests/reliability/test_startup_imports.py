"""Commands import only what they need: ``--help``, ``inspect`` and ``check`` never load the conversion stack
(tokenizers, safetensors, the Hub client, the writer), numpy or the gguf package beyond its constants.

Each command runs in a fresh interpreter (this test session has imported everything already); the list of
modules it ended with is compared with what it must not hold. ``docs/performance.md`` has the timings.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dspark_convert import convert

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"

RUN = """
import json, sys
from dspark_convert.cli import main
sys.argv = ["dspark-convert", *sys.argv[1:]]
try:
    main()
except SystemExit as e:
    code = e.code
else:
    code = 0
sys.stderr.write("\\nMODULES " + json.dumps({"code": code, "modules": sorted(sys.modules)}) + "\\n")
"""

#: the conversion stack, and the heavy libraries the header views must not load
CONVERSION = ["dspark_convert.hf2gguf.conversion", "dspark_convert.hf2gguf.writer", "dspark_convert.hf.checkpoint",
              "dspark_convert.formats.transforms", "dspark_convert.hf.hub", "dspark_convert.hf2gguf.metadata",
              "dspark_convert.registry.families",
              "dspark_convert.tokenizer", "dspark_convert.verify", "dspark_convert.reference", "tokenizers",
              "safetensors", "huggingface_hub", "sentencepiece", "torch", "yaml"]
HEAVY = ["numpy", "gguf", "gguf.gguf_writer", "gguf.quants", "gguf.gguf_reader"]


def modules(*args: str) -> tuple[int, set[str]]:
    p = subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)
    line = next(ln for ln in p.stderr.splitlines() if ln.startswith("MODULES "))
    doc = json.loads(line[len("MODULES "):])
    return doc["code"], set(doc["modules"])


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("imports") / "draft.gguf"
    convert(FIX / "dspark-qwen3", FIX / "target-qwen3", out, outtype="bf16")
    return out


@pytest.mark.parametrize("args", [["--help"], ["inspect", "{f}"], ["inspect", "{f}", "--json"], ["check", "{f}"],
                                  ["check", "{f}", "--json"], ["hf2gguf", "--help"]])
def test_header_commands_import_no_conversion_stack(gguf_file: Path, args: list[str]) -> None:
    code, mods = modules(*(a.format(f=gguf_file) for a in args))
    assert code in (0, None)
    loaded = sorted(m for m in mods if any(m == b or m.startswith(b + ".") for b in CONVERSION) or m in HEAVY)
    assert loaded == []
    assert "dspark_convert.cli" in mods and ("gguf.constants" in mods) == (args != ["--help"] and
                                                                          args != ["hf2gguf", "--help"])


def test_stats_and_conversion_load_what_they_need(gguf_file: Path, tmp_path: Path) -> None:
    code, mods = modules("inspect", str(gguf_file), "--stats")
    assert code in (0, None) and "numpy" in mods and "tokenizers" not in mods
    out = tmp_path / "x.gguf"
    code, mods = modules("hf2gguf", str(FIX / "dflash-zlab"), "-t", str(FIX / "target-qwen3"), "-o", str(out),
                         "--outtype", "bf16", "--json")
    assert code in (0, None) and {"dspark_convert.hf2gguf.writer", "gguf", "numpy"} <= mods and "torch" not in mods



def test_one_value_type_class_whichever_comes_first() -> None:
    code = ("import sys; from dspark_convert.gguf_constants import VT, QT; assert 'gguf' not in sys.modules; "
            "import gguf, gguf.constants as c; from gguf import GGUFWriter; "
            "assert gguf.GGUFValueType is VT is c.GGUFValueType and gguf.GGMLQuantizationType is QT; print('ok')")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.stdout.strip() == "ok", p.stderr[-2000:]


def test_inspect_md_names_what_inspect_imports(gguf_file: Path) -> None:
    """Issue 24 bug 13: docs/inspect.md said the command imports numpy and gguf; it does not. The sentence's two
    lists (imported, then "not ...") are checked against a fresh ``inspect`` run."""
    import re

    doc = " ".join((ROOT / "docs" / "inspect.md").read_text(encoding="utf-8").split())
    m = re.search(r"starting Python and importing (.+?) \(not (.+?): ", doc)
    assert m, "docs/inspect.md: the sentence on what the command line imports is missing"
    imported = re.split(r", | and ", m.group(1))
    absent = [n.removeprefix("not ") for n in m.group(2).split(", ")]
    _, mods = modules("inspect", str(gguf_file))
    assert imported == ["typer", "rich", "gguf.constants"] and all(n in mods for n in imported)
    assert absent == ["numpy", "the rest of gguf"] and "numpy" not in mods
    assert not [m for m in mods if m.startswith("gguf") and m != "gguf.constants" and not m.startswith("gguf_")]
