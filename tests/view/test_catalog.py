"""The catalog keeps a finished run's payloads while its results file stays the same, computes
them again once the file changes, never keeps a running run's, and drops the oldest past its size."""

from __future__ import annotations

import os
from pathlib import Path

import evalflow.view.payloads as payloads
from evalflow.frames.discovery import RunEntry
from evalflow.view.payloads import Catalog
from tests.support.runs import Runner


def test_payloads_are_kept_by_the_results_files_stamp(runner: Runner, tmp_path: Path, monkeypatch) -> None:
    _, _, folder = runner("toy_mc", model="dummy", limit=5)
    catalog = Catalog([folder.parent])
    (entry,) = catalog.entries.values()
    calls: list[int] = []

    def compute() -> int:
        calls.append(1)
        return len(calls)

    assert [catalog.memo(("summary",), [entry], compute) for _ in range(3)] == [1, 1, 1]
    results = entry.results
    assert results is not None
    stat = results.stat()
    os.utime(results, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # the run written again
    assert catalog.memo(("summary",), [entry], compute) == 2
    running = RunEntry(id="x", folder=folder, layout="evalflow", results=None)
    assert [catalog.memo(("summary",), [running], compute) for _ in range(2)] == [3, 4]
    monkeypatch.setattr(payloads, "MEMO_HEAVY", 2)
    for n in range(3):
        catalog.memo(("compare", n), [entry], compute)
    assert catalog.memo(("compare", 0), [entry], compute) == len(calls), "the oldest was dropped"
    assert catalog.memo(("compare", 2), [entry], compute) == len(calls) - 1, "the newest was kept"
