"""Leases: how processes sharing a cache folder split the model's work (CacheStore.claim and the
inference edge). A lease ends with its holder's process (same host), its expiry, or a release."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from evalflow.cache.codec import decode, encode
from evalflow.cache.store import LEASE, CacheStore, Holder
from evalflow.commands.cache import main as cache_main
from evalflow.core.records import Request
from evalflow.models.dummy import DummyModel
from evalflow.scale.answer_cache import CachedModel, request_key


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_claim_skips_values_and_live_leases_and_takes_dead_ones(tmp_path: Path) -> None:
    store = CacheStore(tmp_path)
    try:
        store.put("done", 1.5, tag="request")
        other = Holder(token="other")  # this process, another holder: alive
        assert store.claim(["held"], other, limit=5, ttl=60).claimed == ["held"]
        store.raw.set(LEASE + "dead", encode(Holder(pid=dead_pid()).as_data()), tag="lease")
        remote = Holder(host="elsewhere", pid=1)  # another host: alive while its heartbeat beats
        store.raw.set(LEASE + "remote", encode(remote.as_data()), tag="lease")

        me = Holder()
        with store.heartbeat(remote):
            claim = store.claim(["done", "held", "dead", "remote", "free", "beyond"], me, limit=2, ttl=60)
        assert claim.found == {"done": 1.5} and claim.busy == ["held", "remote"]
        assert claim.claimed == ["dead", "free"] and claim.scanned == 5  # "beyond": past the limit
        # its heartbeat stopped (the process ended or died): its lease is free at once
        assert store.claim(["remote"], me, limit=1, ttl=60).claimed == ["remote"]

        store.release(["held"])
        assert store.claim(["held"], me, limit=5, ttl=60).claimed == ["held"]
        store.put_many({"dead": 1.0, "free": 2.0}, tag="request")  # values end their leases
        assert not {"dead", "free"} & set(store.leased())  # one lease row covered both: gone
    finally:
        store.close()


def test_expired_leases_are_taken_over(tmp_path: Path) -> None:
    """A lease lasts its ttl, even while its holder is alive and beating: busy to others within
    it, free to them once diskcache's clock (time.time) is past its expiry. The busy check uses a
    long ttl and the expiry check waits for the recorded expiry itself, so neither depends on how
    fast the machine runs."""
    store = CacheStore(tmp_path)
    try:
        remote = Holder(host="elsewhere")
        with store.heartbeat(remote):
            assert store.claim(["long"], remote, limit=1, ttl=3600).claimed == ["long"]
            assert store.claim(["long"], Holder(), limit=1, ttl=60).busy == ["long"]
            before = time.time()
            assert store.claim(["short"], remote, limit=1, ttl=0.05).claimed == ["short"]
            expires = lease_expiry(tmp_path, "short")
            assert before + 0.05 <= expires <= time.time() + 0.05  # written with the ttl it was given
            while (left := expires - time.time()) >= 0:
                time.sleep(left + 0.001)
            claim = store.claim(["short", "long"], Holder(), limit=2, ttl=60)
            assert claim.claimed == ["short"] and claim.busy == ["long"]
    finally:
        store.close()


def lease_expiry(cache: Path, key: str) -> float:
    """The expiry diskcache recorded for the lease row covering ``key``, read from cache.db itself
    (diskcache's own ``get`` hides an entry once it has expired)."""
    with contextlib.closing(sqlite3.connect(cache / "cache.db")) as conn:
        rows = conn.execute("SELECT value, expire_time FROM Cache WHERE key LIKE 'lease:%'").fetchall()
    (expires,) = [e for value, e in rows if key in decode(bytes(value))["keys"]]
    return float(expires)


def test_gc_drops_dead_leases_only(tmp_path: Path) -> None:
    store = CacheStore(tmp_path)
    store.raw.set(LEASE + "dead", encode(Holder(pid=dead_pid()).as_data()), tag="lease")
    store.raw.set(LEASE + "live", encode(Holder().as_data()), tag="lease")
    store.close()
    assert cache_main(["gc", f"cache_dir={tmp_path}"]) == 0
    store = CacheStore(tmp_path)
    try:
        assert LEASE + "live" in store.raw and LEASE + "dead" not in store.raw
    finally:
        store.close()


class MeetingModel(DummyModel):
    """The dummy model, answering its first chunk only once the other edge's model has a chunk too
    (``meet``, a two-party barrier): both edges then provably compute, however the threads run."""

    def __init__(self, meet: threading.Barrier) -> None:
        super().__init__()
        self.meet = meet
        self.seen: list[Request] = []

    def loglikelihood(self, requests):  # type: ignore[no-untyped-def]
        if not self.seen:
            self.meet.wait(timeout=60)  # BrokenBarrierError: the other edge never got a chunk to compute
        self.seen.extend(requests)
        return super().loglikelihood(requests)


def test_two_edges_on_one_folder_compute_each_request_once(tmp_path: Path) -> None:
    """Two holders (threads here; processes in test_concurrency) asking for the same requests at
    once: one computes each chunk, the other waits for it and serves it from the cache. Each
    edge's first chunk waits for the other's, so both hold work at the same moment."""
    requests = [Request("loglikelihood", (f"context {i}", " answer")) for i in range(40)]
    meet = threading.Barrier(2)
    models = [MeetingModel(meet), MeetingModel(meet)]
    answers: list[list] = [[], []]
    errors: list[BaseException] = []

    def ask(i: int) -> None:
        store = CacheStore(tmp_path)
        try:
            edge = CachedModel(store, "ident", lambda: models[i], chunk_size=8, poll_seconds=0.01)
            answers[i] = edge.loglikelihood(requests)
        except BaseException as exc:  # reported below; and the other edge must not wait for this one
            errors.append(exc)
            meet.abort()
        finally:
            store.close()

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "an edge still runs after 120 s"
    assert not errors, errors
    assert answers[0] == answers[1] == [list(a) for a in DummyModel().loglikelihood(requests)]
    computed = [r for m in models for r in m.seen]
    assert len(computed) == len(set(computed)) == 40 and all(models[i].seen for i in range(2))
    store = CacheStore(tmp_path)
    try:
        assert {request_key("ident", r) for r in requests} <= set(store.raw.iterkeys())
        assert not [k for k in store.raw.iterkeys() if str(k).startswith(LEASE)]
    finally:
        store.close()
