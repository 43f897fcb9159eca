"""Sandboxed execution of model-written programs (HumanEval, MBPP): one extension point.

    from evalflow.sandbox import Limits, sandbox
    outcome = sandbox("bwrap").run([sys.executable, "-I", "-c", program], Limits(wall_seconds=3))
    outcome.passed

Backends: ``bwrap`` (bubblewrap, the default) and ``subprocess`` (the documented opt-out: the same
limits, no isolation); add one with :func:`register_sandbox`.
"""

from evalflow.sandbox.base import Limits, Outcome, Sandbox
from evalflow.sandbox.current import active, using
from evalflow.sandbox.registry import register_sandbox, require_sandbox, sandbox, sandbox_identity, sandbox_names

__all__ = [
    "Limits",
    "Outcome",
    "Sandbox",
    "active",
    "register_sandbox",
    "require_sandbox",
    "sandbox",
    "sandbox_identity",
    "sandbox_names",
    "using",
]
