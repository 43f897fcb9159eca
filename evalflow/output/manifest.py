"""manifest.json: what ran and why, the record `explain` diffs and `compare` checks data by."""

from __future__ import annotations

import dataclasses
from importlib import metadata
from typing import Any

from evalflow.output.code_execution import code_execution
from evalflow.output.inputs import plain
from evalflow.output.results import RunRecord, task_clusters, task_generations, tokens_and_cost

PACKAGES = (
    "evalflow",
    "torch",
    "transformers",
    "datasets",
    "hydra-core",
    "omegaconf",
    "diskcache",
    "xxhash",
    "numpy",
    "lm-eval",
)


def manifest(record: RunRecord) -> dict[str, Any]:
    """What ran and why: every stage's key, hit/miss, seconds and key inputs (``explain`` diffs
    these), the model's identity as plain data, request counts, data fingerprints, versions."""
    return {
        "stages": [
            {
                "task": e.task,
                "stage": e.stage,
                "key": e.key,
                "hit": e.hit,
                "seconds": e.seconds,
                **({"requests": dict(e.detail)} if e.detail else {}),
                "inputs": plain(e.inputs),
            }
            for e in record.events
        ],
        **cache_facts(record),
        # which model replica computed how much (one "local@host:pid", or one per Ray worker)
        "workers": {name: dataclasses.asdict(w) for name, w in sorted(record.inference.workers.items())},
        "data": {t: record.summary(t).data for t in record.outputs},
        "data_map": _data_map_record(record.settings.data_map_file),
        # the sandbox that ran model-written programs, the side environments that ran task code
        "code_execution": code_execution(record.selection.tasks, record.settings.code_sandbox, record.selection.groups),
        "fewshot_split": {t: record.summary(t).fewshot_split for t in record.outputs},
        # how each task's generations ended and their tokens (output/generations.py), and the share
        # of cut-off generations above which the run warns (output/truncation.py)
        "generations": task_generations(record),
        **tokens_and_cost(record),  # the run's tokens, computed and cached, and their cost (output/cost.py)
        # the tasks with a cluster_key: their clustered stderr, as results.json's (output/clusters.py)
        "clustered_stderr": task_clusters(record),
        "truncation_warning": record.settings.truncation_warning,
        "packages": {name: _version(name) for name in PACKAGES},
        "seconds": round(record.finished - record.started, 3),
        # of which some model replica was answering requests (start-up and model loads excluded)
        "answering_seconds": round(record.inference.answering_seconds, 6),
    }


def cache_facts(record: RunRecord) -> dict[str, Any]:
    """What the run's cache line says (output.run_summary.cache_line): the model's identity, the
    answers read and computed (the judges' too), the cache folder, and whether answers were read."""
    return {
        "model_identity": plain(record.model_identity),
        "inference": {
            "requests": record.inference.requests,
            "computed": record.inference.computed,
            "cached": record.inference.cached,
            # what a loaded model says of itself, e.g. what a server's /v1/models reported
            **({"model": record.inference.model} if record.inference.model is not None else {}),
            # a served model: HTTP requests each server (base_url) answered
            **({"servers": dict(record.inference.servers)} if record.inference.servers else {}),
        },
        # judge metrics: the judge models' requests, as the scored model's above, and who the judges were
        **(
            {
                "judge": {
                    "requests": record.judge.requests,
                    "computed": record.judge.computed,
                    "cached": record.judge.cached,
                    "models": plain(dict(record.judge_identities)),
                }
            }
            if record.judge is not None
            else {}
        ),
        "cache_dir": str(record.settings.cache_dir),
        # what the run computed anew rather than read from the cache (None: it read what was there)
        "recompute": record.settings.recompute,
    }


def _data_map_record(path: str | None) -> dict[str, str] | None:
    if path is None:
        return None
    from evalflow.cache.fingerprint import file_fingerprint

    return {"file": path, "xxh64": file_fingerprint(path)}


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
