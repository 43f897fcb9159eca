"""A cache that is safe on clusters: network file systems refused, node-local caches merged,
and leases of processes that died on another host freed within the heartbeat time."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from evalflow.cache import filesystem
from evalflow.cache.store import ALIVE, CacheStore, Holder
from evalflow.core.records import Request
from evalflow.errors import CacheError
from evalflow.models.dummy import DummyModel
from evalflow.scale.answer_cache import CachedModel
from tests.support.scale_runs import outcome, run_once

ROOT = Path(__file__).resolve().parents[2]


def test_a_cache_dir_on_a_network_file_system_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = tmp_path / "mounts"
    table.write_text(f"/dev/sda1 / ext4 rw 0 0\nfiler:/export/scratch {tmp_path / 'scratch'} nfs4 rw,vers=4.2 0 0\n")
    monkeypatch.setattr(filesystem, "MOUNTS", table)
    CacheStore(tmp_path / "local").close()  # ext4: fine
    with pytest.raises(CacheError, match=r"network file system \(nfs4\).*cache merge"):
        CacheStore(tmp_path / "scratch" / "me" / "cache")
    assert filesystem.filesystem_type(tmp_path / "scratch", table.read_text()) == "nfs4"
    for kind in ("lustre", "gpfs", "cifs"):
        assert kind in filesystem.NETWORK_TYPES


def test_merge_of_two_half_runs_equals_one_whole_run(
    toy_library: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A two-task run split over two nodes (one task each, each its own cache), merged: the same
    cache as the whole run on one node, and a third run on it computes nothing."""
    run_once(toy_library, tmp_path / "whole", tmp_path / "w", task=["toy_mc", "toy_gen"])
    run_once(toy_library, tmp_path / "shard-a", tmp_path / "a", task="toy_mc")
    run_once(toy_library, tmp_path / "shard-b", tmp_path / "b", task="toy_gen")
    from evalflow.commands.cache import main

    assert (
        main(["merge", str(tmp_path / "shard-a"), str(tmp_path / "shard-b"), f"cache_dir={tmp_path / 'merged'}"]) == 0
    )
    assert "0 damaged" in capsys.readouterr().out
    whole = _entries(tmp_path / "whole")
    assert _entries(tmp_path / "merged") == whole and len(whole) > 200
    _, again = run_once(toy_library, tmp_path / "merged", tmp_path / "c", task=["toy_mc", "toy_gen"])
    assert again["inference"] == {"requests": 200, "computed": 0, "cached": 200}
    assert all(e["hit"] for e in again["stages"])
    assert outcome(tmp_path / "c") == outcome(tmp_path / "w")
    # merging again changes nothing (idempotent)
    assert main(["merge", str(tmp_path / "shard-a"), f"cache_dir={tmp_path / 'merged'}"]) == 0
    assert "0 entries copied" in capsys.readouterr().out and _entries(tmp_path / "merged") == whole


