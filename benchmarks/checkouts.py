"""An earlier evalflow beside this one: the before/after benchmarks' two trees and their commands.

``source_at`` extracts the tree at a git ref (``git archive``, so the repository's worktrees are
left alone) with a link to the workplace's ``shared`` folder beside it, which ``data_map=shared``
resolves against; ``cold_command`` runs one tree's evalflow on a fresh cache.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
MMLU5 = "[mmlu_abstract_algebra,mmlu_anatomy,mmlu_astronomy,mmlu_business_ethics,mmlu_college_biology]"
"""Five mmlu subjects: the 5-shot workload of the chunk and persistence benchmarks."""


def source_at(ref: str, into: Path) -> Path:
    """The evalflow tree at ``ref``, extracted into ``into``, ``shared`` linked beside it."""
    into.mkdir(parents=True)
    (into.parent / "shared").symlink_to(SHARED)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def cold_command(tree: Path, args: list[str], work: Path, model: str = "smollm2") -> list[str]:
    """``tree``'s evalflow on ``args`` (with ``data_map=shared``, batch size 8, no bootstrap), its
    cache and run folders under ``work`` removed first."""
    cache, run = work / "cache", work / "run"
    line = [
        sys.executable,
        "-m",
        "evalflow",
        f"model={model}",
        "data_map=shared",
        "batch_size=8",
        "bootstrap_iters=0",
        f"cache_dir={cache}",
        f"hydra.run.dir={run}",
        *args,
    ]
    quoted = " ".join(f"'{a}'" for a in line)
    return ["bash", "-c", f"rm -rf {cache} {run} && cd {tree} && PYTHONPATH={tree} {quoted}"]
