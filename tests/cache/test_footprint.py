"""The cache's footprint (issue 20, item 6): `cache stats` counts everything the folder holds, `cache
gc max_size_gb=` bounds everything (least recently used first, converted weights included), and
converted weights live in one shared place that a fresh cache_dir or $EVALFLOW_CACHE does not move."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from evalflow.cache.store import CacheStore
from evalflow.cache.upkeep import folder_bytes
from evalflow.commands.cache import main


def with_memo(folder: Path, megabytes: float, used: float) -> Path:
    """A finished memo of the given size, last used at ``used`` (seconds since the epoch)."""
    memo = folder / "gguf-weights" / f"m{megabytes}"
    memo.mkdir(parents=True)
    (memo / "model.safetensors").write_bytes(b"w" * int(megabytes * 1e6))
    (memo / "memo.json").write_text(json.dumps({"weights": "x"}))
    os.utime(memo / "memo.json", (used, used))
    return memo


def test_stats_reports_every_byte_of_the_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = CacheStore(tmp_path)
    store.put("metrics:a", {"x": 1}, tag="metrics")
    store.close()
    with_memo(tmp_path, 2.0, time.time())
    assert main(["stats", f"cache_dir={tmp_path}"]) == 0
    reported = float(re.search(r"\(([\d.]+) MB on disk", capsys.readouterr().out).group(1))
    assert (
        reported == pytest.approx(folder_bytes(tmp_path) / 1e6, abs=0.15) and reported >= 2.0
    )  # ± the open index's journal


def test_gc_max_size_bounds_entries_and_memos_least_recently_used_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = CacheStore(tmp_path)
    store.put_many({f"inference:{i}": "y" * 200_000 for i in range(4)}, tag="inference")  # 0.8 MB in value files
    store.close()
    old = with_memo(tmp_path, 1.5, time.time() - 86400)  # used yesterday: goes first
    recent = with_memo(tmp_path, 0.5, time.time() + 60)  # used after every entry was stored: goes last
    assert folder_bytes(tmp_path) > 2.5e6
    assert main(["gc", f"cache_dir={tmp_path}", "max_size_gb=0.0013"]) == 0
    assert "and 1 memos" in capsys.readouterr().out
    assert not old.exists() and recent.exists()
    assert folder_bytes(tmp_path) <= 1.3e6


def test_converted_weights_live_in_one_place_whatever_the_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalflow.models.hf.gguf_memo import memo_folder

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 64)
    monkeypatch.delenv("EVALFLOW_WEIGHTS_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))
    places = set()
    for fresh in ("ci-job-1", "ci-job-2"):
        monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path / fresh))
        places.add(memo_folder(gguf, "float32", None))
    [place] = places
    assert place.parent == tmp_path / "home-cache" / "evalflow" / "gguf-weights"
    monkeypatch.setenv("EVALFLOW_WEIGHTS_DIR", str(tmp_path / "weights"))
    assert memo_folder(gguf, "float32", None) == tmp_path / "weights" / place.name  # keyed by the file's hash
