"""The ``general.*`` metadata KVs (row 4 of contract §2.1; rules in §2.7).

The heuristics are upstream's own: this module drives the building blocks of ``gguf.Metadata`` (gguf 0.19.0:
model-card reader, ``_name_or_path`` / model-id parser, title-casing, ``gguf.size_label``) in the order that
``Metadata.load`` and the converter's ``prepare_metadata`` use, and turns the result into typed :class:`KV` s.
It does not call ``Metadata.load`` itself, because that would take the name of the folder *as given*: ``.``,
``..`` or a cache snapshot's commit hash (ecosystem §6, #5461). Differences from upstream, all deliberate:

- the folder-name fallback uses the absolute folder name, or the Hub repo id when the draft came from the Hub
  (``repo_id``: name and organization from ``org/name``, plus ``general.source.repo_url``);
- ``general.base_model.0`` describes the target model (when one is given); the draft's README base models follow;
- ``--metadata`` must exist and be a JSON object of known keys; it may also set ``general.license``
  (upstream ignores that key); values of the wrong type are one-line errors instead of a crash.
With ``target=None``, ``target_name=None`` and ``repo_id=None`` the output equals upstream's for a local folder.
"""

from __future__ import annotations

import math
import os
import reprlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import gguf
from gguf import GGUFValueType as VT
from gguf.metadata import Metadata

from .. import schema as S
from ..errors import ConvertError, clip
from ..hf.checkpoint import lone_surrogate, read_json
from ..hf.hub import ResolvedModel, split_repo_spec
from ..plan import KV, add_kv
from ..safeio import open_regular, require_regular
from ..units import size_text

HF_URL = "https://huggingface.co"
#: --metadata keys holding lists of {name, organization, ...} objects (upstream's override format).
LIST_KEYS = ("general.base_models", "general.datasets")
_INT32 = (-(2**31), 2**31 - 1)


