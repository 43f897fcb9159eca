"""The run folder's log file (``cli.log``), one run per file.

Hydra's file handler appends: a run folder reused after a failed attempt (``hydra.run.dir=...``
again, which evalflow allows while the folder holds no results) would mix both runs' lines in one
``cli.log``. conf/config.yaml names :class:`FreshFileHandler` instead, which moves an earlier
run's log aside first, as logrotate does: the newest earlier log is ``cli.log.1``, older ones
``.2``, ``.3`` ...
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

__all__ = ["FreshFileHandler", "rotate"]


def rotate(path: Path) -> None:
    """Shift ``path.N`` to ``path.N+1`` (oldest first) and ``path`` to ``path.1``; an empty or
    missing ``path`` holds no earlier run and is left to be overwritten."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    numbered = 1
    while path.with_name(f"{path.name}.{numbered}").exists():
        numbered += 1
    for n in range(numbered, 1, -1):
        os.replace(path.with_name(f"{path.name}.{n - 1}"), path.with_name(f"{path.name}.{n}"))
    os.replace(path, path.with_name(f"{path.name}.1"))


class FreshFileHandler(logging.FileHandler):
    """A :class:`logging.FileHandler` that starts a new file, keeping an earlier run's as ``.1``."""

    def __init__(self, filename: str, mode: str = "w", encoding: str | None = None, delay: bool = False) -> None:
        rotate(Path(filename))
        super().__init__(filename, mode=mode, encoding=encoding, delay=delay)
