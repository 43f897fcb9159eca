"""Task code that ships inside an installed Python package, such as lm-eval's task library.

``include_path=lm_eval`` names a *library* (:data:`TASK_LIBRARIES`): the ``tasks`` folder of the
installed package, wherever pip put it. A ``!function`` module under an installed distribution's
package is then treated as that package's code, not as a loose file:

* it is imported by its real dotted name (``lm_eval.tasks.ifeval.utils``), so its relative and
  absolute imports of its own package work and it is the same module object lm-eval would use;
* it needs no ``trust_task_code``: pip already installed it into this environment, where any
  ``import lm_eval`` runs it, so evalflow running it grants nothing that installing it did not (the
  refusal exists for folders someone hands you; ``unsafe_code`` tasks still need
  ``confirm_unsafe_code``, a separate question about what the code does when scored);
* its fingerprint is its file's hash plus the distribution's name and version: the module imports
  the rest of its package (``lm_eval.tasks.ifeval.instructions``), which no YAML names, so the
  version stands for that code, and a run reproduced under another lm-eval version misses the cache.

"Installed" means the distribution's own files (its RECORD places the package there) or the
checkout an editable install points to; a folder that merely shadows a package name on
``sys.path`` (``./lm_eval`` in the working directory) is a loose folder.

    >>> library_folder("not_a_library") is None
    True
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

from evalflow.errors import TaskError

__all__ = ["TASK_LIBRARIES", "PackageModule", "code_fingerprint", "library_folder", "package_module"]

# include_path name -> (the package to import, its folder of task YAMLs, the evalflow extra that installs it)
TASK_LIBRARIES: dict[str, tuple[str, str, str]] = {
    "lm_eval": ("lm_eval", "tasks", "lm-eval-tasks"),
}


def library_folder(entry: str) -> str | None:
    """The task folder ``include_path=entry`` names if ``entry`` is a library, else None (a folder).

    A library name is always the library (write ``./lm_eval`` for a folder of that name), so a
    snapshot's ``include_path: lm_eval`` means the installed package wherever it is reproduced.
    """
    if entry not in TASK_LIBRARIES:
        return None
    package, tasks, extra = TASK_LIBRARIES[entry]
    try:
        spec = importlib.util.find_spec(package)
    except ImportError:  # a finder that refuses the name: as good as absent
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec else []
    folder = next((os.path.join(loc, tasks) for loc in locations if os.path.isdir(os.path.join(loc, tasks))), None)
    if folder is None:
        found = (
            f"the installed '{package}' at {locations[0]} has no '{tasks}' folder"
            if locations
            else f"'{package}' is not installed"
        )
        raise TaskError(
            f"include_path={entry} names the task library of the Python package '{package}', but {found}. "
            f"Install it with evalflow's extra: pip install 'evalflow[{extra}]' (lm-eval's core package "
            f"and the task extras its common tasks need), or give the path of a task folder instead."
        )
    return os.path.realpath(folder)


@dataclass(frozen=True)
class PackageModule:
    """A task-code file that is a module of an installed distribution's package."""

    # dotted module name: lm_eval.tasks.ifeval.utils; None where a folder on the way is no Python
    # name (lm_eval/tasks/openai-mmmlu/default/utils.py: 1,000+ of lm-eval 0.4.13's tasks), so the
    # file is imported by its path, as lm-eval does, yet it is still the installed package's code
    name: str | None
    distribution: str  # lm-eval
    version: str  # 0.4.13


def package_module(path: str) -> PackageModule | None:
    """``path`` as a module of an installed distribution's package, or None for a loose file."""
    real = os.path.realpath(path)
    if not real.endswith(".py") or not os.path.isfile(real):
        return None
    folder, stem = os.path.split(real[:-3])
    parts = [] if stem == "__init__" else [stem]
    while True:
        found = _package_root(folder)
        if found is not None:
            top, dist = found
            name = ".".join([top, *reversed(parts)])
            ok = all(p.isidentifier() for p in parts)
            return PackageModule(name if ok else None, *_identity(dist))
        parent, base = os.path.split(folder)
        if parent == folder:
            return None
        parts.append(base)
        folder = parent


