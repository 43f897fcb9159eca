"""`python -m evalflow` as an lm-eval user drives it: run folders inside task folders, `show`,
`validate`, `samples=` and `predict_only=` (issue 14)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import cli_in, task_folder


def test_run_folders_inside_the_task_folder_do_not_break_later_runs(tmp_path: Path) -> None:
    """The issue's two reproductions: `hydra.run.dir=T/a` then another run; `include_path=[.]`
    run from the task folder once `outputs/` holds run folders."""
    lib, cache = task_folder(tmp_path / "T"), tmp_path / "cache"
    run = ["model=dummy", "task=mytask", "limit=4", "bootstrap_iters=0"]
    for name in ("a", "b"):
        done = cli_in(run + [f"include_path=[{lib}]", f"hydra.run.dir={lib / name}"], tmp_path, cache)
        assert done.returncode == 0, done.stderr
        assert (lib / name / "results.json").is_file()
    for _ in range(2):  # the first writes outputs/<date>/<time>/, the second must not read it
        done = cli_in(run + ["include_path=[.]"], lib, cache)
        assert done.returncode == 0, done.stderr
        assert "could not be read" not in done.stderr
    assert len(list((lib / "outputs").glob("*/*/results.json"))) >= 1
    listing = cli_in(["ls", f"include_path=[{lib}]"], tmp_path, cache)
    assert listing.returncode == 0 and "skipped" not in listing.stderr, listing.stderr


BROKEN = """\
task: broken
include: mytask.yaml
doc_to_text: "{{ question }}"
"""
BAD_METRIC = """\
task: bad_metric
include: mytask.yaml
metric_list:
  - metric: acuracy
"""
BAD_FILTER = """\
task: bad_filter
include: mytask.yaml
filter_list:
  - name: x
    filter:
      - function: take_frist
"""


def test_show_prints_prompts_targets_and_requests_without_a_model(tmp_path: Path) -> None:
    lib, cache = task_folder(tmp_path / "T"), tmp_path / "cache"
    done = cli_in(
        ["show", "task=mytask", f"include_path=[{lib}]", "n=2", "model=dummy", "model.type=no.such.module:Model"],
        tmp_path,
        cache,
    )  # a model that cannot load: none is loaded
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "2 of 12 documents evaluated, showing 2" in out
    assert "--- document 0\n[prompt]\nQuestion: q0\n[end of prompt]\ntarget: 0 ('a')" in out
    assert "--- document 1\n" in out and "--- document 2\n" not in out
    assert "0: loglikelihood of continuation ' a'" in out and "1: loglikelihood of continuation ' b'" in out

    # Through the run's own stages and cache: a run with the same settings reuses what show computed.
    manifest = run_manifest(lib, cache, tmp_path / "run", ["limit=2"])
    hits = {e["stage"]: e["hit"] for e in manifest["stages"]}
    assert hits["load_docs"] and hits["fewshot"] and hits["instances"] and not hits["inference"]


def run_manifest(lib: Path, cache: Path, folder: Path, extra: list[str]) -> dict:
    done = cli_in(
        ["model=dummy", "task=mytask", f"include_path=[{lib}]", "bootstrap_iters=0", f"hydra.run.dir={folder}", *extra],
        folder.parent,
        cache,
    )
    assert done.returncode == 0, done.stderr
    return json.loads((folder / "manifest.json").read_text())


def test_show_needs_a_task_and_refuses_bad_arguments(tmp_path: Path) -> None:
    done = cli_in(["show", "n=2"], tmp_path, tmp_path / "cache")
    assert done.returncode == 2 and "name the task, e.g. task=arc_easy" in done.stderr
    done = cli_in(["show", "task=mytask", "n=zero"], tmp_path, tmp_path / "cache")
    assert done.returncode == 2 and "n=zero must be a whole number" in done.stderr


def test_validate_passes_good_tasks_and_names_each_broken_one(tmp_path: Path) -> None:
    lib, cache = task_folder(tmp_path / "T"), tmp_path / "cache"
    good = cli_in(["validate", "task=mytask", f"include_path=[{lib}]"], tmp_path, cache)
    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith("ok  mytask: 3 document(s) render (6 requests); metrics acc, acc_norm; filters none")

    for name, text in (("broken", BROKEN), ("bad_metric", BAD_METRIC), ("bad_filter", BAD_FILTER)):
        (lib / f"{name}.yaml").write_text(text)
    bad = cli_in(["validate", "task=[mytask,broken,bad_metric,bad_filter]", f"include_path=[{lib}]"], tmp_path, cache)
    assert bad.returncode == 2
    assert "ok  mytask" in bad.stdout
    errors = [line for line in bad.stderr.splitlines() if line.startswith("evalflow: error: ")]
    assert len(errors) == 3, bad.stderr
    assert "task 'broken'" in errors[0] and "'question' is undefined" in errors[0]
    assert "unknown metric 'acuracy'; did you mean 'acc'" in errors[1]
    assert "take_frist" in errors[2] and "take_first" in errors[2]
    assert "3 of 4 task(s) failed validation" in bad.stderr

    unknown = cli_in(["validate", "task=mytsk", f"include_path=[{lib}]"], tmp_path, cache)
    assert unknown.returncode == 2 and "did you mean 'mytask'" in unknown.stderr
