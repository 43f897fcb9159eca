"""Local JSON Lines read without ``datasets`` give exactly its rows, or are left to it.

Each case writes a small data set and loads it both ways; where the direct reader declines
(returns None) the case says why datasets' Arrow round trip would change the values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalflow.taskspec.data.jsonl import read_jsonl_splits

datasets = pytest.importorskip("datasets")


def _write(folder: Path, splits: dict[str, list[Any]], raw: dict[str, str] | None = None) -> dict[str, tuple[str, ...]]:
    files = {}
    for split, rows in splits.items():
        path = folder / f"{split}.jsonl"
        path.write_text(
            (raw or {}).get(split) or "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
        )
        files[split] = (str(path),)
    return files


def _read(files: dict[str, tuple[str, ...]]) -> Any:
    return read_jsonl_splits("json", None, {"data_files": {k: v[0] for k, v in files.items()}}, files)


def _exact(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_exact(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_exact(x, y) for x, y in zip(a, b))
    return a == b


def test_plain_rows_equal_datasets_rows(tmp_path: Path) -> None:
    rows = [
        {"question": 'Q é "quoted"\n', "choices": ["a", "b", "c"], "answer": 2, "ok": True, "score": 0.1},
        {"question": "Second", "choices": ["d"], "answer": -7, "ok": False, "score": 1e-07},
    ]
    files = _write(tmp_path, {"test": rows, "dev": rows[:1]})
    got = _read(files)
    assert got is not None
    loaded = datasets.load_dataset(
        "json", data_files={k: v[0] for k, v in files.items()}, cache_dir=str(tmp_path / "hf")
    )
    assert sorted(got) == sorted(loaded)
    for split in loaded:
        assert _exact(got[split], list(loaded[split]))


@pytest.mark.parametrize(
    "rows, why",
    [
        ([{"a": "x", "b": 1}, {"a": "y"}], "a missing key becomes null"),
        ([{"a": "x", "b": 1}, {"b": 2, "a": "y"}], "key order differs"),
        ([{"a": 1}, {"a": 1.5}], "ints and floats mix: all become floats"),
        ([{"a": "2021-01-01"}, {"a": "2022-02-02"}], "ISO dates become timestamps"),
        ([{"a": {"b": 1}}, {"a": {"c": 2}}], "objects become structs filled out with nulls"),
        ([{"a": []}, {"a": ["x"]}], "an empty list"),
        ([{"a": None}, {"a": "x"}], "a null"),
        ([{"a": 2**63}], "an integer beyond int64 (Arrow reads a double)"),
    ],
)
def test_declines_what_arrow_would_change(tmp_path: Path, rows: list[Any], why: str) -> None:
    assert _read(_write(tmp_path, {"test": rows})) is None, why


def test_declines_splits_whose_columns_differ(tmp_path: Path) -> None:
    """datasets casts every split to the first split's schema."""
    assert _read(_write(tmp_path, {"test": [{"a": "x"}], "dev": [{"a": 1}]})) is None


@pytest.mark.parametrize("text", ['{"a": "x"}\n\n{"a": "y"}\n', '{"a": "x"}\r\n', '["x"]\n', '{"a": NaN}\n', ""])
def test_declines_unusual_files(tmp_path: Path, text: str) -> None:
    assert _read(_write(tmp_path, {"test": []}, raw={"test": text or " "})) is None


def test_declines_other_builders_and_arguments(tmp_path: Path) -> None:
    files = _write(tmp_path, {"test": [{"a": "x"}]})
    data_files = {"test": files["test"][0]}
    assert read_jsonl_splits("csv", None, {"data_files": data_files}, files) is None
    assert read_jsonl_splits("json", "cfg", {"data_files": data_files}, files) is None
    assert read_jsonl_splits("json", None, {"data_files": data_files, "field": "rows"}, files) is None
    assert read_jsonl_splits("json", None, {"data_files": data_files}, files) == {"test": [{"a": "x"}]}


def test_declines_file_patterns(tmp_path: Path) -> None:
    """Files found by a pattern are in datasets' order, which is datasets' business."""
    files = _write(tmp_path, {"test": [{"a": "x"}]})
    pattern = {"test": str(tmp_path / "te*.jsonl")}
    assert read_jsonl_splits("json", None, {"data_files": pattern}, files) is None
