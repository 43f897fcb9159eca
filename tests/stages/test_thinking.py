"""Reasoning models: the thinking part is cached and logged, but only the answer after it is scored."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalflow import evaluate
from evalflow.core.records import Request
from evalflow.stages.filters import without_thinking


class ThinkingModel:
    """Thinks out loud (with a wrong number), then answers the sum asked in the prompt."""

    def __init__(self) -> None:
        self.calls = 0

    def identity(self) -> dict[str, Any]:
        return {"name": "thinker"}

    def generate_until(self, requests: Sequence[Request]) -> list[str]:
        self.calls += len(requests)
        out = []
        for r in requests:
            a, b = map(int, re.findall(r"What is (\d+) plus (\d+)\?\nAnswer:$", r.args[0])[0])
            out.append(f"<think>maybe #### {a * b}\n\nno</think>\n#### {a + b}")
        return out

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        raise AssertionError("not used")

    loglikelihood_rolling = loglikelihood


def test_without_thinking_cuts_the_trace_then_the_stop_sequences() -> None:
    assert without_thinking("<think>a\n\nb</think>  x\n\ny", "</think>", ["\n\n"]) == "x"
    assert without_thinking("no marker\n\nrest", "</think>", "\n\n") == "no marker"


def test_think_end_token_rescores_without_inference(toy_library: Path, tmp_path: Path) -> None:
    model = ThinkingModel()
    kw: dict[str, Any] = dict(
        include_path=[str(toy_library)], cache_dir=str(tmp_path / "c"), limit=5, bootstrap_iters=0
    )
    plain = evaluate("toy_gen", model, **kw)
    assert model.calls == 5
    assert plain["results"]["toy_gen"]["exact_match,get-answer"] == 0.0  # the trace's number is taken
    thought = evaluate("toy_gen", model, think_end_token="</think>", output_dir=tmp_path / "run", **kw)
    assert model.calls == 5  # same raw generations, from the cache
    assert thought["results"]["toy_gen"]["exact_match,get-answer"] == 1.0
    sample = json.loads((tmp_path / "run" / "samples_toy_gen.jsonl").read_text().splitlines()[0])
    assert sample["resps"][0][0].startswith("<think>")  # the thinking part is kept in the samples
    assert not sample["filtered_resps"][0].startswith("<think>")
