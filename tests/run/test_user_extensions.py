"""What a new user trips on when extending evalflow from the command line (found by trying it as one
would): `imports=` brings a metrics module in before the tasks are checked (and a model.type module
is imported first too), a snapshot reproduces into a fresh suffixed folder from any working folder,
and an identity() written as a plain method is one clear error."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.cli import cli

METRICS = """\
from evalflow import register_aggregation, register_metric


@register_aggregation("spread_u")
def spread_u(items):
    return max(items) - min(items)


@register_metric("contains_u", higher_is_better=True, aggregation="mean")
def contains_u(references, predictions, **kwargs):
    return float(str(references[0]) in predictions[0])
"""

TASK = """\
task: user_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n"]
metric_list:
  - metric: contains_u
    aggregation: spread_u
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    data = tmp_path / "test.jsonl"
    data.write_text("".join(json.dumps({"question": f"{i} + 1", "answer": str(i + 1)}) + "\n" for i in range(4)))
    (tmp_path / "user_metrics.py").write_text(METRICS)
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "user_gen.yaml").write_text(TASK.format(data=data))
    return tmp_path


def run(workdir: Path, *extra: str, cwd: Path | None = None):
    return cli(
        ["model=dummy", "task=tasks/user_gen.yaml", f"cache_dir={workdir / 'cache'}", "bootstrap_iters=0", *extra],
        cwd=cwd or workdir,
    )


def test_imports_registers_a_metrics_module_before_the_tasks_are_checked(workdir: Path) -> None:
    refused = run(workdir, f"hydra.run.dir={workdir / 'r0'}")
    assert refused.returncode == 2 and "unknown metric 'contains_u'" in refused.stderr
    assert "imports=[my_module]" in refused.stderr  # the error says how to bring it in
    done = run(workdir, "imports=[user_metrics]", f"hydra.run.dir={workdir / 'r1'}")
    assert done.returncode == 0, done.stderr
    assert "contains_u,none" in json.loads((workdir / "r1" / "results.json").read_text())["results"]["user_gen"]
    by_path = cli(
        [
            "model=dummy",
            f"task={workdir / 'tasks' / 'user_gen.yaml'}",
            f"cache_dir={workdir / 'cache'}",
            f"imports={workdir / 'user_metrics.py'}",
            f"hydra.run.dir={workdir / 'r2'}",
        ],
        cwd=workdir / "tasks",
    )
    assert by_path.returncode == 0, by_path.stderr  # a .py file's path, from another working folder
    missing = run(workdir, "imports=[no_such_module]", f"hydra.run.dir={workdir / 'r3'}")
    assert missing.returncode == 2 and "imports: no module 'no_such_module'" in missing.stderr


def test_a_model_type_module_may_register_the_metrics(workdir: Path) -> None:
    (workdir / "user_model.py").write_text(
        "import user_metrics  # registers contains_u\n"
        "from evalflow.models.dummy import DummyModel\n\n\n"
        "class Parrot(DummyModel):\n    pass\n"
    )
    done = run(workdir, "model.type=user_model:Parrot", f"hydra.run.dir={workdir / 'r'}")
    assert done.returncode == 0, done.stderr


def test_a_snapshot_reproduces_into_a_new_suffixed_folder_from_any_working_folder(workdir: Path) -> None:
    first = workdir / "first"
    assert run(workdir, "imports=[user_metrics]", f"hydra.run.dir={first}").returncode == 0
    elsewhere = workdir / "elsewhere"
    elsewhere.mkdir()
    folders = []
    for _ in range(2):
        again = cli(
            ["--config-dir", str(first / ".hydra"), "--config-name", "config"],
            cwd=elsewhere,
            env_extra={"PYTHONPATH": f"{Path(__file__).resolve().parents[1]}:{workdir}"},
        )
        assert again.returncode == 0, again.stderr
        folders.append(re.search(r"run folder: (\S+)", again.stdout).group(1))
    assert folders[0] != folders[1] and all(re.search(r"\d\d-\d\d-\d\d-[0-9a-f]{6}$", f) for f in folders)
    assert all(Path(f).is_relative_to(elsewhere) for f in folders)


def test_an_identity_written_as_a_plain_method_is_one_clear_error(workdir: Path) -> None:
    (workdir / "plain_identity.py").write_text(
        "from evalflow.models.dummy import DummyModel\n\n\n"
        "class Oracle(DummyModel):\n"
        "    def identity(self, **config):\n        return {'name': 'oracle'}\n"
    )
    done = cli(
        ["model.type=plain_identity:Oracle", "task=arith_mc", "limit=2", f"cache_dir={workdir / 'cache'}"], cwd=workdir
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "Oracle.identity is a plain method" in done.stderr and "@classmethod" in done.stderr
