"""Runs in-process against a private cache (``Runner``, as ``python -m evalflow`` would run them) and
what tests read of their manifests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support.models import CountingModel

COUNTING = "tests.support.models:CountingModel"


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


def stage_hits(manifest: dict, task: str | None = None) -> dict[str, bool]:
    """Each stage's cache hit in a run's manifest (of one task, or of every task)."""
    return {e["stage"]: e["hit"] for e in manifest["stages"] if task is None or e["task"] == task}
