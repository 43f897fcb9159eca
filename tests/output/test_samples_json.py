"""The samples writer's JSON text is exactly ``json``'s, for rows and for lm-eval's doc_hash text."""

from __future__ import annotations

import json
import math

import pytest

from evalflow.output.samples_json import LONG, indented_doc_json, row_json

CONTEXT = 'Q: "quoted" \\ back\nslash é ✓ \u2028 tab\t' * (LONG // 20)


@pytest.mark.parametrize(
    "row",
    [
        {
            "doc_id": 0,
            "doc": {"q": "x", "choices": ["a", "b"]},
            "target": 1,
            "arguments": {f"gen_args_{i}": {"arg_0": CONTEXT, "arg_1": f" {c}"} for i, c in enumerate("ABCD")},
            "resps": [[[-1.5, False]]],
            "filtered_resps": [[-1.5, False]],
            "acc": 1.0,
            "nan": math.nan,
        },
        {"arguments": {"gen_args_0": {"arg_0": CONTEXT, "arg_1": {"until": ["\n\n"], "do_sample": False}}}},
        {"arguments": {"gen_args_0": {"arg_0": {"image": "<ref>"}}}, "x": None},
        {"arguments": [1, 2]},
        {},
        {1: "a non-string key"},
    ],
)
def test_rows_are_json_dumps(row: dict) -> None:
    assert row_json(row) == json.dumps(row, ensure_ascii=False)


@pytest.mark.parametrize(
    "doc",
    [
        {"question": CONTEXT, "choices": ["a", "", "c"], "answer": 3, "ok": True, "none": None, "empty": [], "obj": {}},
        {"nested": {"list": [[1, 2], {"k": "v"}]}, "big": 2**63 - 1, "neg": -(2**63)},
        {"score": 0.1, "tiny": 1e-7},  # floats: json's own text
        {"lone": "\ud800"},
        {"huge": 2**70},
        {1: "int key"},
        ["a", "b"],
    ],
)
def test_doc_hash_text_is_json_dumps_indent_2(doc: object) -> None:
    assert indented_doc_json(doc) == json.dumps(doc, indent=2, default=str, ensure_ascii=False)
