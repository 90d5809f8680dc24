#!/usr/bin/env python3
"""Regenerate ``dspark_convert/tokenizer/data/targets-b11434.json`` (the target table) from an upstream llama.cpp tree.

A draft of the DFlash lineage is converted with its target's tokenizer: upstream's ``DFlashModel.set_vocab`` takes the
target ``config.json``'s text architecture and runs that class's own ``set_vocab`` on the draft. So every text
architecture upstream registers can be a target; this script lists them all, with what each class's ``set_vocab`` is
(the vocab method) and the facts a draft conversion reads besides the vocabulary:

* ``methods``: one entry per vocab method. A ``set_vocab`` that only calls one base helper (``self._set_vocab_gpt2()``)
  is named after the helper; any other body is named ``Class.set_vocab``. Each entry has ``sha``, a digest of the
  code it runs (the ``set_vocab`` chain along the class's MRO and the helpers it calls, as resolved on the draft class,
  comments and line numbers aside), so ``--check`` notices a changed body; and the facts read off that code:
  the draft ``hparams`` keys it reads, the token strings it names, the GGUF writer calls it makes.
* ``architectures``: every ``TEXT_MODEL_MAP`` name with its class, GGUF architecture, method, ``mtp_export`` (the
  class writes an MTP sidecar with ``--mtp``: ``supports_mtp_export``) and ``role``: ``target``;
  ``excluded`` (encoders, TTS, the draft classes themselves, decision heads, embedding entry points: not generative
  targets); or ``fails`` (upstream crashes when a draft uses it; ``failure``: ``no-text-class``, ``target-state``
  (the method reads state only the target class's ``__init__`` creates) or ``super`` (the method calls ``super()``
  in a class the draft class does not derive from: TypeError)).
* ``layer_inputs``: per GGUF architecture, whether llama.cpp's graph records the layer inputs a DFlash / EAGLE-3
  draft reads (from the C++ tree; a target without them makes llama-server abort); ``wide_layer_input``: the
  graphs whose recorded layer inputs are the hyper-connection residual, wider than a hidden row (llama-server
  aborts on those too); ``final_layer_input``: the
  architectures whose graph also records the last layer's output (layer input ``n_layer``, which a DFlash-family
  draft tapping the last layer reads);
* ``top_level_architectures``: the architectures whose top-level name wins over ``text_config.architectures`` in
  ``get_model_architecture``; ``embedding_scale_prefix``: the prefix of the target architectures whose embedding scale
  a DFlash draft writes.

It imports upstream's ``conversion`` package, so it needs what upstream's converter needs (torch, transformers); the
package itself only reads the committed JSON.

usage:
  python scripts/target_table.py [--tree LLAMA_CPP_TREE] [--out FILE] [--check]

``--check`` writes nothing: exit 1 (and the differing names) when the committed file differs from what the tree gives.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import inspect
import json
import logging
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TREE = Path.home() / ".cache" / "dspark-convert" / "llama-server-b11434" / "src" / "llama.cpp"
DEFAULT_OUT = ROOT / "dspark_convert" / "tokenizer" / "data" / "targets-b11434.json"
UPSTREAM = "b11434"

#: GGUF architectures that are not generative text targets (encoders, codecs, TTS, the drafts themselves)
EXCLUDED_GGUF_ARCHS = {
    "bert": "encoder", "nomic-bert": "encoder", "nomic-bert-moe": "encoder", "neo-bert": "encoder",
    "jina-bert-v2": "encoder", "jina-bert-v3": "encoder", "eurobert": "encoder", "modern-bert": "encoder",
    "t5": "encoder-decoder", "t5encoder": "encoder-decoder", "wavtokenizer-dec": "audio codec",
    "pockettts": "text-to-speech", "qwen3tts": "text-to-speech", "dflash": "draft", "gemma4-assistant": "draft",
}
#: architecture names that are draft classes, decision heads or embedding entry points of a causal family
EXCLUDED_NAMES = {
    "Eagle3DraftModel": "draft", "Eagle3Speculator": "draft", "Eagle3LlamaForCausalLM": "draft",
    "LlamaForCausalLMEagle3": "draft", "DeepseekV4DSparkModel": "draft", "MuseGlimmerAssistantModel": "draft",
    "Gemma4DSparkModel": "draft", "OpenJevModel": "decision head", "ClefModel": "decision head",
    "LevModel": "decision head", "KevModel": "decision head", "NimbleModel": "decision head",
    "ModernBertDecisionModel": "decision head", "Qwen2Model": "embedding entry point",
    "Qwen3Model": "embedding entry point", "LlamaModel": "embedding entry point",
    "LlamaBidirectionalModel": "embedding entry point", "Gemma3TextModel": "embedding entry point",
    "Lfm2Model": "embedding entry point", "Lfm2BidirectionalModel": "embedding entry point",
    "Lfm2BidirectionalForMaskedLM": "embedding entry point", "Lfm25AudioTokenizer": "audio codec",
}
#: helpers whose body is a data table regenerated every release (the pre-tokenizer hashes have their own file)
UNHASHED = {"get_vocab_base_pre"}
HELPER_PREFIXES = ("_set_vocab_", "_create_vocab_", "get_vocab_base", "does_token_look_special")


def _tree_ast(fn: Any) -> ast.FunctionDef:
    node = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
    assert isinstance(node, ast.FunctionDef)
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        node.body = body[1:] or [ast.Pass()]
    return node


def _digest(node: ast.AST) -> str:
    return ast.dump(node, annotate_fields=False, include_attributes=False)


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


class Upstream:
    """The upstream tree's ``conversion`` package, imported, and the code facts read from it."""

    def __init__(self, tree: Path) -> None:
        self.tree = tree
        sys.path[:0] = [str(tree / "gguf-py"), str(tree)]
        logging.disable(logging.WARNING)
        import conversion
        from conversion import qwen

        self.conversion = conversion
        self.draft_cls = qwen.DFlashModel
        self.text_map: dict[str, str] = dict(conversion.TEXT_MODEL_MAP)
        self.draft_attrs = self._instance_attributes(self.draft_cls)

    # ------------------------------------------------------------------------------------------ draft-side facts
    @staticmethod
    def _instance_attributes(cls: type) -> set[str]:
        """Attribute names a draft instance has when its ``set_vocab`` runs: class attributes, ``self.X = ...`` in
        the ``__init__`` of every class of its MRO, and ``setattr(self, "X", ...)`` in its own ``set_vocab``."""
        names = set(dir(cls))
        for k in cls.__mro__:
            for meth in ("__init__", "set_vocab"):
                fn = k.__dict__.get(meth)
                if not inspect.isfunction(fn):
                    continue
                for node in ast.walk(_tree_ast(fn)):
                    if isinstance(node, ast.Attribute) and _is_self(node.value) and isinstance(node.ctx, ast.Store):
                        names.add(node.attr)
                    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
                            and len(node.args) >= 2 and _is_self(node.args[0])
                            and isinstance(node.args[1], ast.Constant)):
                        names.add(str(node.args[1].value))
        return names

    def top_level_architectures(self) -> list[str]:
        """The names ``get_model_architecture`` keeps at the top level for TEXT (its ``arch in (...)`` tuple)."""
        fn = _tree_ast(self.conversion.get_model_architecture)
        for node in ast.walk(fn):
            if isinstance(node, ast.Compare) and any(isinstance(op, ast.In) for op in node.ops):
                for comp in node.comparators:
                    if isinstance(comp, ast.Tuple) and all(isinstance(e, ast.Constant) for e in comp.elts):
                        return [str(e.value) for e in comp.elts]  # type: ignore[attr-defined]
        raise SystemExit("get_model_architecture: no tuple of top-level architectures found")

    def embedding_scale_prefix(self) -> str:
        """The ``startswith`` prefix DFlashModel tests the target architecture with for the embedding scale."""
        found = set()
        for fn in self.draft_cls.__dict__.values():
            if not inspect.isfunction(fn):
                continue
            src = inspect.getsource(fn)
            if "embedding_scale" not in src:
                continue
            for node in ast.walk(_tree_ast(fn)):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr == "startswith" and node.args and isinstance(node.args[0], ast.Constant)):
                    found.add(str(node.args[0].value))
        if len(found) != 1:
            raise SystemExit(f"DFlashModel: expected one startswith() prefix for the embedding scale, found {found}")
        return found.pop()

    # ------------------------------------------------------------------------------------------ methods
    def _resolve(self, name: str) -> Any:
        """``self.name`` on a draft instance (helpers resolve on the draft class, not on the target's)."""
        return getattr(self.draft_cls, name, None)

    def method_of(self, cls: type) -> tuple[str, dict[str, Any]]:
        """(method key, entry) of ``cls.set_vocab`` run on a draft instance."""
        defining = [k for k in cls.__mro__ if "set_vocab" in k.__dict__]
        chain = defining[:1]
        while len(chain) < len(defining) and _calls_super_set_vocab(_tree_ast(chain[-1].__dict__["set_vocab"])):
            chain.append(defining[len(chain)])
        first = _tree_ast(chain[0].__dict__["set_vocab"])
        key = f"{chain[0].__name__}.set_vocab"
        if len(first.body) == 1:
            stmt = first.body[0]
            call = stmt.value if isinstance(stmt, (ast.Expr, ast.Return)) else None
            if (isinstance(call, ast.Call) and not call.args and not call.keywords
                    and isinstance(call.func, ast.Attribute) and _is_self(call.func.value)
                    and call.func.attr.startswith("_set_vocab_")):
                key = call.func.attr
        parts: list[str] = []
        hparams: set[str] = set()
        tokens: list[str] = []
        writes: list[str] = []
        needs: set[str] = set()
        needs_if: set[str] = set()
        bad_super: list[str] = []
        seen: set[str] = set()
        todo: list[tuple[str, Any]] = []
        if key.startswith("_set_vocab_"):
            todo.append((key, self._resolve(key)))
        else:
            todo += [(f"{k.__name__}.set_vocab", k.__dict__["set_vocab"]) for k in chain]
        while todo:
            label, fn = todo.pop(0)
            if not inspect.isfunction(fn) or label in seen:
                continue
            seen.add(label)
            node = _tree_ast(fn)
            parts.append(label + ":" + _digest(node))
            owner_cls = self._owner_of(fn)
            if (owner_cls is not None and not issubclass(self.draft_cls, owner_cls)
                    and any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "super"
                            and not n.args for n in ast.walk(node))):
                bad_super.append(owner_cls.__name__)
            guarded = {id(n) for stmt in ast.walk(node) if isinstance(stmt, (ast.If, ast.Try))
                       for n in ast.walk(stmt) if n is not stmt}
            for sub in ast.walk(node):
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
                    owner, attr = sub.func.value, sub.func.attr
                    if _is_self(owner) and attr.startswith(HELPER_PREFIXES) and attr not in UNHASHED:
                        todo.append((attr, self._resolve(attr)))
                    elif isinstance(owner, ast.Name) and owner.id[:1].isupper() and sub.args and _is_self(sub.args[0]):
                        klass = self._class_named(fn, owner.id)  # ``Mamba2Model.set_vocab(self)``
                        if klass is not None and attr in klass.__dict__:
                            todo.append((f"{owner.id}.{attr}", klass.__dict__[attr]))
                    elif (isinstance(owner, ast.Attribute) and _is_self(owner.value) and owner.attr == "gguf_writer"
                          and attr not in writes):
                        writes.append(attr)
                    if (isinstance(owner, ast.Attribute) and _is_self(owner.value) and owner.attr == "hparams"
                            and attr == "get" and sub.args and isinstance(sub.args[0], ast.Constant)):
                        hparams.add(str(sub.args[0].value))
                    for arg in sub.args:
                        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and _looks_like_token(arg.value):
                            tokens.append(arg.value)
                if isinstance(sub, ast.Subscript):
                    if (isinstance(sub.value, ast.Attribute) and _is_self(sub.value.value)
                            and sub.value.attr == "hparams" and isinstance(sub.slice, ast.Constant)):
                        hparams.add(str(sub.slice.value))
                    if (isinstance(sub.slice, ast.Constant) and isinstance(sub.slice.value, str)
                            and _looks_like_token(sub.slice.value)):
                        tokens.append(sub.slice.value)
                if (isinstance(sub, ast.Attribute) and _is_self(sub.value) and isinstance(sub.ctx, ast.Load)
                        and sub.attr not in self.draft_attrs):
                    (needs_if if id(sub) in guarded else needs).add(sub.attr)
        entry: dict[str, Any] = {"sha": hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]}
        if key.startswith("_set_vocab_"):
            entry["defined_in"] = type_name(self.draft_cls, key)
        if hparams:
            entry["draft_hparams"] = sorted(hparams)
        if tokens:
            entry["tokens"] = list(dict.fromkeys(tokens))
        if writes:
            entry["writes"] = writes
        if needs:
            entry["needs_target_state"] = sorted(needs)
        if bad_super:
            entry["super_outside_draft"] = bad_super
        if needs_if - needs:
            entry["needs_target_state_in_a_branch"] = sorted(needs_if - needs)
        return key, entry

    @staticmethod
    def _owner_of(fn: Any) -> type | None:
        """The class whose body defines function ``fn`` (its ``__qualname__``'s owner, from its module)."""
        import importlib

        owner: Any = importlib.import_module(fn.__module__)
        for part in fn.__qualname__.split(".")[:-1]:
            owner = getattr(owner, part, None)
        return owner if isinstance(owner, type) else None

    @staticmethod
    def _class_named(fn: Any, name: str) -> type | None:
        klass = fn.__globals__.get(name)
        return klass if isinstance(klass, type) else None

    def table(self) -> dict[str, Any]:
        from conversion import get_model_class

        methods: dict[str, dict[str, Any]] = {}
        archs: dict[str, dict[str, Any]] = {}
        for name in sorted(self.text_map):
            row: dict[str, Any] = {"module": self.text_map[name]}
            try:
                cls = get_model_class(name)
            except KeyError:
                row.update(role="fails", failure="no-text-class", why="registered only as a multimodal projector: upstream has no text class "
                           "for it (KeyError in get_model_class)")
                archs[name] = row
                continue
            gguf_arch = self._gguf_arch(cls)
            row["class"] = cls.__name__
            if gguf_arch is not None:
                row["gguf_arch"] = gguf_arch
            if getattr(cls, "supports_mtp_export", False):
                row["mtp_export"] = True
            key, entry = self.method_of(cls)
            methods.setdefault(key, entry)
            row["method"] = key
            why = EXCLUDED_NAMES.get(name) or EXCLUDED_GGUF_ARCHS.get(gguf_arch or "")
            if why is not None:
                row.update(role="excluded", why=f"{why}, not a generative target")
            elif "super_outside_draft" in entry:
                row.update(role="fails", failure="super", why=f"its set_vocab calls super() in {entry['super_outside_draft'][0]}, "
                           "which the draft class does not derive from (upstream raises TypeError on a draft)")
            elif "needs_target_state" in entry:
                attrs = ", ".join(f"self.{a}" for a in entry["needs_target_state"])
                row.update(role="fails", failure="target-state", why=f"its set_vocab reads {attrs}, which only the target class creates "
                           "(upstream raises AttributeError on a draft)")
            else:
                row["role"] = "target"
            archs[name] = row
        used = {r["method"] for r in archs.values() if "method" in r}
        return {
            "upstream": UPSTREAM,
            "generated_by": "scripts/target_table.py",
            "top_level_architectures": self.top_level_architectures(),
            "embedding_scale_prefix": self.embedding_scale_prefix(),
            "layer_inputs": runtime_layer_inputs(self.tree),
            "final_layer_input": runtime_final_layer_input(self.tree),
            "wide_layer_input": runtime_wide_layer_input(self.tree),
            "methods": {k: methods[k] for k in sorted(used)},
            "architectures": archs,
        }

    @staticmethod
    def _gguf_arch(cls: type) -> str | None:
        import gguf

        arch = getattr(cls, "model_arch", None)
        return gguf.MODEL_ARCH_NAMES.get(arch) if arch is not None else None


