"""The real llama.cpp server (stock and ``--fixed``), one of each per test session, and a runner
that evaluates toy tasks through ``openai_completions`` / ``openai_chat``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import served
from tests.support.api_runs import ROLL_TEXTS, ROLL_YAML, ApiRunner


def _server(fixed: bool) -> Iterator[served.LlamaServer]:
    why = served.missing()
    if why:
        pytest.skip(f"no real server: {why}")
    server = served.LlamaServer.start(fixed=fixed)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def stock_server() -> Iterator[served.LlamaServer]:
    """llama-cpp-python 0.3.36's server as released: echoed log-probabilities shifted by one."""
    yield from _server(fixed=False)


@pytest.fixture(scope="session")
def fixed_server() -> Iterator[served.LlamaServer]:
    """The same server with its echo+logprobs defects fixed (``../shared/serve/serve_fixed.py``)."""
    yield from _server(fixed=True)


@pytest.fixture
def api_library(toy_library: Path) -> Path:
    """The toy tasks plus ``toy_roll`` (rolling log-likelihood of two short texts)."""
    data = toy_library.parent / "data"
    (data / "roll.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in ROLL_TEXTS))
    (toy_library / "toy_roll.yaml").write_text(ROLL_YAML.format(data=data))
    return toy_library


@pytest.fixture
def api_run(api_library: Path, tmp_path: Path) -> ApiRunner:
    return ApiRunner(api_library, tmp_path / "cache", tmp_path / "outputs")
