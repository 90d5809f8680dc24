"""One table of every draft and target the tests use, with its facts; the test files select from it.

Three sources of inputs:

- ``committed``: a folder under ``fixtures/`` (written by ``fixtures/generate.py``);
- ``golden``: a layout of the public golden set (``tests/make_golden.py`` writes twelve drafts and ``target/``, and
  the DeepSeek-V4 sample, which is its own target, checked against ``tests/golden/*.sha256``), generated per
  session by the ``golden_inputs`` fixture of ``conftest.py``;
- ``generated``: a draft a maker writes on demand (:attr:`Fixture.maker`: ``tests/new_drafts.py``,
  ``tests/nvfp4_drafts.py``, ``tests/gemma4_drafts.py``, ``tests/mtp_checkpoints.py``, ``fixtures/dsv4.py``,
  ``fixtures/correlated.py``).

Each row says which GGUF variant the converted file is (``dspark_convert.variants.BY_NAME``), which converter
family reads the checkpoint, the ``--spec-type`` llama-server b11434 needs for it, its target, how ``verify`` proves
it (``kind``) and the tags the test files select by. ``tests/variants/test_conformance.py`` checks the facts of every draft
row against the converter (a wrong row fails there), and that every fixture folder and every maker's draft has a
row. A new fixture or variant is one row here; the conformance runner then covers it.

Selections keep the order of the table, except where a test file's historical order differs (its test ids and
its hypothesis draws depend on it): a row's :attr:`Fixture.rank` moves it within one tag's selection.

Example:
    >>> names(source="committed", variant="eagle3")
    ['eagle3-specforge', 'eagle3-angelslim', 'eagle3-speculators', 'eagle3-normfc', 'eagle3-llama']
    >>> get("dflash2-zlab").spec_type, get("dspark-dsv4", "golden").target
    ('draft-dflash', 'self')
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

ROOT = Path(__file__).resolve().parents[1]
FIXTURES_DIR = ROOT / "fixtures"
TESTS_DIR = ROOT / "tests"

#: the targets a row may name: a committed target folder, the golden set's ``target/`` (make_inputs.py, or
#: make_inputs_b11434.py's qwen3 group), the draft's own folder (a DeepSeek-V4 checkpoint is its own target), or the
#: target folder the maker writes next to the draft (from the b11434 group's target, for the NVFP4 drafts)
GOLDEN_TARGET, SELF, OWN = "golden/target", "self", "own"
#: the target of make_inputs_b11434.py's qwen3 group (tests/variants/test_new_drafts.py's session fixture ``b11434_qwen3``)
B11434_TARGET = "golden-b11434/qwen3/target"
#: how verify proves a file: a block draft's two forwards over one block, an EAGLE-3 chain's two forwards over
#: chained steps, a Gemma 4 assistant's two forwards over chained steps into a seeded target cache, tensor by tensor
#: (a variant without a reference forward yet); ``target`` for a target folder
KINDS = ("block", "eagle", "assistant", "tensors", "target")
ALL_OUTTYPES = ("f32", "f16", "bf16", "q8_0")


@dataclass(frozen=True)
class Fixture:
    """One draft or target, with what the tests need to know about it (see the module docstring)."""

    name: str
    source: str                       # committed | golden | generated
    variant: str | None               # GGUF variant of the converted file; None for a target
    family: str | None                # converter family module (families.family_name); None for a target
    spec_type: str | None             # the --spec-type llama-server b11434 needs; None for a target
    target: str | None                # a committed target folder, GOLDEN_TARGET, SELF or OWN; None for a target
    kind: str                         # one of KINDS
    maker: str | None = None          # generated rows: "module" (its make(out, name)) or "module.function"
    tags: frozenset[str] = frozenset()
    rank: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    #: the outtypes tests/variants/test_conformance.py converts this draft to (the cheap ones: every outtype for small drafts)
    outtypes: tuple[str, ...] = ALL_OUTTYPES

    @property
    def is_draft(self) -> bool:
        return self.kind != "target"

    @property
    def key(self) -> str:
        """``source/name``: unique in the table (a golden layout may share its name with a committed fixture)."""
        return f"{self.source}/{self.name}"


def _row(name: str, source: str, variant: str | None, family: str | None, spec: str | None, target: str | None,
         kind: str, *tags: str, maker: str | None = None, rank: Mapping[str, int] | None = None,
         outtypes: tuple[str, ...] = ALL_OUTTYPES) -> Fixture:
    return Fixture(name, source, variant, family, spec, target, kind, maker, frozenset(tags),
                   MappingProxyType(dict(rank or {})), outtypes)


_Q3 = "target-qwen3"
#: a DeepSeek-V4 DSpark file's types are the family's whatever the outtype (test_dsv4 checks the bytes are equal)
_FORCED = ("auto",)
#: the Gemma4 variants verify at every outtype in test_gemma4_dspark; here the two ends (exact and quantized)
_TWO = ("f32", "q8_0")
_DS, _DF, _E3, _MTP = "draft-dspark", "draft-dflash", "draft-eagle3", "draft-mtp"

#: Tags (what the test files select by):
#:
#: - ``config-fuzz``: test_bad_inputs' configuration fuzzing (one hypothesis draw picks among them);
#: - ``variant-sample``: test_variants' GGUF-side / checkpoint-side variant agreement;
#: - ``llama-family`` / ``llama-other``: test_llama's one draft per family (every outtype) / every other layout (bf16);
#: - ``rounding``: test_reference's bit-for-bit rounding of the checkpoint against the GGUF;
#: - ``pickle``: test_pickles' ``pytorch_model.bin`` twin of the safetensors checkpoint;
#: - ``d2t``: a reduced draft vocabulary (a ``d2t`` map: fit checks the vocabulary cover);
#: - ``golden-sample``: the golden-set rows the conformance runner also converts and checks (cheap ones).
REGISTRY: tuple[Fixture, ...] = (
    # ------------------------------------------------------------------ committed drafts (fixtures/generate.py order)
    _row("dspark-qwen3", "committed", "dflash", "dspark", _DS, _Q3, "block", "config-fuzz", "variant-sample",
         "llama-family", "pickle"),
    _row("dspark-qwen3-interleaved", "committed", "dflash", "dspark", _DS, _Q3, "block", "llama-other", "rounding"),
    _row("dspark-qwen3-f32", "committed", "dflash", "dspark", _DS, _Q3, "block", "llama-other", "rounding", "pickle"),
    _row("dflash-deepspec", "committed", "dflash", "dspark", _DS, _Q3, "block", "llama-other",
         rank={"llama-other": 1}),
    _row("dflash-zlab", "committed", "dflash", "dflash", _DF, _Q3, "block", "config-fuzz", "variant-sample",
         "llama-family", rank={"variant-sample": -1}),
    _row("dflash-zlab-swa", "committed", "dflash", "dflash", _DF, _Q3, "block", "llama-other", "rounding",
         rank={"llama-other": 1}),
    _row("dflash2-zlab", "committed", "dflash2", "dflash2", _DF, _Q3, "block", "llama-family",
         rank={"llama-family": 1}),
    _row("dspark-specforge", "committed", "dflash", "dspark", _DS, _Q3, "block", "llama-other"),
    _row("dspark-speculators", "committed", "dflash", "dspark", _DS, _Q3, "block", "config-fuzz", "llama-other"),
    _row("dspark-reduced", "committed", "dflash", "dspark", _DS, _Q3, "block", "config-fuzz", "variant-sample",
         "llama-other", "rounding", "pickle", "d2t"),
    _row("eagle3-specforge", "committed", "eagle3", "eagle3", _E3, _Q3, "eagle", "llama-family", "rounding", "d2t"),
    _row("eagle3-angelslim", "committed", "eagle3", "eagle3", _E3, _Q3, "eagle", "llama-other", "d2t",
         rank={"llama-other": 2}),
    _row("eagle3-speculators", "committed", "eagle3", "eagle3", _E3, _Q3, "eagle", "config-fuzz", "variant-sample",
         "llama-other", "d2t", rank={"config-fuzz": 1, "llama-other": 2}),
    _row("eagle3-normfc", "committed", "eagle3", "eagle3", _E3, _Q3, "eagle", "llama-other", "rounding", "d2t",
         rank={"llama-other": 2}),
    _row("eagle3-llama", "committed", "eagle3", "eagle3", _E3, _Q3, "eagle", "config-fuzz", "variant-sample",
         "llama-other", "rounding", "pickle", "d2t", rank={"llama-other": 2}),
    # ------------------------------------------------------------------ committed targets
    _row("target-qwen3", "committed", None, None, None, None, "target"),
    _row("target-qwen3-sharded", "committed", None, None, None, None, "target"),
    _row("target-llama2-spm", "committed", None, None, None, None, "target"),
    # ------------------------------------------------------------------ the public golden set (tests/make_golden.py order)
    _row("dspark-deepspec", "golden", "dflash", "dspark", _DS, GOLDEN_TARGET, "block", outtypes=()),
    _row("dflash-deepspec", "golden", "dflash", "dspark", _DS, GOLDEN_TARGET, "block", outtypes=()),
    _row("dflash-zlab", "golden", "dflash", "dflash", _DF, GOLDEN_TARGET, "block", "golden-sample", outtypes=("f32",)),
    _row("dflash-zlab-swa", "golden", "dflash", "dflash", _DF, GOLDEN_TARGET, "block", outtypes=()),
    _row("dspark-specforge", "golden", "dflash", "dspark", _DS, GOLDEN_TARGET, "block", outtypes=()),
    _row("dspark-speculators", "golden", "dflash", "dspark", _DS, GOLDEN_TARGET, "block", outtypes=()),
    _row("dspark-reduced", "golden", "dflash", "dspark", _DS, GOLDEN_TARGET, "block", "golden-sample", outtypes=("f32",)),
    _row("dspark-interleaved", "golden", "dflash", "dspark", _DS, GOLDEN_TARGET, "block", outtypes=()),
    _row("eagle3-specforge", "golden", "eagle3", "eagle3", _E3, GOLDEN_TARGET, "eagle", outtypes=()),
    _row("eagle3-angelslim", "golden", "eagle3", "eagle3", _E3, GOLDEN_TARGET, "eagle", outtypes=()),
    _row("eagle3-speculators", "golden", "eagle3", "eagle3", _E3, GOLDEN_TARGET, "eagle", "golden-sample", outtypes=("f32",)),
    _row("eagle3-normfc", "golden", "eagle3", "eagle3", _E3, GOLDEN_TARGET, "eagle", outtypes=()),
    _row("dspark-dsv4", "golden", "dsv4", "dspark_dsv4", _DS, SELF, "tensors", "golden-sample",
         outtypes=_FORCED),
    # ------------------------------------------------------------------ generated drafts
    _row("dflash-mimo", "generated", "dflash", "dflash", _DF, _Q3, "block", "llama-family", maker="correlated.mimo_draft",
         rank={"llama-family": 1}),
    _row("dsv4-draft", "generated", "dsv4", "dspark_dsv4", _DS, SELF, "tensors", maker="dsv4_support.make",
         outtypes=_FORCED),
    _row("v-dflash2-f32", "generated", "dflash2", "dflash2", _DF, B11434_TARGET, "block", maker="new_drafts",
         outtypes=()),
    _row("v-dflash2-bf16", "generated", "dflash2", "dflash2", _DF, B11434_TARGET, "block", maker="new_drafts",
         outtypes=()),
    _row("v-mimo-boundary", "generated", "dflash", "dflash", _DF, B11434_TARGET, "block", maker="new_drafts",
         outtypes=()),
    _row("v-mimo-own-embed", "generated", "dflash", "dflash", _DF, B11434_TARGET, "block", maker="new_drafts",
         outtypes=()),
    _row("v-nvfp4-h64", "generated", "dflash", "dspark", _DS, OWN, "block", maker="nvfp4_drafts", outtypes=()),
    _row("v-nvfp4-h128-mixed", "generated", "dflash", "dspark", _DS, OWN, "block", maker="nvfp4_drafts",
         outtypes=()),
    _row("v-nvfp4-dflash", "generated", "dflash", "dflash", _DF, OWN, "block", maker="nvfp4_drafts",
         outtypes=()),
    _row("v-nvfp4-fp8-mixed", "generated", "dflash", "dspark", _DS, OWN, "block", maker="nvfp4_drafts",
         outtypes=()),
    _row("v-modelopt-fp8", "generated", "dflash", "dflash", _DF, OWN, "block", maker="nvfp4_drafts",
         outtypes=()),
    _row("v-ct-nvfp4", "generated", "dflash", "dspark", _DS, OWN, "block", maker="nvfp4_drafts", outtypes=()),
    _row("v-fp8-channel", "generated", "dflash", "dspark", _DS, OWN, "block", maker="nvfp4_drafts", outtypes=()),
    _row("v-ct-mixed-dflash", "generated", "dflash", "dflash", _DF, OWN, "block", maker="nvfp4_drafts",
         outtypes=()),
    _row("v-gemma4-f32", "generated", "gemma4", "dspark_gemma4", _DS, OWN, "block", maker="gemma4_drafts", outtypes=_TWO),
    _row("v-gemma4-tied", "generated", "gemma4", "dspark_gemma4", _DS, OWN, "block", maker="gemma4_drafts", outtypes=_TWO),
    _row("v-gemma4-default", "generated", "gemma4", "dspark_gemma4", _DS, OWN, "block", maker="gemma4_drafts", outtypes=_TWO),
    _row("v-gemma4-nomarkov", "generated", "gemma4", "dspark_gemma4", _DS, OWN, "block", maker="gemma4_drafts", outtypes=_TWO),
    _row("a-gemma4-e2b", "generated", "gemma4_assistant", "gemma4_assistant", _MTP, SELF, "assistant",
         maker="assistant_drafts", outtypes=_TWO),
    _row("a-gemma4-f32", "generated", "gemma4_assistant", "gemma4_assistant", _MTP, SELF, "assistant",
         maker="assistant_drafts", outtypes=_TWO),
    _row("a-gemma4-unified", "generated", "gemma4_assistant", "gemma4_assistant", _MTP, SELF, "assistant",
         maker="assistant_drafts", outtypes=_TWO),
    _row("a-gemma4-kv-eq", "generated", "gemma4_assistant", "gemma4_assistant", _MTP, SELF, "assistant",
         maker="assistant_drafts", outtypes=_TWO),
    _row("a-gemma4-kv-array", "generated", "gemma4_assistant", "gemma4_assistant", _MTP, SELF, "assistant",
         maker="assistant_drafts", outtypes=_TWO),
    _row("a-muse", "generated", "dflash", "muse_glimmer", _DF, OWN, "block", maker="assistant_drafts", outtypes=_TWO),
    _row("a-muse-f32", "generated", "dflash", "muse_glimmer", _DF, OWN, "block", maker="assistant_drafts",
         outtypes=_TWO),
    _row("a-muse-dflash2", "generated", "dflash2", "dflash2", _DF, OWN, "block", maker="assistant_drafts",
         outtypes=_TWO),
    # the MTP head of a Qwen3.5 checkpoint (hf2gguf --mtp; every case at every outtype: tests/variants/test_mtp.py)
    _row("mtp-qwen35-dense", "generated", "mtp", "mtp", "draft-mtp", SELF, "tensors", maker="mtp_checkpoints",
         outtypes=_TWO),
)
BY_KEY: dict[str, Fixture] = {f.key: f for f in REGISTRY}


def _one_of(value: str | None, wanted: str | Iterable[str] | None) -> bool:
    if wanted is None:
        return True
    return value == wanted if isinstance(wanted, str) else value in tuple(wanted)


def select(*, source: str | Iterable[str] | None = None, variant: str | Iterable[str] | None = None,
           kind: str | Iterable[str] | None = None, tag: str | None = None, drafts: bool | None = None,
           needs_golden: bool | None = None) -> list[Fixture]:
    """The rows matching every given filter, in table order (moved by their :attr:`~Fixture.rank` for ``tag``).

    ``drafts``: True for drafts only, False for targets only. ``needs_golden``: whether making the row needs the
    public golden set (a golden layout, or a generated draft whose target is the golden target)."""
    rows = [f for f in REGISTRY if _one_of(f.source, source) and _one_of(f.variant, variant)
            and _one_of(f.kind, kind) and (tag is None or tag in f.tags)
            and (drafts is None or f.is_draft == drafts) and (needs_golden is None or _needs_golden(f) == needs_golden)]
    return sorted(rows, key=lambda f: f.rank.get(tag, 0)) if tag is not None else rows


def names(**filters: object) -> list[str]:
    """:func:`select`'s names."""
    return [f.name for f in select(**filters)]  # type: ignore[arg-type]


