"""A loose ``!function`` module's key covers the task-code files it imports: editing a sibling
(``from .helpers import x`` or ``import helpers`` from the task folder) re-scores, from the cache's
answers, with the sibling's new code."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalflow.taskspec.format.installed import code_fingerprint
from evalflow.taskspec.sidenv.local_modules import local_closure
from tests.support.runs import Runner, stage_hits

TASK = """\
include: toy_gen.yaml
task: toy_sibling
process_results: !function {module}.process_results
metric_list:
  - metric: bonus
    aggregation: mean
    higher_is_better: true
"""

UTILS = {
    "relative": "from .helpers import BONUS\n",
    "absolute": "import helpers\nBONUS = None\n",
}
PROCESS = """
def process_results(doc, results):
    return {"bonus": BONUS if BONUS is not None else helpers.BONUS}
"""


@pytest.mark.parametrize("style", sorted(UTILS))
def test_editing_an_imported_sibling_rescores(
    style: str, runner: Runner, toy_library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if style == "absolute":  # `import helpers` finds the sibling when run from the task folder
        monkeypatch.syspath_prepend(str(toy_library))
    module = f"utils_{style}"
    (toy_library / f"{module}.py").write_text(UTILS[style] + PROCESS)
    (toy_library / "helpers.py").write_text("BONUS = 1.0\n")
    (toy_library / "toy_sibling.yaml").write_text(TASK.format(module=module))
    (toy_library / "unrelated.py").write_text("X = 1\n")
    utils = str(toy_library / f"{module}.py")
    assert [p.name for p in local_closure(utils)] == [f"{module}.py", "helpers.py"]

    first, _, _ = runner(task="toy_sibling", limit=3, trust_task_code=True)
    before = code_fingerprint(utils)
    (toy_library / "unrelated.py").write_text("X = 2\n")  # not imported: not in the key
    assert code_fingerprint(utils) == before
    (toy_library / "helpers.py").write_text("BONUS = 0.25\n")
    assert code_fingerprint(utils) != before
    second, manifest, _ = runner(task="toy_sibling", limit=3, trust_task_code=True)

    assert first["results"]["toy_sibling"]["bonus,get-answer"] == 1.0
    assert second["results"]["toy_sibling"]["bonus,get-answer"] == 0.25
    hits = stage_hits(manifest)
    assert hits["inference"] and not hits["metrics"] and not hits["aggregate"]


def test_a_module_importing_no_sibling_keeps_its_file_hash(tmp_path: Path) -> None:
    """Single-file task code keeps the key it always had (no cache of today's tasks is lost)."""
    from evalflow.cache.fingerprint import file_fingerprint

    (tmp_path / "utils.py").write_text("import os.path\nimport re\n")
    (tmp_path / "helpers.py").write_text("")  # a sibling that utils.py does not import
    path = str(tmp_path / "utils.py")
    assert [p.name for p in local_closure(path)] == ["utils.py"]
    assert code_fingerprint(path) == file_fingerprint(path)
