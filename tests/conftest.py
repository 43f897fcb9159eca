"""Shared fixtures (a toy task library written to a temp folder, a run helper) and the collection
hooks; what they are built from lives in tests/support/."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import settings

# No per-example deadline: on a shared two-core machine a slow example is load, not a bug, and a
# deadline turns it into a flaky failure (hypothesis reports it as "Flaky").
settings.register_profile("evalflow", deadline=None)
settings.load_profile("evalflow")

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from tests.support.runs import Runner  # noqa: E402
from tests.support.toy_tasks import write_toy_library  # noqa: E402


@pytest.fixture
def toy_library(tmp_path: Path) -> Path:
    """A folder with toy_mc (multiple choice, 40 docs) and toy_gen (generation) over local JSONL."""
    return write_toy_library(tmp_path)


@pytest.fixture
def runner(toy_library: Path, tmp_path: Path) -> Runner:
    return Runner(toy_library, tmp_path / "cache", tmp_path / "outputs")


# With pytest-xdist (README "Tests": `-n 2 --dist loadgroup`), a whole test file is one unit of work, so a
# module fixture (one SmolLM2 load, one lm-eval run) is built once. Two files' tests must not overlap:
# the Ray tests share one session cluster per worker and start local ones (tests/scale), and the
# sandbox's fork bomb fills the process cap of the user that every concurrent sandbox also runs as.
_SERIAL_GROUPS = {"tests/scale/": "ray", "tests/sandbox/": "sandbox"}


def _xdist_group(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return next((name for prefix, name in _SERIAL_GROUPS.items() if path.startswith(prefix)), path)


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
    slow = {_xdist_group(item.nodeid) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: _xdist_group(item.nodeid) not in slow)  # stable: file order otherwise kept
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_xdist_group(item.nodeid)))
