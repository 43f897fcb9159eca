"""Cache integrity end to end: entries of a real run's cache damaged on disk are reported once,
recomputed, and the results do not change; ``cache verify`` finds them first.

Small values live inside SQLite (cache.db); values of 32 KB or more are files under the cache
folder (diskcache's MODE_BINARY), which can be truncated or deleted on their own: both kinds are
covered. The cache folder's own instructions (its Settings table, the file names in its rows) are
not trusted either: a cache received from someone else cannot make evalflow read or delete files
outside it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from evalflow.cache.codec import decode
from evalflow.cache.store import CacheStore
from evalflow.commands.cache import main as cache_main
from tests.support.reliability import calls, cli, results_of, toy_args

SHOTS = "num_fewshot=3"  # long prompts: the instances entries of toy_mc exceed 32 KB (a value file)


def rows(cache: Path) -> list[tuple[str, str | None, int | None]]:
    """(key, value file or None, inline value length) of every entry."""
    con = sqlite3.connect(cache / "cache.db")
    try:
        return con.execute("SELECT key, filename, LENGTH(value) FROM Cache").fetchall()
    finally:
        con.close()


def update_value(cache: Path, key: str, value: bytes) -> None:
    con = sqlite3.connect(cache / "cache.db")
    con.execute("UPDATE Cache SET value = ? WHERE key = ?", (value, key))
    con.commit()
    con.close()


def inline_value(cache: Path, key: str) -> bytes:
    con = sqlite3.connect(cache / "cache.db")
    try:
        return bytes(con.execute("SELECT value FROM Cache WHERE key = ?", (key,)).fetchone()[0])
    finally:
        con.close()


@pytest.fixture
def filled(toy_library: Path, tmp_path: Path) -> tuple[Path, dict]:
    cache = tmp_path / "cache"
    done = cli(toy_args(toy_library, cache, tmp_path / "first", SHOTS))
    assert done.returncode == 0, done.stderr
    return cache, results_of(tmp_path / "first")


def test_damaged_entries_are_reported_once_and_recomputed(
    toy_library: Path, tmp_path: Path, filled, capsys: pytest.CaptureFixture[str]
) -> None:
    cache, first = filled
    entries = rows(cache)
    ((big_key, big_file),) = [
        (key, name) for key, name, _ in entries if name and key.startswith("instances:")
    ]  # toy_mc's
    inline = [key for key, name, _ in entries if not name]
    # toy_mc's inference stage: the one with (logprob, is_greedy) answers; re-running it reads the
    # per-request entries, among them a damaged one of toy_mc's
    stage_key = next(k for k in inline if k.startswith("inference:") and b"[[" in inline_value(cache, k))
    request_key = next(
        k for k in inline if k.startswith("request:") and isinstance(decode(inline_value(cache, k)), list)
    )

    update_value(cache, stage_key, inline_value(cache, stage_key).replace(b"true", b"fals", 1))  # bad checksum
    update_value(cache, request_key, inline_value(cache, request_key)[:-4])  # truncated
    (cache / big_file).write_bytes((cache / big_file).read_bytes()[:20000])  # truncated value file
    done = cli(["cache", "verify", f"cache_dir={cache}"])
    assert done.returncode == 1 and "Traceback" not in done.stderr and "3 corrupt" in done.stdout
    for key in (stage_key, request_key, big_key):
        assert done.stderr.count(key) == 1, (key, done.stderr)

    log = tmp_path / "calls"
    again = cli(toy_args(toy_library, cache, tmp_path / "again", SHOTS), {"EVALFLOW_TEST_CALL_LOG": str(log)})
    assert again.returncode == 0, again.stderr
    for key in (stage_key, request_key, big_key):
        assert (again.stdout + again.stderr).count(f"cache entry {key}") == 1, (key, again.stdout + again.stderr)
    assert results_of(tmp_path / "again")["results"] == first["results"]
    assert calls(log) == 1  # the damaged response, and nothing else, went back to the model
    assert missed_stages(tmp_path / "again") == {("toy_mc", "instances"), ("toy_mc", "inference")}

    (new_file,) = [name for key, name, _ in rows(cache) if name and key.startswith("instances:")]
    (cache / new_file).unlink()  # a value file lost on its own
    assert cache_main(["verify", f"cache_dir={cache}"]) == 1 and big_key in capsys.readouterr().err
    third = cli(toy_args(toy_library, cache, tmp_path / "third", SHOTS), {"EVALFLOW_TEST_CALL_LOG": str(log)})
    assert third.returncode == 0, third.stderr
    assert (third.stdout + third.stderr).count(f"cache entry {big_key}") == 1
    assert results_of(tmp_path / "third")["results"] == first["results"]
    assert missed_stages(tmp_path / "third") == {("toy_mc", "instances")} and calls(log) == 1  # no new call
    assert cache_main(["verify", f"cache_dir={cache}"]) == 0


def missed_stages(run_dir: Path) -> set[tuple[str, str]]:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    return {(e["task"], e["stage"]) for e in manifest["stages"] if not e["hit"]}


def test_stats_and_gc_on_a_real_cache(tmp_path: Path, filled) -> None:
    cache, _ = filled
    done = cli(["cache", "stats", f"cache_dir={cache}"])
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line.split() for line in done.stdout.splitlines()[1:]}
    for stage in ("load_docs", "fewshot", "instances", "inference", "filters", "metrics", "aggregate", "request"):
        assert stage in lines and lines[stage][2] == "entries" and lines[stage][4] == "MB", done.stdout
    assert int(lines["request"][1]) == 200 and int(lines["total"][1]) == len(rows(cache))
    assert float(lines["instances"][3]) > float(lines["aggregate"][3])

    (kept,) = [name for key, name, _ in rows(cache) if name and key.startswith("instances:")]
    orphan, fresh = cache / "ab" / "cd" / ("0" * 28 + ".val"), cache / "ab" / "cd" / ("1" * 28 + ".val")
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"left by a killed run")
    fresh.write_bytes(b"being written now")
    os.utime(orphan, (time.time() - 7200, time.time() - 7200))
    os.utime(cache / kept, (time.time() - 7200, time.time() - 7200))
    assert cache_main(["gc", f"cache_dir={cache}", "max_age_days=1"]) == 0  # nothing is a day old
    assert len(rows(cache)) == int(lines["total"][1])
    assert not orphan.exists() and fresh.exists() and (cache / kept).exists()
    assert cache_main(["gc", f"cache_dir={cache}", "max_size_gb=0"]) == 0  # a zero budget empties it
    assert rows(cache) == [] and list(cache.glob("*/*/*.val")) == [fresh]


def test_a_received_cache_cannot_point_evalflow_at_other_files(tmp_path: Path, filled) -> None:
    cache, _ = filled
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    key = next(k for k, name, _ in rows(cache) if name)
    con = sqlite3.connect(cache / "cache.db")
    con.execute("UPDATE Cache SET filename = ? WHERE key = ?", (str(victim), key))
    con.execute("INSERT OR REPLACE INTO Settings VALUES ('sqlite_mmap_size', 1)")
    con.commit()
    con.close()
    store = CacheStore(cache)
    try:
        assert store.check(key) is not None  # refused, not read
        assert store.raw.reset("sqlite_mmap_size", update=False) == 2**26  # the pinned pragma, not the folder's
        assert store.get(key) is not None and store.corrupt == [key]
    finally:
        store.close()
    assert cache_main(["clear", f"cache_dir={cache}"]) == 0
    assert victim.read_text() == "keep me"
