"""Which ``--spec-type`` llama-server b11434 needs for a draft file of each GGUF variant, and what it picks without one.

From upstream's ``common/speculative.cpp`` (auto-detection, ``upstream-b11434.md`` §2.9) and the drafting loop:

- auto-detection reads a local ``-md`` file: arch ``dflash`` -> ``draft-dspark`` when ``markov_w1.weight`` exists,
  else ``draft-dflash``; arch ``eagle3`` is never auto-detected (nothing speculates unless ``--spec-type
  draft-eagle3`` is given); arch ``gemma4-assistant`` is never auto-detected either (it has no ``nextn.eh_proj``):
  it runs with ``--spec-type draft-mtp``;
- ``draft-dflash`` reads the draft's prediction from block rows 1..n whatever ``dflash.sample_from_anchor``
  says (the selector walk of a ``selector_hidden.weight`` file too); ``draft-dspark`` reads rows 0..n-1 when
  ``dflash.sample_from_anchor`` is true or absent, and applies the Markov head only when the file has one.

So a ``dflash`` file without ``markov_w1.weight`` whose ``dflash.sample_from_anchor`` is **true** (a head-less
anchor-first draft: it predicts the token after the anchor from row 0) is auto-detected as ``draft-dflash`` and
then drafts every token one position late (on the fixture: 62/84 positions agree with the reference under
``draft-dflash``, all under ``draft-dspark``). It needs ``--spec-type draft-dspark`` passed explicitly; a key
absent or false keeps the z-lab reading (rows 1..n), which is what ``draft-dflash`` does. With
``dflash.has_confidence_head = false``, ``draft-dspark`` also refuses ``--spec-draft-p-min`` above 0 (0 is the
default). Numpy-free: ``check`` and ``inspect`` use it on a header.

How many tokens one draft holds (``--spec-draft-n-max`` for a whole block per draft, :func:`draft_n_max`) follows
from the same reading: ``dflash.block_size`` (16 when absent) under ``draft-dspark`` reading rows from the anchor
on, one less under the types that read rows 1..n, and a number of chained steps for ``draft-eagle3`` (one token a
step).

Example:
    >>> spec_type_of({"general.architecture": "dflash"}.get, ["fc.weight", "markov_w1.weight"]).spec_type
    'draft-dspark'
    >>> s = spec_type_of({"general.architecture": "dflash", "dflash.sample_from_anchor": True}.get, ["fc.weight"])
    >>> s.spec_type, s.auto_detected, s.flag_needed
    ('draft-dspark', 'draft-dflash', True)
    >>> kv = {"general.architecture": "dflash", "dflash.block_size": 8}
    >>> draft_n_max(kv.get, s), draft_n_max(kv.get, spec_type_of(kv.get, ["fc.weight"]))
    (8, 7)
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass
from typing import Any

from .. import schema as S
from ..findings import JsonRow

MARKOV = "markov_w1.weight"
SELECTOR = "selector_hidden.weight"
ANCHOR_KEY = "dflash.sample_from_anchor"
CONF_KEY = "dflash.has_confidence_head"
BLOCK_KEY = "dflash.block_size"
#: the ``--spec-type`` values of the draft files llama-server b11434 speculates with
SPEC_TYPES = ("draft-dspark", "draft-dflash", "draft-eagle3", "draft-mtp")
#: chained draft types: one drafted token per step (the draft's length is a number of steps)
CHAINED = frozenset({"draft-eagle3", "draft-mtp"})
#: the file-name keyword llama-server b11434's ``-hf``/``-hfd`` finds a draft of each ``--spec-type`` by, beside its
#: target (``common/download.cpp``: ``find_best_sibling`` matches it case-sensitively in the repo path;
#: ``gguf_filename_is_model`` never takes a file whose name holds one as the main model), in the order ``-hfd``
#: without ``--spec-type`` tries them (``common/arg.cpp``: the first sidecar found sets the type)
HF_KEYWORDS = {"draft-mtp": "mtp-", "draft-dspark": "dspark-", "draft-dflash": "dflash-", "draft-eagle3": "eagle3-"}


@dataclass(frozen=True)
class SpecType:
    """What llama-server does with a draft file: the ``--spec-type`` it needs (None: not a draft llama-server
    speculates with), the one it auto-detects (None: none), why, and any other flag it needs."""

    spec_type: str | None
    auto_detected: str | None
    reason: str
    extra_flags: tuple[str, ...] = ()

    @property
    def flag_needed(self) -> bool:
        """True when ``--spec-type`` must be passed (auto-detection picks another type, or none)."""
        return self.spec_type is not None and self.spec_type != self.auto_detected

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "extra_flags": list(self.extra_flags), "flag_needed": self.flag_needed}

    def line(self, reason: bool = True) -> str:
        """One line for the terminal (``reason=False``: without the why, e.g. when a warning already says it)."""
        if self.spec_type is None:
            return f"llama-server: not a speculative draft ({self.reason})"
        flags = " ".join((f"--spec-type {self.spec_type}", *self.extra_flags))
        how = "pass" if self.flag_needed else "auto-detected; or pass"
        return f"llama-server: {how} {flags}" + (f" ({self.reason})" if reason else "")


@dataclass(frozen=True)
class HubName(JsonRow):
    """Whether llama-server's ``-hf`` finds a draft file under its name: ``keyword`` is the one its ``--spec-type``
    needs, ``found_as`` the type ``-hfd`` without ``--spec-type`` runs it as (None: no keyword, so ``-hf`` does not
    find it as a draft and may take it as the main model), ``problem`` one line when the name hides it (else None)."""

    name: str
    spec_type: str
    keyword: str
    found_as: str | None
    problem: str | None


def file_name_of(ref: str) -> str:
    """The file name in a path, ``hf://ORG/REPO/file.gguf@REV`` or URL (query, fragment and ``@REV`` dropped)."""
    if "://" in ref:
        ref = ref.split("?", 1)[0].split("#", 1)[0]
        if ref.startswith("hf://") and "@" in ref.rsplit("/", 1)[-1]:
            ref = ref.rsplit("@", 1)[0]
    return ref.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def hub_name(ref: str, spec_type: str) -> HubName:
    """How llama-server's ``-hf`` sees a draft file named ``ref`` (a path, ``hf://`` reference or URL) that runs
    as ``spec_type`` (see :data:`HF_KEYWORDS`).

    Example:
        >>> hub_name("out/dspark-Qwen3-8B-BF16.gguf", "draft-dspark").problem is None
        True
        >>> hub_name("Qwen3-8B-DSpark-BF16.gguf", "draft-dspark").problem.split(",")[0]
        "the file name 'Qwen3-8B-DSpark-BF16.gguf' lacks 'dspark-' (lower case)"
    """
    name = file_name_of(ref)
    keyword = HF_KEYWORDS[spec_type]
    found = [(t, k) for t, k in HF_KEYWORDS.items() if k in name]
    found_as = found[0][0] if found else None
    problem: str | None = None
    if not name.endswith(".gguf"):
        problem = f"the file name {name!r} does not end in .gguf: llama-server's -hf looks at .gguf files only"
    elif keyword not in name:
        case = " (lower case)" if keyword in name.lower() else ""
        what = (f"it finds this file as a {found_as} draft; replace {found[0][1]!r} with {keyword!r}" if found else
                f"it does not find this file beside its target (and may take it for the main model); name it e.g. "
                f"{keyword}{name}")
        problem = (f"the file name {name!r} lacks {keyword!r}{case}, the keyword llama-server's -hf finds a "
                   f"{spec_type} draft by: {what}")
    elif found_as != spec_type:
        problem = (f"the file name {name!r} holds {found[0][1]!r} as well as {keyword!r}: -hfd without --spec-type "
                   f"runs it as {found_as}, not {spec_type}; drop {found[0][1]!r} from the name")
    return HubName(name, spec_type, keyword, found_as, problem)


