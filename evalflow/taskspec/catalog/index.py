"""The task index: every task, group and tag name in the task folders, cached on disk.

``TaskIndex.build`` scans each installed ``task_library`` (lm-eval's tasks, under ``evalflow lm-eval``),
then the built-in ``tasks/`` folder, then each ``include_path`` folder; a later folder's task or
group overrides an earlier one's of the same name, tags merge. The override is warned about when a
run resolves one of the overriding names (``include_path=lm_eval`` overrides dozens of built-in
names; a run that uses none of them is not told so on every start), except the built-in tasks'
override of a library beneath them: they are its copies (the same prompts, their code metrics in
the sandbox), so a run of ``arc_easy`` under the lm-eval front door is not warned on every start.
Classification follows lm-eval 0.4.13's ``TaskIndex`` (``lm_eval/tasks/_index.py``): a YAML with
``class`` is a (Python) task, else with ``group`` a group, else with ``task`` a task; ``tag:`` on a
task registers it under that tag; YAMLs with none of these (templates) are skipped; within one
folder the first file (in path order) to use a name keeps it. evalflow also reads ``task_list:``
files (one task per entry, sharing the file's other keys).

Indexing never imports task code and constructs only the YAML keys that classify a file; each
folder is scanned, and its result cached, by :mod:`evalflow.taskspec.catalog.index_scan`.

Example::

    index = TaskIndex.build(include_path=["my_tasks"])
    selection = index.resolve("mmlu,my_task")   # Selection(tasks=(TaskConfig, ...), groups=...)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from evalflow.config.packaged import tasks_dir
from evalflow.errors import TaskError
from evalflow.taskspec.catalog.index_scan import Row, scan_root
from evalflow.taskspec.catalog.libraries import library_roots, missing_library_paragraph, trusted_code_lines
from evalflow.taskspec.catalog.selection import IndexEntry, Selection, kind_of
from evalflow.taskspec.format.installed import library_folder

__all__ = ["IndexEntry", "Selection", "TaskIndex", "builtin_tasks_dir", "is_task_path", "kind_of"]

log = logging.getLogger(__name__)


def builtin_tasks_dir() -> Path:
    """``$EVALFLOW_TASKS_DIR``, else evalflow's own ``tasks/`` folder (the checkout's, or the installed package's)."""
    env = os.environ.get("EVALFLOW_TASKS_DIR")
    return Path(env).expanduser() if env else tasks_dir()


