"""Every repeat scored: per-metric reductions over sampled repeats, and what they cost in model calls.

The toy generation task samples (``do_sample: true``) with a model that is right about half the
time, so a document's k samples disagree; results are checked against a hand computation on the
samples file the run wrote.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from math import comb
from pathlib import Path

import pytest

from evalflow.errors import TaskError
from evalflow.scoring import register_filter
from tests.support.models import NoisyOracleModel
from tests.support.paths import ROOT, SHARED_DATA
from tests.support.runs import Runner, stage_hits

ORACLE = "tests.support.models:NoisyOracleModel"
REDUCED = """metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    reduction: REDUCTIONS
"""


@pytest.fixture
def sampled(toy_library: Path) -> Path:
    """toy_gen with sampling, ``repeats: 4`` and exact_match reduced by REDUCTIONS (to fill in)."""
    NoisyOracleModel.ANSWERS = {f"What is {i + 1} plus {i % 5 + 2}?": (i + 1) + (i % 5 + 2) for i in range(40)}
    path = toy_library / "toy_gen.yaml"
    text = path.read_text().replace("  do_sample: false", "  do_sample: true\n  temperature: 0.7") + "repeats: 4\n"
    path.write_text(re.sub(r"metric_list:\n(  .*\n|    .*\n)+", REDUCED, text))
    return path


def set_yaml(path: Path, reductions: str, repeats: int | None = None) -> None:
    text = re.sub(r"reduction: .*", f"reduction: {reductions}", path.read_text()).replace("REDUCTIONS", reductions)
    path.write_text(text if repeats is None else re.sub(r"repeats: \d+", f"repeats: {repeats}", text))


def hand_scores(row: dict, k: int) -> dict[str, float]:
    """pass@k, maj@k, mean and max of one samples-file row, from its raw responses alone."""
    answers = [m[-1] if (m := re.findall(r"#### (\-?[0-9\.\,]+)", r)) else "[invalid]" for r in row["resps"][0]]
    right = [a == row["target"] for a in answers]
    n, c = len(right), sum(right)
    vote = Counter(answers).most_common(1)[0][0]
    return {
        f"exact_match_pass@{k}": 1 - comb(n - c, k) / comb(n, k),
        f"exact_match_maj@{n}": float(vote == row["target"]),
        f"exact_match_mean@{n}": c / n,
        f"exact_match_max@{n}": float(c > 0),
    }


def test_reductions_match_a_hand_computation_on_the_recorded_samples(runner: Runner, sampled: Path) -> None:
    set_yaml(sampled, "[pass@2, maj@k, mean, max]", repeats=8)
    results, _, folder = runner("toy_gen", model=ORACLE, limit=10)
    rows = [json.loads(line) for line in (folder / "samples_toy_gen.jsonl").read_text().splitlines()]
    assert len(rows) == 10 and all(len(r["resps"][0]) == 8 and len(r["sample_metrics"]) == 8 for r in rows)
    hand = [hand_scores(r, 2) for r in rows]
    counts = [int(h["exact_match_mean@8"] * 8) for h in hand]
    assert any(0 < c < 8 for c in counts) and len(set(counts)) > 2  # samples really disagree
    assert any(h["exact_match_maj@8"] != h["exact_match_max@8"] for h in hand)  # a wrong majority
    for row, expected in zip(rows, hand):
        assert {k: row[k] for k in expected} == pytest.approx(expected)
        assert [s["exact_match"] for s in row["sample_metrics"]] == [
            float(a == row["target"]) for a in row["filtered_samples"][0]
        ]
    numbers = results["results"]["toy_gen"]
    for name in hand[0]:
        assert numbers[f"{name},get-answer"] == pytest.approx(sum(h[name] for h in hand) / 10)
    assert "exact_match,get-answer" not in numbers  # only the reduced results are reported


def test_first_keeps_lm_evals_number(runner: Runner, sampled: Path) -> None:
    set_yaml(sampled, "first")
    first, _, folder = runner("toy_gen", model=ORACLE, limit=10)
    rows = [json.loads(line) for line in (folder / "samples_toy_gen.jsonl").read_text().splitlines()]
    assert [r["exact_match"] for r in rows] == [r["sample_metrics"][0]["exact_match"] for r in rows]
    sampled.write_text(sampled.read_text().replace("    reduction: first\n", ""))  # lm-eval 0.4.13's YAML
    plain, _, _ = runner("toy_gen", model=ORACLE, limit=10)
    assert first["results"]["toy_gen"] == plain["results"]["toy_gen"]


def test_raising_repeats_samples_only_the_new_repeats(runner: Runner, sampled: Path) -> None:
    set_yaml(sampled, "[pass@k, maj@k]")
    runner("toy_gen", model=ORACLE, limit=5)
    assert NoisyOracleModel.calls_total == 5 * 4
    set_yaml(sampled, "[pass@k, maj@k]", repeats=8)
    results, manifest, _ = runner("toy_gen", model=ORACLE, limit=5)
    assert NoisyOracleModel.calls_total == 5 * 4  # repeats 4..7 of each document, nothing else
    assert {r.repeat for r in NoisyOracleModel.requests_seen} == {4, 5, 6, 7}
    assert manifest["inference"] == {"requests": 40, "computed": 20, "cached": 20}
    assert "exact_match_pass@8,get-answer" in results["results"]["toy_gen"]


def test_changing_only_the_reduction_rescores_without_inference_or_filters(runner: Runner, sampled: Path) -> None:
    set_yaml(sampled, "first")
    runner("toy_gen", model=ORACLE, limit=5)
    for reductions in ("pass@k", "[maj@k, mean]", "pass@2"):
        set_yaml(sampled, reductions)
        results, manifest, _ = runner("toy_gen", model=ORACLE, limit=5)
        hits = stage_hits(manifest)
        assert NoisyOracleModel.calls_total == 0
        assert all(hits[s] for s in ("load_docs", "fewshot", "instances", "inference", "filters")), reductions
        assert not hits["metrics"] and not hits["aggregate"]
    assert "exact_match_pass@2,get-answer" in results["results"]["toy_gen"]


@pytest.mark.parametrize(
    ("reductions", "message"),
    [
        ("pass@9", "between 1 and the task's repeats (4)"),
        ("best_of", "unknown reduction 'best_of'"),
        ("[mean, mean]", "mean@4 twice"),
    ],
)
def test_bad_reductions_are_refused_before_any_model_call(
    runner: Runner, sampled: Path, reductions: str, message: str
) -> None:
    set_yaml(sampled, reductions)
    with pytest.raises(TaskError, match=re.escape(message)):
        runner("toy_gen", model=ORACLE, limit=5)
    assert NoisyOracleModel.calls_total == 0


def test_a_voting_pipeline_with_a_reduction_is_refused_before_any_model_call(runner: Runner, sampled: Path) -> None:
    set_yaml(sampled, "pass@k")
    sampled.write_text(
        sampled.read_text().replace(
            "      - function: take_first\n", "      - function: majority_vote\n      - function: take_first\n"
        )
    )
    with pytest.raises(TaskError, match="combine repeats"):
        runner("toy_gen", model=ORACLE, limit=5)
    assert NoisyOracleModel.calls_total == 0


@register_filter("test_repeats_second_opinion")
def second_opinion(resps: list, docs: list) -> list:
    """A custom filter written for lm-eval 0.4.13's shape: every instance brings all its repeats."""
    if any(len(inst) < 2 for inst in resps):
        raise ValueError(f"second_opinion needs every repeat of an instance, got {[len(i) for i in resps]}")
    return [inst[1:] for inst in resps]


