"""The SpecialVocab block of the tokenizer KVs: merges, special ids, add flags, chat templates, normalizer flags.

Re-implements what gguf-py's ``SpecialVocab`` of llama.cpp b11434 reads from a target directory (contract §2.5.4,
with the post-processor and normalizer rules of spec/upstream-b11434.md §2.8; docs/tokenizer.md), without
transformers and with our own error handling. The PyPI ``gguf`` 0.19.0 version lacks the normalizer flags that
upstream [LC] writes, so the logic lives here. Quirks of upstream are kept on purpose (they decide byte parity):
``tokenizer_config.json`` values are compared as they are (a dict-form ``bos_token`` never equals a template id),
a bool counts as an integer id, and ``cls`` / FIM types have no GGUF key and are dropped when written.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from string import ascii_letters, digits
from typing import Any

from gguf import GGUFValueType as VT

from .. import schema as S
from ..errors import ConvertError
from ..hf.checkpoint import load_json_if_present, read_json
from ..hf.members import member_dir, read_member_text
from ..notes import note
from ..plan import KV, add_kv

log = logging.getLogger(__name__)

DEFAULT_SPECIAL_TYPES = ("bos", "eos", "unk", "sep", "pad", "cls", "mask")


def looks_special(token: str) -> bool:
    """Upstream's "looks like a control token" test (contract §2.5.2).

    Example:
        >>> looks_special("<|im_start|>"), looks_special("<｜begin▁of▁sentence｜>"), looks_special("hello")
        (True, True, False)
    """
    if token in ("<pad>", "<mask>", "<2mass>", "[@BOS@]"):
        return True
    if token.startswith("<|") and token.endswith("|>"):
        return True
    if token.startswith("<\uff5c") and token.endswith("\uff5c>"):
        return True
    return token.startswith("<unused") and token.endswith(">")


def merges_from_json(tokenizer_json: Path, data: dict[str, Any]) -> list[str]:
    """``model.merges`` of a parsed tokenizer.json as GGUF strings (pair form joined, spaces as U+0120)."""
    model = data.get("model")
    merges = model.get("merges") if isinstance(model, dict) else None
    if not isinstance(merges, list) or not merges:
        return []
    first = merges[0]
    if isinstance(first, str):
        return list(merges)
    if isinstance(first, list) and len(first) == 2 and isinstance(first[0], str):
        # Pair form (transformers >= 4.45): a space inside a part is stored as U+0120, as gguf-py does.
        if any(" " in part for pair in merges for part in pair):
            return [" ".join(part.replace(" ", "\u0120") for part in pair) for pair in merges]
        return [f"{a} {b}" for a, b in merges]
    raise ConvertError(f"{tokenizer_json}: unknown format of model.merges (first entry {first!r})")


def merges_from_txt(path: Path) -> list[str]:
    """``merges.txt``: an optional leading ``#`` line is skipped, lines that are not exactly 2 fields dropped."""
    lines = read_member_text(path, what="merges file").split("\n")  # file-iteration semantics: newlines only
    if lines and lines[0].strip().startswith("#"):
        lines = lines[1:]
    merges = []
    for line in lines:
        parts = line.strip().split(None, 3)
        if len(parts) == 2:
            merges.append(f"{parts[0]} {parts[1]}")
        elif parts:
            note("tokenizer.ggml.merges", "malformed-merge", f"{path}: malformed merge line {line!r} ignored")
    return merges


def _normalizer_flags(normalizer: Any, flags: dict[str, Any]) -> None:
    """lowercase / strip_accents from a tokenizer.json normalizer, recursing into Sequence (b11434 rules).

    ``Lowercase`` / ``StripAccents`` set their flag true; a ``BertNormalizer`` sets each flag to its field's value
    when the field is present (false and null included: a null is not written); a later entry overrides.
    """
    if not isinstance(normalizer, dict):
        return
    kind = normalizer.get("type")
    if kind == "Lowercase":
        flags["lowercase"] = True
    elif kind == "StripAccents":
        flags["strip_accents"] = True
    elif kind == "BertNormalizer":
        for field in ("lowercase", "strip_accents"):
            if field in normalizer:
                flags[field] = normalizer[field]
    elif kind == "Sequence":
        for sub in normalizer.get("normalizers") or []:
            _normalizer_flags(sub, flags)


def token_content(entry: Any) -> str | None:
    """The text of a tokenizer_config.json token entry: a plain string, or a dict with ``content``."""
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and isinstance(entry.get("content"), str):
        return entry["content"]
    return None


