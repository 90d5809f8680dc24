"""The numpy reader (tokscan) gives exactly what ``json.loads`` gives, or steps aside.

Its vocabulary and merges are compared with ``json.loads`` on generated documents (escapes, control characters,
lone surrogates, every indent, chunks of a few bytes) and on corrupted ones; its vocabulary index is compared
with a set, and made to meet hash collisions (a weak hash swapped in) that the byte comparison must catch.
"""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dspark_convert.formats import native
from dspark_convert.gguffile.packed import PackedStrings
from dspark_convert.tokenizer import tokjson, tokscan

_TEXT = st.text(st.sampled_from(list("ab\"\\/\n\t\x00\x1fé中😀 ,:[]{}") + ["\ud7ff", "\ue000"]), max_size=6)


def _document(vocab: list[str], merges: list[Any], indent: int | None, ascii_only: bool, order: int) -> bytes:
    ids = list(range(len(vocab)))
    random.Random(order).shuffle(ids) if order else None
    data = {"version": "1.0", "added_tokens": [{"id": 0, "content": "x\"]}"}], "normalizer": None,
            "model": {"type": "BPE", "dropout": None, "vocab": {vocab[i]: i for i in ids}, "merges": merges}}
    return json.dumps(data, indent=indent, ensure_ascii=ascii_only).encode("utf-8")


def _tokens(lay: tokjson.Layout) -> list[bytes] | None:
    spans = tokscan.vocab_spans(lay)
    return None if spans is None else tokscan.span_list(*spans)


def _merge_strings(lay: tokjson.Layout) -> list[bytes]:
    a, b = lay.merges
    out: list[bytes] = []
    for s, _ in tokscan.chunks(lay.raw, a + 1, b - 1, b"],"):
        out += tokscan.span_list(s.data, s.starts, s.lens)
    return out


@pytest.mark.usefixtures("either_kernels")
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(vocab=st.lists(_TEXT, unique=True, max_size=30), indent=st.sampled_from([None, 0, 2]),
       ascii_only=st.booleans(), order=st.integers(0, 3), chunk=st.integers(1, 64), data=st.data())
def test_strings_equal_json(monkeypatch: pytest.MonkeyPatch, vocab: list[str], indent: int | None,
                            ascii_only: bool, order: int, chunk: int, data: st.DataObject) -> None:
    monkeypatch.setattr(tokscan, "CHUNK", chunk)  # many small pieces: cuts next to quotes and escapes
    merges = data.draw(st.lists(st.lists(_TEXT, min_size=2, max_size=2), max_size=20))
    raw = _document(vocab, merges, indent, ascii_only, order)
    ref = json.loads(raw)["model"]
    lay = tokjson.locate(raw)
    surrogates = any("\ud800" <= c <= "\udfff" for t in vocab + [p for m in merges for p in m] for c in t)
    try:
        tokens = _tokens(lay)
        strings = _merge_strings(lay)
    except tokjson.NotFast:  # allowed only where the bytes are not plain UTF-8 (lone surrogates)
        assert surrogates
        return
    enc = [t.encode("utf-8", "surrogatepass") for t in sorted(ref["vocab"], key=ref["vocab"].get)]
    if tokens is None:  # no tokens, or ids out of file order: left to tokjson
        assert not vocab or (order and [ref["vocab"][t] for t in ref["vocab"]] != list(range(len(vocab))))
    else:
        assert tokens == enc
    assert strings == [p.encode("utf-8", "surrogatepass") for m in ref["merges"] for p in m]


def _merge_doc(indent: int | None, ascii_only: bool) -> tuple[list[str], bytes]:
    vocab = ["a", "b", "ab", '"q', "\\", '"q\\', "}", "],", "é", "é}", "],é}", "x" * 9, "y" * 9, "x" * 9 + "y" * 9]
    merges = [["a", "b"], ['"q', "\\"], ["é", "}"], ["],", "é}"], ["x" * 9, "y" * 9]]
    return vocab, _document(vocab, merges, indent, ascii_only, 0)


@pytest.mark.usefixtures("either_kernels")
@pytest.mark.parametrize("indent", [None, 2])
def test_merge_pairs_pack_as_gguf_py(indent: int | None) -> None:
    vocab, raw = _merge_doc(indent, False)
    lay = tokjson.locate(raw)
    index = tokscan.VocabIndex(*tokscan.joined([t.encode() for t in vocab]))
    got = tokscan.merge_pairs(lay, index, np.array([vocab.index("ab"), vocab.index("],é}")]))
    assert got is not None
    blob, count, reduced = got
    pairs = json.loads(raw)["model"]["merges"]
    assert count == 5 and blob == PackedStrings.pack([f"{a} {b}" for a, b in pairs]).blob
    assert reduced == [["a", "b"], ["],", "é}"]]


