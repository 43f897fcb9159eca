"""lm-eval 0.4.13's Python modules, run by evalflow: a script or notebook changes its imports only.

    import evalflow.lm_eval as lm_eval                       # was: import lm_eval
    from evalflow.lm_eval.tasks import TaskManager           # was: from lm_eval.tasks import TaskManager
    from evalflow.lm_eval.evaluator import evaluate, simple_evaluate

Each name keeps lm-eval's signature and return value (:mod:`evalflow.lmeval_compat` runs them).
lm-eval's own objects are accepted too, for the names a script keeps importing from ``lm_eval``:
its ``TaskManager``, its Task and Group objects, its model objects (``HFLM``), the models registered
with its ``@register_model``, its ``EvaluationTracker``. docs/python-api.md lists what each takes.

Lives here: the mirrored modules, names only. May import ``lmeval_compat`` and the rooms below it.
"""

from __future__ import annotations

from evalflow.lm_eval.evaluator import evaluate, simple_evaluate

__all__ = ["evaluate", "simple_evaluate"]
