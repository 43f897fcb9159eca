"""A folder of runs as ``evalflow view`` and the frames find them: real runs of the ``dummy`` model
(one with a group, one partial, a Hydra multirun sweep of two jobs from the command line), lm-eval
0.4.13's own output folder with two runs in one model folder, a run that stopped with a snapshot and
no results,
and what the walk must skip (the cache folder, a gate's round scratch, a link to a folder outside).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from evalflow import evaluate
from evalflow.output.run_paths import (
    gate_rounds_dir,
    results_file,
    snapshot_config,
    snapshot_dir,
)
from tests.support.cli import cli
from tests.support.lm_eval_folders import LM_EVAL_FOLDERS
from tests.support.toy_tasks import write_toy_library

GROUP_YAML = """\
group: toy_group
task: [toy_mc, toy_gen]
aggregate_metric_list:
  - metric: acc
    weight_by_size: true
metadata:
  version: 1
"""
SWEEP = "multirun/2026-12-06/18-00-00-abc"  # Hydra's sweep folder, as conf/config.yaml names it
LIMIT = 6
STOPPED = 1_000_000_000.0  # 2001: the time of the snapshot-only run


@dataclass(frozen=True)
class ViewRuns:
    """Where each run of :func:`make_view_runs` lies under ``root``."""

    root: Path
    outside: Path  # a folder beside root holding a run, linked from inside root
    library: Path
    cache: Path
    grouped: Path  # toy_group (toy_mc + toy_gen), evaluate()
    partial: Path  # toy_mc, subset of 3 documents
    sweep: Path  # the sweep folder; its jobs are sweep/0 (num_fewshot=0) and sweep/1 (num_fewshot=1)
    lm_eval: Path  # the model folder with lm-eval's arc_easy and gsm8k runs
    stopped: Path  # a snapshot and no results, written long ago (failed)


def make_view_runs(base: Path) -> ViewRuns:
    """The runs above, written under ``base`` (a fresh folder)."""
    library = write_toy_library(base)
    (library / "toy_group.yaml").write_text(GROUP_YAML)
    root, outside = base / "outputs", base / "elsewhere"
    cache = root / "cache"  # an evalflow cache folder among the runs: never listed
    common = {"include_path": [str(library)], "cache_dir": str(cache), "limit": LIMIT}
    grouped, partial = root / "single" / "grouped", root / "single" / "partial"
    evaluate("toy_group", "dummy", output_dir=grouped, **common)
    evaluate("toy_mc", "dummy", output_dir=partial, subset={"toy_mc": [0, 2, 4]}, **common)
    sweep = root / SWEEP
    done = cli(
        [
            "model=dummy",
            "task=toy_mc",
            f"include_path=[{library}]",
            f"cache_dir={cache}",
            f"limit={LIMIT}",
            "-m",
            "num_fewshot=0,1",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=base,
    )
    assert done.returncode == 0, done.stderr
    lm_eval = root / "lm" / "smollm2"
    lm_eval.mkdir(parents=True)
    for fixture in ("lm_eval_arc_easy", "lm_eval_gsm8k"):
        for path in (LM_EVAL_FOLDERS / fixture / "smollm2").iterdir():
            shutil.copy(path, lm_eval / path.name)
    stopped = root / "stopped"
    snapshot_dir(stopped).mkdir(parents=True)
    shutil.copy(snapshot_config(grouped), snapshot_config(stopped))
    set_time(stopped, STOPPED)  # long past its start, with no events: a run that died before starting
    rounds = gate_rounds_dir(partial) / "0"  # a gate's round scratch inside a run folder
    shutil.copytree(grouped, rounds)
    evaluate("toy_mc", "dummy", output_dir=outside / "run", **common)
    os.symlink(outside, root / "link_out")
    return ViewRuns(root, outside, library, cache, grouped, partial, sweep, lm_eval, stopped)


def set_time(path: Path, seconds: float) -> None:
    """Give a run's results file (or, without one, its folder and snapshot) the modification time ``seconds``."""
    targets = [results_file(path)] if results_file(path).is_file() else [path, snapshot_dir(path)]
    for target in targets:
        os.utime(target, (seconds, seconds))
