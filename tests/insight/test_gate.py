"""`compare A B max_drop=X alpha=P`: the release gate. The README's recipe end to end (a candidate
checkpoint that lost questions fails the build, an equal one passes), the smallest detectable
difference against an exhaustive search, lower-is-better metrics reversed, bad input refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalflow.commands.compare import parse_args
from evalflow.errors import ConfigError
from evalflow.insight.gate import GateSettings, judge, mcnemar_detectable
from evalflow.insight.stats import mcnemar_exact
from tests.support.cli import cli
from tests.support.paths import ROOT

CHECKPOINT = "tests.support.checkpoints:ArithCheckpoint"


def _evaluate(folder: Path, cache: Path, skill: float) -> None:
    """The recipe's first step: evaluate a checkpoint into a named run folder."""
    done = cli(
        [
            "task=arith_mc",
            f"model.type={CHECKPOINT}",
            f"+model.skill={skill}",
            f"cache_dir={cache}",
            f"hydra.run.dir={folder}",
        ]
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gate")
    folders = {"release": root / "release", "same": root / "same", "worse": root / "worse"}
    for (_name, folder), skill in zip(folders.items(), (1.0, 1.0, 0.6)):
        _evaluate(folder, root / "cache", skill)
    return folders


def test_a_candidate_that_lost_questions_fails_the_build(releases: dict[str, Path]) -> None:
    gated = cli(["compare", str(releases["release"]), str(releases["worse"]), "max_drop=0.01", "alpha=0.05"])
    assert gated.returncode == 1, gated.stdout + gated.stderr
    assert "REGRESSION: arith_mc acc,none: dropped by" in gated.stdout
    assert "gate: 2 regression(s) in 2 metric(s); FAILED" in gated.stderr  # acc and acc_norm


def test_an_equal_candidate_passes_and_json_rows_carry_the_direction(releases: dict[str, Path]) -> None:
    passed = cli(["compare", str(releases["release"]), str(releases["same"]), "max_drop=0.01", "alpha=0.05", "--json"])
    assert passed.returncode == 0, passed.stderr
    report = json.loads(passed.stdout)
    assert report["gate"]["failed"] == [] and {r["higher_is_better"] for r in report["rows"]} == {True}
    assert all(r["detectable"] == mcnemar_detectable(60, 0, 0.05) for r in report["rows"])


def test_rows_chooses_the_gated_rows(releases: dict[str, Path]) -> None:
    """rows=TASK:METRIC gates that row alone (acc_norm's drop is shown, not gated; the GATED line
    and --json say which were); a filter is named with @; a name that matches no row, or rows=
    without a gate, is one paragraph and exit 2."""
    one = cli(["compare", str(releases["release"]), str(releases["worse"]), "max_drop=0.01", "rows=arith_mc:acc"])
    assert one.returncode == 1 and "gate: 1 regression(s) in 1 metric(s); FAILED" in one.stderr, one.stderr
    assert "REGRESSION: arith_mc acc,none" in one.stdout and "acc_norm,none: dropped" not in one.stdout
    assert "GATED (rows=): arith_mc acc,none" in one.stdout
    words = ["max_drop=0.01", "rows=arith_mc:acc_norm@none", "--json"]
    shown = json.loads(cli(["compare", str(releases["release"]), str(releases["worse"]), *words]).stdout)
    assert shown["gate"]["gated"] == shown["gate"]["failed"] == ["arith_mc acc_norm,none"]
    for words, says in (
        (["max_drop=0.01", "rows=arith_mc:accc"], "rows=arith_mc:accc names no row the gate can judge"),
        (["max_drop=0.01", "rows=arith_mc:acc@strict"], "rows=arith_mc:acc@strict names no row"),
        (["max_drop=0.01", "rows=arith"], "rows=arith names no task or group of the baseline"),
        (["rows=arith_mc"], "rows= chooses the rows the release gate judges"),
    ):
        refused = cli(["compare", str(releases["release"]), str(releases["worse"]), *words])
        assert refused.returncode == 2 and says in refused.stderr and "Traceback" not in refused.stderr, refused.stderr


def test_a_candidate_missing_a_baseline_task_fails_the_gate(releases: dict[str, Path], tmp_path: Path) -> None:
    """compare pairs the tasks both runs have; the gate fails a task the candidate did not run
    (it would pass on the rest), unless rows= leaves that task out."""
    from evalflow import evaluate

    demo = ROOT / "tasks" / "demo"
    (tmp_path / "tasks").mkdir()
    copy = (demo / "arith_mc.yaml").read_text().replace("task: arith_mc", "task: arith_copy")
    (tmp_path / "tasks" / "arith_copy.yaml").write_text(copy.replace("arith_mc_t", f"{demo}/arith_mc_t"))
    common = {"cache_dir": str(tmp_path / "c"), "include_path": [str(tmp_path / "tasks")], "limit": 10}
    both, one = tmp_path / "both", tmp_path / "one"
    evaluate(["arith_mc", "arith_copy"], "dummy", output_dir=both, **common)
    evaluate(["arith_copy"], "dummy", output_dir=one, **common)
    dropped = cli(["compare", str(both), str(one), "max_drop=0.01"])
    assert dropped.returncode == 1 and f"REGRESSION: arith_mc: not in B ({one})" in dropped.stdout, dropped.stdout
    assert cli(["compare", str(both), str(one), "max_drop=0.01", "rows=arith_copy"]).returncode == 0
    from evalflow.output.run_folder import load_run
    from evalflow.view.comparing import compare_payload

    lines = compare_payload(load_run(both), load_run(one), GateSettings(0.01))["gate"]  # the viewer's gate, too
    assert f"REGRESSION: arith_mc: not in B ({one}): the candidate has no value to gate" in lines
    assert lines[-1].endswith("FAILED")


def test_without_gate_options_compare_reports_and_exits_zero(releases: dict[str, Path]) -> None:
    shown = cli(["compare", str(releases["release"]), str(releases["worse"])])
    assert shown.returncode == 0 and "Detectable" in shown.stdout and "REGRESSION" not in shown.stdout


@pytest.mark.parametrize(
    "words",
    [
        ["--fail-on-regression"],
        ["--jsn"],
        ["max_dorp=0.01"],
        ["alpha=0"],
        ["alpha=1.5"],
        ["max_drop=-1"],
        ["max_drop=a"],
        ["max_drop=0.01", "rows=arith_mc:"],
        ["max_drop=0.01", "rows=arith_mc:acc@"],
    ],
)
def test_unknown_or_bad_options_exit_2(releases: dict[str, Path], words: list[str]) -> None:
    refused = cli(["compare", str(releases["release"]), str(releases["worse"]), *words])
    assert refused.returncode == 2 and refused.stderr.startswith("evalflow: error: compare: "), refused.stderr
    assert "Traceback" not in refused.stderr


@pytest.mark.parametrize("n", [5, 6, 12, 30])
@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.2])
def test_detectable_difference_is_the_smallest_significant_split(n: int, alpha: float) -> None:
    """Against the exact test itself: with D documents disagreeing (topped up to the first count
    that can be significant), the smallest |B - A| whose McNemar p is below alpha; None when no
    split of n documents is significant."""
    for d_observed in range(0, n + 1, 3):
        expected = None
        for d in range(max(d_observed, 1), n + 1):
            splits = [
                abs(d - 2 * m)
                for m in range(d // 2 + 1)
                if mcnemar_exact([1] * m + [0] * (d - m), [0] * m + [1] * (d - m)) < alpha
            ]
            if splits:
                expected = min(splits) / n
                break
        assert mcnemar_detectable(n, d_observed, alpha) == (None if expected is None else pytest.approx(expected))


def test_lower_is_better_metrics_are_reversed() -> None:
    gate = GateSettings(max_drop=0.01, alpha=0.05)
    assert judge("wikitext word_perplexity,none", +3.0, False, 0.001, gate).failed  # perplexity rose
    assert not judge("wikitext word_perplexity,none", -3.0, False, 0.001, gate).failed
    assert not judge("x acc,none", -0.2, True, 0.3, gate).failed  # a drop the documents cannot tell from noise
    assert judge("x acc,none", -0.2, True, None, gate).failed  # no paired test: nothing says it is noise
    unknown = judge("x score,none", -0.2, None, 0.001, gate)
    assert not unknown.failed and unknown.reason.startswith("not gated")


def test_parse_args_accounts_for_every_word() -> None:
    args = parse_args(["a", "b", "alpha=0.01", "--json", "seed=3"])
    assert args.gate == GateSettings(0.0, 0.01) and args.as_json and args.seed == 3
    assert parse_args(["a", "b"]).gate is None
    with pytest.raises(ConfigError, match="takes 2 RUN_A RUN_B"):
        parse_args(["a", "b", "c"])
