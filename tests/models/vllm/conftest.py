"""The real vLLM CPU engine for tests, started as few times as possible: one ``python -m evalflow
model=vllm`` run of three toy tasks (``vllm_run``), one ``vllm serve`` (``vllm_server``), and the
same tasks through evalflow's hf backend (``hf_samples``), each once per test session. The tests
that use them are in the ``vllm`` xdist group, so one worker starts them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import vllm_side
from tests.support.api_runs import ROLL_TEXTS, ROLL_YAML
from tests.support.vllm_runs import SHARED_KEYS, TASKS, run_args, samples


@pytest.fixture(scope="session")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.support.toy_tasks import GEN_YAML, MC_YAML, write_toy_data

    root = tmp_path_factory.mktemp("vllm-tasks")
    data, lib = write_toy_data(root), root / "tasks"
    lib.mkdir()
    (data / "roll.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in ROLL_TEXTS))
    for name, text in (("toy_mc", MC_YAML), ("toy_gen", GEN_YAML), ("toy_roll", ROLL_YAML)):
        (lib / f"{name}.yaml").write_text(text.format(data=data))
    return lib


@pytest.fixture(scope="session")
def vllm_run(library: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    why = vllm_side.missing()
    if why:
        pytest.skip(why)
    folder = vllm_side.smollm2_folder()
    root = tmp_path_factory.mktemp("vllm-run")
    done = vllm_side.run_evalflow(run_args(folder, library, root / "cache", root / "out"), cwd=root)
    assert done.returncode == 0, done.stderr[-4000:]
    return {"folder": folder, "root": root, "out": root / "out", "samples": samples(root / "out")}


@pytest.fixture(scope="session")
def hf_samples(hf_run: Path) -> dict[str, list[dict[str, Any]]]:
    return samples(hf_run)


@pytest.fixture(scope="session")
def hf_run(library: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same tasks through evalflow's hf backend, lm-eval's reference engine, on the GGUF's
    weights: the run's folder (its cache in ``cache/``)."""
    from evalflow import evaluate
    from evalflow.config.smollm2 import SMOLLM2_GGUF, smollm2_dir

    out = tmp_path_factory.mktemp("hf-run")
    model = {
        "type": "hf",
        "pretrained": smollm2_dir(),
        "gguf_file": SMOLLM2_GGUF,
        "dtype": "float32",
        "engine": "reference",
        **SHARED_KEYS,
    }
    evaluate(
        TASKS,
        model,
        output_dir=out,
        include_path=[str(library)],
        cache_dir=str(out / "cache"),
        limit=8,
        num_fewshot=0,
        bootstrap_iters=0,
        batch_size=8,
    )
    return out


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[vllm_side.VllmServer]:
    why = vllm_side.missing()
    if why:
        pytest.skip(why)
    server = vllm_side.VllmServer.start(vllm_side.smollm2_folder(), tmp_path_factory.mktemp("vllm-server"))
    try:
        yield server
    finally:
        server.stop()
