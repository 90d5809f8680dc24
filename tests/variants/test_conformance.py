"""One conformance runner per GGUF variant, over every draft of tests/fixture_registry.py (issue 20).

For each registered draft and each of its outtypes: convert; ``check`` finds no error; the file's variant by the
registry (``gguf_variant``) is the row's, and so is the checkpoint's (``checkpoint_variant``), with the row's
converter family and ``--spec-type``; ``verify`` passes, by the row's kind of proof, with every tensor of both sides
accounted for; ``inspect`` renders the file. Then one negative per variant: a tensor no forward reads, added to a
good file, makes ``verify`` fail naming it (the tensor-accounting rule; tests/verify/test_mutations.py has the review's
repro on dflash-zlab at every outtype). A new variant or fixture gets all of this from one registry row.

Rows that need the shared golden set run in :func:`test_conformance_golden`, which is marked ``golden`` (see
conftest.py): one sample per kind of golden layout (the rest, and the drafts generated against the b11434 group's
target, are registered with no outtypes here: their byte parity with upstream and their verify runs live in
test_golden, test_new_drafts and test_nvfp4_dspark, and would cost this file tens of seconds). Committed fixtures are converted
through conftest's session-wide ``converted`` (shared with the verify, mutation and reference suites).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from fixture_registry import (
    FIXTURES_DIR,
    REGISTRY,
    TESTS_DIR,
    Fixture,
    maker_module,
    materialize,
    names,
    select,
)
from typer.testing import CliRunner

from dspark_convert.check import check_file, errors
from dspark_convert.cli import app
from dspark_convert.gguffile.reader import read_gguf
from dspark_convert.hf.checkpoint import Checkpoint
from dspark_convert.registry import BY_NAME, VARIANTS, gguf_variant
from dspark_convert.registry.families import checkpoint_variant, family_for, family_name
from dspark_convert.registry.spectype import spec_type_of

pytest.importorskip("torch", reason="verify needs torch (the test extra)")
from dspark_convert.verify import verify  # noqa: E402

runner = CliRunner()
#: a tensor no forward of any variant reads, and whose name no variant's predicate looks at
PROBE = "blk.0.unread_probe.weight"


def _cases(golden: bool) -> list[tuple[str, Fixture, str]]:
    """(variant, row, outtype) in the registry's variant order, then table order."""
    rows = select(drafts=True, needs_golden=golden)
    return [(v.name, f, ot) for v in VARIANTS for f in rows if f.variant == v.name for ot in f.outtypes]


def _id(case: tuple[str, Fixture, str]) -> str:
    variant, f, ot = case
    return f"{variant}-{f.source}-{f.name}-{ot}"


LOCAL, GOLDEN = _cases(golden=False), _cases(golden=True)


@pytest.fixture(scope="session")
def drafts(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Fixture, Path | None], tuple[Path, Path | None]]:
    """``drafts(row, golden_inputs) -> (draft, target)``: each row's folders, made once per session."""
    out, cache = tmp_path_factory.mktemp("conformance-drafts"), {}

    def get(f: Fixture, golden_inputs: Path | None) -> tuple[Path, Path | None]:
        if f.key not in cache:
            cache[f.key] = materialize(f, out / f.source, golden_inputs)
        return cache[f.key]

    return get


