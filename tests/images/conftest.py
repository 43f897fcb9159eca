"""A local image task (Pillow-drawn shapes and digits, as a hub-style parquet file) for the DAG tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import images


@pytest.fixture
def vqa_library(tmp_path: Path) -> Path:
    """tasks/toy_vqa.yaml over data/test.parquet: 6 documents, one image each."""
    data = images.write_parquet(images.rows(6), tmp_path / "test.parquet")
    return images.write_task(tmp_path / "tasks", "toy_vqa", data)
