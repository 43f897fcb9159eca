"""An image task on two Ray workers: the actors receive the pixels (PIL images, read from the
cache's image table by the driver) and the run folder is byte for byte the one-worker run's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import images
from tests.support.scale_runs import outcome, run_once

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

VISION = "tests.support.models:VisionCountingModel"


def test_two_workers_equal_one_on_an_image_task(ray_cluster: str, tmp_path: Path) -> None:
    data = images.write_parquet(images.rows(8), tmp_path / "test.parquet")
    library = images.write_task(tmp_path / "tasks", "toy_vqa", data)
    seen = {}
    for workers in (1, 2):
        folder = tmp_path / f"w{workers}"
        _, manifest = run_once(
            library,
            tmp_path / f"cache{workers}",
            folder,
            task="toy_vqa",
            model={"type": VISION},
            workers=workers,
            ray_address=ray_cluster,
            chunk_size=2,
        )
        assert manifest["inference"] == {"requests": 8, "computed": 8, "cached": 0}
        assert len(manifest["workers"]) == workers
        seen[workers] = outcome(folder)
    assert seen[2] == seen[1]
    assert "32x32:" in seen[1]["samples"]["samples_toy_vqa.jsonl"]  # the answers were computed from pixels
