"""The benchmarks run from the project alone: each test runs its script from a copy of ``benchmarks/``
in a folder with no ``shared/`` beside it (what a new contributor's clone has)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

_BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def benchmarks_alone(tmp_path: Path) -> Path:
    """A copy of ``benchmarks/`` at ``<tmp>/checkout/benchmarks``, with no ``<tmp>/shared``."""
    into = tmp_path / "checkout" / "benchmarks"
    shutil.copytree(_BENCHMARKS, into, ignore=shutil.ignore_patterns("__pycache__"))
    assert not (tmp_path / "shared").exists()
    return into
