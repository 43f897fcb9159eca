"""evalflow: LLM evaluation as a declarative, cached DAG, in lm-eval's task format.

    from evalflow import evaluate
    results = evaluate(task="arith_mc", model="dummy", limit=20)
    results["results"]["arith_mc"]["acc,none"]

The command line is ``python -m evalflow`` (a Hydra app); see README.md and docs/. Names are imported on
first use, so ``python -m evalflow`` on a warm cache stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "evaluate": "evalflow.run.phases",
    "simple_evaluate": "evalflow.lmeval_compat.evaluate",
    "EvalflowError": "evalflow.errors",
    "LanguageModel": "evalflow.models.protocol",
    "register_model": "evalflow.models.registry",
    "register_metric": "evalflow.scoring.registry",
    "register_aggregation": "evalflow.scoring.registry",
    "register_filter": "evalflow.scoring.registry",
    "register_reduction": "evalflow.scoring.registry",
    "register_judge_parser": "evalflow.judges.parsers",
    "register_sandbox": "evalflow.sandbox.registry",
    "TaskConfig": "evalflow.taskspec.format.spec",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'evalflow' has no attribute {name!r}")