def spec_type_of(value: Callable[[str], Any], tensor_names: Collection[str]) -> SpecType:
    """The :class:`SpecType` of a file from its metadata getter (key -> value or None) and tensor names."""
    arch = value(S.GENERAL_ARCHITECTURE)
    names = set(tensor_names)
    if arch == S.ARCH_EAGLE3:
        return SpecType("draft-eagle3", None, f"llama-server never auto-detects an {S.ARCH_EAGLE3} file")
    if arch == S.ARCH_GEMMA4_ASSISTANT:
        return SpecType("draft-mtp", None, f"llama-server never auto-detects a {S.ARCH_GEMMA4_ASSISTANT} file (no "
                        "nextn.eh_proj; a Hub file named mtp-... is found by -hf)")
    if arch in S.MTP_ARCHES:  # an MTP sidecar: auto-detected when the last block has nextn.eh_proj (§1.7)
        n = value(S.BLOCK_COUNT.format(arch=arch))
        last = S.LAYER_PREFIX.format(bid=n - 1) + S.L_NEXTN_EH_PROJ if isinstance(n, int) and n > 0 else None
        if last is not None and last in names:
            return SpecType("draft-mtp", "draft-mtp", f"{last} present (an MTP head)")
        return SpecType(None, None, f"a {arch} file without {last or 'an MTP block'}")
    if arch != S.ARCH_DFLASH:
        return SpecType(None, None, f"general.architecture {arch!r} is neither {S.ARCH_DFLASH} nor {S.ARCH_EAGLE3}")
    anchor = value(ANCHOR_KEY)
    if MARKOV in names:
        return SpecType("draft-dspark", "draft-dspark", f"{MARKOV} present")
    if anchor is True and SELECTOR not in names:
        extra = ("--spec-draft-p-min 0",) if value(CONF_KEY) is False else ()
        return SpecType("draft-dspark", "draft-dflash",
                        f"no {MARKOV}, so llama-server auto-detects draft-dflash, which reads block rows 1..n; this "
                        f"file predicts from the anchor row ({ANCHOR_KEY} = true), which only draft-dspark reads: "
                        "under draft-dflash every drafted token is one position late", extra)
    what = "the selector lattice is walked under draft-dflash" if SELECTOR in names else "block rows 1..n"
    return SpecType("draft-dflash", "draft-dflash", f"no {MARKOV}; {what}")