def test_a_custom_filter_of_all_repeats_runs_when_no_metric_reduces(runner: Runner, sampled: Path) -> None:
    """Without a reduction, pipelines never run on single repeats (a filter that reads several
    repeats is not called with one); with one, they do, and this filter's failure names it."""
    step = "      - function: test_repeats_second_opinion\n"
    sampled.write_text(
        sampled.read_text()
        .replace("      - function: regex\n", step + "      - function: regex\n")
        .replace("    reduction: REDUCTIONS\n", "")
    )
    results, _, folder = runner("toy_gen", model=ORACLE, limit=3)
    rows = [json.loads(line) for line in (folder / "samples_toy_gen.jsonl").read_text().splitlines()]
    second = [m[0] if (m := re.findall(r"#### (\-?[0-9\.\,]+)", r["resps"][0][1])) else "[invalid]" for r in rows]
    assert [r["filtered_resps"][0] for r in rows] == second  # the second repeat's answer
    assert all("filtered_samples" not in r for r in rows)
    assert results["results"]["toy_gen"]["exact_match,get-answer"] == pytest.approx(
        sum(float(a == r["target"]) for a, r in zip(second, rows)) / 3
    )
    sampled.write_text(
        sampled.read_text().replace("higher_is_better: true\n", "higher_is_better: true\n    reduction: mean\n", 1)
    )
    with pytest.raises(Exception, match="second_opinion needs every repeat"):
        runner("toy_gen", model=ORACLE, limit=3)
    assert NoisyOracleModel.calls_total == 0  # the answers came from the cache


