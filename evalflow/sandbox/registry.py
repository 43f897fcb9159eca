"""Sandbox backends by name: ``code_sandbox=NAME`` picks one; ``register_sandbox`` adds your own.

One registry holds every name. The built-ins are import paths, imported on first use. A name is
taken once: registering another backend under ``bwrap`` would silently change where model-written
code runs, so it is refused (the same class again, a reloaded module, replaces itself).

    @register_sandbox("firejail")
    class Firejail:
        name = "firejail"
        def unavailable(self) -> str | None: ...
        def run(self, argv, limits) -> Outcome: ...

    sandbox("bwrap").run([sys.executable, "-I", "-c", "print(1)"], Limits())
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping
from typing import Any

from evalflow.cache.code import code_hash
from evalflow.errors import SandboxError, closest
from evalflow.sandbox.base import Sandbox, run_limited


class SandboxRegistry:
    """Names to backend classes: built-ins as lazy import paths, the user's as classes."""

    def __init__(self, builtin: Mapping[str, str]) -> None:
        self._paths = dict(builtin)
        self._classes: dict[str, type] = {}

    def register(self, name: str) -> Callable[[type], type]:
        """Class decorator: ``@register_sandbox("mine")`` makes ``code_sandbox=mine`` use that class."""

        def decorate(cls: type) -> type:
            self.add(name, cls)
            return cls

        return decorate

    def add(self, name: str, cls: type) -> None:
        missing = [m for m in ("unavailable", "run") if not callable(getattr(cls, m, None))]
        if not isinstance(name, str) or not name or not isinstance(cls, type) or missing:
            raise SandboxError(f"register_sandbox({name!r}): {cls!r} is not a sandbox backend; a backend is a class "
                               f"with unavailable() and run(argv, limits) (see evalflow.sandbox.base.Sandbox)"
                               f"{f'; missing: {missing}' if missing else ''}")
        taken = self._classes.get(name)
        if name in self._paths or (taken is not None and _qualified(taken) != _qualified(cls)):
            current = self._paths.get(name) or _qualified(taken)
            raise SandboxError(f"the sandbox name '{name}' is already registered ({current}); registering "
                               f"{_qualified(cls)} under it would silently change where model-written code runs. "
                               "Pick another name for your backend.")
        self._classes[name] = cls
        self.instance.cache_clear()

    def names(self) -> list[str]:
        return sorted(set(self._paths) | set(self._classes))

    def cls(self, name: str) -> type:
        if name in self._classes:
            return self._classes[name]
        if name in self._paths:
            module, attr = self._paths[name].split(":")
            return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]
        raise SandboxError(f"unknown sandbox '{name}' (setting code_sandbox); {closest(name, self.names())} "
                           "Pick one of those, or register yours with evalflow.sandbox.register_sandbox(...) in a "
                           "module the run imports (imports=[my_module]).")

    @functools.lru_cache(maxsize=None)  # noqa: B019 (one registry, lives as long as the process)
    def instance(self, name: str) -> Sandbox:
        return self.cls(name)()  # type: ignore[no-any-return]


SANDBOXES = SandboxRegistry({
    "bwrap": "evalflow.sandbox.bubblewrap:Bubblewrap",
    "subprocess": "evalflow.sandbox.plain:PlainSubprocess",
})
register_sandbox = SANDBOXES.register
sandbox = SANDBOXES.instance
sandbox_names = SANDBOXES.names


def sandbox_identity(name: str) -> dict[str, Any]:
    """What scores computed through backend ``name`` are keyed by: its name and the hash of its code
    and of the limits runner (a stricter limit can turn a pass into a failure)."""
    return {"backend": name, "code": code_hash(SANDBOXES.cls(name)), "runner": code_hash(run_limited)}


def require_sandbox(name: str, needed_by: str) -> None:
    """Refuse, before any model call, to plan a task whose metric runs code when backend ``name``
    cannot run here; ``needed_by`` names the task and its file."""
    why = sandbox(name).unavailable()
    if why is None:
        return
    raise SandboxError(
        f"{needed_by} runs model-written code through the '{name}' sandbox (setting code_sandbox), which cannot "
        f"run here: {why}. Install bubblewrap (apt-get install bubblewrap), or opt out with "
        "code_sandbox=subprocess: each program then runs as a plain child process with the same CPU, memory, "
        "process-count and wall-clock limits but without isolation (it can read your files, use the network and "
        "signal the evaluator; README, Code execution)."
    )


def _qualified(cls: Any) -> str:
    return f"{getattr(cls, '__module__', '?')}:{getattr(cls, '__qualname__', cls)}"
