"""compare over clustered documents: whole clusters are resampled and a cluster's discordant
documents count once, so identical answers within clusters widen the interval; with every
document its own cluster the clustered tests are the plain ones."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evalflow.insight.comparison import compare
from evalflow.insight.stats import cluster_bootstrap, clustered_mcnemar, paired_bootstrap
from evalflow.output.run_folder import load_run

DATE = "2026-01-01T00-00-00.000000"


def _folder(root: Path, tasks: dict[str, list[float]], clusters: dict[str, list[str]] | None) -> Path:
    """An lm-eval-shaped output folder with a 0/1 ``acc`` per document; ``clusters`` adds each
    line's ``cluster`` as an evalflow run with ``cluster_key`` writes it."""
    folder = root / "model"
    folder.mkdir(parents=True)
    results: dict = {"results": {}, "group_subtasks": {t: [] for t in tasks}, "higher_is_better": {}}
    for task, values in tasks.items():
        results["results"][task] = {"alias": task, "acc,none": sum(values) / len(values), "acc_stderr,none": 0.1}
        rows = [
            {"doc_id": i, "doc": {"q": i}, "filter": "none", "metrics": ["acc"], "acc": v}
            | ({"cluster": clusters[task][i]} if clusters else {})
            for i, v in enumerate(values)
        ]
        (folder / f"samples_{task}_{DATE}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if len(tasks) > 1:
        results["results"]["grp"] = {
            "alias": "grp",
            "acc,none": float(np.mean([v for vs in tasks.values() for v in vs])),
        }
        results["group_subtasks"]["grp"] = list(tasks)
    (folder / f"results_{DATE}.json").write_text(json.dumps(results))
    return root


def _pair(tmp_path: Path, name: str, clustered: bool, tasks: int = 1) -> tuple:
    """A and B over 30 passages of 5 questions: B loses 7 passages and gains 2, whole."""
    rng = np.random.default_rng(11)
    a_passages = rng.integers(0, 2, 30)
    b_passages = a_passages.copy()
    b_passages[np.flatnonzero(a_passages == 1)[:7]] = 0
    b_passages[np.flatnonzero(a_passages == 0)[:2]] = 1
    a = [float(v) for v in np.repeat(a_passages, 5)]
    b = [float(v) for v in np.repeat(b_passages, 5)]
    ids = [f"p{i // 5}" for i in range(150)]
    names = [f"t{k}" for k in range(tasks)]
    clusters = dict.fromkeys(names, ids) if clustered else None
    run_a = load_run(_folder(tmp_path / f"{name}a", dict.fromkeys(names, a), clusters))
    run_b = load_run(_folder(tmp_path / f"{name}b", dict.fromkeys(names, b), clusters))
    return run_a, run_b


def test_identical_answers_within_clusters_widen_the_interval(tmp_path: Path) -> None:
    (plain,) = compare(*_pair(tmp_path, "plain", False), iters=4000, seed=3)
    (clustered,) = compare(*_pair(tmp_path, "clustered", True), iters=4000, seed=3)
    assert plain.test == "mcnemar" and clustered.test == "mcnemar, clustered (30 clusters)"
    assert clustered.clusters == 30 and plain.clusters is None
    assert clustered.diff == plain.diff == pytest.approx(-5 / 30)
    width = lambda r: r.high - r.low  # noqa: E731
    assert width(clustered) > 1.8 * width(plain)  # about √5 wider: 5 answers per passage agree
    assert clustered.p_value > plain.p_value
    assert plain.p_value < 0.001 and clustered.p_value > 0.05  # 35 vs 10 documents, but 7 vs 2 passages


def test_groups_pool_members_clusters_per_task(tmp_path: Path) -> None:
    rows = compare(*_pair(tmp_path, "grp", True, tasks=2), iters=2000, seed=3)
    group = next(r for r in rows if r.group)
    # the same passage id in two tasks is two clusters: each task's documents are its own
    assert group.n == 300 and group.test == "mcnemar, clustered (60 clusters)"


def test_singletons_give_the_plain_tests() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 2, 200).astype(float), rng.integers(0, 2, 200).astype(float)
    ours, plain = cluster_bootstrap(a, b, list(range(200)), 3000, 9), paired_bootstrap(a, b, 3000, 9)
    assert ours.low == pytest.approx(plain.low, abs=1e-12) and ours.high == pytest.approx(plain.high, abs=1e-12)
    assert ours.p_value == plain.p_value
    sm = pytest.importorskip("statsmodels.stats.contingency_tables")
    only_a, only_b = int(np.sum((a == 1) & (b == 0))), int(np.sum((a == 0) & (b == 1)))
    table = [[int(np.sum((a == 1) & (b == 1))), only_a], [only_b, int(np.sum((a == 0) & (b == 0)))]]
    chi_square = sm.mcnemar(table, exact=False, correction=False).pvalue
    assert clustered_mcnemar(a, b, list(range(200))) == pytest.approx(chi_square, rel=1e-12)


def test_durkalski_hand_computation() -> None:
    # cluster 0: A alone right on 2 docs; cluster 1: B alone right on 1, A alone on 1; cluster 2: none
    a, b, clusters = [1, 1, 0, 1, 1, 0], [0, 0, 1, 0, 1, 0], [0, 0, 1, 1, 2, 2]
    # per cluster b_k - c_k: 2, 0, 0 -> X² = 2² / (4 + 0 + 0) = 1
    from scipy.stats import chi2

    assert clustered_mcnemar(a, b, clusters) == pytest.approx(float(chi2.sf(1.0, 1)))
