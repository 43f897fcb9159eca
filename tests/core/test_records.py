"""The records that flow between the stages: frozen (a stage never mutates what it was given), and a
sampled request's seed the same in every process, batch and replica that answers it."""

from __future__ import annotations

import dataclasses
import inspect
import os
import subprocess
import sys

import pytest

from evalflow.core import records
from evalflow.core.records import Request
from tests.support.paths import ROOT

RECORDS = [c for _, c in inspect.getmembers(records, inspect.isclass) if c.__module__ == records.__name__]


def test_there_are_records_and_each_is_a_dataclass() -> None:
    assert {"DocSet", "Request", "Instance", "Scores", "TaskResult"} <= {c.__name__ for c in RECORDS}
    assert [c.__name__ for c in RECORDS if not dataclasses.is_dataclass(c)] == []


@pytest.mark.parametrize("record", RECORDS, ids=lambda c: c.__name__)
def test_every_record_is_frozen(record: type) -> None:
    assert record.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_a_record_refuses_to_change() -> None:
    request = Request("generate_until", ("Q:", {"until": ["\n"]}), repeat=1, seed=7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.repeat = 2  # type: ignore[misc]


def test_sample_seeds_differ_by_repeat_and_agree_across_processes() -> None:
    """Another interpreter, with another string-hash seed, gives each repeat the same sampling seed."""
    seeds = [Request("generate_until", ("Q:", {}), repeat=k, seed=1234).sample_seed() for k in range(8)]
    assert len(set(seeds)) == 8
    code = (
        "from evalflow.core.records import Request;"
        "print([Request('generate_until', ('Q:', {}), repeat=k, seed=1234).sample_seed() for k in range(8)])"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "12345"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(seeds)