def draft_n_max(value: Callable[[str], Any], spec: SpecType, chain_steps: int = 4) -> int:
    """``--spec-draft-n-max`` for a whole block per draft of a file run under ``spec`` (its :func:`spec_type_of`):
    ``chain_steps`` for a chained type; for a block type ``dflash.block_size`` (16 when absent) when the type reads
    block rows from the anchor on (``draft-dspark`` with ``dflash.sample_from_anchor`` true or absent), else one
    less (rows 1..n: the anchor row drafts nothing)."""
    if spec.spec_type in CHAINED:
        return chain_steps
    size = value(BLOCK_KEY)
    block = 16 if size is None else int(size)
    sfa = value(ANCHOR_KEY)
    anchor_first = spec.spec_type == "draft-dspark" and (sfa is None or bool(sfa))
    return block if anchor_first else block - 1


#: the family whose checkpoints are trained to predict from block rows 1..n (z-lab's convention)
ROWS_FROM_ONE_FAMILY = "dflash"


def forced_convention(declared_family: str, forced_family: str, config: dict[str, Any], value: Callable[[str], Any],
                      tensor_names: Collection[str], used: str, declared: str, *, corrected: bool = True) -> str | None:
    """The warning for a class forced with ``--architecture`` (``used``, of ``forced_family``) on a checkpoint whose
    declared class (``declared``, of ``declared_family``) is a z-lab DFlash draft, when the planned file says
    ``dflash.sample_from_anchor = true`` without a Markov head and the checkpoint's config does not set it: the
    weights were trained to predict from block rows 1..n, which the forced class's key contradicts. None when none
    of that holds; the file is then served as :func:`spec_type_of` says.

    ``corrected``: the converter writes :data:`ANCHOR_KEY` = false instead (:data:`ROWS_FROM_ONE`), so that the file
    says how its weights predict; every type then reads rows 1..n and :func:`spec_type_of` on the file alone gives
    ``draft-dflash``. Not corrected (``--match-upstream``: the forced class's bytes): the file says true, llama-server
    auto-detects ``draft-dflash`` for it (right), ``--spec-type draft-dspark`` drafts every token one position late,
    and nothing in the file tells this later (``check`` and ``inspect`` on it alone advise ``draft-dspark``).

    Example:
        >>> v = {ANCHOR_KEY: True}.get
        >>> forced_convention("dflash", "dspark", {}, v, ["fc.weight"], "Qwen3DSparkModel", "DFlashDraftModel")[:36]
        '--architecture Qwen3DSparkModel on a'
        >>> forced_convention("dflash", "dflash", {}, v, ["fc.weight"], "DFlashDraftModel", "DFlashDraftModel")
    """
    if (declared_family != ROWS_FROM_ONE_FAMILY or forced_family == declared_family or value(ANCHOR_KEY) is not True
            or MARKOV in tensor_names or "sample_from_anchor" in config):
        return None
    head = (f"--architecture {used} on a checkpoint that declares {declared} (a z-lab DFlash draft, trained to "
            f"predict from block rows 1..n): ")
    if corrected:
        return head + (f"the file says {ANCHOR_KEY} = false, not the {used} class's true (the DSpark convention, "
                       "predictions from the anchor row), so that it says how its weights predict: llama-server "
                       "reads block rows 1..n under draft-dflash (auto-detected) and draft-dspark alike, and check "
                       "and inspect advise draft-dflash for the file; --match-upstream writes the class's true")
    return head + (f"the file says {ANCHOR_KEY} = true (the DSpark convention, predictions from the anchor row, as "
                   "--match-upstream keeps it); llama-server auto-detects draft-dflash for it, which reads rows 1..n "
                   "as trained, but --spec-type draft-dspark would draft every token one position late, and nothing "
                   "in the file tells this later (check and inspect on it alone advise draft-dspark); convert it "
                   f"without --match-upstream or without --architecture (as {declared}) and serve it with "
                   "--spec-type draft-dflash")


#: what a file forced to a DSpark class on a z-lab DFlash checkpoint says in :data:`ANCHOR_KEY` (its weights'
#: convention: predictions from block rows 1..n), unless ``--match-upstream``
ROWS_FROM_ONE = False