def param_counts(tensors: Iterable[tuple[str, Sequence[int]]]) -> tuple[int, int, int, int]:
    """(total, shared, expert, expert count) parameters of (GGUF name, numpy shape) pairs, gguf-py's rule
    (``GGUFWriter.get_total_parameter_count``): a tensor named ``*_exps.*`` with 3+ dims is a stack of
    ``shape[-3]`` experts and counts ``size / experts`` as expert parameters; the rest is shared.

    Example:
        >>> param_counts([("blk.0.ffn_up_exps.weight", (4, 8, 16)), ("fc.weight", (16, 16))])
        (768, 256, 128, 4)
    """
    total = shared = expert = expert_sum = n_expert = 0
    for name, shape in tensors:
        size = math.prod(shape)
        if "_exps." in name and len(shape) >= 3:
            count = shape[-2 if ".bias" in name else -3]
            expert += size // count
            expert_sum += count
            n_expert += 1
        else:
            shared += size
        total += size
    return total, shared, expert, (expert_sum // n_expert if n_expert else 0)


def general_kvs(draft_dir: Path, *, total_params: int, target: ResolvedModel | None = None,
                target_name: str | None = None, metadata_override: Path | None = None,
                model_name: str | None = None, repo_id: str | None = None,
                size_counts: tuple[int, int, int, int] | None = None) -> list[KV]:
    """The ``general.sampling.*``, ``general.name`` … ``general.languages`` KVs, in file order.

    ``total_params`` is the element count of all written tensors (0 for ``--vocab-only``: no size label);
    ``size_counts`` (:func:`param_counts`) gives the size label of a mixture of experts (``4x3.9M``).
    ``target`` / ``target_name`` (a model id such as ``Qwen/Qwen3-8B``; it wins over ``target``) give
    ``general.base_model.0``. ``repo_id`` is the draft's Hub repo id when it was resolved from the Hub.

    Example:
        >>> [(kv.name, kv.value) for kv in general_kvs(Path("dflash-zlab"), total_params=86464)]  # doctest: +SKIP
        [('general.name', 'Dflash Zlab'), ('general.size_label', '86K')]
    """
    draft_dir = Path(draft_dir)
    card = _model_card(draft_dir)
    md = Metadata.apply_metadata_heuristic(Metadata(), card, _hf_params(draft_dir), None, total_params)
    fallback_id = repo_id or Path(os.path.abspath(draft_dir)).name
    _apply_id(md, fallback_id, total_params)
    if repo_id and md.source_repo_url is None:
        md.source_repo_url = f"{HF_URL}/{repo_id}"

    base_entry = target_base_model(target, target_name)
    if base_entry is not None:
        key = _model_key(base_entry)
        md.base_models = [base_entry] + [m for m in md.base_models or [] if _model_key(m) != key]

    sampling: dict[str, tuple[Any, str]] = {}
    gen_config = Metadata.load_generation_config(draft_dir)
    if isinstance(gen_config, dict):
        for key, _vt, field in S.GENERAL_SAMPLING_KEYS:
            if field in gen_config:
                sampling[key] = (gen_config[field], str(draft_dir / "generation_config.json"))

    if metadata_override is not None:
        _apply_override(md, sampling, Path(metadata_override))
    if model_name:
        md.name = model_name
    if not md.name:
        md.name = Metadata.id_to_title(fallback_id.split("/")[-1]) or fallback_id or "model"
    if md.size_label is None and total_params > 0:
        md.size_label = gguf.size_label(*(size_counts or (total_params, total_params, 0, 0)))
    return _to_kvs(md, sampling)


def target_base_model(target: ResolvedModel | None, target_name: str | None = None) -> dict[str, str] | None:
    """The ``general.base_model.*`` entry for the target, or None when there is no target.

    The model id is ``target_name``, else the Hub repo id, else the target ``config.json`` ``_name_or_path``
    (when it is ``org/name`` or ``name``), else the folder name. An ``org/name`` id adds the organization and
    ``repo_url`` = ``https://huggingface.co/org/name``.

    Example:
        >>> target_base_model(None, "Qwen/Qwen3-8B")
        {'name': 'Qwen3 8B', 'organization': 'Qwen', 'repo_url': 'https://huggingface.co/Qwen/Qwen3-8B'}
    """
    model_id = None
    if target_name:
        model_id = _plain_id(target_name)
    elif target is not None and target.repo_id:
        model_id = target.repo_id
    elif target is not None:
        name_or_path = _hf_params(target.path).get("_name_or_path")
        # As upstream for the draft: only a model id, never a filesystem path, is taken from _name_or_path.
        usable = isinstance(name_or_path, str) and name_or_path.count("/") <= 1 and not name_or_path.startswith((".", "/", "~"))
        model_id = _plain_id(name_or_path) if usable and isinstance(name_or_path, str) else target.model_id
    if not model_id:
        return None
    name, org, _base, _fine, version, _size = Metadata.get_model_id_components(model_id, 0)
    entry: dict[str, str] = {"name": Metadata.id_to_title(name or model_id)}
    if version is not None:
        entry["version"] = version
    if org:
        entry["organization"] = Metadata.id_to_title(org)
        entry["repo_url"] = f"{HF_URL}/{org}/{name}"
    return entry


# ---------------------------------------------------------------------------------------------- inputs


#: bounds of the model card read (README.md YAML front matter): a real card's front matter is a few kB with tens
#: of entries; these stop a few hundred hostile bytes (nested aliases: a "billion laughs") from taking the machine
MAX_CARD_FRONT_MATTER_BYTES = 1 << 20
MAX_CARD_ALIASES = 1000  # alias uses (*name) in the front matter
MAX_CARD_NODES = 100_000  # values once aliases are expanded (each use of an alias counts its whole value again)
MAX_CARD_DEPTH = 100  # nesting depth of the front matter


def _front_matter(card_path: Path) -> str | None:
    """The YAML front matter of ``card_path`` (between a first line ``---`` and the next ``---``), as upstream's
    ``Metadata.load_model_card`` takes it, read through a bounded, regular-file-only read; None without one."""
    with open_regular(card_path) as f:
        raw = f.read(MAX_CARD_FRONT_MATTER_BYTES + 8)
    text = raw.decode("utf-8") if len(raw) <= MAX_CARD_FRONT_MATTER_BYTES else raw.decode("utf-8", "ignore")
    lines = text.splitlines()
    if not lines or lines[0] != "---":
        return None
    if "---" not in lines[1:]:
        if len(raw) > MAX_CARD_FRONT_MATTER_BYTES:
            raise ConvertError(f"{card_path}: the YAML front matter is longer than the limit "
                               f"of {size_text(MAX_CARD_FRONT_MATTER_BYTES)} (no closing '---' line within it)")
        body = lines[1:]
    else:
        body = lines[1:lines.index("---", 1)]
    yaml_content = "\n".join(body) + "\n"
    # upstream's two fixes: the Norway problem, tabs
    return yaml_content.replace("- no\n", '- "no"\n').replace("\t", "  ")


def _bounded_yaml(text: str, card_path: Path) -> Any:
    """``yaml.safe_load`` with the alias, expanded-size and depth bounds above (one line when one is passed)."""
    import yaml

    class Loader(yaml.SafeLoader):
        aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                Loader.aliases += 1
                if Loader.aliases > MAX_CARD_ALIASES:
                    raise ConvertError(f"{card_path}: the YAML front matter uses more than {MAX_CARD_ALIASES} "
                                       "aliases (*name); expected a plain model card")
            return super().compose_node(parent, index)

    loader = Loader(text)
    try:
        data = loader.get_single_data()
    finally:
        loader.dispose()
    # the values as the metadata code will walk them: aliases expanded, counted with a budget (a DAG of 10 levels
    # of 9 aliases is 9**10 values; a recursive alias is infinite)
    budget = MAX_CARD_NODES
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        node, depth = stack.pop()
        budget -= 1
        if budget < 0:
            raise ConvertError(f"{card_path}: the YAML front matter expands to more than {MAX_CARD_NODES} values "
                               "(nested aliases?); expected a plain model card")
        if depth > MAX_CARD_DEPTH:
            raise ConvertError(f"{card_path}: the YAML front matter is nested more than {MAX_CARD_DEPTH} levels "
                               "deep; expected a plain model card")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for kv in node.items() for v in kv)
        elif isinstance(node, (list, tuple, set)):
            stack.extend((v, depth + 1) for v in node)
    where = lone_surrogate(data)  # a "\\ud800" escape: a string no GGUF (UTF-8) can hold
    if where is not None:
        raise ConvertError(f"{card_path}: the YAML front matter's value at {clip(where)} holds a lone surrogate (a "
                           "\\ud800-\\udfff escape outside a pair), which is not Unicode text; expected UTF-8 text")
    return data