def _calls_super_set_vocab(node: ast.FunctionDef) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "set_vocab"
               and isinstance(n.func.value, ast.Call) and isinstance(n.func.value.func, ast.Name)
               and n.func.value.func.id == "super" for n in ast.walk(node))


def runtime_layer_inputs(tree: Path) -> dict[str, bool]:
    """GGUF architecture -> whether llama.cpp's graph for it records the layer inputs a DFlash / EAGLE-3 draft reads
    (``res->t_layer_inp``; without them llama-server aborts with "layer input tensor is null"). Read from the C++
    tree: ``llama-arch.cpp`` (enum -> name), ``llama-model.cpp`` (enum -> model class), ``models/*.cpp`` (the file
    that builds the class's graph; a class without one uses its base's, ``models/models.h``)."""
    return {arch: "t_layer_inp" in text for arch, text in graph_texts(tree).items()}


def runtime_final_layer_input(tree: Path) -> list[str]:
    """The GGUF architectures whose llama.cpp graph also records the last layer's output as layer input ``n_layer``
    (``res->t_layer_inp[n_layer]``), sorted. A DFlash-family draft tapping the target's last layer (GGUF tap id =
    ``block_count``) asks for it, and llama-server aborts ("layer input tensor is null") on any other graph."""
    final = re.compile(r"t_layer_inp\s*\[\s*n_layer\s*\]")
    return sorted(arch for arch, text in graph_texts(tree).items() if final.search(text))


