"""Output file names: the default name in the GGUF naming convention, and ``{ftype}`` templates in ``-o``.

The convention (ggml ``docs/gguf.md``, ecosystem §5) is ``<BaseName>-<SizeLabel>-<FineTune>-<Version>-<Encoding>``
joined by ``-``; gguf's :func:`gguf.utility.naming_convention` assembles it. A draft is named after the model it
accelerates, behind the keyword llama.cpp's ``-hf`` finds a draft beside its target by (docs/hub-and-naming.md):

- **the keyword** (``common/download.cpp`` of b11434) starts the name: the one of the ``--spec-type`` the file runs
  as (:data:`~dspark_convert.registry.spectype.HF_KEYWORDS`) when known, else the family module's ``FILE_PREFIX``
  (:func:`file_prefix`); it stands for the method. A family without one would carry its method word
  (``METHOD_WORD``, :func:`method_name`) in the fine-tune part instead;
- **with a target** (``Qwen/Qwen3-8B``): base name, size label, fine-tune and version are the target's, parsed by
  gguf's model-id parser: ``<keyword>Qwen3-8B-BF16.gguf``, ``<keyword>Llama-3.1-8B-Instruct-Q8_0.gguf``;
- **without a target name**: the same from the draft's name, with the draft's parameter-count size label when the
  name has no size part: ``<keyword><draft_name>-1.1M-BF16.gguf`` (a name already starting with the keyword does
  not get it twice);
- a name the parser cannot split (``GLM-4.5-Air``) is kept whole as the base name.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from gguf.metadata import Metadata
from gguf.utility import naming_convention

from .. import schema as S
from ..errors import ConvertError
from ..findings import Finding
from ..hf.hub import split_repo_spec
from ..registry.spectype import SpecType, hub_name
from .results import PlannedConversion

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_OUTTYPE = re.compile(r"^[a-z0-9_]+$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")


def method_name(family: str) -> str:
    """The method word for a draft family (its module's name, compared without case, ``-`` or ``_``): the family
    module's ``METHOD_WORD``; an unknown family is kept as given.

    Example:
        >>> method_name("eagle-3"), method_name("dflash")
        ('EAGLE3', 'DFlash')
    """
    from ..registry.families import family_modules, family_name

    def key(name: str) -> str:
        return name.lower().replace("-", "").replace("_", "")

    mod = next((m for m in family_modules() if key(family_name(m)) == key(family)), None)
    word = getattr(mod, "METHOD_WORD", None)  # each family module's own word (a family without one keeps its name)
    return word if isinstance(word, str) else family


def file_prefix(family: str) -> str:
    """The file-name keyword llama.cpp's ``-hf`` finds a family's drafts by (its module's ``FILE_PREFIX``), else
    ``""`` (an unknown family, or one without it).

    Example:
        >>> file_prefix("dflash"), file_prefix("dspark_dsv4"), file_prefix("eagle3")
        ('dflash-', 'dspark-', 'eagle3-')
    """
    from ..registry.families import family_modules, family_name

    mod = next((m for m in family_modules() if family_name(m) == family), None)
    prefix = getattr(mod, "FILE_PREFIX", "")
    return prefix if isinstance(prefix, str) else ""


def encoding_name(outtype: str) -> str:
    """The file-name encoding of a resolved outtype: ``bf16`` -> ``BF16``, ``q8_0`` -> ``Q8_0``.

    ``auto`` must be resolved to the chosen type before naming the file (ValueError otherwise).

    Example:
        >>> encoding_name("q8_0")
        'Q8_0'
    """
    lower = outtype.lower()
    if lower == "auto":
        raise ValueError("outtype 'auto' must be resolved (to f16 or bf16) before naming the output file")
    if not _OUTTYPE.match(lower):
        raise ConvertError(f"outtype {outtype!r}: expected a type name such as f32, f16, bf16 or q8_0")
    return lower.upper()


def default_output_name(*, family: str, outtype: str, target_name: str | None, draft_name: str | None,
                        size_label: str | None, spec_type: str | None = None) -> str:
    """The default output file name (see the module docstring for the rule).

    ``target_name`` / ``draft_name`` are model ids (``org/name``, optionally ``@rev``) or folder paths;
    ``size_label`` is the draft's own label (``general.size_label``), used only for a name taken from the draft;
    ``spec_type`` the ``--spec-type`` the file runs as (its keyword starts the name; None: the family's
    :func:`file_prefix`). A name that already starts with the keyword does not get it twice.

    Example:
        >>> default_output_name(family="dspark", outtype="bf16", target_name="Qwen/Qwen3-8B",
        ...                     draft_name="deepseek-ai/dspark_qwen3_8b_block7", size_label="1.1M")
        'dspark-Qwen3-8B-BF16.gguf'
        >>> default_output_name(family="dflash", outtype="bf16", target_name="Qwen/Qwen3-8B", draft_name=None,
        ...                     size_label=None, spec_type="draft-dspark")
        'dspark-Qwen3-8B-BF16.gguf'
    """
    from ..registry.spectype import HF_KEYWORDS

    prefix = HF_KEYWORDS.get(spec_type or "") or file_prefix(family)
    method = "" if prefix else method_name(family)
    encoding = encoding_name(outtype)
    if target_name:
        base, size, finetune, version = _components(_bare_name(target_name))
        finetune = _join(finetune, method) if method else finetune
    elif draft_name:
        bare = _bare_name(draft_name)
        base, size, finetune, version = _components(bare)
        size = size or size_label
        if method and _squash(method) not in _squash(bare):
            finetune = _join(finetune, method)
    else:
        base, size, finetune, version = method, size_label, None, None
    name = naming_convention(None, base, finetune, version, size, encoding)
    name = re.sub(r"-{2,}", "-", _UNSAFE.sub("-", name)).lstrip("-.") + ".gguf"
    return name if name.startswith(prefix) else prefix + name


def expand_output_template(template: str, *, outtype: str) -> str:
    """Fill ``{ftype}`` / ``{FTYPE}`` / ``{OUTTYPE}`` (``BF16``) and ``{outtype}`` (``bf16``) in an ``-o`` path.

    ``outtype`` is the resolved type (``auto`` already replaced by the chosen one). Any other ``{...}`` is an
    error (``{}`` included), so a typo such as ``{ftpye}`` does not end up in a file name; a lone ``{`` or ``}``
    is kept.

    Example:
        >>> expand_output_template("out/dspark-Qwen3-8B-{ftype}.gguf", outtype="bf16")
        'out/dspark-Qwen3-8B-BF16.gguf'
    """
    encoding = encoding_name(outtype)
    values = {"ftype": encoding, "FTYPE": encoding, "OUTTYPE": encoding, "outtype": outtype.lower()}

    def fill(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            raise ConvertError(f"-o {template}: unknown placeholder {{{key}}}; use {{ftype}} ({encoding}) or "
                               f"{{outtype}} ({outtype.lower()})")
        return values[key]

    return _PLACEHOLDER.sub(fill, template)


def output_path(outfile: str | os.PathLike[str] | None, planned: PlannedConversion,
                spec_type: SpecType) -> tuple[Path, Finding | None]:
    """Where a planned conversion is written: ``outfile`` with its placeholders filled
    (:func:`expand_output_template`), or the default name (:func:`default_output_name`); with a note (rule
    ``hf-name``) when a name the user chose hides the file from llama-server's ``-hf`` for its ``--spec-type``."""
    plan = planned.plan
    if outfile is None:
        outfile = default_output_name(family=planned.family_name, outtype=planned.outtype,
                                      target_name=planned.target.model_id, draft_name=planned.draft.model_id,
                                      size_label=plan.value(S.GENERAL_SIZE_LABEL), spec_type=spec_type.spec_type)
    path = Path(expand_output_template(str(outfile), outtype=planned.outtype))
    if spec_type.spec_type is not None and (hidden := hub_name(str(path), spec_type.spec_type).problem) is not None:
        return path, Finding("note", str(path), "hf-name", hidden)
    return path, None


# ---------------------------------------------------------------------------------------------- internals


def _bare_name(spec: str) -> str:
    """``org/name@rev`` -> ``name``; a path -> its folder name (absolute, so ``.`` gives the real name)."""
    try:
        return split_repo_spec(spec)[0].split("/")[1]
    except ConvertError:
        pass
    return Path(os.path.abspath(os.path.expanduser(spec))).name


def _components(model_id: str) -> tuple[str, str | None, str | None, str | None]:
    """(base name, size label, fine-tune, version) of a model name, by gguf's model-id parser.

    The parser runs without a parameter count: the draft's count says nothing about the size in the name.
    An ambiguous name (no size, fine-tune or version part) is kept whole as the base name.
    """
    _name, _org, basename, finetune, version, size = Metadata.get_model_id_components(model_id, 0)
    if basename is None:
        return model_id, None, None, None
    return basename, size, finetune, version


def _join(first: str | None, second: str) -> str:
    return f"{first}-{second}" if first else second


def _squash(text: str) -> str:
    return re.sub(r"[-_ ]", "", text.lower())