GSM8K_SAMPLED = """\
include: {builtin}
task: gsm8k_sampled
generation_kwargs:
  until: ["Question:", "</s>", "<|im_end|>"]
  do_sample: true
  temperature: 0.7
repeats: 8
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: false
    regexes_to_ignore: [",", "\\\\$", "(?s).*#### ", "\\\\.$"]
    reduction: [maj@k, pass@k, pass@2, mean]
"""


@pytest.mark.skipif(not (SHARED_DATA / "gsm8k" / "test.jsonl").is_file(), reason="no ../shared/data/gsm8k")
def test_gsm8k_sampled_repeats_8_against_a_hand_computation(runner: Runner, toy_library: Path) -> None:
    """The real gsm8k (its prompts, filters and exact_match options), sampled 8 times per document."""
    docs = [json.loads(line) for line in (SHARED_DATA / "gsm8k" / "test.jsonl").read_text().splitlines()[:5]]
    gold = {d["question"].strip(): d["answer"].split("####")[-1].strip() for d in docs}
    NoisyOracleModel.ANSWERS = {q: int(a.replace(",", "")) for q, a in gold.items()}
    (toy_library / "gsm8k_sampled.yaml").write_text(
        GSM8K_SAMPLED.format(builtin=ROOT / "tasks" / "gsm8k" / "gsm8k.yaml")
    )
    results, manifest, folder = runner("gsm8k_sampled", model=ORACLE, limit=5, data_map="shared")
    assert manifest["inference"]["computed"] == 5 * 8
    rows = [json.loads(line) for line in (folder / "samples_gsm8k_sampled.jsonl").read_text().splitlines()]
    numbers = results["results"]["gsm8k_sampled"]
    for pipeline, pattern in (
        ("strict-match", r"#### (\-?[0-9\.\,]+)"),
        ("flexible-extract", r"(-?[$0-9.,]{2,})|(-?[0-9]+)"),
    ):
        hand: dict[str, list[float]] = {"maj@8": [], "pass@8": [], "pass@2": [], "mean@8": []}
        for row in (r for r in rows if r["filter"] == pipeline):
            found = [re.findall(pattern, text) for text in row["resps"][0]]
            picked = [(m[0] if pipeline == "strict-match" else next(g for g in m[-1] if g)) if m else "" for m in found]
            answers = [a.strip().replace(",", "").removesuffix(".") for a in picked]
            right = [a == gold[row["doc"]["question"].strip()] for a in answers]
            n, c = len(right), sum(right)
            vote = Counter(picked).most_common(1)[0][0]
            hand["maj@8"].append(float(right[picked.index(vote)]))
            hand["pass@8"].append(1 - comb(n - c, 8) / comb(n, 8))
            hand["pass@2"].append(1 - comb(n - c, 2) / comb(n, 2))
            hand["mean@8"].append(c / n)
            for name, values in hand.items():
                assert row[f"exact_match_{name}"] == pytest.approx(values[-1]), (pipeline, name)
        assert all(0 < m < 1 for m in hand["mean@8"])  # each document's samples disagree
        assert hand["pass@2"] != hand["mean@8"] != hand["pass@8"]
        for name, values in hand.items():
            assert numbers[f"exact_match_{name},{pipeline}"] == pytest.approx(sum(values) / len(values))


