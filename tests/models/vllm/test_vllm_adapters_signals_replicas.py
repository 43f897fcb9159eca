"""model=vllm on the real engine, what the one shared run cannot show: a LoRA adapter
(``lora_local_path``, made here by peft) answers as the adapter merged into the weights does under
evalflow's hf backend, and changes the answers; ``kill PID`` of a run mid-inference shuts its
engine processes down instead of orphaning them (lm-eval's are left running); and ``workers=2``
runs an engine per Ray replica with the single engine's answers."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import vllm_side
from tests.support.hold import Hold, signals_as_in_a_terminal
from tests.support.vllm_runs import LOGPROB_TOLERANCE, SHARED_KEYS, run_args, samples

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm")]
TASKS = ["toy_mc", "toy_roll", "toy_gen"]


def _loglikelihoods(rows: dict[str, list[dict[str, Any]]]) -> list[tuple[float, bool | None]]:
    out = []
    for task in ("toy_mc", "toy_roll"):
        for row in rows[task]:
            for (answer,) in row["resps"]:
                out.append((answer[0], answer[1]) if isinstance(answer, list) else (answer, None))
    return out


def test_a_lora_adapter_answers_as_its_merged_weights_do(
    vllm_run: dict[str, Any], library: Path, tmp_path: Path
) -> None:
    from evalflow import evaluate

    adapter, merged = tmp_path / "adapter", tmp_path / "merged"
    vllm_side.make_lora(vllm_run["folder"], adapter, merged)
    args = [
        a
        for a in run_args(vllm_run["folder"], library, tmp_path / "cache", tmp_path / "lora")
        if not a.startswith("task=")
    ]
    done = vllm_side.run_evalflow(
        [*args, f"task=[{','.join(TASKS)}]", f"model.lora_local_path={adapter}"], cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-4000:]
    lora_rows = samples(tmp_path / "lora", TASKS)
    lora = _loglikelihoods(lora_rows)

    hf_out = tmp_path / "hf-merged"
    evaluate(
        TASKS,
        {"type": "hf", "pretrained": str(merged), "dtype": "float32", "engine": "reference", **SHARED_KEYS},
        output_dir=hf_out,
        include_path=[str(library)],
        cache_dir=str(tmp_path / "hf-cache"),
        limit=8,
        num_fewshot=0,
        bootstrap_iters=0,
        batch_size=8,
    )
    hf_rows = samples(hf_out, TASKS)
    hf = _loglikelihoods(hf_rows)
    base = _loglikelihoods({t: vllm_run["samples"][t] for t in TASKS})

    assert len(lora) == len(hf) == len(base) == 8 * 4 + 2
    assert max(abs(a[0] - b[0]) for a, b in zip(lora, hf)) < LOGPROB_TOLERANCE
    assert [a[1] for a in lora] == [b[1] for b in hf]  # greedy flags
    assert max(abs(a[0] - b[0]) for a, b in zip(lora, base)) > 100 * LOGPROB_TOLERANCE  # the adapter is applied
    texts = [[row["resps"][0][0] for row in rows["toy_gen"]] for rows in (lora_rows, hf_rows)]
    assert texts[0] == texts[1] and any(t.strip() for t in texts[0])  # greedy generations under the adapter


def test_sigterm_mid_inference_shuts_the_engine_processes_down(
    vllm_run: dict[str, Any], library: Path, tmp_path: Path
) -> None:
    pids_file = tmp_path / "engine-pids"
    args = [
        *run_args(vllm_run["folder"], library, tmp_path / "cache", tmp_path / "run"),
        "model.type=tests.support.vllm_side:HeldVLLM",
    ]
    python = str(vllm_side.cpu_venv.venv_python(vllm_side.venv()))
    with Hold(at=1) as hold, open(tmp_path / "run.err", "w") as err:
        proc = subprocess.Popen(
            [python, "-m", "evalflow", *args],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**vllm_side.env(), **hold.env, "EVALFLOW_TEST_ENGINE_PIDS": str(pids_file)},
            pass_fds=hold.child_fds,
            preexec_fn=signals_as_in_a_terminal,
        )
        hold.started()
        try:
            hold.wait_held(timeout=vllm_side.READY_SECONDS)
            engine = [int(p) for p in pids_file.read_text().split()]
            assert engine and all(vllm_side.alive(p) for p in engine)
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=120)
        finally:
            proc.kill()
            proc.wait(timeout=60)
    log = (tmp_path / "run.err").read_text()
    assert code == 143 and "evalflow: stopped by SIGTERM." in log, log[-3000:]
    deadline = time.monotonic() + 60  # the engine's own shutdown: SIGTERM, then up to its timeout
    while any(vllm_side.alive(p) for p in engine) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not [p for p in engine if vllm_side.alive(p)], f"engine processes left running: {engine}"
    assert not (tmp_path / "run" / "results.json").exists()


def test_two_ray_replicas_each_with_an_engine_answer_as_one_engine(
    vllm_run: dict[str, Any], library: Path, tmp_path: Path
) -> None:
    """``workers=2``: two Ray replicas, each its own vLLM engine kept for the run, every replica
    dealt chunks; the answers are the single engine's (log-likelihoods within float noise of
    different batches, the same greedy flags and generations)."""
    args = [
        a
        for a in run_args(vllm_run["folder"], library, tmp_path / "cache", tmp_path / "run")
        if not a.startswith("task=")
    ]
    done = vllm_side.run_evalflow(
        [*args, "task=[toy_mc,toy_gen]", "workers=2", "worker_resources={num_cpus: 1}", "chunk_size=16"], cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-4000:]
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert sorted(name.split("@")[0] for name in manifest["workers"]) == ["w0", "w1"]
    rows = samples(tmp_path / "run", ["toy_mc", "toy_gen"])
    for mine, one in zip(rows["toy_mc"], vllm_run["samples"]["toy_mc"], strict=True):
        for (a,), (b,) in zip(mine["resps"], one["resps"], strict=True):
            assert abs(a[0] - b[0]) < LOGPROB_TOLERANCE and a[1] == b[1]
    assert [r["resps"] for r in rows["toy_gen"]] == [r["resps"] for r in vllm_run["samples"]["toy_gen"]]
