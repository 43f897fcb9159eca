"""What ran a run's code: the side environment of task code (decided from its imports, nothing
started), the lines the summary and ``show`` print, and the per-task view ``explain`` compares."""

from __future__ import annotations

import sys
from pathlib import Path

from evalflow.cache.fingerprint import file_fingerprint
from evalflow.output.code_execution import code_execution, summary_lines, task_execution, task_lines
from evalflow.taskspec.format.spec import FunctionRef, TaskConfig
from evalflow.taskspec.sidenv.envs import SIDE_ENVS
from evalflow.taskspec.sidenv.provision import env_folder

ANTLR = SIDE_ENVS[0]


def _task(tmp_path: Path, name: str, source: str) -> TaskConfig:
    path = tmp_path / f"{name}_utils.py"
    path.write_text(source)
    ref = FunctionRef(str(path), "process_results", file_fingerprint(path))
    return TaskConfig(
        task=name, source=str(tmp_path / f"{name}.yaml"), dataset_path="json", doc_to_text="q", process_results=ref
    )


def test_task_code_needing_a_side_environment_is_recorded_with_its_interpreter_and_pins(tmp_path: Path) -> None:
    latex = _task(
        tmp_path,
        "latex_t",
        "from sympy.parsing.latex import parse_latex\ndef process_results(doc, r):\n    return {}\n",
    )
    plain = _task(tmp_path, "plain_t", "def process_results(doc, r):\n    return {}\n")
    execution = code_execution([latex, plain], "bwrap")
    assert execution["sandbox"] is None  # no metric of these runs model-written programs
    assert execution["side_envs"] == [
        {
            "name": ANTLR.name,
            "interpreter": f"{sys.executable} -P",
            "packages": list(ANTLR.requirements),
            "folder": str(env_folder(ANTLR)),
            "why": ANTLR.why,
            "tasks": ["latex_t"],
            "modules": [str(tmp_path / "latex_t_utils.py")],
        }
    ]
    assert summary_lines(execution) == [
        f"code execution: task code of latex_t runs in the side environment '{ANTLR.name}': {sys.executable} -P "
        f"with antlr4-python3-runtime==4.11.0 from {env_folder(ANTLR)}"
    ]
    assert task_lines(latex, "bwrap") == [summary_lines(execution)[0].replace(" of latex_t", "")]
    assert task_lines(plain, "bwrap") == []


def test_the_per_task_view_changes_with_the_pins_only_for_the_tasks_using_them(tmp_path: Path) -> None:
    latex = _task(tmp_path, "latex_t", "import antlr4\ndef process_results(doc, r):\n    return {}\n")
    plain = _task(tmp_path, "plain_t", "def process_results(doc, r):\n    return {}\n")
    before = code_execution([latex, plain], "bwrap")
    after = {**before, "side_envs": [{**before["side_envs"][0], "packages": ["antlr4-python3-runtime==4.13.2"]}]}
    assert task_execution(before, "latex_t") != task_execution(after, "latex_t")
    assert task_execution(before, "plain_t") == task_execution(after, "plain_t") == {"sandbox": None, "side_envs": []}


def test_the_sandbox_line_shows_the_backends_description_not_its_docstring() -> None:
    """Issue 38, item 5: the line read "Programs in bubblewrap (...), with the limits of Limits."."""
    from evalflow.sandbox import sandbox

    task = TaskConfig(
        task="code_t", output_type="generate_until", unsafe_code=True, metric_list=[{"metric": "pass_at_k", "k": [1]}]
    )
    for name in ("bwrap", "subprocess"):
        execution = code_execution([task], name)
        assert execution["sandbox"]["about"] == sandbox(name).description
        (line,) = summary_lines(execution)
        assert line.endswith(f"(code_sandbox): {sandbox(name).description}")
        assert "Limits" not in line and "``" not in line and (type(sandbox(name)).__doc__ or "") not in line
