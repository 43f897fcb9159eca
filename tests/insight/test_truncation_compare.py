"""`compare` and its gate say when two runs cut off different shares of a task's generations: a
model starved by a shorter budget (the scripted thinker, a third of its generations cut off)
against the same model with room to finish. The gate still fails; the TRUNCATION line says why
the drop is likely the budget. The rule (one point apart and Fisher's exact p < alpha) is
checked on figures alone."""

from __future__ import annotations

import json
from math import comb
from pathlib import Path
from typing import Any

import pytest

from evalflow import evaluate
from evalflow.commands.compare import main
from evalflow.insight.truncation_change import truncation_change
from tests.support.thinking import TRUNCATED_SHAPES, shape_of
from tests.support.toy_tasks import rows

MARKER = "</think>"


def run(toy_library: Path, tmp_path: Path, name: str, model: str) -> Path:
    evaluate(
        "toy_gen",
        {"type": model},
        think_end_token=MARKER,
        include_path=[str(toy_library)],
        cache_dir=str(tmp_path / "cache"),
        bootstrap_iters=0,
        output_dir=tmp_path / name,
    )
    return tmp_path / name


@pytest.fixture
def roomy_and_starved(toy_library: Path, tmp_path: Path) -> tuple[Path, Path]:
    return (
        run(toy_library, tmp_path, "roomy", "tests.support.thinking_budget:RoomyThinker"),
        run(toy_library, tmp_path, "starved", "tests.support.thinking:ScriptedThinker"),
    )


def cut_off() -> int:
    """How many toy_gen documents the scripted thinker cuts off (their question says)."""
    pairs = [(int(r["question"].split()[2]), int(r["question"].split()[4].rstrip("?"))) for r in rows(40)]
    return sum(1 for a, b in pairs if shape_of(a, b) in TRUNCATED_SHAPES)


def fisher_p(hit_a: int, hit_b: int, n: int) -> float:
    """Fisher's exact two-sided p-value for hit_a of n against hit_b of n, summed by hand."""
    hits = hit_a + hit_b

    def p(k: int) -> float:
        return comb(n, k) * comb(n, hits - k) / comb(2 * n, hits)

    return sum(p(k) for k in range(max(0, hits - n), min(n, hits) + 1) if p(k) <= p(hit_a) * (1 + 1e-7))


def test_the_gate_fails_and_says_the_drop_came_with_truncation(
    roomy_and_starved: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    roomy, starved = roomy_and_starved
    cut = cut_off()
    assert main([str(roomy), str(starved), "max_drop=0.01", "alpha=0.05", "bootstrap_iters=200"]) == 1
    out, err = capsys.readouterr()
    assert "REGRESSION: toy_gen exact_match,get-answer: dropped by" in out
    (line,) = [line for line in out.splitlines() if line.startswith("TRUNCATION:")]
    assert line.startswith(
        f"TRUNCATION: toy_gen: A cut off 0 of 40 generations (0.0%), B {cut} of 40 ({100 * cut / 40:.1f}%); "
        f"Fisher p={fisher_p(0, cut, 40):.4g} < alpha=0.05. B truncated more: a score difference that comes with it "
        "is likely a shorter max_gen_toks budget"
    )
    assert "not a worse model" in line and "On the generations that finished, exact_match,get-answer is" in line
    assert "FAILED (truncation rates differ on toy_gen: see the TRUNCATION lines)" in err


def test_json_records_each_tasks_truncation_beside_the_rows(
    roomy_and_starved: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    roomy, starved = roomy_and_starved
    cut = cut_off()
    assert main([str(starved), str(roomy), "--json", "bootstrap_iters=200"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["truncation"]
    assert (entry["task"], entry["a_truncated"], entry["b_truncated"], entry["differs"]) == ("toy_gen", cut, 0, True)
    assert entry["a_share"] == cut / 40 and entry["b_share"] == 0.0
    assert entry["p_value"] == pytest.approx(fisher_p(cut, 0, 40))
    assert entry["a_max_gen_toks"] == 32


def test_runs_that_truncate_alike_get_no_line(
    roomy_and_starved: tuple[Path, Path], toy_library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, starved = roomy_and_starved
    again = run(toy_library, tmp_path, "again", "tests.support.thinking:ScriptedThinker")
    assert main([str(starved), str(again), "max_drop=0.01", "bootstrap_iters=200"]) == 0
    out, err = capsys.readouterr()
    assert "TRUNCATION" not in out and "truncation rates differ" not in err


def figures(generations: int, truncated: int, reasons: dict[str, int] | None = None) -> dict[str, Any]:
    return {"generations": generations, "truncated": truncated, "stop_reasons": reasons or {"eos": 1}}


def test_the_rule_needs_one_point_and_a_significant_test() -> None:
    n = 1_000_000  # so many generations that half a point is significant: still not a line
    close = truncation_change("t", figures(n, 100_000), figures(n, 105_000), alpha=0.05)
    assert close.p_value < 1e-6 and not close.differs
    apart = truncation_change("t", figures(n, 100_000), figures(n, 110_000), alpha=0.05)
    assert apart.differs
    few = truncation_change("t", figures(10, 0), figures(10, 2), alpha=0.05)  # 20 points, but p = 0.47
    assert few.p_value == pytest.approx(fisher_p(0, 2, 10)) and not few.differs


def test_unknown_stop_reasons_give_no_rate(tmp_path: Path) -> None:
    """A model that reported no stop reason (plain strings, no thinking marker) has no known rate."""
    from evalflow.insight.truncation_change import truncation_changes
    from evalflow.output.run_folder import Run

    known = {"t": figures(40, 13)}
    unknown = {"t": figures(40, 0, {"unknown": 40})}
    run_a = Run(tmp_path, "evalflow", {"generations": known}, {})
    assert [c.task for c in truncation_changes(run_a, run_a, ["t"], 0.05)] == ["t"]
    assert truncation_changes(run_a, Run(tmp_path, "evalflow", {"generations": unknown}, {}), ["t"], 0.05) == []
    assert truncation_changes(run_a, Run(tmp_path, "lm-eval", {}, {}), ["t"], 0.05) == []
