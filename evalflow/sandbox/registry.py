"""Sandbox backends by name: ``code_sandbox=NAME`` picks one; ``register_sandbox`` adds your own.

One registry (`evalflow.registry.Registry`) holds every name. The built-ins are import
paths, imported on first use. A name is taken once: registering another backend under ``bwrap``
would silently change where model-written code runs, so it is refused (the same class again, a
reloaded module, replaces itself).

    @register_sandbox("firejail")
    class Firejail:
        name = "firejail"
        description = "each program runs in a firejail container under ..."  # shown in the manifest
        def unavailable(self) -> str | None: ...
        def run(self, argv, limits, stdin=b"") -> Outcome: ...

    sandbox("bwrap").run([sys.executable, "-I", "-c", "print(1)"], Limits()).stdout  # b'1\n'

Whether a program passed is `evalflow.sandbox.verdict.run_program`'s to say, not a backend's.
"""

from __future__ import annotations

import functools
from typing import Any

from evalflow.cache.code import code_hash
from evalflow.errors import SandboxError
from evalflow.registry import Registry
from evalflow.sandbox.contract import Sandbox, run_limited
from evalflow.sandbox.verdict import run_program


def _check_backend(name: str, cls: Any) -> None:
    missing = [m for m in ("unavailable", "run") if not callable(getattr(cls, m, None))]
    description = getattr(cls, "description", None)
    missing += [] if isinstance(description, str) and description.strip() else ["description (a str)"]
    if not isinstance(cls, type) or missing:
        raise SandboxError(
            f"register_sandbox({name!r}): {cls!r} is not a sandbox backend; a backend is a class "
            f"with a description (one sentence for the manifest), unavailable() and "
            f"run(argv, limits, stdin) (see evalflow.sandbox.contract.Sandbox)"
            f"{f'; missing: {missing}' if missing else ''}"
        )


SANDBOXES: Registry[type[Sandbox]] = Registry(
    "sandbox",
    error=SandboxError,
    setting="setting code_sandbox",
    noun="backend",
    check=_check_backend,
    consequence="change where model-written code runs",
    hint="Pick one of those, or register yours with evalflow.sandbox.register_sandbox(...) in a module the run "
    "imports (imports=[my_module]).",
    builtin={
        "bwrap": "evalflow.sandbox.bubblewrap:Bubblewrap",
        "subprocess": "evalflow.sandbox.plain:PlainSubprocess",
    },
)
register_sandbox = SANDBOXES.register


def sandbox_names() -> list[str]:
    return list(SANDBOXES.names())


def sandbox(name: str) -> Sandbox:
    """The backend called `name`, built once per registered class.

    Args:
        name: A built-in (`bwrap`, `subprocess`) or registered backend's name.

    Returns:
        The backend.

    Raises:
        SandboxError: No backend has that name.
    """
    return _instance(SANDBOXES.get(name))


@functools.cache
def _instance(cls: type[Sandbox]) -> Sandbox:
    return cls()


def sandbox_identity(name: str) -> dict[str, Any]:
    """What scores computed through backend `name` are keyed by.

    Args:
        name: The backend's name.

    Returns:
        Its name and the hashes of its code, of the limits runner (a stricter limit can turn a
            pass into a failure) and of the verdict (`evalflow.sandbox.verdict`, its `RUNNER`
            included: what counts as passed).
    """
    return {
        "backend": name,
        "code": code_hash(SANDBOXES.get(name)),
        "runner": code_hash(run_limited),
        "verdict": code_hash(run_program),
    }


def require_sandbox(name: str, needed_by: str) -> None:
    """Refuse, before any model call, to plan a task whose metric runs code where its backend cannot run.

    Args:
        name: The backend's name (the `code_sandbox` setting).
        needed_by: The task and its file, named in the error.

    Raises:
        SandboxError: The backend cannot run here: the reason, and the two ways out (install
            bubblewrap, or `code_sandbox=subprocess`).
    """
    why = sandbox(name).unavailable()
    if why is None:
        return
    raise SandboxError(
        f"{needed_by} runs model-written code through the '{name}' sandbox (setting code_sandbox), which cannot "
        f"run here: {why}. Install bubblewrap (apt-get install bubblewrap), or opt out with "
        "code_sandbox=subprocess: each program then runs as a plain child process with the same CPU, memory, "
        "process-count and wall-clock limits but without isolation (it can read your files, use the network and "
        "signal the evaluator; docs/security.md)."
    )
