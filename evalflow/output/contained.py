"""Whether a file of a run folder really lies in it: the one check every reader of the viewer
(frames' discovery, runs, samples and status; the view's image route and bundle) makes before it
opens a run's file.

A run folder handed to the viewer is data from someone else: its ``.hydra/config.yaml`` may be a
symbolic link to ``/etc/passwd``, its ``samples_x.jsonl`` a link into another run. A file counts
as the run's only when its real path (every link on the way resolved, the folder's own too, so a
root given as a link is fine) lies under the run folder's real path. A file that leaves is treated
as absent, and :func:`left_out` says which and why, for the page and payload to show.

    >>> from pathlib import Path
    >>> link_out(Path("/tmp"), Path("/tmp/not-there")) is None    # absent is not an escape
    True
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path


def link_out(folder: Path, path: Path) -> str | None:
    """Why ``path`` may not be read as a file of the run folder ``folder`` (it, or a folder on
    its way, is a link leading outside it, or a link loop); None when it stays inside or is absent."""
    if not os.path.lexists(path):
        return None
    try:
        real = Path(path).resolve(strict=True)
    except (OSError, RuntimeError):
        return "it is a broken symbolic link or a link loop"
    root = Path(folder).resolve()
    if real.is_relative_to(root):
        return None
    return f"it is a symbolic link to {real}, outside the run folder {root}; links out of a run folder are not read"


def inside(folder: Path, path: Path) -> bool:
    """Whether ``path`` is a file of ``folder`` that may be read: present, a file, and inside."""
    return link_out(folder, path) is None and Path(path).is_file()


def kept(folder: Path, files: Mapping[str, Path]) -> dict[str, Path]:
    """The entries of ``files`` (task -> samples file, say) that lie inside ``folder``."""
    return {name: path for name, path in files.items() if link_out(folder, path) is None}


def left_out(folder: Path, paths: Iterable[Path]) -> list[dict[str, str]]:
    """``{"file", "reason"}`` of each of ``paths`` that leaves ``folder`` (the file named as it
    sits in the folder), in order; empty when every one stays inside or is absent."""
    out = []
    for path in paths:
        reason = link_out(folder, path)
        if reason is not None:
            try:
                name = Path(path).relative_to(folder).as_posix()
            except ValueError:
                name = str(path)
            out.append({"file": name, "reason": reason})
    return out
