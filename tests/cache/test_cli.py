from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from evalflow.cache.store import CacheStore
from evalflow.commands.cache import main
from evalflow.errors import ConfigError


def filled(tmp_path: Path) -> Path:
    store = CacheStore(tmp_path)
    store.put("metrics:a", {"x": 1}, tag="metrics")
    store.put_many({f"request:{i}": [-1.0, False] for i in range(5)}, tag="request")
    store.close()
    return tmp_path


def test_stats_counts_entries_per_stage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", f"cache_dir={filled(tmp_path)}"]) == 0
    out = capsys.readouterr().out
    assert "request" in out and " 5 entries" in out and " 6 entries" in out


def test_verify_fails_on_a_corrupt_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    filled(tmp_path)
    assert main(["verify", f"cache_dir={tmp_path}"]) == 0
    con = sqlite3.connect(tmp_path / "cache.db")
    con.execute("UPDATE Cache SET value = ? WHERE key = 'metrics:a'", (b"EVF1 0\n{}",))
    con.commit()
    con.close()
    assert main(["verify", f"cache_dir={tmp_path}"]) == 1
    assert "metrics:a" in capsys.readouterr().err


def test_gc_by_size_and_clear(tmp_path: Path) -> None:
    filled(tmp_path)
    assert main(["gc", f"cache_dir={tmp_path}", "max_age_days=0"]) == 0
    store = CacheStore(tmp_path)
    assert len(store.raw) == 0
    store.close()
    filled(tmp_path)
    assert main(["clear", f"cache_dir={tmp_path}"]) == 0


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        main(["purge"])
    with pytest.raises(ConfigError):
        main(["stats", "dir=/x"])


def test_side_folders_are_listed_swept_of_stale_temporaries_and_cleared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os
    import time

    filled(tmp_path)
    memo = tmp_path / "gguf-weights"
    (memo / "abc").mkdir(parents=True)
    (memo / "abc" / "model.safetensors").write_bytes(b"x" * 1000)
    stale, fresh = memo / "def.tmp-123", memo / "ghi.tmp-456"
    stale.mkdir()
    fresh.mkdir()
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    assert main(["stats", f"cache_dir={tmp_path}"]) == 0
    assert "side folder gguf-weights/" in capsys.readouterr().out
    capsys.readouterr()
    assert main(["gc", f"cache_dir={tmp_path}"]) == 0
    assert (
        "removed 0 entries, 0 orphan value files, 1 half-written memo temporaries and 0 memos"
        in capsys.readouterr().out
    )
    assert not stale.exists() and fresh.exists() and (memo / "abc").exists()  # a memo being written is left alone
    assert main(["clear", f"cache_dir={tmp_path}"]) == 0
    assert not memo.exists() and (tmp_path / "cache.db").exists()


def test_clear_works_on_a_damaged_index_and_removes_only_evalflow_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 9.8: `clear` is the escape hatch, so it must not need a readable cache.db."""
    filled(tmp_path)
    store = CacheStore(tmp_path)
    store.put("big", "x" * 100_000, tag="metrics")  # a value file under two hex folders
    store.close()
    (tmp_path / "gguf-weights").mkdir()
    (tmp_path / "notes.txt").write_text("mine")
    with open(tmp_path / "cache.db", "r+b") as fh:
        fh.truncate(5000)
    assert main(["verify", f"cache_dir={tmp_path}"]) == 1
    assert "damaged" in capsys.readouterr().out
    assert main(["clear", f"cache_dir={tmp_path}"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    store = CacheStore(tmp_path)  # a new, working cache in the same folder
    store.put("metrics:a", 1, tag="metrics")
    assert store.get("metrics:a") == 1
    store.close()


def test_commands_on_a_missing_folder_do_not_create_it(tmp_path: Path) -> None:
    typo = tmp_path / "no-such-cache"
    for command in ("verify", "stats", "gc"):
        with pytest.raises(ConfigError, match="no cache at"):
            main([command, f"cache_dir={typo}"])
    assert main(["clear", f"cache_dir={typo}"]) == 0
    assert not typo.exists()
