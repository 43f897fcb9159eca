"""Shared fixtures: a toy task library written to a temp folder, and a run helper."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# No per-example deadline: on a shared two-core machine a slow example is load, not a bug, and a
# deadline turns it into a flaky failure (hypothesis reports it as "Flaky").
settings.register_profile("evalflow", deadline=None)
settings.load_profile("evalflow")

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = (ROOT / ".." / "shared" / "data").resolve()
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.models import CountingModel  # noqa: E402

COUNTING = "tests.support.models:CountingModel"

MC_YAML = """\
task: toy_mc
dataset_path: json
dataset_kwargs:
  data_files:
    train: {data}/train.jsonl
    test: {data}/test.jsonl
training_split: train
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: label
doc_to_choice: "{{{{choices}}}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""

GEN_YAML = """\
task: toy_gen
dataset_path: json
dataset_kwargs:
  data_files:
    train: {data}/train.jsonl
    test: {data}/test.jsonl
training_split: train
test_split: test
output_type: generate_until
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer.split('####')[-1].strip()}}}}"
generation_kwargs:
  until: ["\\n\\n", "Question:"]
  do_sample: false
filter_list:
  - name: get-answer
    filter:
      - function: regex
        regex_pattern: "#### (\\\\-?[0-9\\\\.\\\\,]+)"
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


def _rows(n: int, offset: int = 0) -> list[dict[str, Any]]:
    rows = []
    for i in range(offset, offset + n):
        a, b = i + 1, i % 5 + 2
        rows.append(
            {
                "question": f"What is {a} plus {b}?",
                "choices": [str(a + b), str(a + b + 1), str(a + b + 10), str(a + b + 20)],
                "label": 0,
                "answer": f"{a} + {b} = {a + b}\n#### {a + b}",
            }
        )
    return rows


@pytest.fixture
def toy_library(tmp_path: Path) -> Path:
    """A folder with toy_mc (multiple choice, 40 docs) and toy_gen (generation) over local JSONL."""
    data = tmp_path / "data"
    data.mkdir()
    for name, rows in (("train", _rows(10, 100)), ("test", _rows(40))):
        (data / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    lib = tmp_path / "tasks"
    lib.mkdir()
    (lib / "toy_mc.yaml").write_text(MC_YAML.format(data=data))
    (lib / "toy_gen.yaml").write_text(GEN_YAML.format(data=data))
    return lib


class Runner:
    """Runs evalflow in-process against a private cache, as `python -m evalflow` would."""

    def __init__(self, library: Path, cache: Path, out: Path) -> None:
        self.library, self.cache, self.out, self.n = library, cache, out, 0

    def __call__(
        self, task: Any = "toy_mc", model: str = COUNTING, overrides: Sequence[str] = (), **values: Any
    ) -> tuple[dict, dict, Path]:
        """(results, manifest, run folder); ``overrides`` are more Hydra overrides (``model.salt=x``)."""
        from evalflow.config.compose import compose_settings
        from evalflow.run.phases import run

        self.n += 1
        folder = self.out / f"run{self.n}"
        settings = compose_settings(
            task=task,
            preset="dummy",
            overrides=[f"model.type={model}", *overrides],
            values={"include_path": [str(self.library)], "cache_dir": str(self.cache), "bootstrap_iters": 0, **values},
        )
        CountingModel.reset()
        results = run(settings, folder)
        manifest = json.loads((folder / "manifest.json").read_text())
        return results, manifest, folder


@pytest.fixture
def runner(toy_library: Path, tmp_path: Path) -> Runner:
    return Runner(toy_library, tmp_path / "cache", tmp_path / "outputs")


def with_acc_norm(yaml_text: str) -> str:
    """A task YAML (toy_mc's) that also scores acc_norm: a metric edit, which rescores without inference."""
    return yaml_text.replace(
        "metric_list:\n", "metric_list:\n  - metric: acc_norm\n    aggregation: mean\n    higher_is_better: true\n"
    )


def stage_hits(manifest: dict, task: str | None = None) -> dict[str, bool]:
    return {e["stage"]: e["hit"] for e in manifest["stages"] if task is None or e["task"] == task}


# With pytest-xdist (README "Tests": `-n 2 --dist loadgroup`), a whole test file is one unit of work, so a
# module fixture (one SmolLM2 load, one lm-eval run) is built once. Two files' tests must not overlap:
# the Ray tests share one session cluster per worker and start local ones (tests/scale), and the
# sandbox's fork bomb fills the process cap of the user that every concurrent sandbox also runs as.
SERIAL_GROUPS = {"tests/scale/": "ray", "tests/sandbox/": "sandbox"}


def xdist_group(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return next((name for prefix, name in SERIAL_GROUPS.items() if path.startswith(prefix)), path)


def pytest_configure(config: pytest.Config) -> None:
    """Under ``--dist loadgroup`` xdist would deal the groups with the most tests first (its
    ``loadscopereorder``); the order below (long groups first) is the one wanted."""
    if getattr(config.option, "dist", None) == "loadgroup":
        config.option.loadscopereorder = False


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test's xdist group (its file's, or its folder's serial group; only ``--dist loadgroup``
    reads the mark), and the groups holding a ``slow`` test first: xdist hands out groups in
    collection order, and a long one dealt last would leave the other worker idle at the end."""
    slow = {xdist_group(item.nodeid) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: xdist_group(item.nodeid) not in slow)  # stable: file order otherwise kept
    for item in items:
        item.add_marker(pytest.mark.xdist_group(xdist_group(item.nodeid)))
