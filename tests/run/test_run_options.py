"""lm-eval's run options `samples=` (task -> document indices, instead of limit) and
`predict_only=true` (generate and log samples, skip the metrics)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalflow.errors import ConfigError
from tests.support.models import CountingModel
from tests.support.runs import Runner, stage_hits


def sample_lines(folder: Path, task: str) -> list[dict]:
    return [json.loads(line) for line in (folder / f"samples_{task}.jsonl").read_text().splitlines()]


def test_samples_evaluate_exactly_those_documents(runner: Runner) -> None:
    results, _manifest, folder = runner(task=["toy_mc", "toy_gen"], samples={"toy_mc": [9, 2, 5, 2]})
    assert [line["doc_id"] for line in sample_lines(folder, "toy_mc")] == [2, 5, 9]  # dataset order, once each
    assert results["n-samples"]["toy_mc"] == {"original": 40, "effective": 3}
    assert results["n-samples"]["toy_gen"]["effective"] == 40  # a task the mapping does not name: all of it
    assert CountingModel.calls_total == 3 * 4 + 40  # four choices per multiple-choice document

    _, again, _ = runner(task=["toy_mc", "toy_gen"], samples={"toy_mc": [2, 5, 9, 11]})
    assert CountingModel.calls_total == 4  # only document 11 reaches the model
    assert stage_hits(again, "toy_mc") == {
        "load_docs": True,
        "fewshot": False,
        "instances": False,
        "inference": False,
        "filters": False,
        "metrics": False,
        "aggregate": False,
    }
    assert all(stage_hits(again, "toy_gen").values())  # its keys did not change


def test_samples_from_a_json_file_and_from_json_text(runner: Runner, tmp_path: Path) -> None:
    picked = tmp_path / "picked.json"
    picked.write_text(json.dumps({"toy_mc": [0, 1]}))
    from_file, _, _ = runner(samples=str(picked))
    from_text, _, _ = runner(samples='{"toy_mc": [1, 0]}')
    assert from_file["n-samples"]["toy_mc"]["effective"] == from_text["n-samples"]["toy_mc"]["effective"] == 2
    assert from_file["results"] == from_text["results"]


@pytest.mark.parametrize(
    "values,match",
    [
        ({"samples": {"toy_mc": [0]}, "limit": 5}, "limit and samples both given"),
        ({"samples": {"toy_mc": [3, 40]}}, "index 40 is out of range; the evaluated split has 40 documents"),
        ({"samples": {"toy_mcc": [0]}}, "samples names the task 'toy_mcc'.*did you mean 'toy_mc'"),
        ({"samples": {"toy_mc": [-1]}}, "whole numbers from 0"),
        ({"samples": "no/such/file.json"}, "neither a JSON mapping nor an existing JSON file"),
    ],
)
def test_bad_samples_are_refused(runner: Runner, values: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        runner(**values)


def test_predict_only_generates_and_logs_without_metrics(runner: Runner) -> None:
    results, manifest, folder = runner(task="toy_gen", limit=5, predict_only=True, log_samples=False)
    assert results["results"]["toy_gen"]["bypass,get-answer"] == 999  # lm-eval's placeholder
    assert results["results"]["toy_gen"]["bypass_stderr,get-answer"] == "N/A"
    assert "exact_match,get-answer" not in results["results"]["toy_gen"]
    lines = sample_lines(folder, "toy_gen")  # written although log_samples=false, as lm-eval does
    assert len(lines) == 5 and all(line["metrics"] == ["bypass"] and line["resps"] for line in lines)
    assert manifest["inference"]["computed"] == 5

    scored, manifest, _ = runner(task="toy_gen", limit=5)  # then score: the answers are all cached
    assert "exact_match,get-answer" in scored["results"]["toy_gen"]
    assert manifest["inference"]["computed"] == 0
    assert stage_hits(manifest)["filters"] is True and stage_hits(manifest)["metrics"] is False


def test_predict_only_on_a_multiple_choice_task(runner: Runner) -> None:
    """As lm-eval 0.4.13 (peer.sh arc_easy --predict_only): a multiple-choice task's bypass yields
    no metric at all; the samples keep the log-likelihoods, with an empty metric list."""
    results, _, folder = runner(task="toy_mc", limit=3, predict_only=True)
    assert not any("," in key for key in results["results"]["toy_mc"])
    assert results["higher_is_better"]["toy_mc"] == {"bypass": True}
    lines = sample_lines(folder, "toy_mc")
    assert [line["metrics"] for line in lines] == [[], [], []] and all(len(line["resps"]) == 4 for line in lines)