def _pieces(read: Any) -> list[tuple[bytes, list[int], bytes, bool]] | str:
    try:
        return [(s.data.tobytes(), s.lens.tolist(), s.grammar, last) for s, last in read()]
    except tokjson.NotFast:
        return "NotFast"


@pytest.mark.usefixtures("either_kernels")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(merges=st.lists(st.lists(_TEXT, min_size=2, max_size=2), max_size=20), indent=st.sampled_from([None, 0, 2]),
       ascii_only=st.booleans(), chunk=st.integers(1, 64))
def test_pair_reader_equals_scan(monkeypatch: pytest.MonkeyPatch, merges: list[list[str]], indent: int | None,
                                 ascii_only: bool, chunk: int) -> None:
    monkeypatch.setattr(tokscan, "CHUNK", chunk)
    lay = tokjson.locate(_document([], merges, indent, ascii_only, 0))
    a, b = lay.merges
    fast = _pieces(lambda: tokscan.pair_chunks(lay.raw, a + 1, b - 1))
    assert fast == _pieces(lambda: tokscan.chunks(lay.raw, a + 1, b - 1, b"],"))
    if fast != "NotFast":
        assert [p for d, lens, _, _ in fast for p in tokscan.span_list(
            np.frombuffer(d, dtype=np.uint8), np.cumsum(lens, dtype=np.int64) - lens, np.array(lens, dtype=np.int64))
        ] == [p.encode("utf-8", "surrogatepass") for m in merges for p in m]


@pytest.mark.usefixtures("either_kernels")
@pytest.mark.parametrize("indent", [None, 2, "\t"])
def test_pair_reader_reads_pretty_merges_itself(monkeypatch: pytest.MonkeyPatch, indent: int | str | None) -> None:
    merges = [["a", "b"], ['"q', "\\"], ["\n\n", "\n"], ["é", "}"], ["],", "é}"], ["x" * 9, '"' * 9], ["\\\"", "["]]
    raw = json.dumps({"model": {"vocab": {}, "merges": merges}}, indent=indent, ensure_ascii=False).encode()
    lay = tokjson.locate(raw)
    a, b = lay.merges

    def refuse(*args: Any) -> None:
        raise AssertionError("scan_pairs stepped back to scan")

    monkeypatch.setattr(tokscan, "CHUNK", 24)
    monkeypatch.setattr(tokscan, "scan", refuse)
    got = _pieces(lambda: tokscan.pair_chunks(lay.raw, a + 1, b - 1))
    assert got != "NotFast" and len(got) > 2
    assert b"".join(d[: sum(lens)] for d, lens, _, _ in got) == "".join(p for m in merges for p in m).encode()
    assert b"".join(g for _, _, g, _ in got) == b'["",""],' * (len(merges) - 1) + b'["",""]'


@pytest.mark.usefixtures("either_kernels")
@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10**6), chunk=st.integers(1, 40), edit=st.sampled_from(["insert", "delete", "replace"]),
       byte=st.sampled_from(list(b' ,:"\\[]{}0a\n\xff\x01')))
def test_never_accepts_what_json_refuses(seed: int, chunk: int, edit: str, byte: int) -> None:
    rnd = random.Random(seed)
    vocab, doc = _merge_doc(rnd.choice([None, 2]), rnd.random() < 0.5)
    raw = bytearray(doc)
    pos = rnd.randrange(len(raw))
    if edit == "insert":
        raw[pos:pos] = bytes([byte])
    elif edit == "delete":
        del raw[pos]
    else:
        raw[pos] = byte
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tokscan, "CHUNK", chunk)
        try:
            lay = tokjson.locate(bytes(raw))
            tokens = _tokens(lay)
            if tokens is None:  # stepped aside: fastbpe reads the vocabulary with tokjson
                tokens = tokjson.vocab_tokens(lay)
            index = tokscan.VocabIndex(*tokscan.joined([t.encode() for t in vocab]))
            merged = tokscan.merge_pairs(lay, index, np.zeros(0, dtype=np.int64))
            if merged is None:  # stepped aside: fastbpe reads the merges with tokjson
                list(tokjson.merge_chunks(lay))
        except tokjson.NotFast:
            return
    ref = json.loads(bytes(raw))  # the reader took it: json must too, with the same content
    model = ref["model"]
    if len(set(tokens)) != len(tokens):  # a repeated key: VocabIndex refuses it
        assert len(model["vocab"]) < len(tokens)
    else:
        assert tokens == [t.encode() for t in sorted(model["vocab"], key=model["vocab"].get)]
        assert sorted(model["vocab"].values()) == list(range(len(tokens)))
    if merged is not None:
        assert all(p in vocab for m in model["merges"] for p in [*m, "".join(m)])
        assert merged[0] == PackedStrings.pack([f"{a} {b}" for a, b in model["merges"]]).blob


