"""The variant registry (``dspark_convert.registry``) and the rules that keep family knowledge in its place:

- one answer to "which variant is this?" for a GGUF file and for a checkpoint, the same one ``check`` uses;
- every converter family has a variant (so verify's tensor accounting has its drop rules), and every family module
  provides the ``Family`` contract;
- verify's side never imports the conversion verb, and each variant's forwards and tensor checks never import the
  converter (its family modules, the kit, the name tables): two independent witnesses;
- the import graph has no cycle and no upward import; at the level of top-level units (each folder of the package
  and each top-level module) no two units import each other and there is no cycle;
- a module under ``variants/`` imports contracts (``roles/``), never a driver; no module imports an underscored
  name from another module;
- family names appear only in the variant packages and the registry (``variants/``) and the schema, plus an
  allow-list of today's offenders that may only shrink.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from conftest import FIXTURES, ROOT
from fixture_registry import select

from dspark_convert.check import loader_role
from dspark_convert.gguffile.reader import read_gguf
from dspark_convert.registry import BY_NAME, VARIANTS, DropRule, gguf_variant, variant_of_family
from dspark_convert.registry.families import checkpoint_variant, draft_architecture, family_modules, family_name

PKG = ROOT / "dspark_convert"

#: committed fixture -> the GGUF variant its conversion is
FIXTURE_VARIANTS = {f.name: f.variant for f in select(tag="variant-sample")}


@pytest.mark.parametrize("layout", sorted(FIXTURE_VARIANTS))
def test_gguf_and_checkpoint_give_the_same_variant(converted, layout: str) -> None:
    f = read_gguf(converted(layout, "f32"))
    v = gguf_variant(f.value, [t.name for t in f.tensors])
    assert v is not None and v.name == FIXTURE_VARIANTS[layout]
    cfg = __import__("json").loads((FIXTURES / layout / "config.json").read_text())
    assert checkpoint_variant(cfg, [], str(FIXTURES / layout)) is v


def test_dsv4_refines_dflash_and_check_agrees() -> None:
    """Hyper-connections make a ``dflash`` file DeepSeek-V4 DSpark; check's loader variants ask the registry."""
    dsv4 = {"general.architecture": "dflash", "dflash.hyper_connection.count": 4}
    assert gguf_variant(dsv4.get).name == "dsv4"
    assert gguf_variant({**dsv4, "dflash.hyper_connection.count": 0}.get).name == "dflash"
    assert gguf_variant({**dsv4, "dflash.hyper_connection.count": True}.get).name == "dflash"   # a bool is no count
    assert gguf_variant({"general.architecture": "llama"}.get) is None
    assert [v.name for v in VARIANTS].index("dsv4") < [v.name for v in VARIANTS].index(BY_NAME["dsv4"].refines or "")
    assert all(v.has_role("loader") for v in VARIANTS)              # check asks each file's variant's loader role
    plan = __import__("dspark_convert.plan", fromlist=["Plan"]).Plan("dflash", kvs=[], tensors=[])
    assert loader_role(plan) is BY_NAME["dflash"].role("loader")


def test_every_family_has_a_variant() -> None:
    names = sorted(family_name(m) for m in family_modules())
    assert names == sorted(f for v in VARIANTS for f in v.families)
    assert {variant_of_family(n).name for n in names} == {"dflash", "dflash2", "eagle3", "dsv4", "gemma4",
                                                          "gemma4_assistant", "mtp"}


def test_draft_architecture() -> None:
    assert draft_architecture({"architectures": ["Eagle3Speculator"]}) == "Eagle3Speculator"
    assert draft_architecture({"architectures": ["Qwen3ForCausalLM"]}) is None
    assert draft_architecture({"architectures": ["LlamaForCausalLM"]}) is None       # also a target class
    assert draft_architecture({"architectures": []}) is None and draft_architecture([]) is None


def test_drop_rules_need_the_other_side() -> None:
    t2d = next(r for r in BY_NAME["dflash"].checkpoint_drops if r.pattern == "t2d")
    assert t2d.covers("t2d", {"d2t"}) and not t2d.covers("t2d", set()) and not t2d.covers("xt2d", {"d2t"})
    embed = next(r for r in BY_NAME["dflash"].checkpoint_drops if r.pattern == "embed_tokens.weight")
    assert embed.covers("embed_tokens.weight", {"fc.weight"}) and not embed.covers("embed_tokens.weight",
                                                                                   {"token_embd.weight"})
    layer = DropRule("layers.{n}.x.weight", "test")
    assert layer.covers("layers.12.x.weight", set()) and not layer.covers("layers.a.x.weight", set())


