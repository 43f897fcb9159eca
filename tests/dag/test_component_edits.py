"""Editing a registered metric or aggregation re-runs exactly the stages that call it, in a new
process on the same cache, with no model call, and gives the numbers an empty cache gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT

USER_SCORING = """\
from evalflow.scoring import register_aggregation, register_metric


@register_aggregation("spread")
def spread(items):
    return sum(items) / len(items)


@register_metric("contains_answer", higher_is_better=True, aggregation="mean")
def contains_answer(references, predictions, **kwargs):
    return float(references[0] in predictions[0])


@register_metric("answer_len", higher_is_better=False, aggregation="mean")
def answer_len(references, predictions, **kwargs):
    return float(len(predictions[0]))
"""

TASK = """\
task: toy_user
dataset_path: json
dataset_kwargs:
  data_files:
    train: {data}/train.jsonl
    test: {data}/test.jsonl
training_split: train
test_split: test
output_type: generate_until
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer.split('####')[-1].strip()}}}}"
generation_kwargs:
  until: ["\\n\\n"]
metric_list:
  - metric: contains_answer
  - metric: answer_len
    aggregation: spread
"""

DRIVER = """\
import json, sys
import user_scoring  # registers the user's components, as a user's script would
from evalflow import evaluate

out, cache, lib = sys.argv[1:4]
results = evaluate("toy_user", "dummy", output_dir=out, include_path=[lib], cache_dir=cache,
                   bootstrap_iters=0, explain=True)
print(json.dumps(results["results"]["toy_user"]))
"""


def run_in_new_process(code: Path, out: Path, cache: Path, lib: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, str(code / "driver.py"), str(out), str(cache), str(lib)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return {
        "results": json.loads(done.stdout.strip().splitlines()[-1]),
        "stderr": done.stderr,
        "manifest": json.loads((out / "manifest.json").read_text()),
    }


def test_edited_user_metric_and_aggregation_rerun_scoring_only(toy_library: Path, tmp_path: Path) -> None:
    from evalflow.insight.explanation import explain

    code, lib = tmp_path / "code", tmp_path / "user_tasks"
    code.mkdir()
    lib.mkdir()
    (lib / "toy_user.yaml").write_text(TASK.format(data=toy_library.parent / "data"))
    (code / "driver.py").write_text(DRIVER)
    module = code / "user_scoring.py"
    module.write_text(USER_SCORING)
    cache, outputs = tmp_path / "cache", tmp_path / "outputs"

    first = run_in_new_process(code, outputs / "first", cache, lib)
    assert first["results"]["contains_answer,none"] > 0  # `ref in pred` holds for some documents

    module.write_text(
        USER_SCORING.replace("references[0] in predictions[0]", "references[0] == predictions[0]").replace(
            "return sum(items) / len(items)", "return max(items)"
        )
    )
    second = run_in_new_process(code, outputs / "second", cache, lib)
    fresh = run_in_new_process(code, tmp_path / "fresh", tmp_path / "empty-cache", lib)

    hits = {e["stage"]: e["hit"] for e in second["manifest"]["stages"]}
    assert hits == {
        "load_docs": True,
        "fewshot": True,
        "instances": True,
        "inference": True,
        "filters": True,
        "metrics": False,
        "aggregate": False,
    }
    requests = first["manifest"]["inference"]["requests"]
    assert requests > 0 and second["manifest"]["inference"] == {"requests": requests, "computed": 0, "cached": requests}
    assert second["results"] == fresh["results"] != first["results"]
    assert second["results"]["answer_len,none"] > first["results"]["answer_len,none"]  # max, not mean

    why = {line.split(" re-ran: ")[0]: line.split(" re-ran: ")[1] for line in explain(outputs / "second")}
    assert why == {
        "toy_user metrics": "metric 'answer_len' code changed; metric 'contains_answer' code changed",
        "toy_user aggregate": "aggregation 'spread' code changed",
    }
    assert "toy_user metrics re-ran: metric 'answer_len' code changed" in second["stderr"]  # explain=true
