"""Which sandbox backend the code that runs now should use: set by the metrics stage for one task.

A metric is called as ``fn(references=, predictions=, **kwargs)`` and sees no run settings, so the
metrics stage, which receives ``code_sandbox``, names the backend here for the duration of its
call. This module imports nothing from evalflow, on purpose: the metrics stage imports it, and
its cache key includes the code of what it imports, so the sandbox backends' code enters the key
only of the tasks that run code (through ``sandbox_identity``), not of every task.

    >>> with using("subprocess"):
    ...     active()
    'subprocess'
    >>> active()
    'bwrap'
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

DEFAULT = "bwrap"
"""The backend when nothing names one (schema.py's default for ``code_sandbox``, restated for
metrics called outside a run, e.g. from a notebook)."""

_ACTIVE: contextvars.ContextVar[str] = contextvars.ContextVar("evalflow_code_sandbox", default=DEFAULT)


def active() -> str:
    """The backend name in force here.

    Returns:
        The name `using` set around this code, else the default, `bwrap`.
    """
    return _ACTIVE.get()


@contextlib.contextmanager
def using(name: str) -> Iterator[None]:
    """Run the block with `name` as the backend (restored afterwards, also on error).

    Args:
        name: A registered backend's name.
    """
    token = _ACTIVE.set(name)
    try:
        yield
    finally:
        _ACTIVE.reset(token)
