"""lm-eval's ``--write_out`` (and ``simple_evaluate(write_out=True)``): each task's document 0 logged
as lm-eval 0.4.13's ``print_writeout`` logs it, message for message and in its log format on stderr:
checked against lm-eval's own simple_evaluate in this venv on the toy tasks (fast), and against the
peer's command line on the shared data (slow)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from evalflow.lmeval_compat.before_run import WRITE_OUT_LOG
from tests.support.cli import cli
from tests.support.parity_harness import missing as peer_missing

STAMP = re.compile(r"^\d{4}-\d\d-\d\d:\d\d:\d\d:\d\d ")  # lm-eval's asctime, its datefmt


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def recorded(logger: logging.Logger) -> Iterator[list[logging.LogRecord]]:
    """The records ``logger`` logs at INFO while the block runs, whatever handlers it has."""
    handler, level = _Records(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_simple_evaluate_logs_what_lm_evals_logs(toy_library: Path, tmp_path: Path, monkeypatch) -> None:
    """The same messages from the same places (lm-eval's module and line) as lm-eval's own
    simple_evaluate with its dummy model, on a multiple-choice and a few-shot generation task."""
    lm_eval = pytest.importorskip("lm_eval")
    from lm_eval.tasks import TaskManager

    from evalflow import simple_evaluate

    monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf"))
    common = dict(model="dummy", tasks=["toy_mc", "toy_gen"], limit=2, num_fewshot=2, bootstrap_iters=0)
    common.update(gen_kwargs="max_gen_toks=7", write_out=True)
    with recorded(logging.getLogger("lm_eval.evaluator_utils")) as records:
        lm_eval.simple_evaluate(**common, task_manager=TaskManager(include_path=str(toy_library)))
    theirs = [
        (f"{r.name.removeprefix('lm_eval.')}:{r.lineno}", r.getMessage())
        for r in records
        if r.funcName == "print_writeout"
    ]
    with recorded(WRITE_OUT_LOG) as records:
        simple_evaluate(**common, include_path=str(toy_library))
    ours = [(r.lm_eval_at, r.getMessage()) for r in records]
    assert len(theirs) == 4 and ours == theirs
    assert "num_fewshot=2,num_samples=40" in ours[0][1] and "'max_gen_toks': 7" in ours[3][1]


def test_the_command_line_logs_in_lm_evals_format_on_stderr(toy_library: Path, tmp_path: Path) -> None:
    argv = ["lm-eval", "--model", "dummy", "--tasks", "toy_mc", "--include_path", str(toy_library), "--limit", "2"]
    done = cli([*argv, "--write_out"], cwd=tmp_path, env_extra={"EVALFLOW_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    assert "evaluator_utils" not in done.stdout  # stdout stays lm-eval's results table
    lines = [line for line in done.stderr.splitlines() if "[evaluator_utils:" in line]
    assert len(lines) == 2 and all(STAMP.match(line) for line in lines)
    assert STAMP.sub("", lines[0]).startswith("INFO     [evaluator_utils:41] Task: ConfigurableTask(task_name=toy_mc,")
    assert STAMP.sub("", lines[1]).startswith("INFO     [evaluator_utils:45] Request: Instance(request_type=")
    quiet = cli(
        [*argv, "--write_out", "--verbosity", "WARNING"],
        cwd=tmp_path,
        env_extra={"EVALFLOW_CACHE": str(tmp_path / "cache")},
    )
    assert quiet.returncode == 0 and "[evaluator_utils:" not in quiet.stderr  # lm-eval logs it at INFO


def write_out_blocks(log: str) -> list[str]:
    """The lines of each write_out message in a log, lm-eval's timestamps taken off."""
    out, inside = [], False
    for line in log.splitlines():
        inside = inside or "[evaluator_utils:41]" in line
        if inside:
            out.append(STAMP.sub("", line))
        inside = inside and "[evaluator_utils:45]" not in line
    return out


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.skipif(peer_missing() is not None, reason=str(peer_missing()))
def test_the_same_lines_as_lm_evals_command_line_on_the_shared_data(tmp_path: Path) -> None:
    """lm-eval's and evalflow's command lines, the same argv (the dummy model; peer.sh's wrappers of
    lm-eval's YAML over the shared data): arc_easy and boolq, and gsm8k 3-shot with --gen_kwargs."""
    from tests.support.peer_runs import evalflow_lm_eval, peer_sh_args, run_argvs

    common = peer_sh_args(tmp_path)
    wrappers = common[common.index("--include_path") + 1]
    runs = [
        ["--tasks", "arc_easy,boolq", "--limit", "2"],
        ["--tasks", "gsm8k", "--limit", "2", "--num_fewshot", "3", "--gen_kwargs", "max_gen_toks=20"],
    ]
    for run in runs:
        argv = ["--model", "dummy", "--include_path", wrappers, *run, "--write_out"]
        theirs = write_out_blocks(run_argvs([argv]))
        ours = write_out_blocks(evalflow_lm_eval(argv, tmp_path / "cache", tmp_path))
        assert theirs and ours == theirs
