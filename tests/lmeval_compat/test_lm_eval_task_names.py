"""lm-eval's own task names under the front door (``python -m evalflow lm-eval --tasks ifeval``):
its task index is lm-eval's installed library beneath evalflow's built-in tasks (``task_library``),
the built-in copy winning a shared name without a warning; without the library, a name it would
know gets the paragraph naming ``evalflow[lm-eval-tasks]`` before any model call. The peer check
runs lm-eval 0.4.13 and the front door on ``--tasks ifeval --limit 3`` and compares the prompts."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalflow.errors import TaskError
from evalflow.lmeval_compat.parser import parse
from evalflow.lmeval_compat.translate import translate
from evalflow.output.run_paths import EVENTS
from evalflow.taskspec.catalog.index import TaskIndex, builtin_tasks_dir
from evalflow.taskspec.format import installed
from tests.support.parity_harness import COMPARE, ROOT, SHARED
from tests.support.parity_harness import missing as peer_missing
from tests.support.peer_runs import run_argvs

needs_lm_eval = pytest.mark.skipif(importlib.util.find_spec("lm_eval") is None, reason="lm-eval is not installed")


def test_the_front_door_indexes_lm_evals_library_and_the_native_command_does_not() -> None:
    tr = translate(parse(["--model", "dummy", "--tasks", "ifeval"]))
    assert "task_library=[lm_eval]" in tr.overrides and "task_library=[lm_eval]" in tr.native()
    assert not any(o.startswith("trust_task_code") for o in tr.overrides)  # a name, not a folder


@needs_lm_eval
def test_library_names_resolve_and_builtin_copies_win_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    index = TaskIndex.build([], library=["lm_eval"])
    with caplog.at_level(logging.WARNING, logger="evalflow"):
        selection = index.resolve("ifeval,arc_easy")
    ifeval, arc = selection.tasks
    assert Path(ifeval.source).parts[-3:] == ("tasks", "ifeval", "ifeval.yaml") and "lm_eval" in ifeval.source
    assert arc.source.startswith(os.path.realpath(builtin_tasks_dir()))
    assert not caplog.records and not index.overrides
    # the native include_path=lm_eval keeps its meaning: the library overrides, and says so
    explicit = TaskIndex.build(["lm_eval"])
    with caplog.at_level(logging.WARNING, logger="evalflow"):
        assert "lm_eval" in explicit.resolve("arc_easy").tasks[0].source
    assert "overrides" in caplog.text


def test_without_the_library_an_unknown_name_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(installed.TASK_LIBRARIES, "lm_eval", ("no_such_package_here", "tasks", "lm-eval-tasks"))
    index = TaskIndex.build([], library=["lm_eval"])
    assert index.missing_libraries == ("lm_eval",)
    assert [t.task for t in index.resolve("arc_easy").tasks] == ["arc_easy"]  # built-in names still resolve
    with pytest.raises(TaskError) as caught:
        index.resolve("arc_easy,ifeval")
    text = str(caught.value)
    assert "'ifeval'" in text and "pip install 'evalflow[lm-eval-tasks]'" in text and "\n" not in text


def test_the_paragraph_comes_before_any_model_call(tmp_path: Path) -> None:
    """The whole front door, in a child process whose lm_eval import is blocked (a finder that
    refuses it, as on a machine without the extra): exit 2, the paragraph, nothing run."""
    block = tmp_path / "block" / "sitecustomize.py"
    block.parent.mkdir()
    block.write_text(
        "import sys\n"
        "class _Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'lm_eval' or name.startswith('lm_eval.'):\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, _Refuse())\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{block.parent}{os.pathsep}{ROOT}", "EVALFLOW_CACHE": str(tmp_path / "c")}
    done = subprocess.run(
        [sys.executable, "-m", "evalflow", "lm-eval", "--model", "dummy", "--tasks", "truthfulqa_mc2"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert "'truthfulqa_mc2'" in done.stderr and "pip install 'evalflow[lm-eval-tasks]'" in done.stderr
    written = [p for p in (tmp_path / "outputs").rglob("*") if p.is_file() and p.name != EVENTS]
    assert all(".hydra" in p.parts for p in written), written  # the config snapshot only: no answer, no result
    [events] = (tmp_path / "outputs").rglob(EVENTS)  # and the run's events: started, then failed with the paragraph
    assert [json.loads(line)["event"] for line in events.read_text().splitlines()] == ["start", "end"]
    assert "truthfulqa_mc2" in json.loads(events.read_text().splitlines()[-1])["error"]


@pytest.mark.slow
@needs_lm_eval
@pytest.mark.skipif(peer_missing() is not None, reason=str(peer_missing()))
def test_ifeval_by_name_prompts_match_lm_eval(tmp_path: Path) -> None:
    """``--tasks ifeval --limit 3`` with lm-eval's dummy model on both sides (prompts only: each
    side's dummy answers differently); lm-eval reads the shared data through peer.sh's wrapper,
    evalflow through the shared data map, with no --include_path."""
    from tests.support.peer_runs import peer_sh_args

    common = ["--tasks", "ifeval", "--limit", "3", "--log_samples"]
    wrappers = peer_sh_args(tmp_path)[peer_sh_args(tmp_path).index("--include_path") + 1]
    run_argvs([["--model", "dummy", "--include_path", wrappers, *common, "--output_path", str(tmp_path / "peer")]])
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "EVALFLOW_CACHE": str(tmp_path / "cache"),
        "EVALFLOW_DATA_MAP": str(SHARED / "data" / "lm_eval_tasks_map.yaml"),
        "NLTK_DATA": str(SHARED / "data" / "nltk_data"),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "evalflow",
            "lm-eval",
            "--model",
            "dummy",
            *common,
            "--output_path",
            str(tmp_path / "ours"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [reference] = (tmp_path / "peer").rglob("samples_ifeval_*.jsonl")
    [candidate] = (tmp_path / "ours").rglob("samples_ifeval_*.jsonl")
    compared = subprocess.run(
        [sys.executable, str(COMPARE), str(reference), str(candidate), "--prompts-only"], capture_output=True, text=True
    )
    assert compared.returncode == 0 and "prompts: 0 documents differ" in compared.stdout, compared.stdout