@pytest.mark.usefixtures("either_kernels")
@settings(max_examples=100, deadline=None)
@given(vocab=st.lists(st.binary(max_size=20), unique=True, max_size=40), probes=st.lists(st.binary(max_size=20)))
def test_index_equals_a_set(vocab: list[bytes], probes: list[bytes]) -> None:
    index = tokscan.VocabIndex(*tokscan.joined(vocab))
    items = probes + vocab
    assert index.ids(items).tolist() == [vocab.index(t) if t in vocab else -1 for t in items]


@pytest.mark.usefixtures("either_kernels")
@settings(max_examples=200, deadline=None)
@given(a=st.binary(max_size=8), data=st.data())
def test_short_hashes_are_one_to_one(a: bytes, data: st.DataObject) -> None:
    """Spans of up to 8 bytes are told apart by hash and length alone (the index compares only longer ones)."""
    b = data.draw(st.binary(min_size=len(a), max_size=len(a)).filter(lambda b: b != a))
    h = tokscan.span_hash(*tokscan.joined([a, b]))
    assert h[0] != h[1]


def test_collisions_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a hash that only sees the length, tokens of one length collide (the index refuses them) and a longer
    probe of a token's length is told apart by its bytes (the numpy form, whose hash can be swapped)."""
    monkeypatch.setenv(native.ENV, "0")
    monkeypatch.setattr(tokscan, "span_hash", lambda data, starts, lens: lens.astype(np.uint64) * np.uint64(7))
    with pytest.raises(ValueError):
        tokscan.VocabIndex(*tokscan.joined([b"ab", b"cd"]))
    index = tokscan.VocabIndex(*tokscan.joined([b"a", b"x" * 9, b"y" * 12]))
    assert index.ids([b"x" * 9, b"x" * 8 + b"z", b"y" * 12, b"y" * 11 + b"x", b"q" * 5]).tolist() == [1, -1, 2, -1, -1]


