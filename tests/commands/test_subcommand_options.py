"""Every subcommand refuses or honours each option it is given (issue 20, item 7): an option a
subcommand silently ignored would look honoured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import cli
from tests.support.runs import Runner


@pytest.fixture
def finished(runner: Runner) -> Path:
    return runner(limit=6)[2]


def test_rescore_honours_hydra_run_dir(runner: Runner, finished: Path, tmp_path: Path) -> None:
    target, cwd = tmp_path / "rescored_here", tmp_path / "elsewhere"
    cwd.mkdir()
    done = cli(
        [
            "rescore",
            str(finished / "samples_toy_mc.jsonl"),
            "task=toy_mc",
            f"include_path=[{runner.library}]",
            f"cache_dir={runner.cache}",
            f"hydra.run.dir={target}",
        ],
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    assert (
        json.loads((target / "results.json").read_text())["results"]["toy_mc"]["acc,none"]
        == json.loads((finished / "results.json").read_text())["results"]["toy_mc"]["acc,none"]
    )
    assert list(cwd.iterdir()) == []  # nothing written to ./outputs


@pytest.mark.parametrize("word", ["num_fewshot=5", "model=hf", "limit=3", "hydra/launcher=parallel", "--json"])
def test_rescore_refuses_what_the_recorded_answers_fix(runner: Runner, finished: Path, word: str) -> None:
    refused = cli(
        [
            "rescore",
            str(finished / "samples_toy_mc.jsonl"),
            "task=toy_mc",
            f"include_path=[{runner.library}]",
            f"cache_dir={runner.cache}",
            word,
        ]
    )
    assert refused.returncode == 2 and refused.stderr.startswith("evalflow: error: rescore: unknown"), refused.stderr
    assert "recorded answers" in refused.stderr and "Traceback" not in refused.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["explain", "{run}", "--json"],
        ["explain", "{run}", "limit=3"],
        ["report", "{run}", "--json"],
        ["report", "{run}", "title=x"],
        ["compare", "{run}", "{run}", "--fail-on-regression"],
        ["cache", "stats", "max_size_gb=1"],
        ["cache", "verify", "max_age_days=3"],
        ["cache", "gc", "max_size_gb=-1"],
        ["cache", "merge", "{run}", "--force"],
    ],
)
def test_options_a_subcommand_does_not_take_are_refused(finished: Path, args: list[str]) -> None:
    words = [a.format(run=finished) for a in args]
    refused = cli(words)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.startswith(f"evalflow: error: {args[0]}") and "usage: python -m evalflow" in refused.stderr
    assert "Traceback" not in refused.stderr


@pytest.mark.parametrize("command", ["show", "validate"])
@pytest.mark.parametrize("word", ["hydra.run.dir=/tmp/x", "hydra/launcher=parallel", "--json"])
def test_show_and_validate_refuse_what_they_cannot_honour(runner: Runner, command: str, word: str) -> None:
    refused = cli([command, "task=toy_mc", f"include_path=[{runner.library}]", word])
    assert refused.returncode == 2 and refused.stderr.startswith(f"evalflow: error: {command}: "), refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_misspelled_option_gets_the_closest_name(finished: Path) -> None:
    refused = cli(["compare", str(finished), str(finished), "max_dorp=0.01"])
    assert refused.returncode == 2 and "unknown option 'max_dorp=' (did you mean 'max_drop'?)" in refused.stderr
    missing = cli(["compare", str(finished), str(finished.parent / "no-such-run")])
    assert missing.returncode == 2 and "no-such-run: no such folder" in missing.stderr
