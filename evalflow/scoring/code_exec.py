"""HumanEval/MBPP scoring: HF ``code_eval`` (which lm-eval's tasks load from the hub), offline and sandboxed.

lm-eval's humaneval and mbpp metrics call ``evaluate.load("code_eval")``: a script fetched from the
Hugging Face hub that runs each candidate in a forked child of the evaluating process. These
metrics keep its semantics and run every program through a sandbox backend instead
(:mod:`evalflow.sandbox`; which one is the run setting ``code_sandbox``):

- the program is ``candidate + "\\n" + test`` (the task's target is ``test + "\\ncheck(entry_point)"``
  and its filter prepends the prompt); it passes when, ``exec``'d after code_eval's reliability
  guard, it runs to its end within ``timeout`` seconds (3.0, code_eval's default): an exception,
  ``sys.exit(0)`` included, or a process that ends early (``os._exit(0)``) fails, whatever the
  exit status (:mod:`evalflow.sandbox.verdict`);
- ``pass@k`` is the unbiased estimator ``1 - C(n-c, k) / C(n, k)`` over a document's n candidates
  of which c pass, reported only for k <= n, as code_eval does.

Per-candidate pass/fail (:func:`candidate_passes`) and the estimator (:func:`estimate_pass_at_k`) are
public so that a reduction over repeats can reuse them::

    >>> estimate_pass_at_k(n=4, c=1, k=1), estimate_pass_at_k(n=4, c=1, k=4), estimate_pass_at_k(n=4, c=0, k=2)
    (0.25, 1.0, 0.0)
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import evalflow.scoring.aggregations  # noqa: F401  (registers 'mean', named below)
from evalflow.errors import TaskError
from evalflow.sandbox import Limits, active, run_program, sandbox
from evalflow.scoring import lazy_numpy as np
from evalflow.scoring.registry import register_metric
from evalflow.taskspec.format.spec import TaskConfig

DEFAULT_TIMEOUT = 3.0  # seconds per program: HF code_eval's default, which lm-eval's tasks keep
CODE_METRICS = ("pass_at_k", "pass_at_1")
"""The registered metrics that execute model-written code (their tasks need a usable sandbox)."""


def program(candidate: str, test: str) -> str:
    """The program code_eval runs for one candidate: the candidate, a newline, the test code."""
    return candidate + "\n" + test


def candidate_passes(candidates: Sequence[str], test: str, timeout: float = DEFAULT_TIMEOUT) -> tuple[bool, ...]:
    """Whether each candidate passes ``test``, each run in its own sandboxed process (a few at once)."""
    backend = sandbox(active())
    limits = Limits(wall_seconds=float(timeout))
    programs = [program(c, test) for c in candidates]
    if len(programs) == 1:
        return (run_program(backend, programs[0], limits),)
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1, len(programs))) as pool:
        return tuple(pool.map(lambda text: run_program(backend, text, limits), programs))


def estimate_pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (code_eval's numerically stable product form)."""
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


@register_metric("pass_at_k", higher_is_better=True, aggregation="mean", value_range=(0.0, 1.0))
def pass_at_k(
    references: Sequence[str],
    predictions: Sequence[Sequence[str]],
    k: int | Sequence[int] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> dict[str, float]:
    """lm-eval humaneval's ``utils.pass_at_k``: ``{"pass@k": value}`` for each k <= the candidates."""
    if k is None:
        raise TaskError("metric pass_at_k needs its k (metric_list entry: `k: [1]`), as lm-eval's humaneval sets it")
    ks = [k] if isinstance(k, int) else list(k)
    passes = [candidate_passes(cands, test, timeout) for cands, test in zip(predictions, references, strict=True)]
    totals = [len(p) for p in passes]
    return {
        f"pass@{kk}": float(np.mean([estimate_pass_at_k(n, sum(p), kk) for n, p in zip(totals, passes)]))
        for kk in ks
        if all(n >= kk for n in totals)
    }


@register_metric("pass_at_1", higher_is_better=True, aggregation="mean", value_range=(0.0, 1.0))
def pass_at_1(
    references: str | Sequence[str], predictions: str | Sequence[Any], timeout: float = DEFAULT_TIMEOUT
) -> float:
    """lm-eval mbpp's ``utils.pass_at_1``: a single candidate (a string) or candidate lists."""
    refs = [references] if isinstance(references, str) else list(references)
    preds = [[p] for p in predictions] if isinstance(predictions[0], str) else list(predictions)
    return float(pass_at_k(refs, preds, k=[1], timeout=timeout)["pass@1"])


def runs_code(task: TaskConfig) -> bool:
    """Whether the task executes model-written code: marked ``unsafe_code`` and scored by a code metric."""
    names = [m.get("metric") for m in task.metric_list or () if isinstance(m, Mapping)]
    return bool(task.unsafe_code) and any(isinstance(n, str) and n in CODE_METRICS for n in names)
