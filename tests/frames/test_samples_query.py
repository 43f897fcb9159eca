"""A page of samples (``frames.samples.query``) is the same rows as the documented samples_df query,
cut from an index that is built once and never re-reads the file while it is unchanged."""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from evalflow.errors import RunFolderError
from evalflow.frames import samples_df
from evalflow.frames import samples_index as index_module
from evalflow.frames.samples import SampleQuery, query, sample_detail
from evalflow.frames.samples_index import build_index, cache_info, clear_cache, samples_index
from evalflow.output.run_paths import samples_file
from tests.support.runs import Runner
from tests.support.toy_tasks import write_toy_library


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two dummy-model runs under one folder: toy_mc (multiple choice, 2-shot) and toy_gen (generation)."""
    root = tmp_path_factory.mktemp("frames")
    run = Runner(write_toy_library(root), root / "cache", root / "outputs")
    run("toy_mc", num_fewshot=2)
    run("toy_gen")
    return root / "outputs"


def both(df: pd.DataFrame, mask: Any) -> list[tuple[int, str]]:
    return list(zip(df[mask]["doc_id"].tolist(), df[mask]["filter"].tolist()))


def searched(df: pd.DataFrame, t: str) -> Any:
    """The documented text search: prompt, answer or target holds ``t``, case aside."""
    return (
        df["prompt"].str.contains(t, case=False, regex=False)
        | df["answer"].str.contains(t, case=False, regex=False)
        | df["target"].str.contains(t, case=False, regex=False)
    )


def page(folder: Path, task: str, **filters: Any) -> dict[str, Any]:
    return query(folder, samples_file(folder, task), SampleQuery(task, limit=10_000, **filters))


def test_each_filter_is_the_documented_dataframe_query(runs: Path) -> None:
    everything = samples_df([runs])
    assert set(everything["run_id"]) == {"run1", "run2"}
    mc = everything[everything["task"] == "toy_mc"].reset_index(drop=True)
    gen = everything[everything["task"] == "toy_gen"].reset_index(drop=True)
    assert len(mc) == 40 and len(gen) == 40
    assert mc["correct"].notna().all() and 0 < mc["correct"].sum() < 40  # the dummy model gets some right
    t = "plus 3"
    cases: list[tuple[str, Path, pd.DataFrame, dict[str, Any], Any]] = [
        ("toy_mc", runs / "run1", mc, {}, mc["doc_id"] >= 0),
        ("toy_mc", runs / "run1", mc, {"correct": True}, mc["correct"] == True),  # noqa: E712 (the documented query)
        ("toy_mc", runs / "run1", mc, {"correct": False}, mc["correct"] == False),  # noqa: E712
        ("toy_mc", runs / "run1", mc, {"metric": "acc", "value": 1.0}, mc["metric.acc"] == 1.0),
        ("toy_mc", runs / "run1", mc, {"metric": "acc"}, mc["metric.acc"].notna()),
        ("toy_mc", runs / "run1", mc, {"has_image": False}, mc["has_image"] == False),  # noqa: E712
        ("toy_mc", runs / "run1", mc, {"filter": "none"}, mc["filter"] == "none"),
        (
            "toy_mc",
            runs / "run1",
            mc,
            {"text": t, "correct": False},
            searched(mc, t) & (mc["correct"] == False),  # noqa: E712
        ),
        ("toy_gen", runs / "run2", gen, {"text": "5"}, searched(gen, "5")),
        ("toy_gen", runs / "run2", gen, {"verdict": "1"}, gen["verdict"] == "1"),
        ("toy_gen", runs / "run2", gen, {"stop_reason": "eos"}, gen["stop_reason"] == "eos"),
        ("toy_mc", runs / "run1", mc, {"stop_reason": "eos"}, mc["stop_reason"] == "eos"),
    ]
    for task, folder, df, filters, mask in cases:
        got = page(folder, task, **filters)
        assert [(r["doc_id"], r["filter"]) for r in got["rows"]] == both(df, mask), filters
        assert got["total"] == int(mask.sum()), filters
        assert got["total"] > 0 or "verdict" in filters or (task == "toy_mc" and "stop_reason" in filters), filters
    assert page(runs / "run1", "toy_mc", text="WHAT IS 7 PLUS")["total"] == 1  # case-insensitive
    narrow = page(runs / "run1", "toy_mc", text=t, correct=False)["total"]
    assert 0 < narrow < page(runs / "run1", "toy_mc", text=t)["total"]


def test_pages_are_windows_of_the_filtered_rows_in_file_order(runs: Path) -> None:
    folder = runs / "run1"
    whole = page(folder, "toy_mc", correct=False)
    window = query(folder, samples_file(folder, "toy_mc"), SampleQuery("toy_mc", offset=5, limit=7, correct=False))
    assert window["total"] == whole["total"] and window["rows"] == whole["rows"][5:12]
    row = window["rows"][0]
    assert row["correct"] is False and row["metrics"] == {"acc": 0.0} and row["has_image"] is False
    assert window["metrics"] == ["acc"] and window["correct_metric"] == "acc" and window["filters"] == ["none"]
    cut = query(folder, samples_file(folder, "toy_mc"), SampleQuery("toy_mc", correct=False), cut=9)["rows"]
    assert [r["prompt"] for r in cut] == [r["prompt"][:9] for r in whole["rows"][:50]]
    with pytest.raises(ValueError, match="no metric 'bleu'.*'acc'"):
        page(folder, "toy_mc", metric="bleu")


def test_a_warm_query_neither_opens_nor_parses_the_file(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = runs / "run2"
    page(folder, "toy_gen")  # builds the index (and reads the run's results once)
    opened: list[Any] = []
    parsed: list[Any] = []
    real_open, real_loads = builtins.open, index_module.parse_json
    monkeypatch.setattr(builtins, "open", lambda *a, **k: opened.append(a) or real_open(*a, **k))
    monkeypatch.setattr(index_module, "parse_json", lambda data: parsed.append(1) or real_loads(data))
    for filters in ({}, {"correct": False}, {"text": "plus"}, {"filter": "get-answer", "metric": "exact_match"}):
        assert page(folder, "toy_gen", **filters)["total"] > 0
    assert opened == [] and parsed == []


def test_a_changed_file_is_indexed_again_and_the_cache_is_bounded(
    tmp_path: Path, runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = samples_file(runs / "run1", "toy_mc").read_bytes()
    path = tmp_path / "samples_toy_mc.jsonl"
    path.write_bytes(source)
    assert len(samples_index(path)) == 40
    assert samples_index(path) is samples_index(path)  # from memory
    assert sample_detail(path, 0, None)["task"] == "toy_mc"  # no results file beside it (a run still going)
    path.write_bytes(b"".join(source.splitlines(keepends=True)[:30]))
    assert len(samples_index(path)) == 30
    monkeypatch.setattr(index_module, "MAX_FILES", 2)
    clear_cache()
    for n in range(3):
        copy = tmp_path / f"samples_copy{n}.jsonl"
        copy.write_bytes(source)
        samples_index(copy)
    assert cache_info()["files"] == 2 and cache_info()["bytes"] > 0


def test_a_line_still_being_written_is_left_out_and_a_bad_line_named(tmp_path: Path, runs: Path) -> None:
    lines = samples_file(runs / "run1", "toy_mc").read_bytes().splitlines(keepends=True)
    path = tmp_path / "samples_t.jsonl"
    path.write_bytes(b"".join(lines[:5]) + lines[5][:40])
    assert build_index(path).doc_ids.tolist() == [0, 1, 2, 3, 4]
    path.write_bytes(b"".join(lines[:2]) + b"{not json\n" + lines[3])
    with pytest.raises(RunFolderError, match="samples_t.jsonl, line 3: not JSON"):
        build_index(path)
