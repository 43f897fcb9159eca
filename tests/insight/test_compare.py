"""`compare`: the paired statistics agree with scipy/statsmodels, a run against itself differs by 0
with p = 1, runs of different documents are refused, lm-eval folders are read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evalflow.commands.compare import main
from evalflow.errors import RunFolderError
from evalflow.insight.comparison import compare
from evalflow.insight.stats import batch_rows, mcnemar_exact, paired_bootstrap
from evalflow.output.run_folder import load_run
from tests.support.runs import Runner

TABLES = [(30, 5, 12, 53), (10, 0, 0, 10), (4, 7, 1, 3), (0, 20, 21, 0), (100, 33, 61, 6), (1, 0, 1, 0)]


@pytest.mark.parametrize("table", TABLES)
def test_mcnemar_matches_statsmodels(table: tuple[int, int, int, int]) -> None:
    from statsmodels.stats.contingency_tables import mcnemar

    both, only_a, only_b, neither = table
    a = [1] * both + [1] * only_a + [0] * only_b + [0] * neither
    b = [1] * both + [0] * only_a + [1] * only_b + [0] * neither
    expected = mcnemar([[both, only_a], [only_b, neither]], exact=True).pvalue
    assert abs(mcnemar_exact(a, b) - expected) <= 1e-9


@pytest.mark.parametrize("n,iters,seed", [(57, 5000, 42), (300, 2000, 0), (13, 999, 7)])
def test_paired_bootstrap_matches_scipy(n: int, iters: int, seed: int) -> None:
    from scipy.stats import bootstrap

    rng = np.random.default_rng(seed + 100)
    a = rng.normal(size=n)
    b = a + rng.normal(0.1, 1.0, size=n)
    ours = paired_bootstrap(a, b, iters, seed)
    theirs = bootstrap(
        (a, b),
        lambda x, y, axis=-1: np.mean(y, axis=axis) - np.mean(x, axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=iters,
        batch=batch_rows(n, iters),
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    assert abs(ours.low - theirs.confidence_interval.low) <= 1e-9
    assert abs(ours.high - theirs.confidence_interval.high) <= 1e-9
    dist = theirs.bootstrap_distribution
    p = min(1.0, 2 * min(np.mean(dist <= 1e-12), np.mean(dist >= -1e-12)))
    assert abs(ours.p_value - p) <= 1e-9


def test_run_against_itself(runner: Runner) -> None:
    _, _, folder = runner(limit=20)
    rows = compare(load_run(folder), load_run(folder), iters=200)
    (row,) = rows
    assert (row.task, row.metric, row.test, row.n) == ("toy_mc", "acc", "mcnemar", 20)
    assert row.diff == 0 and row.p_value == 1.0 and row.low == row.high == 0


def _lm_eval_folder(root: Path, values: list[float], date: str = "2026-01-01T00-00-00.000000") -> Path:
    """An lm-eval-shaped output folder with a continuous per-document metric."""
    folder = root / "model__name"
    folder.mkdir(parents=True)
    mean = sum(values) / len(values)
    results = {
        "results": {"cont": {"alias": "cont", "score,none": mean, "score_stderr,none": 0.1}},
        "group_subtasks": {"cont": []},
        "versions": {"cont": 1},
        "n-shot": {"cont": 0},
    }
    (folder / f"results_{date}.json").write_text(json.dumps(results))
    rows = [
        {"doc_id": i, "doc": {"q": i}, "filter": "none", "metrics": ["score"], "score": v} for i, v in enumerate(values)
    ]
    (folder / f"samples_cont_{date}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def test_continuous_metric_in_lm_eval_folders(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    a = [round(float(x), 6) for x in rng.random(40)]
    b = [round(x + 0.2, 6) for x in a]
    run_a, run_b = load_run(_lm_eval_folder(tmp_path / "a", a)), load_run(_lm_eval_folder(tmp_path / "b", b))
    assert run_a.kind == "lm-eval"
    (row,) = compare(run_a, run_b, iters=1000, seed=5)
    assert row.test == "bootstrap" and row.n == 40
    assert row.diff == pytest.approx(0.2) and row.low == pytest.approx(0.2) and row.p_value == 0.0
    (same,) = compare(run_a, run_a, iters=1000, seed=5)
    assert same.diff == 0 and same.p_value == 1.0


def test_refuses_different_documents(runner: Runner, toy_library: Path) -> None:
    _, _, ten = runner(limit=10)
    _, _, twenty = runner(limit=20)
    with pytest.raises(RunFolderError, match=r"scored different documents \(A .*: 10, B .*: 20, 10 in common\)"):
        compare(load_run(ten), load_run(twenty))
    data = toy_library.parent / "data" / "test.jsonl"
    data.write_text(data.read_text().replace("What is 1 plus 2?", "What is 1 plus 3?"))
    _, _, changed = runner(limit=10)
    with pytest.raises(RunFolderError, match="read different data"):
        compare(load_run(ten), load_run(changed))


def test_groups_and_json_output(runner: Runner, toy_library: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (toy_library / "toy_group.yaml").write_text(
        "group: toy_group\ntask:\n  - toy_mc\n  - toy_gen\naggregate_metric_list:\n  - metric: acc\n"
        "metadata:\n  version: 1\n"
    )
    _, _, a = runner("toy_group", limit=10)
    _, _, b = runner("toy_group", limit=10, num_fewshot=1)
    assert main([str(a), str(b), "--json", "bootstrap_iters=500"]) == 0
    out = json.loads(capsys.readouterr().out)
    by_name = {(r["task"], r["metric"]): r for r in out["rows"]}
    assert by_name[("toy_group", "acc")]["group"] and by_name[("toy_group", "acc")]["n"] == 10
    assert by_name[("toy_gen", "exact_match")]["test"] == "mcnemar"
    assert main([str(a), str(b)]) == 0
    table = capsys.readouterr().out
    assert table.startswith("|Task") and "toy_group (group)" in table


def test_not_a_run_folder(tmp_path: Path) -> None:
    with pytest.raises(RunFolderError, match="neither an evalflow run folder"):
        load_run(tmp_path)