class TaskIndex:
    """Names of tasks, groups and tags; resolves requests into a :class:`Selection`."""

    def __init__(
        self,
        rows: Mapping[str, tuple[str, Row]],
        *,
        roots: Sequence[str] = (),
        problems: Sequence[tuple[str, str]] = (),
        overrides: Mapping[str, tuple[str, str]] | None = None,
        missing_libraries: Sequence[str] = (),
    ) -> None:
        self._rows = dict(rows)  # name -> (folder, row); IndexEntry objects are made on demand
        self.roots = tuple(roots)
        self.problems = tuple(problems)  # (file, why it was skipped)
        self.overrides = dict(overrides or {})  # name -> (the overriding folder, what it replaced)
        self._warned: set[str] = set()  # overriding names already warned about by this index
        self.missing_libraries = tuple(missing_libraries)  # task_library names not installed here

    @classmethod
    def build(
        cls, include_path: Sequence[str | Path] = (), *, builtin: bool = True, library: Sequence[str] = ()
    ) -> TaskIndex:
        """Scan each installed ``library`` (a :data:`TASK_LIBRARIES` name), the built-in folder (if
        ``builtin``), then each ``include_path`` folder."""
        if isinstance(include_path, (str, Path)):
            include_path = [include_path]
        roots, missing = library_roots(library)
        if builtin and builtin_tasks_dir().is_dir():
            roots.append(os.path.realpath(builtin_tasks_dir()))
        warned_from = len(roots)  # the built-in folder overrides the libraries beneath it silently
        for folder in include_path:
            path = Path(library_folder(str(folder)) or folder).expanduser()  # include_path=lm_eval: its tasks
            if not path.is_dir():
                raise TaskError(
                    f"include_path '{folder}' is not a folder ({'a file' if path.exists() else 'missing'})."
                    " include_path lists folders of task YAMLs; to run one YAML file, pass its path "
                    "as the task instead."
                )
            roots.append(os.path.realpath(path))
        merged: dict[str, tuple[str, Row]] = {}
        problems: list[tuple[str, str]] = []
        overrides: dict[str, tuple[str, str]] = {}
        for position, root in enumerate(roots):
            rows, skipped = scan_root(root)
            problems += skipped
            for name, line in _overlay(merged, root, rows):
                log.debug("%s", line)
                if position >= warned_from:
                    overrides[name] = (root, line)
        return cls(merged, roots=roots, problems=problems, overrides=overrides, missing_libraries=missing)

    # ------------------------------------------------------------------ queries

    def entry(self, name: str) -> IndexEntry | None:
        found = self._rows.get(name)
        if found is None:
            return None
        root, (_, kind, rel, item, python, members) = found
        return IndexEntry(name, kind, os.path.join(root, rel) if rel else "", item, python, tuple(members))

    def names(self) -> list[str]:
        return list(self._rows)

    def _kind_names(self, kind: str) -> list[str]:
        return sorted(name for name, (_, row) in self._rows.items() if row[1] == kind)

    def task_names(self) -> list[str]:
        return self._kind_names("task")

    def group_names(self) -> list[str]:
        return self._kind_names("group")

    def tag_names(self) -> list[str]:
        return self._kind_names("tag")

    def resolve(self, requested: str | Sequence[str], *, trust_task_code: bool = False) -> Selection:
        """Leaf tasks and groups for names of tasks, groups, tags, or paths of task YAMLs.

        A string may list several names separated by commas. Raises :class:`TaskError` for
        unknown names (with the closest ones) and for a task reached twice, and
        :class:`UnsafeCodeError` for task code outside the built-in folder unless
        ``trust_task_code``.
        """
        names = [requested] if isinstance(requested, str) else list(requested)
        names = [part.strip() for name in names for part in str(name).split(",") if part.strip()]
        if not names:
            raise TaskError("no task requested; name at least one task, group, tag or YAML file.")
        names = [path for name in names for path in self._folder_files(name)]
        unknown = [name for name in names if self.entry(name) is None and _yaml_path(name) is None]
        if unknown and self.missing_libraries:
            raise TaskError(missing_library_paragraph(unknown, self.missing_libraries))
        # groups never imports this module (the nouns both use are in taskspec.catalog.selection); imported
        # here because it pulls in yaml, which a warm index build (`ls`) never needs
        from evalflow.taskspec.catalog.groups import expand

        selection = expand(
            self,
            names,
            trusted_root=os.path.realpath(builtin_tasks_dir()),
            trust=trust_task_code,
            path_of=_yaml_path,
        )
        used = [*names, *(task.task for task in selection.tasks), *(group.name for group in selection.groups)]
        self._warn_overrides(used)
        if trust_task_code:
            for line in trusted_code_lines(selection, self.roots, builtin_tasks_dir()):
                log.warning("%s", line)
        return selection

    def _folder_files(self, name: str) -> list[str]:
        """``name`` itself, or, for a folder that is no indexed name, its ``*.yaml`` files (lm-eval's
        ``--tasks DIR``: each YAML directly in the folder, sorted here; lm-eval takes the file system's order)."""
        if self.entry(name) is not None or not Path(name).expanduser().is_dir():
            return [name]
        found = sorted(str(p) for p in Path(name).expanduser().glob("*.yaml") if p.is_file())
        if not found:
            raise TaskError(
                f"'{name}' is a folder with no .yaml file; name a folder of task YAMLs, or index "
                f"its subfolders with include_path=[{name}] and name their tasks."
            )
        return found

    def _warn_overrides(self, used: Sequence[str]) -> None:
        """Warn about the overridden names this run uses, once per name and index."""
        fresh = [name for name in dict.fromkeys(used) if name in self.overrides and name not in self._warned]
        self._warned.update(fresh)
        by_root: dict[str, list[str]] = {}
        for name in fresh:
            by_root.setdefault(self.overrides[name][0], []).append(name)
        for root, overridden in by_root.items():
            _warn_overrides(root, [(name, self.overrides[name][1]) for name in overridden])


def is_task_path(name: str) -> bool:
    """Whether ``name`` is a file or folder that :meth:`TaskIndex.resolve` reads as task YAML."""
    path = Path(name).expanduser()
    return path.is_dir() or path.is_file()


def _yaml_path(name: str) -> str | None:
    """The real path of a requested YAML file, None if ``name`` does not look like a path."""
    if not name.endswith((".yaml", ".yml")) and os.sep not in name:
        return None
    path = Path(name).expanduser()
    if not path.is_file():
        raise TaskError(f"task file '{name}' not found (and it is not an indexed name); check the path.")
    return os.path.realpath(path)


# ----------------------------------------------------------------------------- merging


def _overlay(merged: dict[str, tuple[str, Row]], root: str, rows: list[Row]) -> list[tuple[str, str]]:
    """A later folder wins for tasks and groups; tags merge their tasks. Returns (name, what it
    replaced) for each name the folder overrides."""
    overridden: list[tuple[str, str]] = []
    if not merged:
        merged.update((row[0], (root, row)) for row in rows)
        return overridden
    for row in rows:
        name = row[0]
        previous = merged.get(name)
        if previous is not None and previous[1][1] == "tag" and row[1] == "tag":
            members = sorted(set(previous[1][5]) | set(row[5]))
            merged[name] = (root, [name, "tag", "", None, False, members])
            continue
        if previous is not None:
            before = os.path.join(previous[0], previous[1][2]) if previous[1][2] else "tags"
            overridden.append(
                (
                    name,
                    (
                        f"{row[1]} '{name}' from {os.path.join(root, row[2]) if row[2] else 'tags'} overrides "
                        f"the {previous[1][1]} of the same name from {before}"
                    ),
                )
            )
        merged[name] = (root, row)
    return overridden


def _warn_overrides(root: str, overridden: list[tuple[str, str]]) -> None:
    """One warning per folder, not one per name: a group from lm-eval's own task folder on
    include_path may override dozens of built-in tasks (each is logged at debug level when indexed)."""
    if len(overridden) == 1:
        log.warning("%s", overridden[0][1])
    elif overridden:
        names = [name for name, _ in overridden]
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        log.warning(
            "%d tasks and groups this run uses from %s override those of the same name from earlier folders (%s); "
            "the later folder's definitions are used (each override is logged at debug level)",
            len(overridden),
            root,
            shown,
        )