def _model_card(draft_dir: Path) -> dict[str, Any]:
    """The draft's model card front matter (``README.md``), bounded (see the limits above)."""
    card_path = draft_dir / "README.md"
    if not card_path.is_file():
        require_regular(card_path)  # a FIFO or a device named README.md: one line
        return {}
    try:
        text = _front_matter(card_path)
        card = _bounded_yaml(text, card_path) if text is not None and text.strip() else {}
    except ConvertError:
        raise
    except UnicodeDecodeError as exc:
        raise ConvertError(f"{card_path}: not UTF-8 text ({exc.reason} at byte {exc.start:,})") from None
    except RecursionError:
        raise ConvertError(f"{card_path}: the YAML front matter is nested too deeply; expected a plain model "
                           "card") from None
    except Exception as exc:  # yaml.YAMLError (and whatever PyYAML raises on odd input)
        line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConvertError(f"{card_path}: the YAML front matter does not parse: {clip(line)}") from None
    return card if isinstance(card, dict) else {}


def _hf_params(folder: Path) -> dict[str, Any]:
    """Only ``_name_or_path`` of ``config.json`` is used, and only when it is a string (else: absent)."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        return {}
    config = read_json(path)
    value = config.get("_name_or_path") if isinstance(config, dict) else None
    return {"_name_or_path": value} if isinstance(value, str) else {}


def _plain_id(spec: str) -> str:
    """``org/name@rev`` -> ``org/name``; another path -> its (absolute) folder name; ``name`` stays as it is."""
    try:
        return split_repo_spec(spec)[0]
    except ConvertError:
        pass
    if "/" in spec or "\\" in spec or spec in (".", "..", "~"):
        return Path(os.path.abspath(os.path.expanduser(spec))).name
    return spec


def _apply_id(md: Metadata, model_id: str, total_params: int) -> None:
    """Upstream's folder-name fallback (fills only what is still unset), with ``model_id`` as the folder name."""
    name, org, basename, finetune, version, size_label = Metadata.get_model_id_components(model_id, total_params)
    for attr, value in (("name", Metadata.id_to_title(name) if name is not None else None),
                        ("organization", Metadata.id_to_title(org) if org is not None else None),
                        ("basename", basename), ("finetune", finetune), ("version", version),
                        ("size_label", size_label)):
        if getattr(md, attr) is None and value is not None:
            setattr(md, attr, value)


def _model_key(entry: Any) -> str:
    if not isinstance(entry, dict):
        return ""
    return str(entry.get("repo_url") or entry.get("name") or "").lower()


def _attr(key: str) -> str:
    """``general.license.name`` -> ``license_name`` (the Metadata field)."""
    return key[len("general."):].replace(".", "_")


