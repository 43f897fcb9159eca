"""`python -m evalflow` as an lm-eval user drives it: run folders inside task folders, `show`,
`validate`, `samples=` and `predict_only=` (issue 14)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

MYTASK = """\
task: mytask
dataset_path: json
dataset_kwargs:
  data_files:
    test: data.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{q}}"
doc_to_target: label
doc_to_choice: ["a", "b"]
"""


def cli(args: list[str], cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVALFLOW_CACHE": str(cache)}
    return subprocess.run([sys.executable, "-m", "evalflow", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def task_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "mytask.yaml").write_text(MYTASK)
    (folder / "data.jsonl").write_text("".join(json.dumps({"q": f"q{i}", "label": i % 2}) + "\n" for i in range(12)))
    return folder


def test_run_folders_inside_the_task_folder_do_not_break_later_runs(tmp_path: Path) -> None:
    """The issue's two reproductions: `hydra.run.dir=T/a` then another run; `include_path=[.]`
    run from the task folder once `outputs/` holds run folders."""
    lib, cache = task_folder(tmp_path / "T"), tmp_path / "cache"
    run = ["model=dummy", "task=mytask", "limit=4", "bootstrap_iters=0"]
    for name in ("a", "b"):
        done = cli(run + [f"include_path=[{lib}]", f"hydra.run.dir={lib / name}"], tmp_path, cache)
        assert done.returncode == 0, done.stderr
        assert (lib / name / "results.json").is_file()
    for _ in range(2):  # the first writes outputs/<date>/<time>/, the second must not read it
        done = cli(run + ["include_path=[.]"], lib, cache)
        assert done.returncode == 0, done.stderr
        assert "could not be read" not in done.stderr
    assert len(list((lib / "outputs").glob("*/*/results.json"))) >= 1
    listing = cli(["ls", f"include_path=[{lib}]"], tmp_path, cache)
    assert listing.returncode == 0 and "skipped" not in listing.stderr, listing.stderr
