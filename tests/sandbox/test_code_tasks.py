"""A code task end to end: scored through the sandbox, keyed by the backend, refused without one.

The toy task's prompts put the dummy model's one-line answer in a comment, so each document's
program passes or fails by its prompt alone: 2 of 4 pass (one returns False, one spins forever).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evalflow.errors import SandboxError
from evalflow.sandbox import Outcome, register_sandbox, sandbox
from tests.support.models import CountingModel
from tests.support.runs import Runner, stage_hits
from tests.support.toy_tasks import write_code_task

needs_bwrap = pytest.mark.skipif(sandbox("bwrap").unavailable() is not None, reason="bubblewrap cannot run here")


@pytest.fixture
def code_library(toy_library: Path) -> Path:
    return write_code_task(toy_library)


@register_sandbox("unusable_for_tests")
class Unusable:
    """A backend that is never available: what a machine without bubblewrap looks like."""

    name = "unusable_for_tests"
    description = "never runs a program"

    def unavailable(self) -> str | None:
        return "this test's backend never runs"

    def run(self, argv: object, limits: object, stdin: bytes = b"") -> Outcome:
        raise AssertionError("an unavailable sandbox must never be asked to run a program")


def _run(runner: Runner, code_library: Path, **values: object) -> tuple[dict, dict, Path]:
    return runner(task=["toy_code", "toy_gen"], confirm_unsafe_code=True, trust_task_code=True, **values)


@needs_bwrap
def test_code_task_is_scored_through_the_sandbox(runner: Runner, code_library: Path) -> None:
    results, _, _ = _run(runner, code_library)
    assert results["results"]["toy_code"]["pass@1,create_test"] == 0.5


@needs_bwrap
def test_changing_the_backend_rescores_only_the_code_task(runner: Runner, code_library: Path) -> None:
    _run(runner, code_library)
    results, manifest, _ = _run(runner, code_library, code_sandbox="subprocess")
    code, gen = stage_hits(manifest, "toy_code"), stage_hits(manifest, "toy_gen")
    assert code["inference"] and not code["metrics"]  # answers reused, programs run again
    assert all(gen.values())  # a task that runs no code keeps every cached stage
    assert results["results"]["toy_code"]["pass@1,create_test"] == 0.5
    assert CountingModel.calls_total == 0


def test_without_a_usable_sandbox_the_task_is_refused_before_any_model_call(runner: Runner, code_library: Path) -> None:
    with pytest.raises(SandboxError) as caught:
        _run(runner, code_library, code_sandbox="unusable_for_tests")
    message = str(caught.value)
    assert "task 'toy_code'" in message and str(code_library / "toy_code.yaml") in message
    assert "this test's backend never runs" in message
    assert "apt-get install bubblewrap" in message and "code_sandbox=subprocess" in message
    assert CountingModel.calls_total == 0


def test_an_unknown_backend_is_named_with_the_choices(runner: Runner, code_library: Path) -> None:
    with pytest.raises(SandboxError, match=r"unknown sandbox 'bwarp'.*did you mean 'bwrap'"):
        _run(runner, code_library, code_sandbox="bwarp")


def test_a_taken_backend_name_is_refused() -> None:
    with pytest.raises(SandboxError, match="already registered"):
        register_sandbox("bwrap")(Unusable)
    register_sandbox("unusable_for_tests")(Unusable)  # the same class again (a reloaded module) is fine


@needs_bwrap
def test_the_run_records_which_sandbox_ran_the_programs_and_explain_names_a_change(
    runner: Runner, code_library: Path
) -> None:
    from evalflow.insight.explanation import explain
    from evalflow.output.run_summary import summary_lines

    _, first, folder_a = _run(runner, code_library)
    _, second, folder_b = _run(runner, code_library, code_sandbox="subprocess")
    box_a, box_b = first["code_execution"]["sandbox"], second["code_execution"]["sandbox"]
    assert (box_a["backend"], box_a["tasks"], box_b["backend"], box_b["tasks"]) == (
        "bwrap",
        ["toy_code"],
        "subprocess",
        ["toy_code"],
    )
    assert (box_a["about"], box_b["about"]) == (sandbox("bwrap").description, sandbox("subprocess").description)
    assert "bubblewrap" in box_a["about"] and "no isolation" in box_b["about"]
    assert first["code_execution"]["side_envs"] == []
    metrics = next(s for s in second["stages"] if (s["task"], s["stage"]) == ("toy_code", "metrics"))
    assert metrics["inputs"]["identity"]["sandbox"]["backend"] == "subprocess"  # in the key: it can change a score
    summary = [line for line in summary_lines(folder_b) if line.startswith("code execution")]
    assert len(summary) == 1 and "(toy_code) run in the sandbox 'subprocess' (code_sandbox)" in summary[0]
    lines = explain(folder_b, folder_a)
    assert any(
        line.startswith("toy_code metrics re-ran: ") and 'sandbox.backend: "bwrap" → "subprocess"' in line
        for line in lines
    )
    assert f"toy_code code ran differently than in {folder_a}: " in "\n".join(lines)
    _, only_gen, _ = runner(task="toy_gen")
    assert only_gen["code_execution"] == {"sandbox": None, "side_envs": []}


def test_the_summary_prints_the_sandbox_once_and_show_prints_a_tasks(
    code_library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evalflow.commands.show import main as show
    from tests.support.cli import base_args, cli

    args = base_args(code_library, tmp_path / "cache")
    args[2] = "task=[toy_code,toy_gen]"
    done = cli(
        args
        + [
            "limit=2",
            "confirm_unsafe_code=true",
            "trust_task_code=true",
            "code_sandbox=subprocess",
            f"hydra.run.dir={tmp_path / 'run'}",
        ]
    )
    assert done.returncode == 0, done.stderr
    printed = [line for line in done.stdout.splitlines() if line.startswith("code execution:")]
    assert printed == [
        "code execution: the programs the model wrote (toy_code) run in the sandbox 'subprocess' "
        f"(code_sandbox): {sandbox('subprocess').description}"
    ]
    show(
        [
            "task=toy_code",
            f"include_path=[{code_library}]",
            f"cache_dir={tmp_path / 'cache'}",
            "n=1",
            "confirm_unsafe_code=true",
            "trust_task_code=true",
            "code_sandbox=subprocess",
        ]
    )
    out = capsys.readouterr().out
    assert "code execution: the programs the model wrote run in the sandbox 'subprocess' (code_sandbox)" in out
