"""lm-eval's ``lm_eval.evaluator``: ``simple_evaluate`` and ``evaluate(lm, task_dict)``."""

from __future__ import annotations

from evalflow.lmeval_compat.evaluate import evaluate, simple_evaluate

__all__ = ["evaluate", "simple_evaluate"]