@pytest.fixture(scope="session")
def ggufs(converted: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``ggufs(row, draft, target, outtype) -> Path``: the conversion, once per session (committed rows through
    conftest's ``converted``)."""
    from dspark_convert import convert

    out, cache = tmp_path_factory.mktemp("conformance-gguf"), {}

    def get(f: Fixture, draft: Path, target: Path | None, outtype: str) -> Path:
        if f.source == "committed":
            return converted(f.name, outtype)
        if (f.key, outtype) not in cache:
            # an MTP sidecar is written only with upstream's --mtp (without it the checkpoint is a target)
            r = convert(draft, target, out / f"{f.source}-{f.name}.{outtype}.gguf", outtype=outtype,
                        mtp=f.variant == "mtp")
            assert r.path is not None
            cache[(f.key, outtype)] = r.path
        return cache[(f.key, outtype)]

    return get


def _conforms(f: Fixture, draft: Path, target: Path | None, gguf: Path) -> None:
    # check: the loader's rules find no error
    assert [x.subject for x in errors(check_file(gguf))] == []
    # the file's variant, the checkpoint's, the family and the spec type are the row's
    g = read_gguf(gguf)
    tensor_names = [t.name for t in g.tensors]
    v = gguf_variant(g.value, tensor_names)
    st = spec_type_of(g.value, tensor_names).spec_type
    g.close()
    assert v is not None and v.name == f.variant and v is BY_NAME[f.variant]
    cfg = json.loads((draft / "config.json").read_text(encoding="utf-8"))
    ck_names = Checkpoint(draft, need_config=False).names
    assert checkpoint_variant(cfg, ck_names, str(draft)) is v
    assert family_name(family_for(cfg, ck_names, str(draft))) == f.family
    assert st == f.spec_type
    # verify passes, by the row's kind of proof, every tensor accounted for
    r = verify(gguf, draft, target, context=8, quality=False)
    rows = [o.name for o in r.outputs]
    assert r.passed, [(o.name, o.grade) for o in r.outputs if not o.passed]
    assert r.accounting is not None and r.accounting.passed, r.accounting
    assert r.tensors["variant"] == f.variant and r.tensors["unaccounted"] == {"gguf": [], "checkpoint": []}
    if f.kind == "block":
        assert rows[:2] == ["context projection", "block input (embeddings)"], rows
        assert any(n.startswith("block logits") for n in rows), rows
    elif f.kind == "eagle":
        assert {"fc output", "prefill logits", "step 0 logits", "chosen tokens"} <= set(rows), rows
    elif f.kind == "assistant":
        assert rows[0] == "pre-projection" and {"logits", "post-projection (h_nextn)", "drafted tokens"} <= set(rows)
    else:
        assert f.kind == "tensors" and rows == tensor_names
    # inspect renders the file (and its JSON counts every tensor)
    shown = runner.invoke(app, ["inspect", str(gguf)])
    assert shown.exit_code == 0, shown.output
    assert "Metadata" in shown.stdout and tensor_names[-1] in shown.stdout
    info = json.loads(runner.invoke(app, ["inspect", str(gguf), "--json", "--no-tensors"]).stdout)
    assert info["tensor_count"] == len(tensor_names) and info["arch"] == v.arch


@pytest.mark.parametrize(("variant", "row", "outtype"), LOCAL, ids=[_id(c) for c in LOCAL])
def test_conformance(drafts, ggufs, variant: str, row: Fixture, outtype: str) -> None:
    draft, target = drafts(row, None)
    _conforms(row, draft, target, ggufs(row, draft, target, outtype))


@pytest.mark.parametrize(("variant", "row", "outtype"), GOLDEN, ids=[_id(c) for c in GOLDEN])
def test_conformance_golden(golden_inputs: Path, drafts, ggufs, variant: str, row: Fixture, outtype: str) -> None:
    draft, target = drafts(row, golden_inputs)
    _conforms(row, draft, target, ggufs(row, draft, target, outtype))


# ---------------------------------------------------------------------------------------------- negatives
#: per variant, its first draft that needs no golden set, at its first outtype
NEGATIVE = {v.name: next((f, f.outtypes[0]) for f in select(drafts=True, variant=v.name, needs_golden=False))
            for v in VARIANTS}


@pytest.mark.parametrize("variant", list(NEGATIVE))
def test_an_unread_tensor_fails_verify_by_name(drafts, ggufs, tmp_path: Path, variant: str) -> None:
    """A good file of the variant plus one tensor no forward reads: ``verify`` fails, the accounting row names the
    tensor, and the registry still calls the file the same variant (the probe is no variant's marker)."""
    from test_mutations import add_gguf_tensors

    row, outtype = NEGATIVE[variant]
    draft, target = drafts(row, None)
    bad = add_gguf_tensors(ggufs(row, draft, target, outtype), tmp_path / "extra.gguf", (PROBE,))
    g = read_gguf(bad)
    assert gguf_variant(g.value, [t.name for t in g.tensors]) is BY_NAME[variant]
    g.close()
    r = verify(bad, draft, target, context=8, quality=False)
    assert not r.passed
    assert r.accounting is not None and not r.accounting.passed and f"GGUF {PROBE}" in r.accounting.detail
    assert r.tensors["unaccounted"] == {"gguf": [PROBE], "checkpoint": []}
    # a tensor-by-tensor proof also lists the probe among its tensor rows (no checkpoint tensor is its source)
    first = "tensors" if not BY_NAME[variant].has_role("numpy_forward") else "tensor accounting"
    assert r.first_divergence is not None and r.first_divergence["component"] == first


#: a checkpoint file broken one way -> (the file, what it becomes; SHARD: the folder's last safetensors file, which
#: every draft reads (a DeepSeek-V4 checkpoint's draft is in its last shards, the others are not opened); None:
#: deleted; empty bytes: the shard's first half). verify reads each through the converter's own readers (bounded JSON,
#: checked safetensors headers), so each is one line naming the file; a nested config, a list weight_map and any
#: broken shard were tracebacks
SHARD = "*.safetensors"
HOSTILE: dict[str, tuple[str, str | bytes | None]] = {
    "config-nested": ("config.json", "[" * 100_000 + "]" * 100_000),
    "config-list": ("config.json", "[1, 2]"),
    "config-missing": ("config.json", None),
    "index-weight-map-list": ("model.safetensors.index.json", '{"weight_map": ["model.safetensors"]}'),
    "shard-truncated": (SHARD, b""),
    "shard-header": (SHARD, b'\x10\x00\x00\x00\x00\x00\x00\x00{"a": [1, 2, 3]}' + bytes(64)),
}


@pytest.mark.parametrize("case", list(HOSTILE))
@pytest.mark.parametrize("variant", list(NEGATIVE))
def test_a_broken_checkpoint_file_fails_verify_in_one_line(drafts, ggufs, tmp_path: Path, variant: str,
                                                           case: str) -> None:
    """A good file of the variant against a copy of its checkpoint with one file broken: ``verify`` exits 2 with
    one ``error:`` line that names the broken file (or, for a missing config, the folder and config.json)."""
    import shutil

    from cli_kit import run

    row, outtype = NEGATIVE[variant]
    draft, target = drafts(row, None)
    gguf = ggufs(row, draft, target, outtype)
    copy = tmp_path / "ck"
    shutil.copytree(draft, copy)
    name, body = HOSTILE[case]
    if name == SHARD:
        name = sorted(p.name for p in copy.glob(SHARD))[-1]
        if body == b"":
            body = (copy / name).read_bytes()[: (copy / name).stat().st_size // 2]
    (copy / name).unlink(missing_ok=True)
    if isinstance(body, str):
        (copy / name).write_text(body)
    elif body is not None:
        (copy / name).write_bytes(body)
    args = ["verify", gguf, "--hf", copy] + (["--target-model-dir", target] if target not in (None, draft) else [])
    r = run(*args, "--context", 8)
    lines = r.stderr.splitlines()
    assert (r.exit_code, r.stdout, len(lines)) == (2, "", 1), (r.exit_code, r.stdout, r.stderr)
    assert lines[0].startswith(f"error: {copy}") and name in lines[0], lines[0]
    if case == "config-nested":
        assert lines[0] == f"error: {copy / name}: JSON nested too deeply (arrays or objects inside each other " \
                           "past the interpreter's recursion limit); expected a flat configuration"


# ---------------------------------------------------------------------------------------------- completeness
def test_every_variant_has_a_draft_without_the_golden_set() -> None:
    """Each variant of the package registry has conformance rows that run anywhere (and the registry names no
    variant the package does not know)."""
    assert {c[0] for c in LOCAL} == set(BY_NAME)
    assert {f.variant for f in REGISTRY if f.is_draft} == set(BY_NAME)


def test_registry_keys_are_unique_and_facts_well_formed() -> None:
    assert len({f.key for f in REGISTRY}) == len(REGISTRY)
    for f in REGISTRY:
        assert f.source in ("committed", "golden", "generated"), f.key
        assert (f.kind == "target") == (f.variant is None) == (f.family is None) == (f.spec_type is None), f.key
        assert (f.source == "generated") == (f.maker is not None), f.key
        assert set(f.rank) <= f.tags, f.key


def test_every_fixture_folder_is_registered() -> None:
    """Every folder under fixtures/, and every entry of fixtures/generate.py, has a ``committed`` row."""
    folders = sorted(p.name for p in FIXTURES_DIR.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted(names(source="committed"))
    generate = (FIXTURES_DIR / "generate.py").read_text(encoding="utf-8")
    table = generate[generate.index("FIXTURES: dict"):]
    table = table[: table.index("\n}\n")]
    assert re.findall(r'^    "([^"]+)":', table, re.M) == names(source="committed")


def _maker_tables() -> dict[str, set[str]]:
    """``{module: draft names}`` for every draft maker: each module-level ``*VARIANTS`` table of a helper module
    (tests/*.py that is no test file, fixtures/*.py). Variants a single test file makes for itself (test_dsv4's
    dimensions, test_mutations' edits) are that file's business, not registry rows."""
    import importlib

    from fixture_registry import _import

    found: dict[str, set[str]] = {}
    for p in sorted([*TESTS_DIR.glob("*.py"), *FIXTURES_DIR.glob("*.py")]):
        if p.stem.startswith("test_") or p.stem == "conftest":
            continue
        tables = re.findall(r"^([A-Z_]*VARIANTS)(?::[^=\n]*)? = ", p.read_text(encoding="utf-8"), re.M)
        if tables:
            mod = importlib.import_module(p.stem) if p.parent == TESTS_DIR else _import(p.stem)
            found.setdefault(p.stem, set()).update(*(getattr(mod, t) for t in tables))
    return found


def test_every_generated_draft_is_registered() -> None:
    """Every maker's drafts have ``generated`` rows, and every generated row's maker exists: the ``*VARIANTS``
    tables of tests/*_drafts.py, fixtures/dsv4.py's checkpoint (through tests/dsv4_support.make) and
    fixtures/correlated.py's MiMo draft."""
    import dsv4_support
    from fixture_registry import _import

    correlated = _import("correlated")
    tables = _maker_tables()
    assert set(tables) == {"new_drafts", "nvfp4_drafts", "gemma4_drafts", "assistant_drafts"}
    for module, made in tables.items():
        assert sorted(made) == sorted(f.name for f in select(source="generated") if maker_module(f) == module), module
    assert callable(dsv4_support.make) and [f.name for f in select(source="generated", variant="dsv4")] == ["dsv4-draft"]
    # correlated.py's families are registered drafts (committed, or its MiMo draft)
    registered = set(names(source=("committed", "generated")))
    assert set(correlated.FAMILIES) <= registered
    assert callable(correlated.mimo_draft)


def test_every_golden_layout_is_registered(golden_dir: Path) -> None:
    """The golden set's layouts (the folders of inputs.sha256 and inputs-dsv4.sha256, its target aside) are the
    ``golden`` rows, and the self-target ones are the checkpoints the golden set converts as their own target."""
    layouts = {line.split(maxsplit=1)[1].removeprefix("./").split("/")[0] for sums in ("inputs.sha256", "inputs-dsv4.sha256")
               for line in (golden_dir / sums).read_text().splitlines() if line.strip()}
    assert sorted(layouts - {"target"}) == sorted(names(source="golden"))


def test_hand_written_expectations_cover_the_registry() -> None:
    """The per-fixture expectations that stay written out by hand (independent of fixtures/generate.py) cover the
    registry's rows: test_fixtures' shapes every committed folder, test_convert_fixtures' keys every committed
    DFlash / DSpark and EAGLE-3 draft, with the arch of the row's variant."""
    from test_convert_fixtures import CASES
    from test_fixtures import EXPECTED

    assert sorted(EXPECTED) == sorted(names(source="committed"))
    assert list(CASES) == names(source="committed", variant=("dflash", "eagle3"))
    assert all(CASES[f.name]["arch"] == BY_NAME[f.variant or ""].arch
               for f in select(source="committed", variant=("dflash", "eagle3")))
