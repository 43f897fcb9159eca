"""A run folder's files that are symbolic links out of it are not read (they are treated as
absent and named, with why, in the summary's ``left_out``), by every reader of frames; a root
given as a link itself is fine, and a link that stays inside the folder is followed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evalflow.frames.discovery import find_runs
from evalflow.frames.runs import run_detail, run_summary
from evalflow.frames.samples import SampleQuery, query, run_samples
from evalflow.frames.status import live_progress, run_status
from evalflow.output.contained import inside, link_out
from evalflow.output.run_paths import (
    events_file,
    manifest_file,
    results_file,
    samples_file,
    snapshot_config,
)
from tests.support.runs import Runner
from tests.support.toy_tasks import write_toy_library

SECRET = "SECRET-OUTSIDE-THE-RUN"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("links")
    runner = Runner(write_toy_library(tmp), tmp / "cache", tmp / "made")
    _, _, run = runner(["toy_mc", "toy_gen"], model="dummy", limit=6)
    (tmp / "secret.yaml").write_text(f"model: {SECRET}\n")
    (tmp / "secret.jsonl").write_text('{"doc_id": 0, "doc": {"q": "' + SECRET + '"}}\n')
    return {"tmp": tmp, "run": run}


def _hostile(made: dict[str, Path], name: str) -> Path:
    """A copy of the run under ``<tmp>/<name>/outputs/r`` whose snapshot, manifest, events and one
    samples file are links out of it; the ``outputs`` root is reached through a link too."""
    real = made["tmp"] / name / "real-outputs"
    run = real / "r"
    shutil.copytree(made["run"], run)
    snapshot_config(run).parent.mkdir(exist_ok=True)  # the runner writes no snapshot: a link stands in
    for path, target in (
        (snapshot_config(run), made["tmp"] / "secret.yaml"),
        (manifest_file(run), made["tmp"] / "secret.yaml"),
        (events_file(run), made["tmp"] / "secret.jsonl"),
        (samples_file(run, "toy_gen"), made["tmp"] / "secret.jsonl"),
    ):
        path.unlink(missing_ok=True)
        path.symlink_to(target)
    (made["tmp"] / name / "outputs").symlink_to(real, target_is_directory=True)
    return made["tmp"] / name / "outputs"


def test_links_out_are_absent_and_named(made: dict[str, Path]) -> None:
    root = _hostile(made, "one")
    (entry,) = find_runs([root])
    assert entry.results is not None  # the results file is real: the run is complete
    detail = run_detail(entry)
    assert SECRET not in repr(detail)
    assert detail["config_yaml"] is None and detail["command"] is None
    assert [s["task"] for s in detail["samples"]] == ["toy_mc"]
    assert detail["manifest"]["stages"] == []
    named = {o["file"] for o in run_summary(entry)["left_out"]}
    assert named == {".hydra/config.yaml", "manifest.json", "events.jsonl", "samples_toy_gen.jsonl"}, named
    assert all("outside the run folder" in o["reason"] for o in detail["left_out"])
    assert sorted(run_samples(entry.folder, entry.layout, entry.results)) == ["toy_mc"]
    assert live_progress(entry.folder) is None
    page = query(entry.folder, samples_file(entry.folder, "toy_mc"), SampleQuery(task="toy_mc"))
    assert page["total"] == 6


def test_a_results_file_that_links_out_is_no_results(made: dict[str, Path]) -> None:
    root = _hostile(made, "two")
    run = root / "r"
    results_file(run).rename(made["tmp"] / "two" / "results-elsewhere.json")
    results_file(run).symlink_to(made["tmp"] / "two" / "results-elsewhere.json")
    (entry,) = find_runs([root])
    assert entry.results is None
    assert run_status(entry.folder, entry.layout) != "complete"
    assert "results.json" in {o["file"] for o in run_summary(entry)["left_out"]}


def test_a_link_that_stays_inside_is_followed(made: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "r"
    shutil.copytree(made["run"], run)
    moved = run / "kept" / "samples.jsonl"
    moved.parent.mkdir()
    samples_file(run, "toy_gen").rename(moved)
    samples_file(run, "toy_gen").symlink_to(Path("kept") / "samples.jsonl")
    assert link_out(run, samples_file(run, "toy_gen")) is None and inside(run, samples_file(run, "toy_gen"))
    (entry,) = find_runs([tmp_path])
    assert sorted(run_samples(entry.folder, entry.layout, entry.results)) == ["toy_gen", "toy_mc"]
    assert run_summary(entry)["left_out"] == []


def test_explain_reads_no_manifest_that_links_out(made: dict[str, Path], tmp_path: Path) -> None:
    """explain (and the viewer's explain page) searches earlier runs for a reference: a run folder
    whose manifest is another folder's is not read as a record of it."""
    from evalflow.errors import RunFolderError
    from evalflow.insight.explanation import read_manifest

    run = tmp_path / "r"
    shutil.copytree(made["run"], run)
    manifest_file(run).rename(tmp_path / "elsewhere.json")
    manifest_file(run).symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(RunFolderError, match="not read: it is a symbolic link"):
        read_manifest(run)