def runtime_wide_layer_input(tree: Path) -> list[str]:
    """The GGUF architectures whose llama.cpp graph records its hyper-connection residual (``res_hc``: hc_count x
    hidden values per token) as the layer inputs, sorted. llama-server copies those rows into a draft's buffer
    asserting one hidden row per token (``llama_context::extract_layer_inputs``), so any draft that reads them
    aborts on its first block."""
    wide = re.compile(r"t_layer_inp\s*\[[^\]]*\]\s*=\s*res_hc\b")
    return sorted(arch for arch, text in graph_texts(tree).items() if wide.search(text))


def graph_texts(tree: Path) -> dict[str, str]:
    """GGUF architecture -> the text of the ``models/*.cpp`` file that builds its graph (see
    :func:`runtime_layer_inputs`)."""
    src = tree / "src"
    names = dict(re.findall(r'\{\s*(LLM_ARCH_\w+),\s*"([^"]+)"\s*\}', (src / "llama-arch.cpp").read_text()))
    classes: dict[str, str] = {}
    for m in re.finditer(r"((?:case\s+LLM_ARCH_\w+:\s*)+)return new (llama_model_\w+)",
                         (src / "llama-model.cpp").read_text()):
        for arch in re.findall(r"LLM_ARCH_\w+", m.group(1)):
            classes.setdefault(arch, m.group(2))
    texts = [p.read_text(errors="replace") for p in sorted((src / "models").glob("*.cpp"))]
    header = (src / "models" / "models.h").read_text()

    def graph_text(cls: str, depth: int = 0) -> str | None:
        pattern = re.compile(rf"\b{cls}::graph(?:<[^>]*>)?::graph\s*\(")
        for text in texts:
            if pattern.search(text):
                return text
        base = re.search(rf"struct {cls}\s*:\s*public\s+(llama_model_\w+)", header)
        return graph_text(base.group(1), depth + 1) if base and depth < 5 else None

    out: dict[str, str] = {}
    for arch, cls in classes.items():
        text = graph_text(cls)
        if arch in names and text is not None:
            out[names[arch]] = text
    if not out:
        raise SystemExit(f"{src}: no model graphs found (llama-model.cpp / models/*.cpp changed shape)")
    return dict(sorted(out.items()))


