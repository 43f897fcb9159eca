"""results.json in lm-eval 0.4.13's layout: model and version fields, groups in ``versions``,
``higher_is_better`` and ``n-shot`` with ``sample_len``, the overridden num_fewshot in ``configs``;
compared key by key with a results file lm-eval itself writes for the same tasks when its venv is
here (``../shared/parity/peer.sh``)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from evalflow import evaluate
from tests.support.cli import cli
from tests.support.parity_harness import PEER_SH, PEER_VENV, SHARED, missing
from tests.support.toy_tasks import with_acc_norm

# The lm-eval key results.json leaves to `evalflow lm-eval --output_path`, whose file carries it
# (see evalflow/output/results.py); evalflow's own extras sit under "evalflow".
NOT_WRITTEN = {"task_hashes"}

GROUP_YAML = """\
group: toy_group
task: [toy_a, toy_b]
aggregate_metric_list:
  - metric: acc
  - metric: acc_norm
metadata:
  version: 3
"""


@pytest.fixture
def group_library(toy_library: Path) -> Path:
    """toy_a (acc) and toy_b (acc, acc_norm) in a group that aggregates both metrics."""
    base = (toy_library / "toy_mc.yaml").read_text()
    (toy_library / "toy_a.yaml").write_text(base.replace("task: toy_mc", "task: toy_a"))
    b = with_acc_norm(base.replace("task: toy_mc", "task: toy_b"))
    (toy_library / "toy_b.yaml").write_text(b)
    (toy_library / "toy_group.yaml").write_text(GROUP_YAML)
    return toy_library


def test_groups_and_run_fields_in_lm_evals_layout(
    group_library: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="evalflow"):
        r = evaluate(
            "toy_group",
            {"type": "dummy", "salt": "s"},
            include_path=[str(group_library)],
            limit=6,
            num_fewshot=2,
            cache_dir=str(tmp_path / "c"),
            bootstrap_iters=10,
        )
    group = r["results"]["toy_group"]
    assert list(group)[:3] == ["alias", "name", "sample_len"] and group["sample_len"] == 12
    assert group["sample_count"] == {"acc,none": 12, "acc_norm,none": 6}
    assert r["groups"]["toy_group"] == group
    assert r["versions"]["toy_group"] == "3" and r["n-shot"]["toy_group"] == 2
    assert r["higher_is_better"]["toy_group"] == {"acc": True, "acc_norm": True}
    assert r["configs"]["toy_a"]["num_fewshot"] == 2 and r["n-shot"]["toy_a"] == 2
    assert r["config"]["model"] == "dummy" and r["config"]["model_args"] == {
        "salt": "s",
        "pretrained": None,
        "gguf_file": None,
    }
    assert r["model_source"] == "dummy" and r["model_name"] == "dummy"
    assert r["evalflow"]["model"] == {"type": "dummy", "salt": "s", "pretrained": None, "gguf_file": None}
    assert r["evalflow"]["num_fewshot"] == 2
    warned = [m.getMessage() for m in caplog.records if "missing in" in m.getMessage()]
    assert warned == [
        "group 'toy_group': metric 'acc_norm,none' is missing in 1 of 2 tasks: toy_a; "
        "the group score averages the others only"
    ]


def test_model_name_is_lm_evals() -> None:
    from evalflow.output.run_info import model_name, sanitize_model_name

    assert model_name({"type": "hf", "pretrained": "HuggingFaceTB/SmolLM2-135M", "peft": "me/adapter"}) == "me/adapter"
    assert sanitize_model_name("HuggingFaceTB/SmolLM2-135M") == "HuggingFaceTB__SmolLM2-135M"


def _shape(value: Any) -> Any:
    """Keys (in order) of nested mappings, leaves reduced to their JSON type."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    return type(value).__name__


@pytest.mark.slow
@pytest.mark.skipif(missing() is not None, reason=str(missing()))
def test_layout_matches_a_results_file_lm_eval_wrote(tmp_path: Path) -> None:
    py = PEER_VENV / "bin" / "python"
    tasks_dir = (
        subprocess.run(
            [py, "-c", "import lm_eval, os; print(os.path.dirname(lm_eval.__file__))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        + "/tasks"
    )
    wrappers = tmp_path / "wrappers"
    subprocess.run(
        [py, SHARED / "parity" / "make_wrappers.py", tasks_dir, SHARED / "data", wrappers],
        check=True,
        capture_output=True,
    )
    common = ["--limit", "1", "--num_fewshot", "1"]
    subprocess.run(
        ["bash", PEER_SH, "mmlu_local", "--model", "dummy", "--model_args", "", *common],
        env={**os.environ, "PEER_OUT": str(tmp_path / "peer")},
        check=True,
        capture_output=True,
        timeout=900,
    )
    peer = json.loads(next((tmp_path / "peer").rglob("results_*.json")).read_text())
    done = cli(
        [
            "model=dummy",
            "task=mmlu_local",
            f"include_path=[{wrappers}]",
            "limit=1",
            "num_fewshot=1",
            f"cache_dir={tmp_path / 'cache'}",
            "bootstrap_iters=100",
            f"hydra.run.dir={tmp_path / 'ours'}",
        ]
    )
    assert done.returncode == 0, done.stderr
    ours = json.loads((tmp_path / "ours" / "results.json").read_text())

    expected = [k for k in peer if k not in NOT_WRITTEN]
    assert [k for k in ours if k in peer] == expected  # every other top-level key, in lm-eval's order
    for section in ("group_subtasks", "versions", "n-shot", "higher_is_better", "n-samples"):
        assert ours[section] == peer[section], section
    assert _shape(ours["results"]) == _shape(peer["results"])  # every entry's keys, in order, and value types
    assert _shape(ours["groups"]) == _shape(peer["groups"])
    for name, entry in peer["results"].items():
        assert {k: v for k, v in ours["results"][name].items() if "," not in k} == {
            k: v for k, v in entry.items() if "," not in k
        }  # name, alias, sample_len, sample_count
    assert list(ours["config"]) == list(peer["config"])
    assert {t: c["num_fewshot"] for t, c in ours["configs"].items()} == {
        t: c["num_fewshot"] for t, c in peer["configs"].items()
    }
