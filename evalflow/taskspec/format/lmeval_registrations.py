"""Filters that task code registers in lm-eval's own registry, kept per task module.

lm-eval's task code may register a filter class with ``lm_eval.api.registry.register_filter`` and
name it in its YAML (acpbench's ``ACP_grammar_filter``). evalflow's filter lookup reads its own
registry, so while such a module is imported, :func:`recording_registrations` replaces lm-eval's
``register_filter`` with one that records each class under the module's file (and still registers it
in lm-eval's registry when the name is free there). A task's pipelines then resolve a name evalflow
does not know to the class *its own* modules registered
(:func:`evalflow.taskspec.format.taskcode.task_code_filters`): acpbench ships two copies of one
module (``gen_2shot`` and ``gen_2shot_with_pddl``) that register the same name, which lm-eval's
registry refuses once both are imported in one process; recorded per module, each task gets its own
copy's class and both families load together.

lm-eval's ``register_metric`` and ``register_aggregation`` are not bridged: no task of lm-eval
0.4.13's library calls them (``benchmarks/library_coverage.py`` counts it), so a YAML naming a
metric that only lm-eval's registry has keeps evalflow's unknown-metric error.

    with recording_registrations("/tasks/acp/acp_utils.py"):
        importlib.import_module("lm_eval.tasks.acpbench.gen_2shot.acp_utils")
    registered_filters("/tasks/acp/acp_utils.py")   # {"ACP_grammar_filter": ACPGrammarFilter}
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from evalflow.errors import TaskError
from evalflow.registry import qualified

__all__ = ["recording_registrations", "registered_filters"]

_FILTERS: dict[str, dict[str, type]] = {}  # module file (real path) -> {name: class}


@contextlib.contextmanager
def recording_registrations(path: str) -> Iterator[None]:
    """Record the filters registered through lm-eval while the module at ``path`` is imported.

    Only a module whose task-code files mention ``register_filter`` is watched (the rest never
    import lm-eval's registry on evalflow's account). The replacement stays bound in the module
    (``from lm_eval.api.registry import register_filter``), so a registration made later, when one
    of its functions runs, is recorded under the same file.
    """
    registry = _lmeval_registry(path)
    if registry is None:
        yield
        return
    real = os.path.realpath(path)
    _FILTERS[real] = {}  # an import (a new source version) registers the module's filters anew
    original = registry.register_filter
    registry.register_filter = _recorder(real, registry)
    try:
        yield
    finally:
        registry.register_filter = original


def registered_filters(path: str) -> Mapping[str, type]:
    """The filter classes the module at ``path`` registered in lm-eval's registry when imported."""
    return MappingProxyType(_FILTERS.get(os.path.realpath(path), {}))


def _recorder(path: str, registry: Any) -> Callable[[str], Callable[[type], type]]:
    def register_filter(name: str) -> Callable[[type], type]:
        def decorate(cls: type) -> type:
            table = _FILTERS.setdefault(path, {})
            current = table.get(name)
            if current is not None and qualified(current) != qualified(cls):
                raise TaskError(
                    f"{path} registers two filters under the name '{name}' in lm-eval's registry "
                    f"({qualified(current)} and {qualified(cls)}); give each its own name."
                )
            table[name] = cls
            if name not in registry.filter_registry:
                registry.filter_registry.register(name)(cls)
            return cls

        return decorate

    return register_filter


def _lmeval_registry(path: str) -> Any:
    """lm-eval's registry module, if the task code at ``path`` may register a filter in it."""
    from evalflow.taskspec.sidenv.local_modules import local_closure

    if not any(b"register_filter" in _read(f) for f in local_closure(path)):
        return None
    if importlib.util.find_spec("lm_eval") is None:
        return None  # the import fails on its own, naming lm_eval as the package to install
    importlib.import_module("lm_eval.filters")  # lm-eval's own filters register unwatched: not task code
    return importlib.import_module("lm_eval.api.registry")


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""