def spec_types(**filters: object) -> dict[str, str | None]:
    """``{name: --spec-type}`` of :func:`select`'s rows."""
    return {f.name: f.spec_type for f in select(**filters)}  # type: ignore[arg-type]


def get(name: str, source: str = "committed") -> Fixture:
    """The row of ``name`` from ``source`` (KeyError when there is none)."""
    return BY_KEY[f"{source}/{name}"]


def _needs_golden(f: Fixture) -> bool:  # a golden layout, or a draft made from / converted against a golden target
    return f.source == "golden" or (f.source == "generated" and f.maker in ("new_drafts", "nvfp4_drafts"))


def maker_module(f: Fixture) -> str:
    """The module name of a generated row's maker (``new_drafts``, ``dsv4_support``, ...)."""
    assert f.maker is not None, f.key
    return f.maker.split(".")[0]


def _import(module: str) -> object:
    if str(FIXTURES_DIR) not in sys.path:  # fixtures/correlated.py, fixtures/dsv4.py (as tests/dsv4_support does)
        sys.path.insert(0, str(FIXTURES_DIR))
    return importlib.import_module(module)


def materialize(f: Fixture, out: Path, golden_inputs: Path | None = None,
                b11434: Path | None = None) -> tuple[Path, Path | None]:
    """``(draft folder, target folder or None)`` for a row: the committed folder, the golden layout (in
    ``golden_inputs``), or what its maker writes under ``out`` (``b11434``: make_inputs_b11434.py's qwen3 group)."""
    if f.kind == "target":
        raise ValueError(f"{f.key} is a target")
    if f.source != "generated":
        base = FIXTURES_DIR if f.source == "committed" else golden_inputs
        assert base is not None, f"{f.key} needs the golden inputs"
        draft = base / f.name
    else:
        mod = _import(maker_module(f))
        if f.maker == "correlated.mimo_draft":
            draft = mod.mimo_draft(out / f.name)  # type: ignore[attr-defined]
        elif f.maker == "dsv4_support.make":
            draft = mod.make(out, f.name)  # type: ignore[attr-defined]
        elif f.maker == "new_drafts":
            draft = mod.make(out, f.name)  # type: ignore[attr-defined]
        elif f.maker == "nvfp4_drafts":
            assert b11434 is not None, f"{f.key} needs make_inputs_b11434.py's qwen3 group"
            return mod.make(out, f.name, b11434 / "target", target_weights=True)  # type: ignore[attr-defined,no-any-return]
        elif f.maker == "mtp_checkpoints":
            draft = mod.make(out, f.name)  # type: ignore[attr-defined]
        elif f.maker == "gemma4_drafts":
            return mod.make(out, f.name)  # type: ignore[attr-defined,no-any-return]
        elif f.maker == "assistant_drafts":
            return mod.make(out, f.name, target_weights=True)  # type: ignore[attr-defined,no-any-return]
        else:
            raise ValueError(f"{f.key}: unknown maker {f.maker}")
    return draft, target_of(f, golden_inputs, b11434)


def target_of(f: Fixture, golden_inputs: Path | None = None, b11434: Path | None = None) -> Path | None:
    """The target folder a draft row converts against (None: a checkpoint that is its own target)."""
    if f.target == SELF:
        return None
    if f.target == B11434_TARGET:
        assert b11434 is not None, f"{f.key} needs make_inputs_b11434.py's qwen3 group"
        return b11434 / "target"
    if f.target == GOLDEN_TARGET:
        assert golden_inputs is not None, f"{f.key} needs the golden target"
        return golden_inputs / "target"
    assert f.target is not None and f.target != OWN, f.key
    return FIXTURES_DIR / f.target
