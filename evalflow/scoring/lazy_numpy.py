"""numpy, imported on first use (``from evalflow.scoring import lazy_numpy as np``).

The scoring modules are imported by every run, but only a run that computes metrics calls numpy:
importing it up front is some 80 ms of a fully cached run's ~1.2 s, for nothing. Each name is
looked up in numpy once and then kept here, so later uses are plain attribute reads.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    import numpy

    value = getattr(numpy, name)  # AttributeError, as numpy itself would raise
    globals()[name] = value
    return value
