"""The global random state a task's code scores in: lm-eval's, for that task run alone.

Some task code draws from the *global* RNGs while scoring: lm-eval's mmmu answers with
``random.choice`` of the options when a response names none. Under lm-eval 0.4.13 the state those
draws start from is fixed by what its process did before, which for one task run alone is:

1. ``simple_evaluate`` seeds ``random.seed(0)``, ``np.random.seed(1234)``, ``torch.manual_seed(1234)``
   (its defaults, the CLI's ``--seed 0,1234,1234,1234``);
2. loading the task imports its ``!function`` modules (mmmu's ``utils.py`` runs ``random.seed(42)``);
3. ``TaskManager.load`` reads the task's ``task_name`` three times, and each read evaluates
   ``random_task_id()`` (``random.choices`` of 36 characters, k=8) as a ``getattr`` default;
4. nothing else draws until ``process_results`` runs, filter pipelines outer, documents inner.

evalflow's metrics stage reproduces exactly that per task (:func:`scoring_rng`) and puts the
caller's states back afterwards, so a task's scores equal lm-eval's run of that task alone and are
a pure function of the task and the seeds: the same whichever other tasks ran before or beside it.
With several tasks in one lm-eval process the draws carry from task to task (and group loading reads
task names more often); evalflow deliberately does not reproduce that, since a task's score would
then depend on the others. Step 1's seeds are the run settings ``random_seed``, ``numpy_seed`` and
``torch_seed`` (lm-eval's ``--seed`` slots 1-3; :func:`global_seeds`), keyed into the stages whose
task code runs under them (``process_docs`` in load_docs, scoring in metrics); evalflow's ``seed``
is lm-eval's fourth slot (``fewshot_random_seed``) and plays no part here.

Step 2 is learned when evalflow imports a task module (:func:`import_under_lm_eval_seeds`): the
import runs under step 1's states and whatever it leaves changed is the module's effect. Not
seen: a module this process imported before evalflow did, and task code run in a side environment
(its worker has its own RNGs).
"""

from __future__ import annotations

import random
import string
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

RANDOM_SEED = 0  # lm-eval's DEFAULT_RANDOM_SEED
NUMPY_SEED = 1234  # lm-eval's DEFAULT_OTHER_SEED, for numpy and torch
TORCH_SEED = 1234
TASK_NAME_READS = 3  # lm-eval 0.4.13 TaskManager.load: collect() once, _check_duplicates() twice
_TASK_ID_CHARS = string.ascii_lowercase + string.digits

T = TypeVar("T")


@dataclass(frozen=True)
class RngStates:
    """The three global generators' states; ``None`` where a module's import left one unchanged."""

    python: Any = None
    numpy: Any = None
    torch: Any = None


def capture() -> RngStates:
    """The states now; torch's only if torch is imported (importing it would cost seconds in runs
    that never use it, and code that draws from torch has imported it)."""
    import numpy as np

    torch = sys.modules.get("torch")
    return RngStates(random.getstate(), np.random.get_state(), torch.random.get_rng_state() if torch else None)


def restore(states: RngStates) -> None:
    """Set each generator ``states`` names (the others are left as they are)."""
    import numpy as np

    if states.python is not None:
        random.setstate(states.python)
    if states.numpy is not None:
        np.random.set_state(states.numpy)
    if states.torch is not None:
        sys.modules["torch"].random.set_rng_state(states.torch)


DEFAULT_SEEDS = {"random": RANDOM_SEED, "numpy": NUMPY_SEED, "torch": TORCH_SEED}


def global_seeds(random_seed: int, numpy_seed: int, torch_seed: int) -> dict[str, int]:
    """Step 1's seeds as the stages that run task code receive them (plain data: their key)."""
    return {"random": random_seed, "numpy": numpy_seed, "torch": torch_seed}


def seed_like_lm_eval(seeds: Mapping[str, int] = DEFAULT_SEEDS) -> None:
    """Step 1. Only torch's CPU generator, and only if torch is imported: scoring runs on the CPU,
    and seeding CUDA's would initialise CUDA in a process that may not use it. (Task code that
    first imports torch while scoring finds torch's own fixed default seed: still deterministic.)"""
    import numpy as np

    random.seed(seeds["random"])
    np.random.seed(seeds["numpy"])
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.random.default_generator.manual_seed(seeds["torch"])


def import_under_lm_eval_seeds(load: Callable[[], T]) -> tuple[T, RngStates]:
    """``load()`` (a task module's import) run under lm-eval's start seeds, and the generators it
    changed, as the states it left them in; the caller's states are restored either way."""
    saved = capture()
    try:
        seed_like_lm_eval()
        start = capture()
        result = load()
        after = capture()
    finally:
        restore(saved)
    return result, _changed(start, after)


def _changed(start: RngStates, after: RngStates) -> RngStates:
    import numpy as np

    same_numpy = (
        start.numpy[0] == after.numpy[0]
        and np.array_equal(start.numpy[1], after.numpy[1])
        and start.numpy[2:] == after.numpy[2:]
    )
    # torch imported by the module itself: it was not seeded before, so its state is no effect to keep
    same_torch = (
        start.torch is None or after.torch is None or bool(sys.modules["torch"].equal(start.torch, after.torch))
    )
    return RngStates(
        python=None if start.python == after.python else after.python,
        numpy=None if same_numpy else after.numpy,
        torch=None if same_torch else after.torch,
    )


@contextmanager
def scoring_rng(module_effects: Sequence[RngStates], seeds: Mapping[str, int] = DEFAULT_SEEDS) -> Iterator[None]:
    """The global RNGs as lm-eval's task code finds them for a task run alone (steps 1-3), given
    the task's modules' import effects in import order (learned under the default seeds: a module
    that seeds a generator itself, as mmmu's does, leaves the same state under any); the caller's
    states come back after."""
    saved = capture()
    try:
        seed_like_lm_eval(seeds)
        for effect in module_effects:
            restore(effect)
        for _ in range(TASK_NAME_READS):
            random.choices(_TASK_ID_CHARS, k=8)
        yield
    finally:
        restore(saved)
