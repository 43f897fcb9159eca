"""`rescore`: saved answers scored again through the pipeline's own filters → metrics → aggregate,
without a model, into a normal run folder. Checked on evalflow's samples here, and against lm-eval
0.4.13's own output (a small fixture of its samples/results files, and live when its venv exists)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalflow.errors import ConfigError, RunFolderError
from evalflow.insight.rescore import main, rescore
from tests.conftest import Runner, stage_hits
from tests.support.models import CountingModel

METRICS = lambda entry: {k: v for k, v in entry.items() if "," in k}  # noqa: E731


def overrides(runner: Runner, task: str) -> list[str]:
    return [f"task={task}", f"include_path=[{runner.library}]", f"cache_dir={runner.cache}", "bootstrap_iters=0"]


@pytest.mark.parametrize("task", ["toy_mc", "toy_gen"])
def test_evalflow_samples_rescore_to_the_same_results(runner: Runner, tmp_path: Path, task: str) -> None:
    first, _, folder = runner(task, limit=12)
    CountingModel.reset()
    results = rescore([folder / f"samples_{task}.jsonl"], overrides(runner, task), tmp_path / "rescored")
    assert CountingModel.calls_total == 0
    assert METRICS(results["results"][task]) == METRICS(first["results"][task])
    out = tmp_path / "rescored"
    assert (out / "results.json").is_file() and (out / "manifest.json").is_file()
    original = [json.loads(line) for line in (folder / f"samples_{task}.jsonl").read_text().splitlines()]
    again = [json.loads(line) for line in (out / f"samples_{task}.jsonl").read_text().splitlines()]
    assert again == original  # the same documents, arguments, answers, filtered answers and scores


def test_changed_filter_gives_the_new_score(runner: Runner, toy_library: Path, tmp_path: Path) -> None:
    _, _, folder = runner("toy_gen", limit=12)
    rows = [json.loads(line) for line in (folder / "samples_toy_gen.jsonl").read_text().splitlines()]
    for row in rows:  # answers as a model might have written them: half in the format the regex wants
        row["resps"] = [[f"#### {row['target']}" if row["doc_id"] % 2 else f"answer: {row['target']}"]]
    samples = tmp_path / "samples_toy_gen.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = rescore([samples], overrides(runner, "toy_gen"), tmp_path / "a")["results"]["toy_gen"]
    assert before["exact_match,get-answer"] == 0.5
    yaml_file = toy_library / "toy_gen.yaml"
    yaml_file.write_text(yaml_file.read_text().replace('regex_pattern: "#### (', 'regex_pattern: "(?:####|answer:) ('))
    after = rescore([samples], overrides(runner, "toy_gen"), tmp_path / "b")["results"]["toy_gen"]
    assert after["exact_match,get-answer"] == 1.0
    hits = stage_hits(json.loads((tmp_path / "b" / "manifest.json").read_text()))
    assert hits["inference"] and not hits["filters"]  # the answers' nodes hit; scoring re-ran


def test_bad_input(runner: Runner, tmp_path: Path) -> None:
    bad = tmp_path / "samples_x.jsonl"
    bad.write_text('{"doc_id": 0}\n')
    with pytest.raises(RunFolderError, match=r"line 1: not a samples line"):
        rescore([bad], overrides(runner, "toy_mc"), tmp_path / "out")
    with pytest.raises(ConfigError, match="task=NAME"):
        main([str(bad)])
    assert not (tmp_path / "out" / "results.json").exists()
