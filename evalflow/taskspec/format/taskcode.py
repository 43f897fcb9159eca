"""Task code: the ``!function`` references of a task, and importing them.

A :class:`FunctionRef` names ``attr`` in a ``.py`` file next to a task YAML. Nothing here runs when a
YAML is read or indexed; :func:`resolve_function` imports the module on first use, once per source
version: a loose file under a unique module name (two tasks' ``utils.py`` never clash), a module of
an installed package (lm-eval's tasks) under its real dotted name, so its imports of its own package
work (:mod:`evalflow.taskspec.format.installed`). A module that imports a missing package fails with the
module, the package and the extra that installs it (:mod:`evalflow.taskspec.format.extras`); one whose
``nltk.download`` fails at import fails with the resource (:mod:`evalflow.taskspec.format.downloads`).

    ref = task.process_results                    # FunctionRef(module_path=".../utils.py", attr=...)
    process_results = resolve_function(ref)       # utils.py is imported only now
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import xxhash

from evalflow.errors import TaskError, closest
from evalflow.registry import qualified
from evalflow.taskspec.format.downloads import strict_downloads
from evalflow.taskspec.format.extras import install_hint
from evalflow.taskspec.format.installed import code_fingerprint, package_module
from evalflow.taskspec.format.lmeval_registrations import recording_registrations, registered_filters
from evalflow.taskspec.format.lmeval_seeds import RngStates, import_under_lm_eval_seeds
from evalflow.taskspec.format.source_import import from_source, source_spec
from evalflow.taskspec.format.spec import FunctionRef
from evalflow.taskspec.sidenv.envs import side_env_for
from evalflow.taskspec.sidenv.local_modules import local_closure
from evalflow.taskspec.sidenv.worker import side_function


def function_refs(value: Any) -> list[FunctionRef]:
    """Every :class:`FunctionRef` inside a TaskConfig, GroupSpec, mapping or list, in order."""
    return [ref for _, ref in keyed_function_refs(value)]


def keyed_function_refs(value: Any, key: str = "") -> list[tuple[str, FunctionRef]]:
    """Every :class:`FunctionRef` with the key that holds it (``filter_list[0].filter[1].function``),
    so an error about task code can name the YAML key to fix."""
    found: list[tuple[str, FunctionRef]] = []
    _collect_refs(value, key, found)
    return found


def _collect_refs(value: Any, key: str, found: list[tuple[str, FunctionRef]]) -> None:
    if isinstance(value, FunctionRef):
        found.append((key, value))
    elif isinstance(value, Mapping):
        for k, v in value.items():
            _collect_refs(v, f"{key}.{k}" if key else str(k), found)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _collect_refs(v, f"{key}[{i}]", found)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _collect_refs(getattr(value, f.name), f"{key}.{f.name}" if key else f.name, found)


def task_code_filters(task: Any) -> dict[str, type]:
    """The filters a task's own ``!function`` modules registered, importing them if needed (each
    once per source version). Two of its modules registering one name differently is refused."""
    found: dict[str, type] = {}
    for ref in function_refs(task):
        resolve_function(ref)
        for name, cls in registered_filters(ref.module_path).items():
            if found.get(name, cls) is not cls:
                raise TaskError(
                    f"task '{task.task}' ({task.source}): its task code registers the filter '{name}' twice "
                    f"in lm-eval's registry, as {qualified(found[name])} and {qualified(cls)}; keep one registration."
                )
            found[name] = cls
    return found


_MODULES: dict[tuple[str, str], ModuleType] = {}
# what each module's import did to the global RNGs, run under lm-eval's start seeds (taskspec.format.lmeval_seeds)
_RNG_EFFECTS: dict[tuple[str, str], RngStates] = {}


def rng_effects(task: Any) -> tuple[RngStates, ...]:
    """The import effects on the global RNGs of ``task``'s ``!function`` modules, in the order
    lm-eval imports them (the YAML's), importing any not yet imported. Modules run in a side
    environment are left out: their code draws from its worker's generators, not this process's."""
    effects: list[RngStates] = []
    seen: set[str] = set()
    for ref in function_refs(task):
        if ref.module_path in seen or not os.path.isfile(ref.module_path):
            continue
        seen.add(ref.module_path)
        current = code_fingerprint(ref.module_path)
        if side_env_for(ref.module_path, current) is not None:
            continue
        resolve_function(ref)
        effects.append(_RNG_EFFECTS.get((ref.module_path, current), RngStates()))
    return tuple(effects)


def resolve_function(ref: FunctionRef) -> Callable[..., Any]:
    """Import ``ref``'s module (once per source version) and return the referenced attribute.

    The module gets a unique name (no clash between two tasks' ``utils.py``). If the file changed
    since the YAML was loaded, this refuses: the run's cache keys were computed from the old source.
    A module that needs a side environment (:mod:`evalflow.taskspec.sidenv.envs`) is not imported here: the result
    is a proxy that runs it in that environment's worker.
    """
    path = ref.module_path
    if not os.path.isfile(path):
        raise TaskError(
            f"`!function {Path(path).stem}.{ref.attr}`: the module file {path} does not exist. "
            "Put the .py file next to the task YAML, or fix the module name in the tag."
        )
    current = code_fingerprint(path)
    if ref.source_hash and current != ref.source_hash:
        raise TaskError(
            f"{path} changed after its task was loaded (needed for `{ref.attr}`); the run was "
            "planned with the old source. Start the run again so it sees the new code."
        )
    env = side_env_for(path, current)
    if env is not None:  # its packages conflict with evalflow's: it runs in a worker interpreter
        return side_function(ref, env)
    module = _MODULES.get((path, current)) or _import_module(path, current, ref.attr)
    try:
        fn = getattr(module, ref.attr)
    except AttributeError:
        public = [n for n in vars(module) if not n.startswith("_")]
        raise TaskError(
            f"{path} has no attribute '{ref.attr}' (named by a `!function` tag); "
            f"{closest(ref.attr, public)} Fix the name in the YAML or define it in the module."
        ) from None
    if not callable(fn):
        raise TaskError(f"{path}: '{ref.attr}' is a {type(fn).__name__}, not a function.")
    return fn


def _import_module(path: str, source_hash: str, attr: str) -> ModuleType:
    installed = package_module(path)
    try:
        with strict_downloads():
            module, effect = import_under_lm_eval_seeds(
                lambda: (
                    _import_installed(installed.name, path)
                    if installed and installed.name
                    else _import_file(path, source_hash, attr)
                )
            )
    except ModuleNotFoundError as exc:
        raise TaskError(f"importing {path} (for `!function ...{attr}`) failed: {_missing(exc)}") from exc
    except TaskError as exc:
        raise TaskError(f"importing {path} (for `!function ...{attr}`) failed: {exc}") from exc
    except (Exception, SystemExit) as exc:  # lm-eval's slr_bench calls sys.exit() when swipl is missing
        raise TaskError(
            f"importing {path} (for `!function ...{attr}`) failed: {type(exc).__name__}: {exc}. "
            "Fix the task module; run with EVALFLOW_DEBUG=1 for the traceback."
        ) from exc
    _MODULES[(path, source_hash)] = module
    _RNG_EFFECTS[(path, source_hash)] = effect
    return module


def _import_file(path: str, source_hash: str, attr: str) -> ModuleType:
    """A loose task file, as a module of a package unique to its folder and source version.

    The package's path is the file's folder, so the module's relative imports (``from .helpers
    import x``) find its siblings, imported anew with each source version (``source_hash`` covers
    the siblings it imports). Siblings imported by plain name from ``sys.path`` (``import
    helpers``, run from the task folder) are dropped from ``sys.modules`` first, so an edited one
    is not served from an earlier import in this process. The file and those siblings run from
    their source as it is now, never from a ``.pyc`` (:mod:`evalflow.taskspec.format.source_import`).
    """
    folder, filename = os.path.split(path)
    package = f"_evalflow_task_code_{xxhash.xxh64_hexdigest(path.encode())}_{source_hash[:12]}"
    stem = filename[:-3] if filename.endswith(".py") else filename
    name = f"{package}.{stem}" if stem.isidentifier() else package
    spec = source_spec(name, path)
    if spec is None or spec.loader is None:
        raise TaskError(f"{path} cannot be imported as a Python module (needed for `{attr}`).")
    if package_module(path) is None:  # an installed package's siblings are its own modules: kept
        _forget_siblings(path)
    parent = ModuleType(package)
    parent.__path__ = [folder]
    added = [n for n in (package, name) if n not in sys.modules]
    sys.modules.setdefault(package, parent)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with recording_registrations(path), from_source(path):
            spec.loader.exec_module(module)
    except BaseException:
        for n in added:
            sys.modules.pop(n, None)
        raise
    return module


def _forget_siblings(path: str) -> None:
    """Drop modules loaded from the task-code files ``path`` imports (not ``path`` itself)."""
    siblings = {str(f) for f in local_closure(path)[1:]}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and os.path.realpath(file) in siblings:
            del sys.modules[name]


def _import_installed(name: str, path: str) -> ModuleType:
    """A module of an installed package, by its dotted name; reloaded if an earlier version of the
    file was imported in this process (the key names the new source)."""
    loaded = sys.modules.get(name)
    with recording_registrations(path):
        if loaded is not None and any(p == path and m is loaded for (p, _), m in _MODULES.items()):
            return importlib.reload(loaded)
        return importlib.import_module(name)


def _missing(exc: ModuleNotFoundError) -> str:
    """What to install for a task module's failed import: the module, and the package to get."""
    module = exc.name or str(exc)
    top = module.split(".")[0]
    if module != top and importlib.util.find_spec(top) is not None:
        return (
            f"it imports '{module}', which the installed package '{top}' does not have (another "
            f"version of '{top}' may be needed). Install the version the task was written for."
        )
    return (
        f"it imports the module '{module}', which is not installed. Install it with "
        f"{install_hint(module)}, or leave out the tasks that need it."
    )
