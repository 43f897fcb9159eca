"""The engine's fast paths give the bytes, keys and order of the general code they stand in for.

Request keys are pinned to the values evalflow computed before the fast paths (c8eaf9d): a
change here would orphan every cached answer. The length order is compared with sorting by the
full key; text entries (EVFT) with the JSON string entries older runs wrote.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from evalflow.cache.codec import decode, encode, encode_text
from evalflow.cache.fingerprint import canonical
from evalflow.cache.store import MISSING, CacheStore
from evalflow.cache.text import TextFile, text_source
from evalflow.core.records import Instance, Request
from evalflow.scale.answer_cache import _length_order, _length_ordered, request_key


def test_request_keys_are_those_of_the_general_code() -> None:
    assert (
        request_key("m", Request("loglikelihood", ("Q: 2+2?\nA:", " 4"))) == "request:e9790b6fbf68d8771829e65062466217"
    )
    greedy = Request("generate_until", ("ctx", {"until": ["\n"], "max_gen_toks": 5}), repeat=3)
    assert request_key("m", greedy) == "request:9f71a7150f3065b7eecaf71c674abf46"  # repeat dropped: greedy
    assert request_key("m", greedy) == request_key("m", dataclasses.replace(greedy, repeat=0))
    sampled = Request("generate_until", ("ctx", {"until": ["\n"]}), repeat=2, seed=7)
    assert request_key("m", sampled) == "request:2f6507bbdd82b9d5fd56794081935aae"


def test_dataclass_bytes_are_the_same_the_first_time_and_after() -> None:
    expected = b"DRequest(s4:types13:loglikelihoods4:argsl2[s1:as1:b]s6:repeati0;s4:seedN)"
    assert canonical(Request("loglikelihood", ("a", "b"))) == expected
    assert canonical(Request("loglikelihood", ("a", "b"))) == expected  # now from the remembered layout
    nested = Instance(1, 2, Request("loglikelihood", ("a", "b")))
    assert canonical(nested) == b"DInstance(s6:doc_idi1;s3:idxi2;s7:request" + expected + b")"


def test_length_order_is_the_full_keys_order() -> None:
    rng = random.Random(0)
    contexts = ["x" * 5 + c for c in "ab'\"\n\\"] + ["yy" * 3, "z" * 7, "é" * 6]  # ties of length, quotes, escapes
    items = []
    for i, ctx in enumerate(contexts * 3):
        for cont in (" A", " B", " 'C'", ' "D"'):
            items.append((f"k{i}{cont}", Request("loglikelihood", (ctx, cont))))
    items.append(("g", Request("generate_until", ("x" * 6, {"until": ["\n"]}))))
    for extra in ([], [("empty", Request("loglikelihood_rolling", ()))]):  # grouped by context; the full key
        shuffled = items + extra
        rng.shuffle(shuffled)
        expected = sorted(shuffled, key=lambda kv: _length_order(kv[1]))
        assert [k for k, _ in _length_ordered(shuffled)] == [k for k, _ in expected]


def test_text_entries_round_trip_and_older_json_strings_still_read(tmp_path) -> None:
    text = 'line one é\n{"doc": 1}\n'
    assert decode(encode_text(text.encode("utf-8"))) == text
    store = CacheStore(tmp_path)
    try:
        store.put_text("samples:new", text.encode("utf-8"), tag="samples")
        assert bytes(store.get_text_bytes("samples:new")) == text.encode("utf-8")
        store.put("samples:old", text, tag="samples")  # how earlier versions stored it (JSON)
        assert store.get_text_bytes("samples:old") == text.encode("utf-8")
        store.put("samples:not-text", {"a": 1}, tag="samples")
        assert store.get_text_bytes("samples:not-text") is MISSING
        assert store.get_text_bytes("samples:absent") is MISSING
    finally:
        store.close()


def test_a_damaged_text_entry_is_a_miss(tmp_path) -> None:
    store = CacheStore(tmp_path)
    try:
        blob = encode_text(b"some samples text")
        store.put_encoded("samples:bad", blob[:-3] + b"XYZ", tag="samples")
        assert store.get_text_bytes("samples:bad") is MISSING
        assert "samples:bad" in store.corrupt
        assert encode("x") != encode_text(b"x")  # two schemas, one meaning
    finally:
        store.close()


def _value_file(store: CacheStore, key: str) -> Path:
    (name,) = store.raw._sql("SELECT filename FROM Cache WHERE key = ?", (key,)).fetchone()
    return Path(store.directory) / name


def test_a_big_cached_text_is_copied_from_its_value_file(tmp_path: Path) -> None:
    text = ('{"doc": "é ✓"}\n' * 20000).encode("utf-8")  # beyond diskcache's inline size: a value file
    store = CacheStore(tmp_path / "c")
    try:
        store.put_text("samples:big", text, tag="samples")
        source = text_source(store, "samples:big")
        assert isinstance(source, TextFile) and source.size == len(text)
        out = tmp_path / "out.jsonl"
        with open(out, "wb") as fh:
            fh.write(b"")
            source.copy_to(fh)
        assert out.read_bytes() == text and source.source.closed
        assert text_source(store, "samples:small") is MISSING
        store.put_text("samples:small", b"short\n", tag="samples")  # kept inline in the index
        assert bytes(text_source(store, "samples:small")) == b"short\n"
    finally:
        store.close()


@pytest.mark.parametrize("damage", ["flip", "truncate", "remove"])
def test_a_damaged_value_file_is_a_miss_reported_once(tmp_path: Path, damage: str) -> None:
    text = b"x" * 100_000
    store = CacheStore(tmp_path / "c")
    try:
        store.put_text("samples:big", text, tag="samples")
        path = _value_file(store, "samples:big")
        data = path.read_bytes()
        if damage == "flip":
            path.write_bytes(data[:-10] + b"y" + data[-9:])
        elif damage == "truncate":
            path.write_bytes(data[: len(data) // 2])
        else:
            path.unlink()
        assert text_source(store, "samples:big") is MISSING
        assert store.corrupt == ["samples:big"] and text_source(store, "samples:big") is MISSING
    finally:
        store.close()