@pytest.mark.skipif(not (SHARED_DATA / "gsm8k" / "test.jsonl").is_file(), reason="no ../shared/data/gsm8k")
def test_the_built_in_repeats_example_runs_offline(runner: Runner) -> None:
    """tasks/gsm8k/gsm8k_maj8.yaml (the README's example): 8 sampled answers per question, each its
    own request, scored first / maj@8 / pass@8 / mean, which agree with the recorded samples."""
    docs = [json.loads(line) for line in (SHARED_DATA / "gsm8k" / "test.jsonl").read_text().splitlines()[:2]]
    NoisyOracleModel.ANSWERS = {
        d["question"].strip(): int(d["answer"].split("####")[-1].replace(",", "")) for d in docs
    }
    results, manifest, folder = runner("gsm8k_maj8", model=ORACLE, limit=2, data_map="shared")
    assert manifest["inference"]["computed"] == 2 * 8
    assert sorted(r.repeat for r in NoisyOracleModel.requests_seen) == sorted(list(range(8)) * 2)
    assert all(r.args[1].get("do_sample") for r in NoisyOracleModel.requests_seen)
    numbers = results["results"]["gsm8k_maj8"]
    rows = [json.loads(line) for line in (folder / "samples_gsm8k_maj8.jsonl").read_text().splitlines()]
    for pipeline in ("strict-match", "flexible-extract"):
        mine = [r for r in rows if r["filter"] == pipeline]
        per_sample = [[s["exact_match"] for s in r["sample_metrics"]] for r in mine]
        assert [r["exact_match"] for r in mine] == [v[0] for v in per_sample]  # first: lm-eval's number
        assert [r["exact_match_mean@8"] for r in mine] == pytest.approx([sum(v) / 8 for v in per_sample])
        assert [r["exact_match_pass@8"] for r in mine] == [float(any(v)) for v in per_sample]
        for name in ("exact_match", "exact_match_maj@8", "exact_match_pass@8", "exact_match_mean@8"):
            assert numbers[f"{name},{pipeline}"] == pytest.approx(sum(r[name] for r in mine) / 2)
    assert any(0 < sum(v) < 8 for v in per_sample)  # the samples disagree


def test_show_lists_every_sample_and_how_it_is_scored(
    sampled: Path, toy_library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evalflow.commands.show import main

    set_yaml(sampled, "[maj@k, pass@2]")
    assert main(["task=toy_gen", f"include_path=[{toy_library}]", f"cache_dir={tmp_path / 'c'}", "n=1"]) == 0
    out = capsys.readouterr().out
    assert (
        "repeats: 4 samples per request, every one listed below; scored: exact_match -> "
        "exact_match_maj@4, exact_match_pass@2" in out
    )
    assert [f"repeat {r}" in out for r in (1, 2, 3)] == [True] * 3 and "requests (4):" in out


def test_greedy_repeats_of_a_multiple_choice_task_reduce_to_the_same_number(runner: Runner, toy_library: Path) -> None:
    """Loglikelihood repeats are equal answers, so every reduction agrees with lm-eval's number."""
    path = toy_library / "toy_mc.yaml"
    path.write_text(
        path.read_text().replace(
            "    higher_is_better: true\n", "    higher_is_better: true\n    reduction: [first, mean, max, maj@k]\n"
        )
        + "repeats: 3\n"
    )
    results, _, _ = runner("toy_mc", limit=10)
    assert NoisyOracleModel.calls_total == 10 * 4  # 4 choices; the 3 repeats of each share one answer
    numbers = results["results"]["toy_mc"]
    assert numbers["acc_mean@3,none"] == numbers["acc_max@3,none"] == numbers["acc_maj@3,none"] == numbers["acc,none"]
