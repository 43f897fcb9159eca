"""`compare ... kappa=`: Cohen's kappa against hand computations, within one run and across two,
its degenerate cases, and the refusals (continuous values, nothing paired, options it ignores)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalflow.commands.compare import main, parse_args
from evalflow.errors import ConfigError, RunFolderError
from evalflow.insight.agreement import cohen_kappa


def from_table(table: list[list[int]]) -> tuple[list[int], list[int]]:
    """Rater A's and B's categories for a contingency table (rows: A's category, columns: B's)."""
    a = [i for i, row in enumerate(table) for j, count in enumerate(row) for _ in range(count)]
    b = [j for i, row in enumerate(table) for j, count in enumerate(row) for _ in range(count)]
    return a, b


@pytest.mark.parametrize(
    ("table", "observed", "expected", "kappa"),
    [
        # p_o = 35/50; p_e = (25*30 + 25*20)/50^2 = 0.5; kappa = (0.7 - 0.5)/0.5
        ([[20, 5], [10, 15]], 0.7, 0.5, 0.4),
        ([[5, 0], [0, 3]], 1.0, (25 + 9) / 64, 1.0),  # perfect agreement, two categories
        ([[0, 4], [4, 0]], 0.0, 0.5, -1.0),  # always disagree
        ([[0, 6], [0, 0]], 0.0, 0.0, 0.0),  # each constant, in different categories: p_e = 0
        # three categories: p_o = 5/8; p_e = (4*3 + 2*3 + 2*2)/64 = 22/64; kappa = (40 - 22)/(64 - 22) = 3/7
        ([[3, 1, 0], [0, 1, 1], [0, 1, 1]], 5 / 8, 22 / 64, 3 / 7),
    ],
)
def test_kappa_matches_a_hand_computation(
    table: list[list[int]], observed: float, expected: float, kappa: float
) -> None:
    result = cohen_kappa(*from_table(table))
    assert (result.observed, result.expected, result.kappa) == pytest.approx((observed, expected, kappa))


def test_kappa_matches_statsmodels_on_random_tables() -> None:
    from statsmodels.stats.inter_rater import cohens_kappa

    rng = np.random.default_rng(7)
    for size in (2, 3, 5):
        table = rng.integers(0, 12, (size, size)).tolist()
        assert cohen_kappa(*from_table(table)).kappa == pytest.approx(cohens_kappa(np.array(table)).kappa)


def test_degenerate_and_categorical_cases() -> None:
    same = cohen_kappa([1, 1, 1], [1, 1, 1])  # p_e = 1: nothing beyond chance to measure
    assert same.kappa is None and same.observed == 1.0 and same.categories == (1,)
    choices = cohen_kappa(["A", "B", "A", "C"], ["A", "B", "B", "C"])  # p_o 3/4, p_e (2*1 + 1*2 + 1*1)/16
    assert choices.kappa == pytest.approx((3 / 4 - 5 / 16) / (1 - 5 / 16)) and choices.categories == ("A", "B", "C")
    with pytest.raises(RunFolderError, match="at least one document"):
        cohen_kappa([], [])


def write_run(
    folder: Path, values: dict[str, dict[str, list[Any]]], groups: dict[str, list[str]] | None = None
) -> Path:
    """An evalflow run folder: per task, per metric, one value per document (filter "none")."""
    folder.mkdir(parents=True)
    results: dict[str, Any] = {"results": {}, "group_subtasks": {**(groups or {}), **{t: [] for t in values}}}
    for task, metrics in values.items():
        numbers = [v for v in next(iter(metrics.values())) if v is not None]
        results["results"][task] = {f"{m},none": 0.5 for m in metrics} | {"alias": task, "n": len(numbers)}
        rows = [
            {"doc_id": i, "doc": {"q": f"{task}-{i}"}, "filter": "none", **{m: vs[i] for m, vs in metrics.items()}}
            for i in range(len(next(iter(metrics.values()))))
        ]
        (folder / f"samples_{task}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for group in groups or {}:
        results["results"][group] = {"alias": group}
    (folder / "results.json").write_text(json.dumps(results))
    return folder


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["kappa"]


def test_a_judge_against_exact_match_within_one_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    judge, em = from_table([[20, 5], [10, 15]])
    judge2, em2 = from_table([[3, 1], [0, 4]])
    run = write_run(
        tmp_path / "run",
        {
            "t1": {"judge_correct": [*judge, None, float("nan")], "exact_match": [float(x) for x in em] + [1.0, 0.0]},
            "t2": {"judge_correct": [bool(x) for x in judge2], "exact_match": em2},
        },
        groups={"g": ["t1", "t2"]},
    )
    rows = {r["task"]: r for r in run_json(capsys, str(run), "kappa=judge_correct,exact_match")}
    assert rows["t1"]["kappa"] == pytest.approx(0.4) and rows["t1"]["n"] == 50 and rows["t1"]["left_out"] == 2
    # t2: p_o = 7/8, p_e = (4*3 + 4*5)/64 = 1/2
    assert rows["t2"]["kappa"] == pytest.approx(0.75) and rows["t2"]["metric_a"] == "judge_correct"
    pooled = cohen_kappa(judge + judge2, em + em2).kappa  # the group pools its subtasks' documents
    assert rows["g"]["group"] and rows["g"]["n"] == 58 and rows["g"]["kappa"] == pytest.approx(pooled)
    assert main([str(run), "kappa=judge_correct,exact_match"]) == 0
    assert "|+0.4000|" in capsys.readouterr().out.replace(" ", "")  # t1's row of the table


def test_one_metric_across_two_runs_pairs_their_documents(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = from_table([[3, 1, 0], [0, 1, 1], [0, 1, 1]])
    run_a = write_run(tmp_path / "a", {"t": {"grade": [x + 1 for x in a]}})
    run_b = write_run(tmp_path / "b", {"t": {"grade": [float(y + 1) for y in b]}})
    (row,) = run_json(capsys, str(run_a), str(run_b), "kappa=grade")
    assert row["kappa"] == pytest.approx(3 / 7) and row["categories"] == [1, 2, 3]
    other = write_run(tmp_path / "c", {"t": {"grade": [1] * 5}})  # 5 documents, not 8
    with pytest.raises(RunFolderError, match="different documents"):
        main([str(run_a), str(other), "kappa=grade"])


def test_perfect_agreement_on_one_category_is_reported_undefined(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "run", {"t": {"judge_correct": [1, 1, 1], "exact_match": [1.0, 1.0, 1.0]}})
    (row,) = run_json(capsys, str(run), "kappa=judge_correct,exact_match")
    assert row["kappa"] is None and row["observed"] == 1.0 and "every document in 1" in row["note"]


def test_metrics_under_no_shared_filter_pair_across_their_filters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A judge reported only under pipeline "raw", exact_match only under "strict": by default
    each pair of their filters, with @filter the one named (a filter naming nothing is no row)."""
    judge, em = from_table([[20, 5], [10, 15]])
    run = tmp_path / "run"
    run.mkdir()
    rows = [
        {"doc_id": i, "doc": {"q": i}, "filter": f, **m}
        for i in range(50)
        for f, m in (("raw", {"judge_correct": judge[i]}), ("strict", {"exact_match": em[i]}))
    ]
    (run / "samples_t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "results.json").write_text(json.dumps({"results": {"t": {"judge,raw": 0.5, "exact_match,strict": 0.5}}}))
    (row,) = run_json(capsys, str(run), "kappa=judge_correct,exact_match")
    assert (row["filter"], row["filter_b"], row["n"], row["kappa"]) == ("raw", "strict", 50, pytest.approx(0.4))
    (named,) = run_json(capsys, str(run), "kappa=judge_correct@raw,exact_match@strict")
    assert named == row
    with pytest.raises(RunFolderError, match=r"filters: raw, strict\).*exact_match@strict-match"):
        main([str(run), "kappa=judge_correct@strict,exact_match"])


def test_refusals(tmp_path: Path) -> None:
    run = write_run(
        tmp_path / "run",
        {
            "t": {
                "score": [0.37, 1.0],
                "exact_match": [0, 1],
                "graded": [None, None],
                "judge": [{"graded": []}, {"graded": []}],
            }
        },
    )
    with pytest.raises(RunFolderError, match=r"value 0\.37 on document 0, which is not a category"):
        main([str(run), "kappa=score,exact_match"])
    # `judge` is the samples row's record of verdicts, not a metric: the message lists the real ones
    with pytest.raises(
        RunFolderError, match="no per-document metric 'judge' in t; its metrics are exact_match, graded, score"
    ):
        main([str(run), "kappa=judge,exact_match"])
    with pytest.raises(RunFolderError, match="lacks a value of one of the metrics"):
        main([str(run), "kappa=graded,exact_match"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["a", "kappa=exact_match"], "with one run, name two of its metrics"),
        (["a", "b", "kappa=x,y", "max_drop=0.01"], "max_drop= do not apply"),
        (["a", "kappa=x,y,z"], "kappa takes one metric name"),
        (["a"], "takes 2 RUN_A RUN_B"),
        (["a", "b", "c", "kappa=x,y"], r"takes 1 to 2 RUN_A \[RUN_B\]"),
    ],
)
def test_command_line_refusals(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_args(argv)


def test_command_line_spelling() -> None:
    one = parse_args(["run", "kappa=judge_correct,exact_match", "--json"])
    assert one.kappa == ("judge_correct", "exact_match") and one.folders == (Path("run"), Path("run")) and one.as_json
    assert parse_args(["a", "b", "kappa=judge_correct"]).kappa == ("judge_correct", "judge_correct")
    assert parse_args(["a", "b"]).kappa is None


def test_docstring_examples() -> None:
    """cohen_kappa's and split_filter's examples (kappa=metric@filter) give what they show."""
    import doctest

    from evalflow.insight import agreement

    result = doctest.testmod(agreement)
    assert result.attempted >= 2 and result.failed == 0
