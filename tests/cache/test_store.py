from __future__ import annotations

import pickle
import sqlite3
from pathlib import Path

import pytest

from evalflow.cache.codec import CorruptEntry, decode, encode
from evalflow.cache.store import MISSING, CacheStore
from evalflow.core.records import Context, DocSet, Instance, Request, Responses


def test_records_round_trip_with_their_tuples() -> None:
    value = (
        DocSet("test", ({"q": "a", "choices": ["x", "y"]},), "train", ({"q": "b"},), "fp"),
        Context(3, ("ctx a", "ctx b"), (1, 2)),
        Instance(0, 1, Request("generate_until", ("ctx", {"until": ["\n"]}), repeat=2, seed=7)),
        Responses(([-1.5, True], 0.25, "text", float("inf"))),
    )
    back = decode(encode(value))
    assert back[0] == value[0] and back[1] == value[1] and back[2] == value[2]
    assert isinstance(back[1].prompt, tuple) and isinstance(back[0].docs, tuple)
    assert back[0].docs[0]["choices"] == ["x", "y"]  # document content keeps its JSON lists


def test_damaged_values_are_detected() -> None:
    blob = encode({"a": 1})
    with pytest.raises(CorruptEntry):
        decode(blob[:-3])
    with pytest.raises(CorruptEntry):
        decode(blob.replace(b'"a"', b'"b"'))
    with pytest.raises(CorruptEntry):
        decode(pickle.dumps({"a": 1}))


def test_store_put_get_and_corrupt_entry_is_dropped_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = CacheStore(tmp_path)
    store.put("k", {"v": [1, 2]}, tag="metrics")
    store.put_many({"r1": 1.5, "r2": "x"}, tag="request")
    assert store.get("k") == {"v": [1, 2]} and store.get_many(["r1", "r2", "nope"]) == {"r1": 1.5, "r2": "x"}
    store.raw.set("k", b"EVF1 0000\n{}", tag="metrics")
    assert store.get("k") is MISSING and store.get("k") is MISSING
    assert store.corrupt == ["k"] and sum("corrupt" in r.message for r in caplog.records) == 1
    store.close()


def test_pickled_rows_are_never_unpickled(tmp_path: Path) -> None:
    store = CacheStore(tmp_path)
    store.put("k", 1, tag="x")
    store.close()
    con = sqlite3.connect(tmp_path / "cache.db")
    con.execute("UPDATE Cache SET mode = 4, value = ? WHERE key = 'k'", (pickle.dumps(("boom",)),))  # MODE_PICKLE
    con.commit()
    con.close()
    store = CacheStore(tmp_path)
    assert store.get("k") is MISSING
    store.close()