def _apply_override(md: Metadata, sampling: dict[str, tuple[Any, str]], path: Path) -> None:
    if not path.is_file():
        raise ConvertError(f"{path}: no such metadata file")
    data = read_json(path, in_folder=False)
    if not isinstance(data, dict):
        raise ConvertError(f"{path}: is a JSON {type(data).__name__}, expected an object of general.* keys")
    sampling_keys = {key for key, _vt, _field in S.GENERAL_SAMPLING_KEYS}
    string_keys = {key for key, _vt in S.GENERAL_META_KEYS}
    for key, value in data.items():
        if key in sampling_keys:
            sampling[key] = (value, str(path))
        elif key in string_keys or key in (S.GENERAL_TAGS, S.GENERAL_LANGUAGES) or key in LIST_KEYS:
            setattr(md, _attr(key), value)
        else:
            raise ConvertError(f"{path}: unknown key '{key}' (expected general.name, general.license, ..., "
                               "general.sampling.*, general.base_models, general.datasets, general.tags, "
                               "general.languages; see docs/hub-and-naming.md)")


# ---------------------------------------------------------------------------------------------- output


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlist, _REPR.maxdict = 2, 80, 80, 4, 4


def _show(value: Any) -> str:
    """A bounded repr for an error line: an aliased YAML value can be huge (or recursive), its repr never is."""
    return _REPR.repr(value)


def _string(value: Any, key: str, where: str) -> str:
    if isinstance(value, str):
        return value
    # YAML reads `version: 1.0` as a number: keep its text rather than fail.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise ConvertError(f"{where}: '{key}' is {_show(value)}, expected a string")


def _sampling_kv(key: str, vt: VT, value: Any, where: str) -> KV:
    if vt == VT.STRING:
        return KV(key, vt, _string(value, key, where))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConvertError(f"{where}: '{key}' is {_show(value)}, expected a number")
    if vt == VT.INT32:
        if isinstance(value, float) and not value.is_integer():
            raise ConvertError(f"{where}: '{key}' is {_show(value)}, expected an integer")
        if not _INT32[0] <= int(value) <= _INT32[1]:
            raise ConvertError(f"{where}: '{key}' is {_show(value)}, expected a 32-bit integer")
        return KV(key, vt, int(value))
    return KV(key, vt, float(value))


def _entries(kvs: list[KV], count_key: str, item_key: str, entries: Any, where: str) -> None:
    if not isinstance(entries, list):
        raise ConvertError(f"{where}: '{count_key}' source is {type(entries).__name__}, expected a list")
    add_kv(kvs, KV(count_key, VT.UINT32, len(entries)))
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ConvertError(f"{where}: entry {i} of the {count_key.split('.')[1]} list is {_show(entry)}, "
                               "expected an object")
        for field in S.BASE_MODEL_FIELDS:
            if entry.get(field) is not None:
                key = item_key.format(i=i, field=field)
                add_kv(kvs, KV(key, VT.STRING, _string(entry[field], key, where)))


def _string_list(value: Any, key: str, where: str) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise ConvertError(f"{where}: '{key}' is {_show(value)}, expected a list of strings")
    return [_string(v, key, where) for v in items]


def _to_kvs(md: Metadata, sampling: dict[str, tuple[Any, str]]) -> list[KV]:
    where = "README.md / --metadata"
    kvs: list[KV] = []
    for key, vt, _field in S.GENERAL_SAMPLING_KEYS:
        value, source = sampling.get(key, (None, ""))
        if value is not None:
            add_kv(kvs, _sampling_kv(key, vt, value, source))
    for key, vt in S.GENERAL_META_KEYS:
        value = getattr(md, _attr(key))
        if value is None:
            continue
        if key == "general.license" and isinstance(value, list):
            value = ",".join(_string(v, key, where) for v in value)
        add_kv(kvs, KV(key, vt, _string(value, key, where)))
    if md.base_models is not None:
        _entries(kvs, S.BASE_MODEL_COUNT, S.BASE_MODEL_KEY, md.base_models, where)
    if md.datasets is not None:
        _entries(kvs, S.DATASET_COUNT, S.DATASET_KEY, md.datasets, where)
    for key in (S.GENERAL_TAGS, S.GENERAL_LANGUAGES):
        value = getattr(md, _attr(key))
        if value is not None:
            add_kv(kvs, KV(key, VT.ARRAY, _string_list(value, key, where), VT.STRING))
    return kvs
