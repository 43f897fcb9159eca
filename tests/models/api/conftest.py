"""The real llama.cpp server (stock and ``--fixed``), one of each per test session, and a runner
that evaluates toy tasks through ``openai_completions`` / ``openai_chat``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import served

ROLL_YAML = """\
task: toy_roll
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}/roll.jsonl
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
metric_list:
  - metric: word_perplexity
  - metric: byte_perplexity
  - metric: bits_per_byte
metadata:
  version: 1.0
"""

ROLL_TEXTS = [
    "The quick brown fox jumps over the lazy dog. It was a sunny day and the fox was happy.",
    "Paris is the capital of France. Berlin is the capital of Germany, and Rome is the capital of Italy.",
]


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


def completions_config(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "openai_completions",
        "model": served.MODEL_NAME,
        "base_url": url,
        "tokenizer": str(served.gguf_file()),
        "tokenized_requests": False,
        "retry_wait": 0.05,
        **extra,
    }


def chat_config(url: str, **extra: Any) -> dict[str, Any]:
    return {"type": "openai_chat", "model": served.MODEL_NAME, "base_url": url, "retry_wait": 0.05, **extra}


class ApiRunner:
    """``evaluate`` on the toy library with a private cache; returns results, manifest, folder."""

    def __init__(self, library: Path, cache: Path, out: Path) -> None:
        self.library, self.cache, self.out, self.n = library, cache, out, 0

    def __call__(self, model: dict[str, Any], task: str = "toy_mc", **values: Any) -> tuple[dict, dict, Path]:
        from evalflow import evaluate

        self.n += 1
        folder = self.out / f"run{self.n}"
        results = evaluate(
            task,
            model,
            output_dir=folder,
            include_path=[str(self.library)],
            cache_dir=str(self.cache),
            bootstrap_iters=0,
            **values,
        )
        return results, json.loads((folder / "manifest.json").read_text()), folder


@pytest.fixture
def api_run(api_library: Path, tmp_path: Path) -> ApiRunner:
    return ApiRunner(api_library, tmp_path / "cache", tmp_path / "outputs")
