"""A stage's code is in its key by the source of every evalflow module it runs, so an upgrade that
changes what a stage computes re-keys it without anyone bumping a version number."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from evalflow.cache.code import module_closure
from evalflow.dag.node import EVALFLOW_DIR, stage_code
from evalflow.dag.runner import plan
from tests.support.plan_keys import BASE_SETTINGS, BASE_TASK, STAGES


@pytest.fixture(autouse=True)
def fresh_stage_code() -> Iterator[None]:
    stage_code.cache_clear()
    yield
    stage_code.cache_clear()


@pytest.fixture(autouse=True)
def fixed_data_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    import evalflow.dag.pipeline as pipeline

    monkeypatch.setattr(pipeline, "data_identity", lambda task, data_map: "data")


EDITS = [
    ("stages/load_docs.py", STAGES),
    ("taskspec/prompts/requests.py", STAGES[2:]),
    ("scoring/process.py", STAGES[5:]),
    ("scoring/task_aggregation.py", STAGES[6:]),
    ("core/records.py", STAGES),
    ("models/protocol.py", []),  # model-side code is the model identity's, not the stages'
    ("insight/run_names.py", []),  # no stage runs it
]


@pytest.mark.parametrize("module,expected", EDITS, ids=[e[0] for e in EDITS])
def test_an_edited_module_rekeys_exactly_the_stages_that_run_it(
    module: str, expected: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import evalflow.cache.code as code

    assert (EVALFLOW_DIR / module).is_file(), f"{module} is not a module of evalflow: the edit would change nothing"
    before = {p.node.name: p.key for p in plan(BASE_TASK, BASE_SETTINGS)}
    edited, real = str(EVALFLOW_DIR / module), code.file_fingerprint
    monkeypatch.setattr(code, "file_fingerprint", lambda path: "edited" if str(path) == edited else real(path))
    stage_code.cache_clear()
    after = {p.node.name: p.key for p in plan(BASE_TASK, BASE_SETTINGS)}
    assert [s for s in STAGES if before[s] != after[s]] == expected


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_module_closure_reads_imports_from_disk(tmp_path: Path) -> None:
    """Transitive, relative and function-level imports count, and a package's ``__init__`` when a
    name is imported from it; excluded packages, modules nothing imports, and parent packages'
    ``__init__`` (which would tie each stage to every stage ``stages/__init__`` re-exports) do not."""
    pkg = tmp_path / "pkg"
    write(
        pkg,
        {
            "__init__.py": "from pkg.stages.a import run\n",
            "stages/__init__.py": "from pkg.stages import a, b\n",
            "stages/a.py": "from ..lib import helper\nfrom pkg.lib import VALUE\n\n"
            "def run():\n    from pkg.lib.lazy import f\n    return helper.x + f() + VALUE\n",
            "stages/b.py": "import pkg.lib.other\n",
            "lib/__init__.py": "VALUE = 1\n",
            "lib/helper.py": "from pkg.models import m\nx = 1\n",
            "lib/lazy.py": "def f():\n    return 2\n",
            "lib/other.py": "",
            "models/__init__.py": "",
            "models/m.py": "",
        },
    )
    closure = module_closure("pkg.stages.a", pkg, exclude=("pkg.models",))
    assert sorted(closure) == ["pkg.lib", "pkg.lib.helper", "pkg.lib.lazy", "pkg.stages.a"]
    (pkg / "lib" / "lazy.py").write_text("def f():\n    return 3\n")
    after = module_closure("pkg.stages.a", pkg, exclude=("pkg.models",))
    assert [m for m in closure if closure[m] != after[m]] == ["pkg.lib.lazy"]
    (pkg / "lib" / "other.py").write_text("y = 2\n")
    (pkg / "models" / "m.py").write_text("z = 3\n")
    assert module_closure("pkg.stages.a", pkg, exclude=("pkg.models",)) == after
    with pytest.raises(FileNotFoundError, match="pkg.stages.zipped"):  # no source: refuse, never {}
        module_closure("pkg.stages.zipped", pkg)


def test_every_stage_runs_its_own_module_and_no_model_code() -> None:
    from evalflow.dag.pipeline import PIPELINE

    for node in PIPELINE:
        code = stage_code(node.function)
        assert node.function.partition(":")[0] in code
        assert not [m for m in code if m.startswith("evalflow.models")]
    assert "evalflow.scoring.process" not in stage_code("evalflow.stages.load_docs:load_docs")
