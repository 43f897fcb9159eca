"""Code execution is opt-in, end to end through ``python -m evalflow``.

Indexing and ``ls`` never import task code. ``!function`` code (and lm-eval Python task classes)
from folders outside the built-in ``tasks/`` run only with ``trust_task_code=true``; tasks marked
``unsafe_code: true`` (their metrics execute model-written code) run only with
``confirm_unsafe_code=true``. Every task module here records its import in a marker file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.reliability import cli, toy_args

MODULE = """\
from pathlib import Path
Path({marker!r}).write_text("imported")


def doc_to_text(doc):
    return "Q: " + doc["question"] + "\\nA:"


class MyTask:
    pass
"""


@pytest.fixture
def coded_library(toy_library: Path, tmp_path: Path) -> tuple[Path, Path]:
    """toy_library plus a task using `!function`, a Python class task, and an unsafe_code task."""
    marker = tmp_path / "imported.marker"
    (toy_library / "helpers.py").write_text(MODULE.format(marker=str(marker)))
    mc = (toy_library / "toy_mc.yaml").read_text()
    (toy_library / "toy_code.yaml").write_text(
        mc.replace("task: toy_mc", "task: toy_code").replace(
            'doc_to_text: "Question: {{question}}\\nAnswer:"', "doc_to_text: !function helpers.doc_to_text"
        )
    )
    (toy_library / "toy_class.yaml").write_text("task: toy_class\nclass: !function helpers.MyTask\n")
    (toy_library / "toy_unsafe.yaml").write_text(mc.replace("task: toy_mc", "task: toy_unsafe") + "unsafe_code: true\n")
    assert "!function helpers.doc_to_text" in (toy_library / "toy_code.yaml").read_text()
    return toy_library, marker


def test_ls_and_indexing_never_import_task_code(coded_library: tuple[Path, Path]) -> None:
    lib, marker = coded_library
    done = cli(["ls", "--json", f"include_path=[{lib}]"])
    assert done.returncode == 0, done.stderr
    assert {"toy_code", "toy_class", "toy_unsafe"} <= set(json.loads(done.stdout)["tasks"])
    assert cli(["ls", f"include_path=[{lib}]"]).returncode == 0
    assert not marker.exists()


def test_task_code_outside_builtin_tasks_needs_trust(coded_library: tuple[Path, Path], tmp_path: Path) -> None:
    lib, marker = coded_library
    refused = cli(toy_args(lib, tmp_path / "cache", tmp_path / "refused", task="toy_code"))
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "trust_task_code=true" in refused.stderr and "helpers" in refused.stderr
    assert not marker.exists() and not (tmp_path / "refused" / "results.json").exists()

    trusted = cli(toy_args(lib, tmp_path / "cache", tmp_path / "trusted", "trust_task_code=true", task="toy_code"))
    assert trusted.returncode == 0, trusted.stderr
    assert marker.exists() and (tmp_path / "trusted" / "results.json").exists()
    sample = json.loads((tmp_path / "trusted" / "samples_toy_code.jsonl").read_text().splitlines()[0])
    assert sample["arguments"]["gen_args_0"]["arg_0"].startswith("Q: What is 1 plus 2?\nA:")


def test_python_task_classes_are_refused_and_never_imported(coded_library: tuple[Path, Path], tmp_path: Path) -> None:
    lib, marker = coded_library
    refused = cli(toy_args(lib, tmp_path / "cache", tmp_path / "r1", task="toy_class"))
    assert refused.returncode != 0 and "trust_task_code=true" in refused.stderr, refused.stderr
    # trusted, it is still refused: evalflow's declarative stages cannot run lm-eval's Python task API
    trusted = cli(toy_args(lib, tmp_path / "cache", tmp_path / "r2", "trust_task_code=true", task="toy_class"))
    assert trusted.returncode != 0 and "Python task class" in trusted.stderr, trusted.stderr
    assert "Traceback" not in refused.stderr + trusted.stderr and not marker.exists()


def test_unsafe_code_tasks_need_confirmation(coded_library: tuple[Path, Path], tmp_path: Path) -> None:
    lib, _ = coded_library
    refused = cli(toy_args(lib, tmp_path / "cache", tmp_path / "refused", task="toy_unsafe"))
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "unsafe_code" in refused.stderr and "confirm_unsafe_code=true" in refused.stderr
    assert not (tmp_path / "refused" / "results.json").exists() and not (tmp_path / "cache").exists()

    confirmed = cli(
        toy_args(lib, tmp_path / "cache", tmp_path / "confirmed", "confirm_unsafe_code=true", task="toy_unsafe")
    )
    assert confirmed.returncode == 0, confirmed.stderr
    assert json.loads((tmp_path / "confirmed" / "results.json").read_text())["results"]["toy_unsafe"]["acc,none"] >= 0


def test_templates_cannot_reach_python_internals(tmp_path: Path) -> None:
    """Templates come from untrusted folders too: Jinja's sandbox keeps them from running code."""
    from evalflow.errors import EvalflowError
    from evalflow.taskspec.prompts.templates import apply_template

    marker = tmp_path / "ran"
    template = "{{ cycler.__init__.__globals__.os.open('MARKER', 64) }}".replace("MARKER", str(marker))  # 64: O_CREAT
    with pytest.raises(EvalflowError):
        apply_template(template, {"question": "q"})
    assert not marker.exists()
