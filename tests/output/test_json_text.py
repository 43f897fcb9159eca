"""The run folder's JSON (manifest.json, results.json) is byte for byte what ``json`` writes."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from evalflow.output.json_text import indented_json


@dataclasses.dataclass
class Point:
    x: int


VALUES = [
    {"stages": [{"task": "t", "hit": True, "seconds": 0.0123, "inputs": {"a": [1, 2, None]}}], "empty": {}, "none": []},
    {"floats": [1e16, 1e-05, 1.5e300, -0.0, 0.1, 123456789.125, 2.5e-320]},  # exponents orjson writes otherwise
    {"nan": math.nan, "inf": [math.inf, -math.inf]},
    {"big": 2**64, "small": -(2**63) - 1, "ok": 2**63},
    {"tuple": (1, "a"), "dataclass": Point(1)},
    {1: "int key"},
    {"text": 'ünïcode \u2028 "quoted" \\ \n \t', "surrogate": "\ud800"},
    "plain string",
    3,
    2.5,
    None,
    [],
]


@pytest.mark.parametrize("value", VALUES)
def test_indented_json_is_json_dumps(value: object) -> None:
    assert indented_json(value) == json.dumps(value, indent=2, ensure_ascii=False, default=str)
