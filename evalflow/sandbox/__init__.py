"""Sandboxed execution of model-written programs (HumanEval, MBPP): one extension point.

Lives here: the sandbox contract, the backends (bubblewrap, a plain subprocess) and their registry, code_eval's verdict.
May import only ``errors``, ``registry``, ``core``, ``cache`` and ``config`` (the rooms below it).

    from evalflow.sandbox import Limits, run_program, sandbox
    run_program(sandbox("bwrap"), program, Limits(wall_seconds=3))  # True: it ran to its end

A backend runs a command and hands back its exit status and output (`Outcome`); whether a
program passed is code_eval's verdict, read by `run_program` (`evalflow.sandbox.verdict`).

Backends: ``bwrap`` (bubblewrap, the default) and ``subprocess`` (the documented opt-out: the same
limits, no isolation); add one with `register_sandbox`.
"""

from evalflow.sandbox.contract import Limits, Outcome, Sandbox
from evalflow.sandbox.current import active, using
from evalflow.sandbox.registry import register_sandbox, require_sandbox, sandbox, sandbox_identity, sandbox_names
from evalflow.sandbox.verdict import run_program

__all__ = [
    "Limits",
    "Outcome",
    "Sandbox",
    "active",
    "register_sandbox",
    "require_sandbox",
    "run_program",
    "sandbox",
    "sandbox_identity",
    "sandbox_names",
    "using",
]
