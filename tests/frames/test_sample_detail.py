"""One sample in full (``frames.samples.sample_detail``) from real runs: a multiple-choice task with
few-shot context, a generation task, a judged task, an image task, and lm-eval's own output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalflow.frames import samples_df
from evalflow.frames.samples import SampleNotFound, SampleQuery, query, sample_detail
from evalflow.output.run_paths import samples_file
from tests.support.images import path_image_task
from tests.support.judged import Judged
from tests.support.lm_eval_folders import LM_EVAL_FOLDERS, lm_eval_files
from tests.support.runs import Runner
from tests.support.toy_tasks import CODE_DOCS, MC_YAML, write_code_task, write_toy_library

VISION = "tests.support.models:VisionCountingModel"


def test_a_multiple_choice_sample_folds_its_fewshot_and_shows_each_choice(tmp_path: Path) -> None:
    run = Runner(write_toy_library(tmp_path), tmp_path / "cache", tmp_path / "outputs")
    _, _, folder = run("toy_mc", num_fewshot=2)
    path = samples_file(folder, "toy_mc")
    record = json.loads(path.read_text().splitlines()[7])
    detail = sample_detail(path, record["doc_id"], "none")
    assert detail["raw"] == record and detail["task"] == "toy_mc"
    assert detail["prompt"] == f"Question: {record['doc']['question']}\nAnswer:"
    assert (
        detail["fewshot"].count("Question:") == 2
        and detail["fewshot"] + "\n\n" + detail["prompt"] == (record["arguments"]["gen_args_0"]["arg_0"])
    )
    lls = [pair[0] for pair in record["filtered_resps"]]
    assert [c["loglikelihood"] for c in detail["choices"]] == lls
    assert [c["text"] for c in detail["choices"]] == record["doc"]["choices"]  # the target delimiter taken off
    assert [c["chosen"] for c in detail["choices"]] == [i == lls.index(max(lls)) for i in range(4)]
    assert [c["gold"] for c in detail["choices"]] == [True, False, False, False]  # label 0
    assert detail["target"] == record["doc"]["choices"][0] and detail["metrics"] == {"acc": record["acc"]}
    assert detail["generations"] is None and detail["judge"] is None and detail["code"] is None
    with pytest.raises(SampleNotFound, match="no record of document 99"):
        sample_detail(path, 99, None)


def test_a_generation_shows_raw_and_filtered_answers(runner: Runner) -> None:
    _, _, folder = runner("toy_gen", limit=5)
    path = samples_file(folder, "toy_gen")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    detail = sample_detail(path, 3, None)
    (record,) = [r for r in records if r["doc_id"] == 3]
    assert detail["generations"] == record["resps"][0] and detail["filtered"] == record["filtered_resps"]
    assert detail["choices"] is None and detail["answer"] == record["filtered_resps"][0]
    assert detail["target"] == record["target"] and detail["fewshot"] is None  # zero-shot: no context to fold
    assert detail["finish"] == record["finish"][0]


def test_a_judged_sample_shows_the_judge_prompt_rationale_and_verdict(tmp_path: Path) -> None:
    judged = Judged(tmp_path, n=12)
    _, _, folder = judged()
    path = samples_file(folder, "judged")
    detail = sample_detail(path, 3, None)
    judge = detail["judge"]
    assert judge["metric"] == "graded" and judge["response"] == "4"
    assert judge["prompt"] == "Question: What is 3 plus 1?\nAnswer: 4\nGold: 4\nGrade:"
    record = detail["raw"]["judge"]["graded"][0]
    assert judge["rationale"] == record["judge_output"] and judge["verdict"] == f"{record['score']:g}"
    df = samples_df([folder])
    for verdict in set(df["verdict"]):
        got = query(folder, path, SampleQuery("judged", verdict=verdict, limit=100))
        assert [r["doc_id"] for r in got["rows"]] == df[df["verdict"] == verdict]["doc_id"].tolist()
    assert len(set(df["verdict"])) >= 2  # right and wrong answers graded differently


def test_an_image_sample_names_its_images_by_digest(tmp_path: Path) -> None:
    library, _ = path_image_task(tmp_path, n=3)
    _, _, folder = Runner(library, tmp_path / "cache", tmp_path / "outputs")("toy_paths", model=VISION)
    path = samples_file(folder, "toy_paths")
    detail = sample_detail(path, 0, None)
    (image,) = detail["images"]
    assert len(image["digest"]) >= 16 and image["width"] == 32 and image["mode"]
    df = samples_df([folder])
    assert df["has_image"].all()
    assert query(folder, path, SampleQuery("toy_paths", has_image=True))["total"] == 3


def test_lm_evals_own_samples_read_as_evalflows() -> None:
    results, path = lm_eval_files(LM_EVAL_FOLDERS / "lm_eval_arc_easy", "arc_easy")
    record = json.loads(path.read_text().splitlines()[0])
    detail = sample_detail(path, record["doc_id"], None)
    assert detail["task"] == "arc_easy"
    assert detail["choices"][0]["loglikelihood"] == float(record["filtered_resps"][0][0])  # written as text
    assert detail["target"] == record["doc"]["choices"]["text"][int(record["target"])]
    df = samples_df([LM_EVAL_FOLDERS])
    arc = df[df["task"] == "arc_easy"]
    assert len(arc) == results["n-samples"]["arc_easy"]["effective"]
    assert arc["correct"].sum() == round(results["results"]["arc_easy"]["acc,none"] * len(arc))


def test_a_code_sample_shows_its_verdict_and_the_program_that_ran(runner: Runner, toy_library: Path) -> None:
    """The dummy model's one-line answer lands in a comment, so the prompt alone passes or fails."""
    write_code_task(toy_library, CODE_DOCS[:2])
    _, _, folder = runner("toy_code", confirm_unsafe_code=True, trust_task_code=True, code_sandbox="subprocess")
    path = samples_file(folder, "toy_code")
    passed, failed = sample_detail(path, 0, None), sample_detail(path, 1, None)
    assert passed["code"]["metric"] == "pass@1" and passed["code"]["verdict"] == "passed"
    assert failed["code"]["verdict"] == "failed"
    assert failed["code"]["output"].startswith(CODE_DOCS[1]["prompt"]) and failed["code"]["output"].endswith(
        "\nassert ok()"
    )
    assert query(folder, path, SampleQuery("toy_code", correct=True))["rows"][0]["doc_id"] == 0


def test_the_fewshot_fold_uses_the_tasks_own_delimiter(tmp_path: Path) -> None:
    library = write_toy_library(tmp_path)
    text = MC_YAML.format(data=tmp_path / "data").replace("task: toy_mc", "task: toy_dash")
    (library / "toy_dash.yaml").write_text(text + 'fewshot_delimiter: "\\n--\\n"\n')
    _, _, folder = Runner(library, tmp_path / "cache", tmp_path / "outputs")("toy_dash", num_fewshot=2)
    detail = sample_detail(samples_file(folder, "toy_dash"), 5, None)
    assert detail["prompt"] == f"Question: {detail['doc']['question']}\nAnswer:"
    assert detail["fewshot"].count("\n--\n") == 1 and "\n\n" not in detail["fewshot"]
