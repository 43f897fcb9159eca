"""Across runs: the documents every run gets wrong (checked against samples_df), and each run's
reasoning figures as its manifest recorded them."""

from __future__ import annotations

from pathlib import Path

from evalflow.frames import samples_df
from evalflow.frames.across import always_wrong, reasoning_figures
from evalflow.output.run_folder import load_run
from tests.support.lm_eval_folders import LM_EVAL_FOLDERS
from tests.support.runs import Runner


def test_always_wrong_is_the_documents_no_run_gets_right(runner: Runner) -> None:
    folders = [runner("toy_mc")[2], runner("toy_mc", num_fewshot=1)[2], runner("toy_mc", num_fewshot=3)[2]]
    runs = [(f.name, load_run(f)) for f in folders]
    df = samples_df([folders[0].parent])
    wrong = df[df["correct"] == False].groupby("doc_id")["run_id"].nunique()  # noqa: E712
    expected = sorted(wrong[wrong == 3].index)
    assert 0 < len(expected) < len(wrong)  # the runs differ, and agree on some
    (task,) = always_wrong(runs)["tasks"]
    assert task["task"] == "toy_mc" and task["metric"] == "acc" and task["count"] == len(expected)
    assert [d["doc_id"] for d in task["docs"]] == expected
    doc = task["docs"][0]
    rows = df[df["doc_id"] == doc["doc_id"]].set_index("run_id")
    assert doc["answers"] == rows["answer"].to_dict() and doc["target"] == rows["target"].iloc[0]
    assert all(answer != doc["target"] for answer in doc["answers"].values())
    assert always_wrong(runs, limit=2)["tasks"][0]["docs"] == task["docs"][:2]


def test_reasoning_figures_are_what_each_run_recorded(runner: Runner) -> None:
    _, manifest, gen = runner("toy_gen", prices={"input": 2, "output": 10})
    _, _, mc = runner("toy_mc")
    lm_eval = LM_EVAL_FOLDERS / "lm_eval_gsm8k"
    runs = [("gen", load_run(gen)), ("mc", load_run(mc)), ("lm", load_run(lm_eval))]
    figures = {r["id"]: r for r in reasoning_figures(runs)["runs"]}
    (task,) = figures["gen"]["tasks"]
    stats = manifest["generations"]["toy_gen"]
    assert task["task"] == "toy_gen" and task["stop_reasons"] == stats["stop_reasons"]
    assert task["truncated_share"] == stats["truncated_share"] and task["tokens"] == stats["tokens"]
    prompt, completion = stats["tokens"]["prompt"], stats["tokens"]["completion"]
    assert task["cost"] == (2 * prompt + 10 * completion) / 1e6 == figures["gen"]["cost"]["total"] > 0
    assert any(line.startswith("cost: ") for line in figures["gen"]["lines"])
    assert figures["mc"]["tasks"] == [] and "log-likelihoods" in figures["mc"]["note"]
    assert figures["lm"]["tasks"] == [] and "lm-eval" in figures["lm"]["note"]


def test_no_runs_no_tasks(tmp_path: Path) -> None:
    assert always_wrong([]) == {"tasks": []} and reasoning_figures([]) == {"runs": []}
