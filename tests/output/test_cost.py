"""Tokens and cost per run: the run's prompt, completion and reasoning tokens summed exactly, split
into what this run computed and what it read from the cache, priced by a prices file of the
user's (flat or per model) into a cost line; a bad prices file refused in one paragraph before
any model call; changing prices re-runs nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evalflow import evaluate
from evalflow.core.records import Finish
from evalflow.errors import ConfigError
from evalflow.output.run_summary import summary_lines
from tests.support.runs import Runner
from tests.support.thinking import ScriptedThinker, raw_generation
from tests.support.thinking_budget import split_generation

MARKER = "</think>"
SCRIPTED = "tests.support.thinking:ScriptedThinker"
SPLIT = "tests.support.thinking_budget:SplitThinker"


def run(toy_library: Path, tmp_path: Path, name: str, model: str = SCRIPTED, **settings: Any) -> dict[str, Any]:
    kw: dict[str, Any] = dict(include_path=[str(toy_library)], cache_dir=str(tmp_path / "cache"), bootstrap_iters=0)
    return evaluate(
        "toy_gen", {"type": model}, think_end_token=MARKER, output_dir=tmp_path / name, **{**kw, **settings}
    )


def finishes(folder: Path, generation: Callable[[str], tuple[str, Finish]]) -> dict[int, Finish]:
    """Each document's scripted finish, from the prompt the run's samples record."""
    rows = [json.loads(line) for line in (folder / "samples_toy_gen.jsonl").read_text().splitlines()]
    return {row["doc_id"]: generation(row["arguments"]["gen_args_0"]["arg_0"])[1] for row in rows}


def sums(chosen: list[Finish], reasoning: bool = False) -> dict[str, Any]:
    """The token count of ``chosen``, summed here by hand."""
    return {
        "prompt": sum(f.prompt_tokens or 0 for f in chosen),
        "completion": sum(f.completion_tokens or 0 for f in chosen),
        "reasoning": sum(f.reasoning_tokens or 0 for f in chosen) if reasoning else None,
        "counted": len(chosen),
        "generations": len(chosen),
    }


def manifest_of(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "manifest.json").read_text())


def test_a_first_run_computes_every_generation_and_counts_its_tokens_exactly(toy_library: Path, tmp_path: Path) -> None:
    results = run(toy_library, tmp_path, "first")
    total = sums(list(finishes(tmp_path / "first", raw_generation).values()))
    cached = {"prompt": 0, "completion": 0, "reasoning": None, "counted": 0, "generations": 0}
    assert results["tokens"] == {"total": total, "computed": total, "cached": cached}
    assert manifest_of(tmp_path / "first")["tokens"] == results["tokens"]
    assert "cost" not in results  # no prices: no cost
    (line,) = [line for line in summary_lines(tmp_path / "first") if line.startswith("tokens:")]
    assert line == (
        f"tokens: {total['prompt']:,} prompt, {total['completion']:,} completion in 40 generations: 40 computed by "
        f"this run ({total['prompt']:,} prompt, {total['completion']:,} completion), 0 read from the cache "
        "(0 prompt, 0 completion)"
    )


def test_a_larger_run_computes_only_the_new_generations(toy_library: Path, tmp_path: Path) -> None:
    run(toy_library, tmp_path, "half", limit=20)
    calls = ScriptedThinker.calls
    results = run(toy_library, tmp_path, "whole")
    assert ScriptedThinker.calls - calls == 20
    by_doc = finishes(tmp_path / "whole", raw_generation)
    new, old = [by_doc[d] for d in by_doc if d >= 20], [by_doc[d] for d in by_doc if d < 20]
    assert results["tokens"] == {
        "total": sums(new + old),
        "computed": sums(new),
        "cached": sums(old),
    }


def test_a_run_served_by_the_stage_cache_computed_nothing(toy_library: Path, tmp_path: Path) -> None:
    first = run(toy_library, tmp_path, "first")
    calls = ScriptedThinker.calls
    again = run(toy_library, tmp_path, "again")
    assert ScriptedThinker.calls == calls
    assert all(stage["hit"] for stage in manifest_of(tmp_path / "again")["stages"])
    total = first["tokens"]["total"]
    # nothing computed: 0 of each kind the run reports (not null, which would read "not reported")
    none_computed = {**{k: None if total[k] is None else 0 for k in ("prompt", "completion", "reasoning")}}
    assert none_computed["prompt"] == 0 and none_computed["reasoning"] is None
    assert again["tokens"] == {
        "total": total,
        "computed": {**none_computed, "counted": 0, "generations": 0},
        "cached": total,
    }


def prices_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prices.yaml"
    path.write_text(text)
    return path


def dollars(tokens: dict[str, Any], input_: float, output: float, reasoning: float) -> float:
    prompt, completion, thought = tokens["prompt"], tokens["completion"], tokens["reasoning"] or 0
    return (prompt * input_ + (completion - thought) * output + thought * reasoning) / 1e6


def test_the_cost_prices_computed_and_cached_tokens_by_the_models_entry(toy_library: Path, tmp_path: Path) -> None:
    path = prices_file(
        tmp_path, f"{SPLIT}: {{input: 1.5, output: 4, reasoning: 8}}\nother-model: {{input: 9, output: 9}}\n"
    )
    run(toy_library, tmp_path, "half", model=SPLIT, limit=20, prices=str(path))
    results = run(toy_library, tmp_path, "whole", model=SPLIT, prices=str(path))
    by_doc = finishes(tmp_path / "whole", split_generation)
    new = sums([by_doc[d] for d in by_doc if d >= 20], reasoning=True)
    old = sums([by_doc[d] for d in by_doc if d < 20], reasoning=True)
    assert results["tokens"]["computed"] == new and results["tokens"]["cached"] == old
    spent, saved = dollars(new, 1.5, 4, 8), dollars(old, 1.5, 4, 8)
    cost = results["cost"]
    assert cost["computed"] == pytest.approx(spent) and cost["cached"] == pytest.approx(saved)
    assert cost["total"] == pytest.approx(spent + saved)
    assert cost["model_name"] == results["model_name"] == SPLIT
    assert cost["per_million"] == {"input": 1.5, "output": 4.0, "reasoning": 8.0}
    assert cost["prices_file"] == str(path.resolve())
    assert manifest_of(tmp_path / "whole")["cost"] == cost
    (line,) = [line for line in summary_lines(tmp_path / "whole") if line.startswith("cost:")]
    assert line == (
        f"cost: ${spent:.4g} for this run's 20 computed generations; ${saved:.4g} saved by "
        f"20 answers read from the cache (prices for {SPLIT} from {path.resolve()}: $1.5 input, "
        "$4 output, $8 reasoning per million tokens)"
    )


def test_changing_prices_re_runs_nothing(toy_library: Path, tmp_path: Path) -> None:
    first = run(toy_library, tmp_path, "first")
    calls = ScriptedThinker.calls
    again = run(toy_library, tmp_path, "again", prices={"input": 2, "output": 10})
    assert ScriptedThinker.calls == calls
    assert all(stage["hit"] for stage in manifest_of(tmp_path / "again")["stages"])
    assert again["results"] == first["results"]
    total = first["tokens"]["total"]
    assert again["cost"]["computed"] == 0.0  # a flat price; no reasoning reported: completions at output
    assert again["cost"]["cached"] == pytest.approx((total["prompt"] * 2 + total["completion"] * 10) / 1e6)
    assert again["cost"]["per_million"] == {"input": 2.0, "output": 10.0, "reasoning": 10.0}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("gpt-4o: {input: 2.5, output: 10}\n", f"has no prices for the run's model '{SCRIPTED}'"),
        ("input: 0.15\noutput: cheap\n", "output is 'cheap', not a price"),
        (f"{SCRIPTED}: {{input: 1}}\n", f"has no {SCRIPTED}.output price"),
        ("input: 0.15\noutptu: 0.6\n", "has unknown key outptu"),
        ("input: -1\noutput: 0.6\n", "input is -1, not a price"),
        ("- 0.15\n", "holds [0.15], not a mapping"),
    ],
)
def test_a_bad_prices_file_is_one_paragraph_before_any_model_call(
    toy_library: Path, tmp_path: Path, text: str, said: str
) -> None:
    path = prices_file(tmp_path, text)
    calls = ScriptedThinker.calls
    with pytest.raises(ConfigError) as refused:
        run(toy_library, tmp_path, "run", prices=str(path))
    message = str(refused.value)
    assert said in message and f"the prices file {path.resolve()}" in message and "\n" not in message
    assert ScriptedThinker.calls == calls


def test_a_missing_prices_file_is_refused(toy_library: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"prices=.*nothing\.yaml: no such file; give the path of a YAML file"):
        run(toy_library, tmp_path, "run", prices=str(tmp_path / "nothing.yaml"))


def test_loglikelihood_requests_report_no_tokens(runner: Runner) -> None:
    """Only generations report tokens: a multiple-choice run records none and prints no token line."""
    results, manifest, folder = runner("toy_mc", limit=5, prices={"input": 1, "output": 1})
    assert "tokens" not in results and "cost" not in results and "tokens" not in manifest
    assert not [line for line in summary_lines(folder) if line.startswith(("tokens:", "cost:"))]
