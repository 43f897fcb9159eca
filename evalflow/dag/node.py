"""A DAG node: a stage function plus the declaration of exactly what it reads.

The cache key of a node is ``fingerprint(stage name, its code, the task fields and run settings it
reads, the keys of its upstream nodes)``. Its code is derived, not declared: the hash of every
evalflow module the stage function's module imports, transitively (:func:`stage_code`), so an
upgrade that changes what a stage computes changes its key without anyone bumping a number.

The declaration is enforced, not trusted: the stage receives a copy of the task in which every
field it did not declare is :data:`UNDECLARED`, a value that raises on any use. A stage that
starts reading a new field fails loudly in the tests until the field is declared, instead of
silently serving stale cache entries.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from evalflow.cache.code import module_closure
from evalflow.config.packaged import package_dir
from evalflow.taskspec.format.spec import TASK_FIELDS, TaskConfig

EVALFLOW_DIR = package_dir()
MODEL_SIDE = ("evalflow.models",)
"""Left out of every stage's code: model-side code belongs to the model's identity
(:func:`evalflow.models.registry.model_identity`), which keys inference and every response."""


@functools.cache
def stage_code(function: str) -> Mapping[str, str]:
    """``{module: file hash}`` of the evalflow code a stage runs (``"module:attr"``'s module and
    the evalflow modules it imports, transitively, models aside). Memoized per process: a run
    plans every task, and the modules it runs cannot change under it."""
    return module_closure(function.partition(":")[0], EVALFLOW_DIR, exclude=MODEL_SIDE)


class UndeclaredFieldError(RuntimeError):
    """A stage read a task field its node does not declare: a bug in evalflow, not user input."""


class _Undeclared:
    """Stands in for a task field a stage did not declare; any use of it raises."""

    def __init__(self, field_name: str) -> None:
        object.__setattr__(self, "_field", field_name)

    def _fail(self, *_: Any, **__: Any) -> Any:
        raise UndeclaredFieldError(
            f"a stage read task field '{object.__getattribute__(self, '_field')}' without declaring "
            "it in evalflow/dag/pipeline.py; add it to the node's task_fields so it is in the cache key"
        )

    __getattr__ = __bool__ = __iter__ = __len__ = __getitem__ = __contains__ = _fail
    __str__ = __eq__ = __hash__ = __int__ = __fspath__ = _fail

    def __repr__(self) -> str:
        return f"<undeclared task field {object.__getattribute__(self, '_field')}>"


def restricted(task: TaskConfig, fields: tuple[str, ...], derived: Mapping[str, Any]) -> TaskConfig:
    """A copy of ``task`` holding only ``fields`` (plus ``derived`` projections); the rest undeclared."""
    values: dict[str, Any] = {}
    for name in TASK_FIELDS:
        if name == "task" or name in fields:
            values[name] = getattr(task, name)
        elif name in derived:
            values[name] = derived[name]
        else:
            values[name] = _Undeclared(name)
    return dataclasses.replace(task, **values)


@dataclass(frozen=True)
class Node:
    """One stage of the pipeline and the inputs its cache key is made of.

    ``derive`` maps a task field to a projection of it, for stages that depend on one aspect of a
    field only (the instances stage needs to know whether ``acc_mutual_info`` is requested, not the
    whole ``metric_list``, so changing a metric does not re-build requests).
    """

    name: str
    function: str  # "module:attr" of the stage; imported only when the stage must compute
    output: str  # the parameter name under which downstream stages receive this stage's result
    task_fields: tuple[str, ...] = ()
    run_settings: tuple[str, ...] = ()
    upstream: tuple[str, ...] = ()
    derive: Mapping[str, Callable[[TaskConfig], Any]] = field(default_factory=dict)
    identity: Mapping[str, Callable[[TaskConfig, Mapping[str, Any]], Any]] = field(default_factory=dict)
    unhashed: tuple[str, ...] = ()
    # None: every task runs the stage; else the tasks it applies to (the judge stages: tasks with a
    # judge metric). A stage that does not apply is not planned, and is in no downstream key.
    applies: Callable[[TaskConfig], bool] | None = None
    # Objects the stage receives that are no input of its result, so no part of its key: the
    # cache's content-addressed image table ("images"), which a stage writes pixels to and reads
    # them from by the digests its keyed inputs already determine.
    resources: tuple[str, ...] = ()

    def key_inputs(
        self, task: TaskConfig, settings: Mapping[str, Any], upstream_keys: Mapping[str, str | None]
    ) -> dict[str, Any]:
        """Everything the key is a hash of, as plain data (also what `explain` diffs).

        ``unhashed`` names fields/settings the stage receives but whose effect an ``identity``
        entry captures better (a data file's path is replaced by a hash of its bytes).
        """
        return {
            "stage": self.name,
            "code": stage_code(self.function),
            "task": {f: getattr(task, f) for f in self.task_fields if f not in self.unhashed},
            "derived": {f: d(task) for f, d in self.derive.items()},
            "identity": {name: fn(task, settings) for name, fn in self.identity.items()},
            "settings": {s: settings[s] for s in self.run_settings if s not in self.unhashed},
            "upstream": {u: upstream_keys[u] for u in self.upstream if u in upstream_keys},
        }

    def fn(self) -> Callable[..., Any]:
        module, _, attr = self.function.partition(":")
        function: Callable[..., Any] = getattr(importlib.import_module(module), attr)
        return function

    def view(self, task: TaskConfig) -> TaskConfig:
        return restricted(task, self.task_fields, {f: d(task) for f, d in self.derive.items()})