def code_fingerprint(path: str) -> str:
    """The cache identity of a ``!function`` module's code: its file's hash, plus the distribution's
    name and version for a module of an installed package (the package code it imports).

    A loose module that imports task-code files of its own folder (``import helpers``, ``from
    .helpers import x``: :func:`~evalflow.taskspec.sidenv.local_modules.local_closure`) is identified by
    each of those files' hashes too, named by their paths relative to the module's folder (never
    absolute: a moved folder keeps its keys), so an edit to ``helpers.py`` re-scores. A module that
    imports none keeps its file's hash alone, the identity it always had.
    """
    from evalflow.cache.fingerprint import file_fingerprint, fingerprint
    from evalflow.taskspec.sidenv.local_modules import local_closure

    digest = file_fingerprint(path)
    module = package_module(path)
    if module is not None:
        return fingerprint(("package-module", digest, module.distribution, module.version))
    start, *imported = local_closure(path)
    if not imported:
        return digest
    return fingerprint(
        ("task-modules", digest, [(os.path.relpath(f, start.parent), file_fingerprint(str(f))) for f in imported])
    )


@functools.lru_cache(maxsize=256)
def _identity(dist: metadata.Distribution) -> tuple[str, str]:
    """(name, version) of a distribution :func:`_package_root` found (the same object each time,
    it is cached too): each reads and parses its METADATA file, and every `!function` of every
    task asks (once per task: 13,000 times for lm-eval's whole library)."""
    return dist.metadata["Name"], dist.version


@functools.lru_cache(maxsize=4096)
def _package_root(folder: str) -> tuple[str, metadata.Distribution] | None:
    """(top-level name, its distribution) if ``folder`` is the package ``import <name>`` finds here
    and an installed distribution put it there."""
    top = os.path.basename(folder)
    init = os.path.join(folder, "__init__.py")
    if not top.isidentifier() or not os.path.isfile(init):
        return None
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or os.path.realpath(spec.origin) != init:
        return None
    for dist in _candidates(top):
        if _installs(dist, top, folder):
            return top, dist
    return None


def _candidates(top: str) -> list[metadata.Distribution]:
    """The distributions that may provide ``top``: the one named like it (lm_eval, evalflow: found
    at once), else every one whose files list it (``packages_distributions``: a scan of them all)."""
    try:
        return [metadata.distribution(top)]
    except metadata.PackageNotFoundError:
        pass
    found = []
    for name in _distributions_of().get(top, ()):
        try:
            found.append(metadata.distribution(name))
        except metadata.PackageNotFoundError:
            continue
    return found


@functools.cache
def _distributions_of() -> dict[str, list[str]]:
    return {top: list(names) for top, names in metadata.packages_distributions().items()}


def _lists(dist: metadata.Distribution, relative: str) -> bool:
    """Whether ``dist``'s file list has ``relative``: RECORD searched as text (parsing lm-eval's
    16,000 rows into paths takes 0.2 s), other metadata formats through ``dist.files``."""
    record = dist.read_text("RECORD")
    if record is not None:
        return f"\n{relative}," in "\n" + record
    return any(str(f) == relative for f in dist.files or ())


def _installs(dist: metadata.Distribution, top: str, folder: str) -> bool:
    """Whether ``dist`` installed package ``top`` at ``folder``: its RECORD puts the package's
    ``__init__.py`` there, or it is an editable install of a checkout that holds ``folder``."""
    placed = os.path.realpath(str(dist.locate_file(f"{top}/__init__.py")))
    if placed == os.path.join(folder, "__init__.py") and _lists(dist, f"{top}/__init__.py"):
        return True
    direct = dist.read_text("direct_url.json")
    try:
        info = json.loads(direct) if direct else {}
    except ValueError:
        return False
    if not (isinstance(info, dict) and info.get("dir_info", {}).get("editable")):
        return False
    checkout = os.path.realpath(unquote(urlparse(str(info.get("url", ""))).path))
    return bool(checkout) and Path(folder).is_relative_to(checkout)
