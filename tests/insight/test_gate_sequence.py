"""The sequential gate's pure parts: the seeded order of units (clusters kept whole), rounds cut at a
budget, which rows are gated and the refusal of a bounded metric without a range, and a partial
run's mark as trackers and lm-eval's layout carry it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalflow.errors import ConfigError, TaskError
from evalflow.insight.gate_sequence import Unit, gated_rows, round_prefixes, subset, unit_order
from evalflow.lmeval_compat.layout import write_layout
from evalflow.output.partial import partial_line, partial_tasks
from evalflow.output.run_folder import Run, load_run
from evalflow.output.run_paths import samples_file
from evalflow.scoring.registry import declared_range, register_metric
from evalflow.tracking.logged import partial_tags, tracker_params


def test_the_order_is_seeded_and_keeps_each_cluster_whole() -> None:
    clusters = {"a": {0: "p1", 1: "p1", 2: None, 3: "p2", 4: "p2"}, "b": {0: None, 1: None}}
    order = unit_order(clusters, seed=3)
    assert order == unit_order(clusters, seed=3) and order != unit_order(clusters, seed=4)
    assert sorted((u.task, u.docs) for u in order) == [
        ("a", (0, 1)),
        ("a", (2,)),
        ("a", (3, 4)),
        ("b", (0,)),
        ("b", (1,)),
    ]
    assert subset(order, len(order)) == {"a": [0, 1, 2, 3, 4], "b": [0, 1]}


def test_rounds_grow_and_stop_where_the_budget_of_documents_ends() -> None:
    order = tuple(Unit("t", (i,)) for i in range(100))
    assert round_prefixes(order, first=10, budget=None)[-1] == 100
    assert round_prefixes(order, first=10, budget=25) == (10, 15, 22, 25)  # rounds grow 1.5x
    pairs = tuple(Unit("t", (2 * i, 2 * i + 1)) for i in range(50))  # clusters of two documents
    assert round_prefixes(pairs, first=4, budget=13) == (4, 6)  # 6 clusters = 12 documents fit, 7 do not
    with pytest.raises(ConfigError, match="budget=1 documents is smaller than the first round can evaluate"):
        round_prefixes(pairs, first=4, budget=1)


def test_a_round_gives_every_task_documents_judging_only_the_prefix() -> None:
    """A task none of whose units is in the prefix yet gets its first unit (else the run would
    evaluate it whole); the budget counts those look-ahead documents too."""
    order = (Unit("a", (0,)), Unit("a", (1,)), Unit("b", (5, 6)), Unit("a", (2,)), Unit("c", (9,)), Unit("b", (7,)))
    assert subset(order, 1) == {"a": [0], "b": [5, 6], "c": [9]}
    assert subset(order, 3) == {"a": [0, 1], "b": [5, 6], "c": [9]}  # b's first unit is now judged
    assert subset(order, 5) == {"a": [0, 1, 2], "b": [5, 6], "c": [9]}
    assert round_prefixes(order, first=1, budget=4) == (1,)  # 1 unit judged: 4 documents evaluated; 2 units: 5
    assert round_prefixes(order, first=1, budget=5)[-1] == 3  # 3 units: a0 a1 b56 judged, c9 ahead


def _run(folder: Path, values: list[float], partial: dict | None = None, metric: str = "score") -> Run:
    folder.mkdir(parents=True, exist_ok=True)
    hashes = {"doc_hash": "d", "prompt_hash": "p", "target_hash": "t"}
    rows = [{"doc_id": i, "filter": "none", "doc": {"i": i}, metric: v, **hashes} for i, v in enumerate(values)]
    samples_file(folder, "t").write_text("".join(json.dumps(r) + "\n" for r in rows))
    results = {
        "results": {"t": {f"{metric},none": sum(values) / len(values)}},
        "higher_is_better": {"t": {metric: True}},
        **({"partial": partial} if partial else {}),
    }
    return Run(folder, "evalflow", results, {"t": samples_file(folder, "t")})


def test_a_bounded_metric_needs_a_declared_range(tmp_path: Path) -> None:
    binary = gated_rows(_run(tmp_path / "b", [0.0, 1.0, 1.0]), {})
    assert [(r.name, r.value_range, r.difference_range) for r in binary] == [("t score,none", (0.0, 1.0), (-1.0, 1.0))]
    scored = _run(tmp_path / "s", [0.5, 31.0, 80.0])
    with pytest.raises(ConfigError, match=r"t score,none is not a 0/1 metric .* ranges=score:LOW:HIGH"):
        gated_rows(scored, {})
    assert gated_rows(scored, {"score": (0.0, 100.0)})[0].difference_range == (-100.0, 100.0)
    with pytest.raises(ConfigError, match=r"declares score in \[0, 1\], but the baseline's document 1"):
        gated_rows(scored, {"score": (0.0, 1.0)})


@register_metric("gate_rated", higher_is_better=True, aggregation="mean", value_range=(1, 10))
def gate_rated(items: list[float]) -> list[float]:
    """A judge-like score from 1 to 10 (its registration declares the range)."""
    return items


def test_a_registered_metric_declares_its_range(tmp_path: Path) -> None:
    """register_metric(value_range=) is the range the gate uses without ranges= (ranges= still
    wins); values outside it are refused naming the registration."""
    assert declared_range("gate_rated") == (1.0, 10.0) and declared_range("pass_at_k") == (0.0, 1.0)
    rated = _run(tmp_path / "r", [3.0, 7.5, 10.0], metric="gate_rated")
    assert gated_rows(rated, {})[0].difference_range == (-9.0, 9.0)
    assert gated_rows(rated, {"gate_rated": (0.0, 20.0)})[0].value_range == (0.0, 20.0)
    with pytest.raises(ConfigError, match=r"its registration declares gate_rated in \[1, 10\], but .* document 0"):
        gated_rows(_run(tmp_path / "o", [0.0, 7.5], metric="gate_rated"), {})
    with pytest.raises(
        ConfigError, match=r"its registration declares .* \(ranges=gate_rated:LOW:HIGH, which overrides"
    ):
        gated_rows(_run(tmp_path / "o2", [0.0, 7.5], metric="gate_rated"), {})
    for backwards in ((5, 1), (0, float("inf")), (float("nan"), 1)):
        with pytest.raises(TaskError, match="value_range=.* is not"):
            register_metric("gate_rated_bad", higher_is_better=True, aggregation="mean", value_range=backwards)


def test_ranges_names_metrics_the_gate_judges_and_suggests_a_range(tmp_path: Path) -> None:
    """A ranges= name that is no gated metric is refused (a typo would declare nothing); an
    undeclared metric's refusal proposes bounds covering the baseline's values, and rows=."""
    scored = _run(tmp_path / "s", [0.5, 31.0, 80.0])
    with pytest.raises(ConfigError, match=r"ranges=scor:... names no metric the gate can judge; did you mean 'score'"):
        gated_rows(scored, {"scor": (0.0, 100.0)})
    with pytest.raises(
        ConfigError, match=r"at least ranges=score:0:80; .* leave the metric out of the gate with rows="
    ):
        gated_rows(scored, {})


@pytest.mark.parametrize("value", ["score:4:0", "score:0:inf", "score:nan:1", "score:0:1,score:0:2", "score:0"])
def test_the_ranges_word_refuses_what_cannot_bound_a_metric(value: str) -> None:
    from evalflow.commands.gate import metric_ranges

    with pytest.raises(ValueError):
        metric_ranges(value)


def test_trackers_and_the_lm_eval_layout_carry_the_partial_mark(tmp_path: Path) -> None:
    run = _run(tmp_path / "p", [1.0, 0.0], partial={"t": {"n": 2, "N": 40}})
    assert partial_line(run.results) == "partial: t 2 of 40"
    assert tracker_params(run)["partial"] == "partial: t 2 of 40" and partial_tags(run) == ["partial"]
    whole = _run(tmp_path / "w", [1.0, 0.0])
    assert "partial" not in tracker_params(whole) and partial_tags(whole) == []
    written = write_layout(tmp_path / "lm", {**run.results, "configs": {}}, run.folder, "hf", {"pretrained": "m"})
    assert partial_tasks(load_run(written[0]).results) == {"t": (2, 40)}