def test_damaged_entries_in_a_shard_are_skipped_and_counted(
    toy_library: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run_once(toy_library, tmp_path / "shard", tmp_path / "a", limit=10)
    with sqlite3.connect(tmp_path / "shard" / "cache.db") as conn:
        key, value = conn.execute("SELECT key, value FROM Cache WHERE tag = 'request' AND value IS NOT NULL").fetchone()
        conn.execute("UPDATE Cache SET value = ? WHERE key = ?", (value[:-2] + b"!}", key))
    from evalflow.commands.cache import main

    assert main(["merge", str(tmp_path / "shard"), f"cache_dir={tmp_path / 'merged'}"]) == 0
    assert "1 damaged and skipped" in capsys.readouterr().out
    assert (
        key not in _keys(tmp_path / "merged") and len(_keys(tmp_path / "merged")) == len(_keys(tmp_path / "shard")) - 1
    )


def test_merge_refuses_a_folder_that_is_not_a_cache(tmp_path: Path) -> None:
    from evalflow.commands.cache import main

    with pytest.raises(CacheError, match="not an evalflow cache folder"):
        main(["merge", str(tmp_path), f"cache_dir={tmp_path / 'dst'}"])


def test_a_lease_of_a_dead_process_on_another_host_is_taken_over_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = CacheStore(tmp_path)
    remote = Holder(host="node-b.cluster", pid=4242)
    reqs = [Request("loglikelihood", (f"q{i}", " a")) for i in range(4)]
    edge = CachedModel(store, "m", lambda: DummyModel(), chunk_size=2, on_chunk=None, lease_seconds=3600)
    from evalflow.scale.answer_cache import request_key

    keys = [request_key("m", r) for r in reqs]
    claim = store.claim(iter(keys), remote, 4, ttl=3600)  # node b leased everything, then died
    assert claim.claimed == keys
    with caplog.at_level(logging.INFO, logger="evalflow.scale.answer_cache"):
        assert len(edge.loglikelihood(reqs)) == 4
    assert edge.counts.computed == 4  # computed here, and at once: the edge never waited for node b
    assert not [r for r in caplog.records if "another process is computing" in r.getMessage()]
    store.close()


def test_a_live_holder_on_another_host_keeps_its_leases_until_its_heartbeat_stops(tmp_path: Path) -> None:
    """Node b's heartbeat entry outlives its first expiry because the beats re-write it: the claim
    that finds the lease busy is made after a beat written past that first expiry (seen in
    cache.db), not after a sleep that a loaded machine may stretch beyond the next beat."""
    store = CacheStore(tmp_path)
    remote = Holder(host="node-b.cluster", pid=4242)
    me = Holder()
    with store.heartbeat(remote, ttl=3.0):  # node b is alive and beating, every second
        assert store.claim(iter(["k"]), remote, 1, ttl=3600).claimed == ["k"]
        first = heartbeat_expiry(tmp_path, remote)
        wait_for(lambda: heartbeat_expiry(tmp_path, remote) - 3.0 > first, "a beat after the first expiry", 60)
        assert store.claim(iter(["k"]), me, 1, ttl=3600).busy == ["k"]
    # node b stopped beating (it ended, or died and its heartbeat expired)
    assert store.claim(iter(["k"]), me, 1, ttl=3600).claimed == ["k"]
    assert store.leased()["k"].holder["token"] == me.token
    store.close()


def heartbeat_expiry(cache: Path, holder: Holder) -> float:
    """When ``holder``'s heartbeat entry expires, as its last beat wrote it (cache.db itself)."""
    with contextlib.closing(sqlite3.connect(cache / "cache.db")) as conn:
        (expires,) = conn.execute("SELECT expire_time FROM Cache WHERE key = ?", (ALIVE + holder.token,)).fetchone()
    return float(expires)


def wait_for(condition: Callable[[], bool], what: str, timeout: float) -> None:
    """Return once ``condition()`` holds; fail the test if it has not within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f} s"
        time.sleep(0.05)


def test_a_killed_holder_on_another_host_is_dead_once_its_heartbeat_expires(tmp_path: Path) -> None:
    """A process that claims under another host name and is SIGKILLed: its heartbeat is not
    deleted, it expires; its leases are free after the heartbeat ttl, not the lease ttl."""
    code = (
        "import sys, time\n"
        "from evalflow.cache.store import CacheStore, Holder\n"
        "s = CacheStore(sys.argv[1]); h = Holder(host='node-b.cluster')\n"
        "with s.heartbeat(h, ttl=2.0):\n"
        "    s.claim(iter(['k']), h, 1, ttl=3600); print('leased', flush=True); time.sleep(600)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "leased"
        store = CacheStore(tmp_path)
        assert store.claim(iter(["k"]), Holder(), 1, ttl=3600).busy == ["k"]
        proc.kill()
        proc.wait(timeout=30)
        wait_for(
            lambda: store.claim(iter(["k"]), Holder(), 1, ttl=3600).claimed == ["k"],
            "claim of the lease once the heartbeat expired",
            30,
        )
        store.close()
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _keys(cache: Path, tag: str | None = None) -> set[str]:
    with sqlite3.connect(cache / "cache.db") as conn:
        rows = conn.execute("SELECT key, tag FROM Cache").fetchall()
    return {k for k, t in rows if (tag is None or t == tag) and not k.startswith(("lease:", "alive:"))}


def _entries(cache: Path) -> dict[str, object]:
    store = CacheStore(cache)
    try:
        return {k: store.get(k) for k in _keys(cache)}
    finally:
        store.close()