def test_compiled_lookup_confirms_a_hash_hit_by_the_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled lookup finds what the numpy form finds, and a span whose hash a token claims (a forged
    collision) but whose bytes differ is not that token."""
    monkeypatch.delenv(native.ENV, raising=False)
    assert native.kernels() is not None
    tokens = [b"a", b"x" * 9, b"y" * 12, "d\u00e9".encode(), b""]
    index = tokscan.VocabIndex(*tokscan.joined(tokens))
    probes = [b"x" * 9, b"x" * 8 + b"z", b"y" * 12, b"y" * 11 + b"x", b"", b"a", "d\u00e9".encode(), b"q" * 5]
    want = [1, -1, 2, -1, 4, 0, 3, -1]
    assert index.ids(probes).tolist() == want
    # forge a collision: token 1 (x * 9) claims the hash of x * 8 + z and sits where that hash probes first
    data, starts, lens = tokscan.joined([b"x" * 8 + b"z"])
    h = tokscan.span_hash(data, starts, lens)[0]
    index.hashes[1] = h
    index.table[:] = -1
    index.table[int(h >> index.shift)] = 1
    assert index.ids([b"x" * 8 + b"z", b"x" * 9]).tolist() == [-1, -1]
    index.hashes[1] = tokscan.span_hash(*tokscan.joined([b"x" * 9]))[0]
    index.table[:] = -1
    index.table[int(index.hashes[1] >> index.shift)] = 1
    assert index.ids([b"x" * 9, b"x" * 8 + b"z"]).tolist() == [1, -1]


def _compiled_on_random_items(monkeypatch: pytest.MonkeyPatch, seed: int, count: int, longest: int) -> list[bytes]:
    """Random byte strings, with the compiled kernels selected."""
    monkeypatch.delenv(native.ENV, raising=False)
    assert native.kernels() is not None
    rng = random.Random(seed)
    return [bytes(rng.randrange(256) for _ in range(rng.randrange(longest))) for _ in range(count)]


def test_span_hash_compiled_equals_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    data, starts, lens = tokscan.joined(_compiled_on_random_items(monkeypatch, 5, 500, 40))
    compiled = tokscan.span_hash(data, starts, lens)
    monkeypatch.setenv(native.ENV, "0")
    assert compiled.tolist() == tokscan.span_hash(data, starts, lens).tolist()
    with pytest.raises(ValueError, match="outside its padded buffer"):
        monkeypatch.delenv(native.ENV)
        tokscan.span_hash(data[:-1], starts, lens)


def test_pack_pairs_compiled_equals_numpy_and_the_items(monkeypatch: pytest.MonkeyPatch) -> None:
    items = _compiled_on_random_items(monkeypatch, 9, 400, 12)
    data, starts, lens = tokscan.joined(items)
    s = tokscan.Strings(data, lens, starts, b"", b"")
    want = b"".join(len(a + b" " + b).to_bytes(8, "little") + a + b" " + b for a, b in zip(items[0::2], items[1::2], strict=True))
    assert bytes(tokscan.pack_pairs(s)) == want
    monkeypatch.setenv(native.ENV, "0")
    assert bytes(tokscan.pack_pairs(s)) == want
    monkeypatch.delenv(native.ENV)
    assert bytes(tokscan.pack_pairs(tokscan.Strings(*tokscan.joined([])[::2], np.zeros(0, np.int64), b"", b""))) == b""
    with pytest.raises(ValueError, match="pack_pairs"):
        tokscan.pack_pairs(tokscan.Strings(data[:-9], lens, starts, b"", b""))  # strings longer than the data


def _vocab_both_ways(raw: bytes, monkeypatch: pytest.MonkeyPatch, compiled_alone: bool = False) -> tuple[object, object]:
    """The vocabulary read with the compiled kernel and with the numpy form (``compiled_alone``: the compiled read
    must not step back to the numpy form)."""
    def read() -> object:
        try:
            return _tokens(tokjson.locate(raw))
        except tokjson.NotFast:
            return "NotFast"

    def refuse(*args: Any) -> None:
        raise AssertionError("the compiled vocabulary reader stepped back to the numpy form")

    with monkeypatch.context() as mp:
        mp.delenv(native.ENV, raising=False)
        if compiled_alone:
            mp.setattr(tokscan, "chunks", refuse)
        compiled = read()
    monkeypatch.setenv(native.ENV, "0")
    return compiled, read()


@pytest.mark.parametrize("vocab_text, want", [
    ('{"a": 0, "b c": 1, "\\n\\u00e9": 2}', [b"a", b"b c", "\n\u00e9".encode()]),  # a space, escapes
    ('{"a":0,"b":1,"c":2,"d":3,"e":4,"f":5,"g":6,"h":7,"i":8,"j":9,"k":10}', [c.encode() for c in "abcdefghijk"]),
    ('{"a": 0, "b": 2, "c": 1}', None),   # ids out of file order: the caller's path
    ('{"a": 0, "b": 01}', None),          # not a plain id (nor JSON): the caller's path decides
    ('{"a": 0, "b": 1 }', [b"a", b"b"]),
    ('{"a": 0, "b": 1.0}', None),         # not a plain id
    ('{"a": 0, "b": -1}', None),
    ('{"a\tb": 0}', "NotFast"),          # a raw control character in a string
    ('{"a": 0, "\\ud800": 1}', "NotFast"),  # a lone surrogate (tokenizers refuses it)
    ('{"\xff": 0}', "NotFast"),           # not UTF-8
    ('{"a": 0, "b": 1, }', None),
])
def test_vocab_reader_compiled_equals_numpy(vocab_text: str, want: object, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = b'{"model": {"type": "BPE", "vocab": ' + vocab_text.encode("latin-1") + b', "merges": []}}'
    compiled, numpy_form = _vocab_both_ways(raw, monkeypatch, compiled_alone=isinstance(want, list))
    assert compiled == numpy_form == want


def test_vocab_reader_compiled_takes_small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    vocab = [f"t{i}" if i % 7 else f"\\{i} x" for i in range(3000)]
    raw = json.dumps({"model": {"type": "BPE", "vocab": {v: i for i, v in enumerate(vocab)}, "merges": []}},
                     indent=1).encode()
    monkeypatch.setattr(tokscan, "CHUNK", 97)  # many pieces, ids of 1 to 4 digits across their cuts
    compiled, numpy_form = _vocab_both_ways(raw, monkeypatch, compiled_alone=True)
    assert compiled == numpy_form == [v.encode() for v in vocab]


def test_tokens_cut_on_demand() -> None:
    tokens = tokscan.Tokens(tokscan.VocabIndex(*tokscan.joined([b"a", b"bc", b"", "d\u00e9".encode()])))
    assert len(tokens) == 4 and tokens[1] == b"bc" and tokens[np.int64(2)] == b"" and tokens[-1] == "d\u00e9".encode()
    assert tokens[1:3] == [b"bc", b""] and list(tokens) == [b"a", b"bc", b"", "d\u00e9".encode()]
    for bad in (4, -5):
        with pytest.raises(IndexError):
            tokens[bad]
