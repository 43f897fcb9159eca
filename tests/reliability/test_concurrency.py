"""Four processes on one cache folder, asking for overlapping requests at the same time.

Whether they are plain parallel ``python -m evalflow`` runs or the jobs of a ``-m`` sweep with
Hydra's joblib launcher (``hydra/launcher=parallel``, conf/hydra/launcher/parallel.yaml): no
error, no corrupt entry, every run's results equal to the same configuration run serially, and
duplicate model work bounded by the batches in flight (the inference edge leases each chunk
before computing it, so in practice there is none).
GateModel holds every process at its first model call until all four are there, so the runs
provably overlap however loaded the machine is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalflow.commands.cache import main as cache_main
from tests.support.reliability import calls, popen, request_keys, results_of
from tests.support.runs import COUNTING

GATE_MODEL = "tests.support.faulty:GateModel"
CHUNK = 16
PROCESSES = 4


def serial_results(library: Path, cache: Path, configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each configuration run one after another, in-process, on a private cache."""
    from evalflow.config.compose import compose_settings
    from evalflow.run.phases import run

    out = []
    for values in configs:
        values = dict(values)
        settings = compose_settings(
            task=values.pop("task", ["toy_mc", "toy_gen"]),
            preset="dummy",
            overrides=[f"model.type={COUNTING}"],
            values={"include_path": [str(library)], "cache_dir": str(cache), "bootstrap_iters": 0, **values},
        )
        out.append(json.loads(json.dumps(run(settings)["results"])))
    return out


def gate_env(tmp_path: Path, log: Path) -> dict[str, str]:
    return {
        "EVALFLOW_TEST_GATE": str(tmp_path / "gate"),
        "EVALFLOW_TEST_GATE_N": str(PROCESSES),
        "EVALFLOW_TEST_CALL_LOG": str(log),
        "EVALFLOW_TEST_DELAY": "0.002",
    }


def assert_clean(outputs: list[str], cache: Path) -> None:
    for text in outputs:
        assert "Traceback" not in text and "corrupt" not in text and "error" not in text.lower(), text[-3000:]
    assert cache_main(["verify", f"cache_dir={cache}"]) == 0


def test_four_plain_processes_share_one_cache(toy_library: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    configs: list[dict[str, Any]] = [
        {"limit": 40},
        {"limit": 40, "num_fewshot": 1},
        {"limit": 25},
        {"task": ["toy_gen", "toy_mc"]},
    ]
    procs = []
    for i, values in enumerate(configs):
        task = values.get("task", ["toy_mc", "toy_gen"])
        args = [
            "model=dummy",
            f"model.type={GATE_MODEL}",
            f"task=[{','.join(task)}]",
            f"include_path=[{toy_library}]",
            f"cache_dir={cache}",
            "bootstrap_iters=0",
            f"chunk_size={CHUNK}",
            f"hydra.run.dir={tmp_path / f'run{i}'}",
        ]
        args += [f"{k}={v}" for k, v in values.items() if k != "task"]
        procs.append(popen(args, gate_env(tmp_path, tmp_path / f"calls{i}"), out=tmp_path / f"out{i}"))
    codes = [p.wait(timeout=300) for p in procs]
    outputs = [(tmp_path / f"out{i}").read_text() for i in range(PROCESSES)]
    assert codes == [0] * PROCESSES, outputs
    assert_clean(outputs, cache)

    expected = serial_results(toy_library, tmp_path / "serial-cache", configs)
    assert [results_of(tmp_path / f"run{i}")["results"] for i in range(PROCESSES)] == expected
    unique = len(request_keys(cache))
    computed = [calls(tmp_path / f"calls{i}") for i in range(PROCESSES)]
    assert unique <= sum(computed) <= unique + (PROCESSES - 1) * CHUNK, computed
    assert sum(1 for c in computed if c) >= 2, computed  # the work really was split
    manifests = [json.loads((tmp_path / f"run{i}" / "manifest.json").read_text()) for i in range(PROCESSES)]
    assert [m["inference"]["computed"] for m in manifests] == computed


def test_joblib_sweep_of_four_jobs_shares_one_cache(toy_library: Path, tmp_path: Path) -> None:
    cache, sweep, log = tmp_path / "cache", tmp_path / "sweep", tmp_path / "calls"
    args = [
        "model=dummy",
        f"model.type={GATE_MODEL}",
        "task=[toy_mc,toy_gen]",
        f"include_path=[{toy_library}]",
        f"cache_dir={cache}",
        "bootstrap_iters=0",
        f"chunk_size={CHUNK}",
        f"hydra.sweep.dir={sweep}",
        "-m",
        "hydra/launcher=parallel",
        f"hydra.launcher.n_jobs={PROCESSES}",
        "limit=10,20,30,40",
    ]
    proc = popen(args, gate_env(tmp_path, log), out=tmp_path / "out")
    assert proc.wait(timeout=300) == 0, (tmp_path / "out").read_text()[-3000:]
    assert_clean([(tmp_path / "out").read_text()], cache)

    expected = serial_results(toy_library, tmp_path / "serial-cache", [{"limit": n} for n in (10, 20, 30, 40)])
    assert [results_of(sweep / str(job))["results"] for job in range(PROCESSES)] == expected
    unique = len(request_keys(cache))
    assert unique <= calls(log) <= unique + (PROCESSES - 1) * CHUNK
    assert len(list((tmp_path / "gate").iterdir())) == PROCESSES  # four workers met at the gate
