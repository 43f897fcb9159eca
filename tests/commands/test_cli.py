"""`python -m evalflow` as users run it: kills, sweeps, reproduction from a run folder."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from tests.support.cli import base_args, cli, held_args, start_held
from tests.support.hold import Hold


def request_entries(cache: Path) -> int:
    from evalflow.cache.store import CacheStore

    store = CacheStore(cache)
    try:
        return sum(1 for _ in store.raw.iterkeys() if str(_).startswith("request:"))
    finally:
        store.close()


def test_sigkill_during_inference_then_rerun(toy_library: Path, tmp_path: Path) -> None:
    """SIGKILL while the model holds the 3rd of 20 chunks: exactly the first two (16 requests) are
    in the cache, and the re-run computes exactly the other 144."""
    cache = tmp_path / "cache"
    args = held_args(toy_library, cache) + ["chunk_size=8"]
    with Hold(at=3) as hold:
        proc = start_held(args + [f"hydra.run.dir={tmp_path / 'killed'}"], hold, tmp_path / "killed-log")
        try:
            hold.wait_held()
            os.kill(proc.pid, signal.SIGKILL)
            assert proc.wait(timeout=60) == -signal.SIGKILL
        finally:
            proc.kill()
            proc.wait(timeout=60)
    assert not (tmp_path / "killed" / "results.json").exists()
    persisted = request_entries(cache)
    assert persisted == 16

    done = cli(args + [f"hydra.run.dir={tmp_path / 'resumed'}"])  # no hold in its environment
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "resumed" / "manifest.json").read_text())
    assert manifest["inference"]["computed"] == 160 - persisted
    assert manifest["inference"]["cached"] == persisted

    fresh = cli(base_args(toy_library, tmp_path / "fresh-cache") + [f"hydra.run.dir={tmp_path / 'fresh'}"])
    assert fresh.returncode == 0, fresh.stderr
    resumed = json.loads((tmp_path / "resumed" / "results.json").read_text())["results"]
    assert resumed == json.loads((tmp_path / "fresh" / "results.json").read_text())["results"]


def test_multirun_writes_one_folder_per_job(toy_library: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    done = cli(base_args(toy_library, tmp_path / "cache") + [f"hydra.sweep.dir={sweep}", "-m", "num_fewshot=0,1"])
    assert done.returncode == 0, done.stderr
    for job, shots in (("0", 0), ("1", 1)):
        results = json.loads((sweep / job / "results.json").read_text())
        manifest = json.loads((sweep / job / "manifest.json").read_text())
        assert results["n-shot"]["toy_mc"] == shots
        assert {e["stage"] for e in manifest["stages"]} >= {"load_docs", "aggregate"}
        assert (sweep / job / ".hydra" / "config.yaml").exists()


def test_reproduce_from_run_folder_snapshot(toy_library: Path, tmp_path: Path) -> None:
    first_dir = tmp_path / "first"
    done = cli(base_args(toy_library, tmp_path / "cache") + ["num_fewshot=1", "limit=12", f"hydra.run.dir={first_dir}"])
    assert done.returncode == 0, done.stderr
    again_dir = tmp_path / "again"
    done = cli(["--config-dir", str(first_dir / ".hydra"), "--config-name", "config", f"hydra.run.dir={again_dir}"])
    assert done.returncode == 0, done.stderr
    first = json.loads((first_dir / "results.json").read_text())
    again = json.loads((again_dir / "results.json").read_text())
    assert again["results"] == first["results"] and again["n-shot"] == first["n-shot"]
    assert json.loads((again_dir / "manifest.json").read_text())["inference"]["computed"] == 0


def test_cfg_job_prints_the_composed_config() -> None:
    done = cli(["model=dummy", "task=toy_mc", "--cfg", "job"])
    assert done.returncode == 0, done.stderr
    assert "type: dummy" in done.stdout and "num_fewshot: null" in done.stdout


def test_bad_override_type_is_one_clear_line(toy_library: Path, tmp_path: Path) -> None:
    done = cli(base_args(toy_library, tmp_path / "cache") + ["num_fewshot=five"])
    assert done.returncode != 0
    assert "num_fewshot" in done.stderr and "Traceback" not in done.stderr


def test_unknown_task_names_the_closest(toy_library: Path, tmp_path: Path) -> None:
    done = cli(base_args(toy_library, tmp_path / "cache") + ["task=toy_mx", f"hydra.run.dir={tmp_path / 'r'}"])
    assert done.returncode != 0
    assert "toy_mc" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r" / "results.json").exists()


def test_gen_kwargs_override_from_the_command_line(toy_library: Path, tmp_path: Path) -> None:
    args = [a.replace("task=toy_mc", "task=toy_gen") for a in base_args(toy_library, tmp_path / "cache")]
    for i, override in enumerate(["gen_kwargs={max_gen_toks: 7}", "gen_kwargs='max_gen_toks=7'"]):
        done = cli(args + ["limit=2", override, f"hydra.run.dir={tmp_path / str(i)}"])
        assert done.returncode == 0, done.stderr
        sample = json.loads((tmp_path / str(i) / "samples_toy_gen.jsonl").read_text().splitlines()[0])
        assert sample["arguments"]["gen_args_0"]["arg_1"]["max_gen_toks"] == 7


def test_reused_run_folder_moves_the_failed_runs_log_aside(toy_library: Path, tmp_path: Path) -> None:
    """Regression: a run folder reused after failed attempts (no results.json, so evalflow allows
    it) appended the new run's log to theirs, one cli.log mixing the runs. Now the newest earlier
    log is cli.log.1 and older ones shift up, as logrotate numbers them."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "cli.log").write_text("second failed attempt\n")
    (folder / "cli.log.1").write_text("first failed attempt\n")
    done = cli(base_args(toy_library, tmp_path / "cache") + [f"hydra.run.dir={folder}"])
    assert done.returncode == 0, done.stderr
    assert (folder / "cli.log.1").read_text() == "second failed attempt\n"
    assert (folder / "cli.log.2").read_text() == "first failed attempt\n"
    log = (folder / "cli.log").read_text()
    assert "failed attempt" not in log and "toy_mc" in log