# ---------------------------------------------------------------------------------------------- import rules
def _imports(path: Path) -> set[str]:
    """Modules ``path`` imports (relative imports resolved against the package), lazy imports included."""
    rel = path.relative_to(ROOT).with_suffix("").parts
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = list(rel[:len(rel) - node.level]) if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
    return out


#: the verify side: its driver, the shared reference machinery, and each variant's forwards and verify rows
WITNESSES = ("numpy_forward.py", "torch_forward.py", "tensors.py")
VERIFY_SIDE = ["verify/__init__.py", "verify/accounting.py", "verify/checks.py", "verify/nvfp4.py", "verify/rows.py",
               *[f"reference/{p.name}" for p in sorted((PKG / "reference").glob("*.py"))],
               *[p.relative_to(PKG).as_posix() for p in sorted((PKG / "variants").glob("*/*.py"))
                 if p.name in ("verify.py", *WITNESSES)]]
#: converter code a forward must not import (its own HF / GGUF names keep the two sides independent witnesses)
CONVERTER = ("dspark_convert.hf2gguf", "dspark_convert.kit", "dspark_convert.registry.families",
             "dspark_convert.roles.convert", "dspark_convert.variants.dsv4.names", "dspark_convert.variants.dflash.lineage",
             *(f"dspark_convert.variants.{v.name}.{f}" for v in VARIANTS for f in v.families))


@pytest.mark.parametrize("module", VERIFY_SIDE)
def test_verify_side_does_not_import_the_converter(module: str) -> None:
    """verify is a sibling of the conversion verb, and its witnesses keep their own names (issue 20)."""
    imported = _imports(PKG / module)
    assert not {m for m in imported if m.startswith("dspark_convert.hf2gguf")}, module
    assert not {m for m in imported if m.startswith("dspark_convert.variants.dsv4.names")}, module
    if module.startswith(("reference/", "variants/")):  # the witnesses and verify's rows keep their own names
        assert not {m for m in imported if m.startswith(CONVERTER)}, module
    if module.startswith("reference/"):  # shared machinery sits below the variants
        assert not {m for m in imported if m.startswith("dspark_convert.variants")}, module


#: the two witnesses of verify: the GGUF side (numpy) and the checkpoint side (torch), each with its shared layers
NUMPY_SIDE = ["reference/ops.py", "reference/layers.py",
              *[p.relative_to(PKG).as_posix() for p in sorted((PKG / "variants").glob("*/numpy_forward.py"))]]
TORCH_SIDE = ["reference/layers_torch.py", "reference/hf_draft.py",
              *[p.relative_to(PKG).as_posix() for p in sorted((PKG / "variants").glob("*/torch_forward.py"))]]


def _side_modules(side: list[str]) -> set[str]:
    return {"dspark_convert." + m.removesuffix(".py").replace("/", ".") for m in side}


@pytest.mark.parametrize("module", NUMPY_SIDE + TORCH_SIDE)
def test_the_two_witnesses_share_no_code(module: str) -> None:
    """Shared layer code stays within one side: no numpy forward (or ``reference/layers.py``) imports torch or a
    torch module, no torch forward (or ``reference/layers_torch.py``) imports the numpy reference."""
    imported = _imports(PKG / module)
    other = _side_modules(TORCH_SIDE if module in NUMPY_SIDE else NUMPY_SIDE)
    assert not {m for m in imported if m in other or m.startswith(tuple(o + "." for o in other))}, module
    if module in NUMPY_SIDE:
        assert not {m for m in imported if m == "torch" or m.startswith(("torch.", "dspark_convert.reference.hf_draft"))}
    assert len(NUMPY_SIDE) >= 6 and len(TORCH_SIDE) >= 6