def _special_id(template_item: dict[str, Any]) -> Any:
    special = template_item.get("SpecialToken")
    return special.get("id") if isinstance(special, dict) else None


def _sequence_id(template_item: dict[str, Any]) -> Any:
    seq = template_item.get("Sequence")
    return seq.get("id") if isinstance(seq, dict) else None


@dataclass
class _TokenNames:
    """The bos / cls / eos / sep names from tokenizer_config.json that the post-processor rules compare and fill."""

    bos: Any = None
    cls: Any = None
    eos: Any = None
    sep: Any = None

    @classmethod
    def of(cls, config: dict[str, Any] | None) -> _TokenNames:
        c = config or {}
        return cls(c.get("bos_token"), c.get("cls_token"), c.get("eos_token"), c.get("sep_token"))


class SpecialVocab:
    """What gguf-py's SpecialVocab collects from a target dir, emitted as KVs in upstream order.

    Example:
        >>> sv = SpecialVocab(Path("target"), load_merges=True)  # doctest: +SKIP
        >>> [kv.name for kv in sv.kvs()]  # doctest: +SKIP
        ['tokenizer.ggml.merges', 'tokenizer.ggml.bos_token_id', ..., 'tokenizer.ggml.add_eos_token']
    """

    def __init__(self, target_dir: Path, load_merges: bool = False, types: tuple[str, ...] | None = None,
                 n_vocab: int | None = None, tokenizer_data: dict[str, Any] | None = None,
                 merges: Sequence[str] | None = None) -> None:
        """``tokenizer_data`` is the parsed tokenizer.json when the caller has it; ``merges`` its merges when
        the caller read them (``tokenizer_data`` may then lack them)."""
        self.dir = Path(target_dir)
        self.load_merges = load_merges
        self.types: tuple[str, ...] = tuple(types) if types is not None else DEFAULT_SPECIAL_TYPES
        self.n_vocab = n_vocab
        self._given_merges = merges
        self.merges: Sequence[str] = []
        self.special_ids: dict[str, int] = {}
        self.add_flags: dict[str, bool] = {}
        self.chat_template: Any = None
        self.normalizer: dict[str, Any] = {}
        self._load(tokenizer_data)

    # ------------------------------------------------------------------------------------------ loading
    def set_special_token(self, typ: str, tid: Any, source: Path | None = None) -> None:
        """Record ``tid`` for ``typ`` unless already known; out-of-range ids are skipped when n_vocab is set."""
        if not isinstance(tid, int):  # bool included, as upstream
            return
        if tid < 0:
            where = source if source is not None else self.dir
            raise ConvertError(f"{where}: special token '{typ}' has id {tid}, expected a non-negative integer")
        if self.n_vocab is not None and tid >= self.n_vocab:
            note(f"tokenizer.ggml.{typ}_token_id", "token-out-of-range",
                 f"{self.dir}: special token {typ} id {tid} is out of range (< {self.n_vocab}), skipped")
            return
        self.special_ids.setdefault(typ, int(tid))

    def _load(self, tokenizer_data: dict[str, Any] | None) -> None:
        tj = self.dir / "tokenizer.json"
        if tokenizer_data is None and tj.is_file():
            tokenizer_data = read_json(tj)
        if tokenizer_data is not None and not isinstance(tokenizer_data, dict):
            raise ConvertError(f"{tj}: malformed tokenizer.json (top level is not an object)")
        self._from_tokenizer_files(tj, tokenizer_data)
        self._from_config_json()
        if self.load_merges and not self.merges and (self.dir / "merges.txt").is_file():
            self.merges = merges_from_txt(self.dir / "merges.txt")

    def _from_tokenizer_files(self, tj: Path, tokenizer: dict[str, Any] | None) -> None:
        added_tokens: list[Any] = []
        if tokenizer is not None:
            if self.load_merges:
                self.merges = self._given_merges if self._given_merges is not None else merges_from_json(tj, tokenizer)
            if tokenizer.get("normalizer"):
                _normalizer_flags(tokenizer["normalizer"], self.normalizer)
            added_tokens = tokenizer.get("added_tokens") or []
        config = load_json_if_present(self.dir / "tokenizer_config.json")
        config = dict(config) if config else config  # the post-processor rules below set some top-level keys
        if tokenizer:
            self._from_post_processor(tokenizer, config)
        if config is None and self.dir.is_dir():
            note("tokenizer_config.json", "no-tokenizer-config",
                 f"{self.dir / 'tokenizer_config.json'}: no such file, so the GGUF has no chat template and no "
                 "special-token ids or add_bos/add_eos flags from it (only what config.json and tokenizer.json say)")
        if not config:
            return
        self._chat_template_from(config)
        for typ in self.types:
            add_entry = config.get(f"add_{typ}_token")
            if isinstance(add_entry, bool):
                # b11434: the post-processor wins; tokenizer_config only fills flags it left unset.
                if typ not in self.add_flags:
                    self.add_flags[typ] = add_entry
                elif self.add_flags[typ] != add_entry:
                    note(S.ADD_TOKEN_KEYS.get(typ, f"add_{typ}_token"), "add-flag-mismatch",
                         f"{self.dir / 'tokenizer_config.json'}: add_{typ}_token is {add_entry} but the "
                         f"tokenizer.json post-processor gives {self.add_flags[typ]}; the post-processor wins")
            content = token_content(config.get(f"{typ}_token"))
            if content is None:
                continue
            tid = next((a.get("id") for a in added_tokens if isinstance(a, dict) and a.get("content") == content),
                       None)
            self.set_special_token(typ, tid, tj)

    def _from_post_processor(self, tokenizer: dict[str, Any], config: dict[str, Any] | None) -> None:
        """The add flags (and some implied token names) a tokenizer.json ``post_processor`` gives (b11434 rules).

        Each processor, or each entry of a ``Sequence``, in order: ``ByteLevel`` defaults add_bos/add_eos to false
        (a later entry may still set them), ``RobertaProcessing`` sets all three to true, ``TemplateProcessing``
        is read by :meth:`_from_template`. Other kinds (``BertProcessing``, ...) set nothing.
        """
        names = _TokenNames.of(config)
        if not names.bos and names.cls and config:
            config["bos_token"] = names.bos = names.cls
        if not names.eos and names.sep and config:
            config["eos_token"] = names.eos = names.sep
        post = tokenizer.get("post_processor")
        if not isinstance(post, dict) or not post:
            return
        for proc in post.get("processors", [post]):
            if not isinstance(proc, dict):
                continue
            kind = proc.get("type")
            if kind == "ByteLevel":
                self.add_flags.setdefault("bos", False)
                self.add_flags.setdefault("eos", False)
            elif kind == "RobertaProcessing":
                self.add_flags.update(bos=True, eos=True, sep=True)
                if not names.cls and config:
                    names.cls = config["cls_token"] = proc.get("cls", [names.bos])[0]
                if not names.sep and config:
                    names.sep = config["sep_token"] = proc.get("sep", [names.eos])[0]
            elif kind == "TemplateProcessing":
                self._from_template(proc, config, names)

    def _from_template(self, proc: dict[str, Any], config: dict[str, Any] | None, names: _TokenNames) -> None:
        """Upstream's crude TemplateProcessing reading: add_bos/add_eos from ``single``, add_sep from ``pair``."""
        single, pair = proc.get("single") or [], proc.get("pair") or []
        first = last = None
        if len(single) > 1:
            if first := _special_id(single[0]):
                if not config:
                    names.bos = first
                elif first not in (names.bos, names.cls):
                    # A leading token that tokenizer_config does not name: it names the missing bos / cls.
                    if not names.bos:
                        config["bos_token"] = names.bos = first
                    if not names.cls:
                        config["cls_token"] = names.cls = first
                self.add_flags["bos"] = first in (names.bos, names.cls)
            if last := _special_id(single[-1]):
                if not config:
                    names.eos = last
                elif last != names.eos:
                    # A trailing token other than eos: the configured eos becomes eot (or eom), as upstream does.
                    if "eot" not in self.types:
                        self.types += ("eot",)
                        config["eot_token"] = names.eos
                    elif "eom" not in self.types:
                        self.types += ("eom",)
                        config["eom_token"] = names.eos
                    config["eos_token"] = names.eos = last
                self.add_flags["eos"] = last == names.eos
        if pair:
            start = 1 if first and _special_id(pair[0]) == first else 0
            stop = -1 if last and _special_id(pair[-1]) == last else None
            middle = pair[slice(start, stop)]
            if middle and _sequence_id(middle[0]) == "A" and _sequence_id(middle[-1]) == "B" and middle[1:-1]:
                middle = middle[1:-1]
                add_sep = False
                entry = _special_id(middle[0])
                if entry and entry in (names.sep, names.eos) and not last:
                    add_sep = True
                if len(middle) == 2 and (entry := _special_id(middle[1])) and entry in (names.sep, names.eos):
                    add_sep = True
                self.add_flags["sep"] = add_sep
                if add_sep and not names.sep and config:
                    config["sep_token"] = names.eos

    def _chat_template_from(self, config: dict[str, Any]) -> None:
        alt: Any = None
        jinja, json_file = self.dir / "chat_template.jinja", self.dir / "chat_template.json"
        if os.path.lexists(jinja):
            alt = read_member_text(jinja, what="chat template")
            extras = self.dir / "additional_chat_templates"
            extra = sorted(extras.glob("*.jinja")) if extras.is_dir() else []
            if extra:
                member_dir(self.dir, extras.name)
            if extra:
                alt = [{"name": "default", "template": alt}]
                alt += [{"name": p.stem, "template": read_member_text(p, what="chat template")} for p in extra]
        elif json_file.is_file():
            data = read_json(json_file)
            alt = data.get("chat_template") if isinstance(data, dict) else None
        template = config.get("chat_template", alt)
        if template is None or isinstance(template, (str, list)):
            self.chat_template = template
        else:
            note("tokenizer.chat_template", "chat-template-type",
                 f"{self.dir / 'tokenizer_config.json'}: chat_template of type {type(template).__name__} ignored")

    def _from_config_json(self) -> None:
        path = self.dir / "config.json"
        config = load_json_if_present(path)
        if config is None:
            return
        text_config = config.get("text_config")
        for typ in self.types:
            tid = config.get(f"{typ}_token_id")
            if tid is None and isinstance(text_config, dict):
                tid = text_config.get(f"{typ}_token_id")
            self.set_special_token(typ, tid, path)

    # ------------------------------------------------------------------------------------------ output
    def kvs(self) -> list[KV]:
        """The KVs in gguf-py ``add_to_gguf`` order (types without a GGUF key are dropped)."""
        out: list[KV] = []
        if self.merges:
            add_kv(out, KV(S.TOKENIZER_MERGES, VT.ARRAY, self.merges, VT.STRING))
        for typ, tid in self.special_ids.items():
            if key := S.SPECIAL_TOKEN_KEYS.get(typ):
                add_kv(out, KV(key, VT.UINT32, tid))
            else:
                log.debug("no GGUF key for special token type %s (id %d)", typ, tid)
        for typ, value in self.add_flags.items():
            if key := S.ADD_TOKEN_KEYS.get(typ):
                add_kv(out, KV(key, VT.BOOL, value))
        if self.chat_template is not None:
            for kv in chat_template_kvs(self.chat_template):
                add_kv(out, kv)
        for field, key in (("lowercase", S.TOKENIZER_LOWERCASE), ("strip_accents", S.TOKENIZER_STRIP_ACCENTS)):
            if self.normalizer.get(field) is not None:
                add_kv(out, KV(key, VT.BOOL, bool(self.normalizer[field])))
        return out


