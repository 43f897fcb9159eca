"""Runs through a served model (``openai_completions`` / ``openai_chat`` against the real llama.cpp
server of tests/support/served.py): the models' settings, the rolling log-likelihood task, and a
runner that evaluates the toy tasks with a private cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


def completions_config(url: str, **extra: Any) -> dict[str, Any]:
    """``openai_completions`` on the server at ``url``, tokenised locally from its GGUF file."""
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
    """``openai_chat`` on the server at ``url``."""
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