# ---------------------------------------------------------------------------------------------- family names
def _family_figures() -> ModuleType:
    import importlib.util

    spec = importlib.util.spec_from_file_location("family_figures", ROOT / "scripts" / "family_figures.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


#: the family-name pattern, scripts/family_figures.py's (one word list for the test and the figures)
FAMILY_WORD: re.Pattern[str] = _family_figures().FAMILY_WORD
#: where family names belong: the variant packages (``variants/``), the registry (``registry/``), the GGUF vocabulary
ZONES = ("variants/", "registry/", "schema.py", "schema/")
#: today's offenders (issue 20, at its start): each must leave this list when it stops naming families, and the
#: list must end empty. A file not listed here that names a family fails.
ALLOWED: frozenset[str] = frozenset()


def family_name_files() -> dict[str, int]:
    """Package ``.py`` files outside the zones that name a family -> how many times; doctest examples do not count
    (an example's arch string is its data: ``scripts/family_figures.py``'s ``without_examples``)."""
    strip = _family_figures().without_examples
    out: dict[str, int] = {}
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG).as_posix()
        if rel.startswith(ZONES):
            continue
        n = len(FAMILY_WORD.findall(strip(p.read_text())))
        if n:
            out[rel] = n
    return out


def test_family_names_stay_in_the_variants() -> None:
    found = family_name_files()
    assert set(found) <= ALLOWED, f"family names outside the variants and the schema: {sorted(set(found) - ALLOWED)}"
    assert not ALLOWED - set(found), f"no longer name a family, remove from ALLOWED: {sorted(ALLOWED - set(found))}"


def test_doctest_examples_do_not_count() -> None:
    strip = _family_figures().without_examples
    text = ('    """Doc naming no family.\n\n    Example:\n        >>> g.arch, g.value("dflash.block_size")\n'
            "        ('dflash', 16)\n    \"\"\"\n    if arch == 'dflash':\n")
    assert FAMILY_WORD.findall(strip(text)) == ["dflash"]          # the code line still counts
    assert strip(text).splitlines()[-2:] == ['    """', "    if arch == 'dflash':"]
    assert strip("    >>> x\n    'dspark'\"\"\"\nDSpark") == "DSpark"      # output closing the docstring


def test_family_word_pattern() -> None:
    words = FAMILY_WORD.findall("dspark_convert dspark-convert DSpark dspark_dsv4 EAGLE-3 eagle3 DFlash2 DeepSeek-V4")
    assert [w.lower() for w in words] == ["dspark", "dspark", "eagle-3", "eagle3", "dflash", "deepseek"]
    # DeepSeek-V2 / V3 are targets (their tokenizers, model types), not the DeepSeek-V4 draft family
    assert FAMILY_WORD.findall("deepseek-v3 DeepSeek-V3 deepseek_v2 DeepseekV3ForCausalLM") == []
    assert FAMILY_WORD.findall("deepseek-v4 DeepSeek-V32") == ["deepseek", "DeepSeek"]
    # the project's own prefix is not the family: its uppercase environment variables and its temp folders
    assert FAMILY_WORD.findall("$DSPARK_LLAMA_SERVER DSPARK_LLAMA_CACHE 'DSPARK_LLAMA_CPP_SRC' dspark-convert-llama-"
                               " ~/.cache/dspark-convert/llama-server DSPARK_CONVERT_CACHE_DIR") == []
    # ... but the family still counts, whatever the case, and so does a family identifier in capitals
    assert FAMILY_WORD.findall("DSpark dspark DSPARK dspark_llama DSPARK_FLAG Dspark_LLAMA_x dspark-llama-") == [
        "DSpark", "dspark", "DSPARK", "dspark", "DSPARK", "Dspark", "dspark"]
    # nor is the first DeepSeek (upstream's DeepseekModel, class DeepseekForCausalLM)
    assert FAMILY_WORD.findall("DeepseekForCausalLM DeepseekModel") == []
    assert FAMILY_WORD.findall("DeepseekV4ForCausalLM DeepseekV4DSparkModel") == ["Deepseek", "Deepseek"]


# ---------------------------------------------------------------------------------------------- import graph
#: cycles the graph may keep: none (check's staleness warning used to import upgrade, which imports the conversion;
#: the staleness facts now sit in ``staleness.py`` below check, and each variant's upgrade rules above it)
KNOWN_CYCLE: set[str] = set()


