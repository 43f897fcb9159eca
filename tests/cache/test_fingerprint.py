from __future__ import annotations

import math
from pathlib import Path

import pytest

from evalflow.cache.fingerprint import UnhashableError, file_fingerprint, fingerprint
from evalflow.core.records import Request
from evalflow.taskspec.format.spec import FunctionRef


def test_mapping_order_and_sequence_kind_do_not_matter() -> None:
    assert fingerprint({"a": 1, "b": [1, 2]}) == fingerprint({"b": (1, 2), "a": 1})


@pytest.mark.parametrize(
    "a,b",
    [
        (1, 1.0),
        (1, True),
        ("1", 1),
        (None, "None"),
        ({"a": 1}, {"a": 2}),
        ([1, 2], [2, 1]),
        (["ab"], ["a", "b"]),
        (0.1, 0.1000000001),
        (Request("loglikelihood", ("a", "b")), Request("loglikelihood", ("a", "b"), repeat=1)),
    ],
)
def test_different_values_give_different_fingerprints(a: object, b: object) -> None:
    assert fingerprint(a) != fingerprint(b)


def test_nan_is_stable() -> None:
    assert fingerprint(math.nan) == fingerprint(float("nan"))


def test_unknown_types_are_refused() -> None:
    with pytest.raises(UnhashableError):
        fingerprint(object())
    with pytest.raises(UnhashableError):
        fingerprint({1: "non-string key"})


def test_function_ref_hashes_its_source_not_its_path() -> None:
    a = FunctionRef("/a/utils.py", "process_docs", "h1")
    assert fingerprint(a) == fingerprint(FunctionRef("/b/utils.py", "process_docs", "h1"))
    assert fingerprint(a) != fingerprint(FunctionRef("/a/utils.py", "process_docs", "h2"))


def test_file_fingerprint_is_content_not_path(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"x": 1}\n')
    (tmp_path / "b.jsonl").write_text('{"x": 1}\n')
    assert file_fingerprint(tmp_path / "a.jsonl") == file_fingerprint(tmp_path / "b.jsonl")
    (tmp_path / "b.jsonl").write_text('{"x": 2}\n')
    assert file_fingerprint(tmp_path / "a.jsonl") != file_fingerprint(tmp_path / "b.jsonl")