def chat_template_kvs(template: str | list[Any]) -> list[KV]:
    """GGUFWriter.add_chat_template as KVs: a string, or named templates + the name list + the default.

    Example:
        >>> [kv.name for kv in chat_template_kvs([{"name": "default", "template": "A"},
        ...                                        {"name": "tool use", "template": "B"}])]
        ['tokenizer.chat_template.tool_use', 'tokenizer.chat_templates', 'tokenizer.chat_template']
    """
    out: list[KV] = []
    if isinstance(template, str):
        add_kv(out, KV(S.TOKENIZER_CHAT_TEMPLATE, VT.STRING, template))
        return out
    default = None
    names: list[str] = []  # upstream uses a set (arbitrary order); first-seen order is deterministic
    for choice in template:
        if not isinstance(choice, dict):
            continue
        name = "".join(c if c in ascii_letters + digits else "_" for c in str(choice.get("name", "")))
        text = choice.get("template")
        if not name or text is None:
            continue
        if name == "default":
            default = text
        else:
            if name not in names:
                names.append(name)
            add_kv(out, KV(S.TOKENIZER_CHAT_TEMPLATE_N.format(name=name), VT.STRING, text))
    if names:
        add_kv(out, KV(S.TOKENIZER_CHAT_TEMPLATES, VT.ARRAY, names, VT.STRING))
    if default is not None:
        add_kv(out, KV(S.TOKENIZER_CHAT_TEMPLATE, VT.STRING, default))
    return out
