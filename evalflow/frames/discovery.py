"""Every run under some folders, evalflow's and lm-eval's, each with a stable id: the viewer's
catalog (the server maps an id to a folder only through it, never by joining request text to a
path) and the rows of :func:`evalflow.frames.runs.runs_df`.

A folder is an evalflow run when it holds ``results.json`` (finished), or its events file or the
``.hydra/`` snapshot with no results yet (running, or failed before the end). Each ``results_<date>.json``
of lm-eval's layout is one run: lm-eval writes a new one into the model's folder at every
invocation, with the samples files of that date beside it. The walk reads names and times only
(no file is opened), never descends into a run folder (its ``.gate_rounds/`` scratch, a tracker's
offline files), a hidden folder or an evalflow cache folder, and never follows a symbolic link
to a folder (the viewer reads only under the folders it was given).

    [e.id for e in find_runs([Path("outputs")])]
    # ['multirun/2026-12-06/18-00-00-abc/1', 'multirun/2026-12-06/18-00-00-abc/0', 'lm/smollm2/results_<date>.json']
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from evalflow.errors import RunFolderError
from evalflow.output.contained import link_out
from evalflow.output.run_paths import (
    EVENTS,
    LMEVAL_RESULTS_GLOB,
    RESULTS,
    SNAPSHOT,
    events_file,
    results_file,
    snapshot_dir,
    sweep_record_file,
)

# diskcache's index file: a folder holding it is an evalflow cache folder (thousands of value
# files, no run), never walked.
_CACHE_INDEX = "cache.db"

EVALFLOW, LMEVAL = "evalflow", "lm-eval"  # RunEntry.layout


@dataclass(frozen=True)
class RunEntry:
    """One run found: where it is, which layout, and its results file (None while it has none)."""

    id: str  # posix path relative to its root; with several roots "<i>:<relpath>"
    folder: Path  # the run folder (evalflow) or the folder holding results_*.json (lm-eval)
    layout: str  # "evalflow" | "lm-eval"
    results: Path | None  # results.json / results_<date>.json; None while running or failed


def find_runs(roots: Sequence[Path | str]) -> list[RunEntry]:
    """Every run under ``roots`` (folders, or an lm-eval results file itself), newest first (by
    the results file's time, else the run folder's). With several roots each id starts with the
    root's index (``"1:multirun/.../0"``); a run under two of them is listed once, under the first."""
    paths = [Path(r) for r in roots]
    for root in paths:
        if not root.exists():
            raise RunFolderError(
                f"{root}: no such folder; give the folders runs were written under (evalflow's "
                f"outputs/, or lm-eval's --output_path)"
            )
    seen: set[tuple[Path, Path | None]] = set()
    found: list[tuple[float, RunEntry]] = []
    for i, root in enumerate(paths):
        prefix = f"{i}:" if len(paths) > 1 else ""
        for rel, entry, mtime in _runs_under(root):
            key = (entry.folder.resolve(), entry.results.resolve() if entry.results else None)
            if key not in seen:
                seen.add(key)
                found.append((mtime, RunEntry(prefix + rel, entry.folder, entry.layout, entry.results)))
    found.sort(key=lambda pair: (-pair[0], pair[1].id))
    return [entry for _, entry in found]


def sweep_id(entry: RunEntry) -> str | None:
    """The id of the Hydra multirun sweep ``entry`` is a job of (the parent folder holding Hydra's
    ``multirun.yaml``, as its own id would read), None for a run outside a sweep or a job given as
    a root itself (its sweep lies outside the folders given)."""
    record = sweep_record_file(entry.folder.parent)
    if entry.layout != EVALFLOW or not record.is_file() or link_out(entry.folder.parent, record):
        return None
    prefix, _, rel = entry.id.rpartition(":") if _has_root_index(entry.id) else ("", "", entry.id)
    if rel == ".":
        return None
    return (f"{prefix}:" if prefix else "") + (posixpath.dirname(rel) or ".")


def _has_root_index(run_id: str) -> bool:
    head, colon, _ = run_id.partition(":")
    return bool(colon) and head.isdigit()


def _runs_under(root: Path) -> Iterator[tuple[str, RunEntry, float]]:
    """(id relative to ``root``, entry, time) of each run under ``root``."""
    if root.is_file():
        if fnmatch.fnmatch(root.name, LMEVAL_RESULTS_GLOB):
            yield root.name, RunEntry(root.name, root.parent, LMEVAL, root), root.stat().st_mtime
        return
    stack = [root]
    while stack:
        folder = stack.pop()
        files, folders = _listing(folder)
        if _CACHE_INDEX in files:
            continue
        rel = folder.relative_to(root).as_posix()
        for name in sorted(files):
            if fnmatch.fnmatch(name, LMEVAL_RESULTS_GLOB):
                path = folder / name
                yield (
                    posixpath.join(rel, name) if rel != "." else name,
                    RunEntry("", folder, LMEVAL, path),
                    _mtime(path),
                )
        if RESULTS in files or SNAPSHOT in folders or EVENTS in files:
            results = results_file(folder) if RESULTS in files else None
            when = _mtime(results) if results else max(map(_mtime, (folder, snapshot_dir(folder), events_file(folder))))
            yield rel, RunEntry("", folder, EVALFLOW, results), when
            continue  # a run folder's subfolders (gate rounds, tracker files) hold no other run
        stack.extend(folder / name for name in sorted(folders, reverse=True) if not name.startswith("."))


def _listing(folder: Path) -> tuple[set[str], set[str]]:
    """(file names, folder names) in ``folder``; links to folders are left out (never followed),
    and so are links to files outside ``folder`` (:mod:`evalflow.output.contained`): a results
    file that leads elsewhere is no results file of this run."""
    files: set[str] = set()
    folders: set[str] = set()
    try:
        with os.scandir(folder) as items:
            for item in items:
                if item.is_dir(follow_symlinks=False):
                    folders.add(item.name)
                elif item.is_file() and not (item.is_symlink() and link_out(folder, Path(item.path))):
                    files.add(item.name)
    except (PermissionError, NotADirectoryError, FileNotFoundError):
        pass  # a folder removed or unreadable while walking holds no run we can show
    return files, folders


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
