"""code_eval's verdict (issue 38, item 1): a program passes only when it runs to its end.

Each trick follows a wrong HumanEval-style answer and would make the program "pass" if its exit
status were the verdict (as it was: ``return -1.0`` then ``sys.exit(0)`` scored pass@1 = 1.0). Every
backend must score each as failed, the canonical solution as passed. The cases
(``tests/support/verdict_cases.py``) are also the table of ``benchmarks/code_verdicts.py``.
"""

from __future__ import annotations

import pytest

from evalflow.errors import SandboxError
from evalflow.sandbox import Limits, register_sandbox, run_program, sandbox, sandbox_identity, using
from evalflow.sandbox.verdict import RUNNER
from evalflow.scoring.code_exec import pass_at_k, program
from tests.support.verdict_cases import CANONICAL, CASES, PROMPT, TEST, TRICKS, WRONG


def _backend(name: str):  # type: ignore[no-untyped-def]
    box = sandbox(name)
    if box.unavailable() is not None:
        pytest.skip(f"{name} cannot run here: {box.unavailable()}")
    return box


@pytest.mark.parametrize("backend", ["subprocess", "bwrap"])
@pytest.mark.parametrize("case", list(CASES))
def test_only_a_program_that_runs_to_its_end_passes(backend: str, case: str) -> None:
    candidate, passes = CASES[case]
    assert run_program(_backend(backend), program(candidate, TEST), Limits(wall_seconds=10)) is passes


@pytest.mark.parametrize("backend", ["subprocess", "bwrap"])
def test_the_issue_completion_scores_zero(backend: str) -> None:
    _backend(backend)
    completions = [WRONG + TRICKS["sys.exit(0)"], WRONG + TRICKS["os._exit(0)"], CANONICAL, WRONG]
    with using(backend):
        assert pass_at_k([TEST], [[PROMPT + c for c in completions]], k=[1], timeout=10) == {"pass@1": 0.25}


def test_the_guard_disables_what_code_evals_guard_does() -> None:
    guarded = (
        "import builtins, os, shutil, subprocess\n"
        "assert builtins.exit is None and os.kill is None and os.system is None and os.unlink is None\n"
        "assert shutil.rmtree is None and subprocess.Popen is None and os.getcwd is None\n"
        "try:\n    import resource\nexcept ImportError:\n    pass\nelse:\n    raise AssertionError\n"
    )
    assert run_program(sandbox("subprocess"), guarded, Limits(wall_seconds=10))


def test_a_program_read_from_stdin_is_not_limited_by_the_argument_size() -> None:
    big = "x = 0\n" + "x += 1\n" * 40_000 + "assert x == 40_000\n"  # ~300 kB: over Linux's 128 kB per argument
    assert run_program(sandbox("subprocess"), big, Limits(wall_seconds=20))


def test_the_verdict_code_is_in_the_sandbox_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    import evalflow.sandbox.registry as registry

    before = sandbox_identity("subprocess")
    monkeypatch.setattr(registry, "run_program", lambda backend, text, limits: RUNNER.startswith("x"))
    assert sandbox_identity("subprocess")["verdict"] != before["verdict"]
    assert set(before) == {"backend", "code", "runner", "verdict"}


def test_a_backend_without_a_description_is_refused() -> None:
    class Mute:
        name = "mute_for_tests"

        def unavailable(self) -> str | None:
            return None

        def run(self, argv: object, limits: object, stdin: bytes = b"") -> object:
            raise AssertionError

    with pytest.raises(SandboxError, match="description"):
        register_sandbox("mute_for_tests")(Mute)


def test_output_is_capped_and_a_chatty_program_never_blocks() -> None:
    import os
    import sys

    from evalflow.sandbox.contract import STDOUT_CAP, run_limited

    chatty = "import os\nfor _ in range(64):\n    os.write(1, b'x' * 65536)\n"  # 4 MiB, far over a pipe's buffer
    outcome = run_limited([sys.executable, "-I", "-c", chatty], Limits(wall_seconds=30), uid=os.getuid())
    assert outcome.returncode == 0 and outcome.stdout == b"x" * STDOUT_CAP
