"""The run the tracker tests log: both toy tasks, six documents each, a private cache and run folder
under one temp folder."""

from __future__ import annotations

from pathlib import Path

from tests.support.runs import COUNTING


def run_args(lib: Path, tmp: Path, *extra: str) -> list[str]:
    """``python -m evalflow``'s words for it, then ``extra``."""
    return [
        "model=dummy",
        f"model.type={COUNTING}",
        "task=[toy_mc,toy_gen]",
        f"include_path=[{lib}]",
        f"cache_dir={tmp / 'cache'}",
        "bootstrap_iters=10",
        "limit=6",
        f"hydra.run.dir={tmp / 'run'}",
        *extra,
    ]