def type_name(cls: type, attr: str) -> str:
    """The class of ``cls``'s MRO that defines ``attr``."""
    return next(k.__name__ for k in cls.__mro__ if attr in k.__dict__)


def _looks_like_token(s: str) -> bool:
    return 2 < len(s) <= 40 and s[0] in "<[" and s[-1] in ">]" and " " not in s


def render(table: dict[str, Any]) -> str:
    """The file text: one architecture or method per line, keys sorted (diffs stay readable)."""
    head = {k: v for k, v in table.items() if k not in ("methods", "architectures")}
    lines = ["{"]
    for k, v in head.items():
        lines.append(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},")
    for section in ("methods", "architectures"):
        items = list(table[section].items())
        lines.append(f"  {json.dumps(section)}: {{")
        for i, (k, v) in enumerate(items):
            comma = "," if i < len(items) - 1 else ""
            lines.append(f"    {json.dumps(k)}: {json.dumps(v, ensure_ascii=False, sort_keys=True)}{comma}")
        lines.append("  }" + ("," if section == "methods" else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, default=DEFAULT_TREE, help="llama.cpp source tree (convert_hf_to_gguf.py)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the table file")
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    args = ap.parse_args(argv)
    if not (args.tree / "conversion" / "__init__.py").is_file():
        print(f"{args.tree}: not a llama.cpp tree (no conversion/__init__.py)", file=sys.stderr)
        return 2
    text = render(Upstream(args.tree).table())
    table = json.loads(text)
    roles = [r["role"] for r in table["architectures"].values()]
    summary = (f"{len(roles)} architectures: {roles.count('target')} targets, {roles.count('excluded')} excluded, "
               f"{roles.count('fails')} failing upstream; {len(table['methods'])} vocab methods")
    if args.check:
        old = args.out.read_text(encoding="utf-8") if args.out.is_file() else ""
        if old == text:
            print(f"{args.out}: up to date ({summary})")
            return 0
        before = json.loads(old) if old else {"architectures": {}, "methods": {}}
        for section in ("architectures", "methods"):
            a, b = before.get(section, {}), table[section]
            changed = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            if changed:
                print(f"{section} differing: {', '.join(changed[:20])}{' ...' if len(changed) > 20 else ''}")
        print(f"{args.out}: differs from {args.tree} (run scripts/target_table.py to regenerate)")
        return 1
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}: {summary}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
