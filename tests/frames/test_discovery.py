"""``find_runs``: every run under the folders given, evalflow's and lm-eval's, with stable unique ids,
newest first; cache folders, a gate's round scratch and links out never walked."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalflow.errors import RunFolderError
from evalflow.frames.discovery import RunEntry, find_runs, sweep_id
from evalflow.output.run_paths import events_file, results_file
from tests.support.view_runs import SWEEP, ViewRuns, make_view_runs, set_time

ARC = "lm/smollm2/results_2026-11-30T12-10-26.442646.json"
GSM8K = "lm/smollm2/results_2026-11-30T12-37-32.402397.json"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> ViewRuns:
    return make_view_runs(tmp_path_factory.mktemp("view_runs"))


def _by_id(entries: list[RunEntry]) -> dict[str, RunEntry]:
    return {e.id: e for e in entries}


def test_every_run_is_found_with_its_layout_folder_and_results(runs: ViewRuns) -> None:
    found = _by_id(find_runs([runs.root]))
    assert set(found) == {
        "single/grouped",
        "single/partial",
        f"{SWEEP}/0",
        f"{SWEEP}/1",
        ARC,
        GSM8K,
        "stopped",
    }  # not the cache, not partial/.gate_rounds/0, not the run behind link_out
    assert found["single/grouped"] == RunEntry("single/grouped", runs.grouped, "evalflow", results_file(runs.grouped))
    assert found[f"{SWEEP}/1"].folder == runs.sweep / "1"
    assert found["stopped"] == RunEntry("stopped", runs.stopped, "evalflow", None)
    arc = found[ARC]  # lm-eval writes several runs into one model folder: each results file is one
    assert (arc.layout, arc.folder, arc.results) == ("lm-eval", runs.lm_eval, runs.root / ARC)
    assert found[GSM8K].folder == runs.lm_eval and found[GSM8K].results == runs.root / GSM8K


def test_ids_are_stable_and_several_roots_prefix_them_with_the_roots_index(runs: ViewRuns) -> None:
    once, again = find_runs([runs.root]), find_runs([runs.root])
    assert once == again
    both = find_runs([runs.root / "single", runs.lm_eval, runs.outside])
    assert {e.id for e in both} == {"0:grouped", "0:partial", f"1:{Path(ARC).name}", f"1:{Path(GSM8K).name}", "2:run"}
    assert len({e.id for e in both}) == len(both)


def test_a_run_under_two_roots_is_listed_once_under_the_first(runs: ViewRuns) -> None:
    found = find_runs([runs.root / "single", runs.root / "single" / "grouped"])
    assert sorted(e.id for e in found) == ["0:grouped", "0:partial"]


def test_a_run_folder_given_as_the_root_is_the_run_itself(runs: ViewRuns) -> None:
    (entry,) = find_runs([runs.grouped])
    assert (entry.id, entry.folder) == (".", runs.grouped)
    (lm,) = find_runs([runs.root / ARC])  # lm-eval's results file itself
    assert (lm.id, lm.layout, lm.results) == (Path(ARC).name, "lm-eval", runs.root / ARC)


def test_newest_first_by_the_results_file_else_the_folder(runs: ViewRuns) -> None:
    times = {runs.partial: 4_000, runs.sweep / "0": 3_000, runs.stopped: 2_000, runs.grouped: 1_000}
    for folder, seconds in times.items():
        set_time(folder, seconds)
    found = [e.folder for e in find_runs([runs.root / "single", runs.root / SWEEP, runs.stopped])]
    assert found.index(runs.partial) < found.index(runs.sweep / "0") < found.index(runs.stopped)
    assert found.index(runs.stopped) < found.index(runs.grouped)
    set_time(runs.grouped, 5_000)
    assert find_runs([runs.root / "single"])[0].folder == runs.grouped


def test_a_sweeps_jobs_name_the_sweep_folder_as_its_own_id_reads(runs: ViewRuns) -> None:
    found = _by_id(find_runs([runs.root]))
    assert sweep_id(found[f"{SWEEP}/0"]) == sweep_id(found[f"{SWEEP}/1"]) == SWEEP
    assert sweep_id(found["single/grouped"]) is None and sweep_id(found[ARC]) is None
    several = _by_id(find_runs([runs.lm_eval, runs.root / "multirun"]))
    assert sweep_id(several["1:2026-12-06/18-00-00-abc/1"]) == "1:2026-12-06/18-00-00-abc"
    (job,) = find_runs([runs.sweep / "0"])  # the job given alone: its sweep lies outside what was given
    assert sweep_id(job) is None
    assert sweep_id(_by_id(find_runs([runs.sweep]))["0"]) == "."


def test_a_missing_folder_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(RunFolderError, match=r"nowhere: no such folder"):
        find_runs([tmp_path / "nowhere"])


def test_a_folder_without_runs_gives_none(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "notes.json").write_text("{}")
    assert find_runs([tmp_path]) == []


def test_a_folder_with_only_its_events_file_is_a_run_without_results(tmp_path: Path) -> None:
    folder = tmp_path / "starting"
    folder.mkdir()
    events_file(folder).write_text('{"event": "start", "time": 1.0, "pid": 1, "tasks": ["t"], "model": "m"}\n')
    assert find_runs([tmp_path]) == [RunEntry("starting", folder, "evalflow", None)]
