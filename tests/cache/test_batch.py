"""Batched reads and writes leave diskcache's table exactly as its own one-key calls would."""

from __future__ import annotations

import diskcache

from evalflow.cache.batch import BATCH, add_many, delete_many, fetch_many
from evalflow.cache.codec import CorruptEntry
from evalflow.cache.store import CacheStore, Holder


def _raw(store: CacheStore) -> diskcache.Cache:
    return store.raw


def test_added_rows_read_back_through_diskcache(tmp_path):
    store = CacheStore(tmp_path)
    cache = _raw(store)
    big = b"x" * (cache.disk.min_file_size + 10)  # goes to a value file, as Cache.add puts it
    items = {f"k{i}": f"v{i}".encode() for i in range(BATCH + 5)} | {"big": big}
    with cache.transact():
        assert add_many(cache, items, tag="request") == len(items)
    assert cache.get("k3") == b"v3" and cache.get("big") == big
    assert len(cache) == len(items)  # diskcache's count setting, kept by its triggers
    assert cache.volume() > len(big)  # the size setting counts the value file
    tags = dict(cache._sql("SELECT key, tag FROM Cache").fetchall())
    assert set(tags.values()) == {"request"}
    assert fetch_many(cache, ["k1", "big", "absent"]) == {"k1": b"v1", "big": big}


def test_present_keys_are_never_replaced_and_expired_ones_are(tmp_path):
    cache = _raw(CacheStore(tmp_path))
    cache.add("kept", b"old")
    cache.set("stale", b"old", expire=-1)  # already expired
    with cache.transact():
        added = add_many(cache, {"kept": b"new", "stale": b"new", "fresh": b"new"}, tag=None)
    assert added == 2
    assert [cache.get(k) for k in ("kept", "stale", "fresh")] == [b"old", b"new", b"new"]
    assert len(cache) == 3


def test_expiring_entries_and_delete_many(tmp_path):
    cache = _raw(CacheStore(tmp_path))
    with cache.transact():
        add_many(cache, {"lease:a": b"1", "lease:b": b"2"}, tag="lease", expire=-1)
        add_many(cache, {"c": b"x" * (cache.disk.min_file_size + 1)}, tag=None)
    assert fetch_many(cache, ["lease:a", "lease:b"]) == {}  # expired: invisible, as to Cache.get
    files = list(tmp_path.rglob("*.val"))
    assert len(files) == 1
    with cache.transact():
        delete_many(cache, ["lease:a", "c", "never"])
    assert len(cache) == 1 and not any(f.exists() for f in files)


def test_a_foreign_value_file_is_reported_not_read(tmp_path):
    cache = _raw(CacheStore(tmp_path))
    cache._sql(
        "INSERT INTO Cache(key, raw, store_time, expire_time, access_time, access_count, tag, size, mode,"
        " filename, value) VALUES ('evil', 1, 0, NULL, 0, 0, NULL, 1, 2, '../../etc/passwd', NULL)"
    )
    (got,) = fetch_many(cache, ["evil"]).values()
    assert isinstance(got, CorruptEntry)


def test_claim_reports_found_busy_and_leases_the_rest(tmp_path):
    store = CacheStore(tmp_path)
    other = Holder(token="other")  # this process's pid: a live holder
    store.put_many({"done": 1}, tag="request")
    assert store.claim(iter(["held"]), other, 1, ttl=60).claimed == ["held"]
    keys = iter(["done", "held", "a", "b", "c"])
    claim = store.claim(keys, Holder(), limit=2, ttl=60)
    assert (claim.found, claim.busy, claim.claimed, claim.scanned) == ({"done": 1}, ["held"], ["a", "b"], 4)
    assert list(keys) == ["c"]  # the iterator stops at the first key not looked at
    assert len({store.leased()[k].key for k in ("a", "b")}) == 1  # one lease row for the claim
    store.put_many({"a": 2}, tag="request")  # b still open: the row stays (a is found now)
    assert set(store.leased()) == {"held", "a", "b"}
    store.put_many({"b": 3}, tag="request")  # every request of the claim persisted: the row goes
    assert set(store.leased()) == {"held"}
    assert store.claim(iter(["c"]), Holder(), 1, ttl=60).claimed == ["c"]
    store.release(["c"])
    assert store.claim(iter(["a", "b", "c"]), other, 5, ttl=60).claimed == ["c"]
