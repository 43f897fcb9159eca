"""``imports=[...]``: the user's modules, imported before any task is loaded, so the metrics,
aggregations, filters and models they register exist when a task or ``model.type`` names them.

A name is imported as a module (``my_metrics``, found on ``sys.path``, which holds the working
folder for ``python -m evalflow``); a path ending in ``.py`` is imported from that file. Importing
runs the code, as ``model.type=pkg.module:Class`` does: it is the command line's own, trusted.

    >>> import_user_modules(())
    ()
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from evalflow.errors import ConfigError
from evalflow.taskspec.format.source_import import source_spec


def import_user_modules(names: Sequence[str]) -> tuple[ModuleType, ...]:
    """Import each of ``names`` once (a module already imported is not imported again)."""
    return tuple(_import(name) for name in names)


def _import(name: str) -> ModuleType:
    try:
        if name.endswith(".py"):
            return _from_file(Path(name).expanduser().resolve())
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and name.startswith(exc.name):
            raise ConfigError(
                f"imports: no module '{name}' (looked on sys.path, which starts with the working folder "
                f"{Path.cwd()}); give its importable name, or the path of its .py file (imports=[lib/{name}.py])"
            ) from None
        raise ConfigError(
            f"imports: '{name}' imports '{exc.name}', which is not installed: pip install {exc.name}"
        ) from None


def _from_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise ConfigError(f"imports: {path} is not a file; give a .py file's path or a module name")
    name = f"evalflow_user_{path.stem}"
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path):
        return sys.modules[name]
    spec = source_spec(name, str(path))  # its source as it is now, never a stale .pyc (keys hash the source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
