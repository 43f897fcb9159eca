"""A ``model=vllm`` run of the three toy tasks (toy_mc, toy_gen, toy_roll) on SmolLM2, and its
samples read back by document; the vLLM tests compare these across engines and servers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalflow.cache.store import CacheStore
from evalflow.core.records import Generation

TASKS = ["toy_mc", "toy_gen", "toy_roll"]


SHARED_KEYS = {"max_gen_toks": 48}


LOGPROB_TOLERANCE = 1e-3  # the HF parity tests' (measured here: see test_log_likelihoods_match_the_hf_backend)


def run_args(folder: Path, library: Path, cache: Path, out: Path) -> list[str]:
    """``python -m evalflow``'s words: vLLM on ``folder`` (the model), the tasks of ``library``."""
    return [
        "model=vllm",
        f"model.pretrained={folder}",
        "model.dtype=float32",
        "model.enforce_eager=true",
        "model.max_model_len=2048",
        *(f"model.{k}={v}" for k, v in SHARED_KEYS.items()),
        f"task=[{','.join(TASKS)}]",
        "limit=8",
        "num_fewshot=0",
        "bootstrap_iters=0",
        f"include_path=[{library}]",
        f"cache_dir={cache}",
        f"hydra.run.dir={out}",
    ]


def samples(out: Path, tasks: list[str] = TASKS) -> dict[str, list[dict[str, Any]]]:
    """Each task's samples file, by document."""
    return {
        t: sorted(
            (json.loads(line) for line in (out / f"samples_{t}.jsonl").read_text().splitlines()),
            key=lambda s: s["doc_id"],
        )
        for t in tasks
    }


def cached_generations(cache: Path) -> list[Generation]:
    """Every generation answer in a run's cache (its ``generate_until`` requests' records)."""
    store = CacheStore(cache)
    try:
        found = [store.get(key) for key in store.raw.iterkeys() if str(key).startswith("request:")]
    finally:
        store.close()
    return [answer for answer in found if isinstance(answer, Generation)]