def test_import_graph_no_new_cycles_or_upward_imports() -> None:
    """The registry sits below check and the slices, each slice above the drivers it serves (issue 20): 0 cycles
    and 0 upward imports outside :data:`KNOWN_CYCLE`, measured by ``benchmarks/import_graph.py``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "benchmarks" / "import_graph.py")
    assert spec is not None and spec.loader is not None
    graph = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(graph)
    limit = sys.getrecursionlimit()
    fig = graph.figures(PKG)
    # the search raises the interpreter's recursion limit only while it runs: a raised limit left behind would let
    # the JSON reader accept the nesting it refuses (tests/reliability's nested-3000-deep cases) in later tests
    assert sys.getrecursionlimit() == limit
    cycles = [set(c) for c in fig["_cycles"]]                 # module cycles, then unit cycles
    assert all(c <= KNOWN_CYCLE for c in cycles), cycles
    layer = fig["_layers"]
    #: not a draft variant: the facts of targets with MTP layers (check and fit read them)
    slices = [u for u in layer if u.startswith("dspark_convert.variants.") and u != "dspark_convert.variants.nextn"]
    assert layer["dspark_convert.variants.nextn"] < layer["dspark_convert.check"]
    assert sorted(slices) == [f"dspark_convert.variants.{v.name}" for v in sorted(VARIANTS, key=lambda v: v.name)]
    assert layer["dspark_convert.registry"] < layer["dspark_convert.check"]       # check asks the registry
    assert layer["dspark_convert.roles"] < layer["dspark_convert.registry"]       # the contracts sit below both
    assert all(layer[u] < layer["dspark_convert.fit"] for u in slices)            # the drivers find the slices by name
    assert fig["cycles (units)"] == 0 and fig["upward imports (units)"] == 0      # was 1 and 9 at 3fc559b


def _graph() -> ModuleType:
    import importlib.util

    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "benchmarks" / "import_graph.py")
    assert spec is not None and spec.loader is not None
    graph = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(graph)
    return graph


def test_top_level_units_import_no_each_other() -> None:
    """Each folder of the package (``variants/`` whole) and each top-level module is one unit: no two units import
    each other and there is no cycle among them (``benchmarks/import_graph.py``); the contracts, the kit and the
    registry import no variant."""
    fig = _graph().figures(PKG)
    assert fig["_mutual"] == [] and fig["_top_cycles"] == []
    edges = fig["_top_edges"]
    for floor in ("dspark_convert.roles", "dspark_convert.kit", "dspark_convert.registry"):
        assert "dspark_convert.variants" not in edges[floor], floor
    assert "dspark_convert.registry" not in edges["dspark_convert.roles"]


def test_a_mutual_import_is_found(tmp_path: Path) -> None:
    """The unit rule can fail: two top-level modules importing each other are one mutual pair and one cycle."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import x\n")
    fig = _graph().figures(pkg)
    assert fig["_mutual"] == [("pkg.a", "pkg.b")] and len(fig["_top_cycles"]) == 1


#: the drivers a variant must not import: the verbs and the llama-server runner (it imports contracts instead)
DRIVERS = ("check", "fit", "verify", "staleness", "upgrade", "hf2gguf", "llamacpp", "inspect", "diff", "cli", "render")


@pytest.mark.parametrize("module", sorted(p.relative_to(PKG).as_posix() for p in (PKG / "variants").rglob("*.py")))
def test_variants_import_contracts_never_drivers(module: str) -> None:
    imported = _imports(PKG / module)
    bad = {m for m in imported if m.startswith(tuple(f"dspark_convert.{d}" for d in DRIVERS))
           and m.split(".")[1] in DRIVERS}
    assert not bad, f"{module} imports a driver: {sorted(bad)}"


def test_no_underscored_imports_across_modules(tmp_path: Path) -> None:
    """An underscored name is private to its module: no other module of the package imports it (a dunder such as
    ``__version__`` is not private). The rule can fail: a module importing another's private name is listed."""
    graph = _graph()
    assert graph.figures(PKG)["_chassis"]["underscored"] == []
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("__version__ = '1'\n")
    (pkg / "a.py").write_text("_x = 1\n")
    (pkg / "b.py").write_text("from . import __version__\nfrom .a import _x\n")
    assert graph.figures(pkg)["_chassis"]["underscored"] == ["pkg.b: pkg.a._x"]


def test_every_family_module_provides_the_family_contract() -> None:
    """Each family module a ``Variant`` row lists has every member of ``roles.convert.Family``."""
    from dspark_convert.roles.convert import Family

    members = {n for n in vars(Family) if not n.startswith("_")} | set(Family.__annotations__)
    for mod in family_modules():
        assert not {m for m in members if not hasattr(mod, m)}, mod.__name__
