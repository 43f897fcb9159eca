"""One error tree for everything a user can get wrong.

An :class:`EvalflowError` is printed as one paragraph without a traceback (unless
``EVALFLOW_DEBUG=1``): it says where (file, key, document), what is wrong, what is allowed and the
fix. Anything else escaping the program is a bug in evalflow.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class EvalflowError(Exception):
    """Base of every error caused by input: configs, task files, data, models, cache folders."""


class ConfigError(EvalflowError):
    """A run setting or override is wrong."""


class TaskError(EvalflowError):
    """A task YAML, template or task-code reference is wrong."""


class DataError(EvalflowError):
    """A dataset cannot be found or a document does not fit the task."""


class ModelError(EvalflowError):
    """A model cannot be loaded or answered a request wrongly."""


class CacheError(EvalflowError):
    """A cache folder or entry cannot be used."""


class RunFolderError(EvalflowError):
    """A run folder (evalflow's or lm-eval's) cannot be read, or two runs cannot be paired."""


class UnsafeCodeError(EvalflowError):
    """Task code would run without the user having allowed it."""


class SandboxError(EvalflowError):
    """Model-written code would run without a usable sandbox, or a sandbox backend is misdeclared."""


def closest(word: str, options: Iterable[str], n: int = 3) -> str:
    """A phrase suggesting the nearest valid names, for 'did you mean' in error messages."""
    options = sorted(set(options))
    near = difflib.get_close_matches(word, options, n=n, cutoff=0.5)
    if near:
        return "did you mean " + " or ".join(repr(x) for x in near) + "?"
    shown = ", ".join(options[:12]) + (", ..." if len(options) > 12 else "")
    return f"valid names: {shown}" if options else "none are available"
