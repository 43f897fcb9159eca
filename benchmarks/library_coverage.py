"""How much of lm-eval's task library loads in evalflow: every task and group, no data, no model.

    python benchmarks/library_coverage.py                    # include_path=lm_eval: the installed one
    python benchmarks/library_coverage.py --library DIR [--json out.json] [--examples 2] [--only NAME ...]

Each task and group of the library is resolved the way a run resolves ``task=NAME`` with lm-eval's
folder on ``include_path`` (:class:`~evalflow.taskspec.catalog.index.TaskIndex`, the group expansion) and
then passes the load-time checks a run, ``show`` and ``validate`` make
(:func:`evalflow.run.load_checks.check_selection`: registry names, and every ``!function`` module
imported, once per module file). So whatever fixes the loader or the checks gets is in the figure.
evalflow's built-in folder is left out of the index, so every name counted is lm-eval's.
No dataset is opened and no model is built.

What does not load is grouped by cause: a task-code module importing a package that is not
installed (with the package, and the lm-eval extra that lists it, read from
``importlib.metadata.requires("lm-eval")``); lm-eval's Python ``class:`` tasks; ANTLR-runtime and
``lm_eval``-import failures (other engineers' parts of issue 21); and everything else, one line per
distinct message shape (paths, names and numbers blanked) with a count and an example task.
The installed package's task code needs no ``trust_task_code`` (as with ``include_path=lm_eval``);
a folder given with ``--library`` is trusted, as ``trust_task_code=true`` would.
Prints the figures and the seconds taken; asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalflow.errors import EvalflowError  # noqa: E402
from evalflow.run.load_checks import check_selection  # noqa: E402
from evalflow.taskspec.catalog.index import TaskIndex  # noqa: E402

CLASS_TASK = "Python `class:` task (refused: see the README)"
# Causes told apart by the message the load-time checks give (the checks return their errors
# without the original exception, so the text is what there is). First match wins.
KNOWN = (
    ("pass trust_task_code=true", "task code not trusted (not an installed package's, as evalflow tells)"),
    ("antlr", "ANTLR runtime (MATH task code; issue 21 item 2)"),
    ("imports the module 'lm_eval", "imports lm_eval (issue 21 item 1)"),
    ("on the Hugging Face Hub", "task code loads an HF `evaluate` metric at import (no network here)"),
    ("hf_evaluate metrics load", "metric from the HF `evaluate` hub (`hf_evaluate: true`)"),
    ("SystemExit", "task code exits at import (a missing program)"),
    ("downloads the NLTK resource", "task code downloads NLTK data at import (no network here)"),
    ("already registered", "two task modules register one name in lm-eval's own registry"),
    ("unknown filter", "a filter that task code registers in lm-eval's own registry"),
)


@dataclass
class Tally:
    """The outcome of every name of one kind (task or group)."""

    loaded: int = 0
    causes: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    @property
    def total(self) -> int:
        return self.loaded + sum(len(v) for v in self.causes.values())


def library_folder() -> Path:
    """The installed lm_eval package's tasks folder (found without importing lm_eval)."""
    spec = importlib.util.find_spec("lm_eval")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("lm_eval is not installed here; pass --library DIR (lm-eval's tasks folder)")
    return Path(next(iter(spec.submodule_search_locations))) / "tasks"


def extras_of_packages() -> dict[str, list[str]]:
    """Normalised package name -> lm-eval's extras that list it (its install metadata)."""
    out: dict[str, list[str]] = defaultdict(list)
    for line in importlib.metadata.requires("lm-eval") or []:
        match = re.match(r"\s*([A-Za-z0-9_.\-]+).*?extra\s*==\s*['\"]([^'\"]+)['\"]", line)
        if match:
            out[_norm(match[1])].append(match[2])
    return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def cause_of(exc: BaseException, extras: dict[str, list[str]]) -> str:
    """The cause line a failure is counted under."""
    text = str(exc).split(" (And ", 1)[0]  # a group's message: its first failing task's paragraph
    if "Python task class" in text:
        return CLASS_TASK
    drift = version_drift(text)
    if drift:
        return drift
    for needle, label in KNOWN:
        if needle in text:
            return label
    missing = missing_packages(text, extras)
    if missing:
        named = re.findall(r"lm_eval\[[\"']?([A-Za-z0-9_\-]+)", text)  # a module's own advice
        found = sorted({e for p in missing for e in extras.get(_norm(p), [])} | {_norm(e) for e in named})
        extra = f"lm-eval[{','.join(found)}]" if found else "in no lm-eval extra"
        return f"missing package: {' '.join(missing)} ({extra})"
    return "other: " + shape(text)


def version_drift(text: str) -> str | None:
    """'installed P V lacks M' when task code imports what a newer release of P removed."""
    found = re.search(r"it imports '([^']+)', which the installed package '([^']+)'", text)
    name = re.search(r"cannot import name '([^']+)' from '([^']+)'", text)
    module, package = (
        (found[1], found[2]) if found else (f"{name[2]}.{name[1]}", name[2].split(".")[0]) if name else ("", "")
    )
    if not package:
        return None
    try:
        version = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    return f"installed {package} {version} lacks {module} (task code written for an older {package})"


_WORDS = frozenset({"please", "via", "or", "and", "the", "evaluation", "metrics", "install", "pip", "with"})


def missing_packages(text: str, extras: dict[str, list[str]]) -> list[str]:
    """The packages a failed import asks for: evalflow's `pip install NAME` advice, or the names
    a task module's own ImportError message spells (`pip install a b`, backquoted names)."""
    tail = text.split(" failed: ", 1)[-1]
    if "install" not in tail.lower():
        return []
    tail = re.sub(r"lm_eval\[[^\]]*\]", "", tail)
    words = re.findall(r"`([A-Za-z0-9_.\-]+)", tail)
    for run in re.findall(r"pip install ((?:`?[A-Za-z0-9_.\-<>=]+`?[ ,]*)+)", tail):
        run_words = run.replace(",", " ").split()  # the first, and those that look like packages
        words += run_words[:1] + [w for w in run_words[1:] if _norm(w) in extras or re.search(r"[-_]", w)]
    names = {_norm(re.split(r"[<>=\[]", w.strip("`"))[0]) for w in words}
    extra_names = {_norm(e) for found in extras.values() for e in found}
    return sorted(
        n
        for n in names
        if re.fullmatch(r"[A-Za-z][A-Za-z0-9_.\-]*", n)
        and _norm(n) not in extra_names
        and (_norm(n) in extras or (n.lower() not in _WORDS and n[0].islower()) or "`" + n in tail)
        and not _installed(n)
    )


def _installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
        return True
    except importlib.metadata.PackageNotFoundError:
        return importlib.util.find_spec(name.replace("-", "_")) is not None if name.isidentifier() else False


def shape(text: str) -> str:
    """A message with its particulars blanked, so that one mistake in 500 files is one line."""
    text = re.sub(r"(/[^\s:,'\"`)]+)+", "<path>", text)
    text = re.sub(r"'[^']*'", "'…'", text)
    text = re.sub(r"\d+", "N", text)
    return text[:300]


def check(index: TaskIndex, name: str, trust: bool) -> None:
    """Resolve ``name`` as a run does and make the run's load-time checks (raises on failure)."""
    selection = index.resolve([name], trust_task_code=trust)
    check_selection(selection, num_fewshot=None)


def measure(index: TaskIndex, names: list[str], extras: dict[str, list[str]], trust: bool) -> Tally:
    tally = Tally()
    for name in names:
        try:
            check(index, name, trust)
        except EvalflowError as exc:
            tally.causes[cause_of(exc, extras)].append(name)
        except Exception as exc:
            tally.causes[f"other: crash {type(exc).__name__}: {shape(str(exc))}"].append(name)
        else:
            tally.loaded += 1
    return tally


def registry_calls(library: Path) -> dict[str, int]:
    """How many task-code modules call each of lm-eval's ``register_*`` decorators: evalflow bridges
    ``register_filter`` (per module, :mod:`evalflow.taskspec.format.lmeval_registrations`) and counts the rest."""
    counts = dict.fromkeys(("register_filter", "register_metric", "register_aggregation"), 0)
    for path in library.rglob("*.py"):
        text = path.read_text(errors="replace")
        for name in counts:
            counts[name] += bool(re.search(rf"^\s*@(?:\w+\.)*{name}\(", text, re.M))
    return counts


def report(kind: str, tally: Tally, examples: int) -> list[str]:
    lines = [f"{kind}: {tally.loaded} of {tally.total} load ({100 * tally.loaded / max(tally.total, 1):.1f}%)"]
    for cause, names in sorted(tally.causes.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        shown = ", ".join(sorted(names)[:examples])
        lines.append(f"  {len(names):6d}  {cause}  [e.g. {shown}]")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", type=Path, default=None, help="lm-eval's tasks folder")
    parser.add_argument("--json", type=Path, default=None, help="also write every name's cause here")
    parser.add_argument("--examples", type=int, default=2, help="example names per cause")
    parser.add_argument("--only", nargs="*", default=None, help="check only these names")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # escapes and override warnings are not this figure
    os.environ.setdefault("EVALFLOW_CACHE", tempfile.mkdtemp(prefix="coverage-cache-"))
    library = args.library or library_folder()
    start = time.perf_counter()
    index = TaskIndex.build([args.library or "lm_eval"], builtin=False)
    indexed = time.perf_counter() - start
    extras = extras_of_packages()
    tasks, groups = index.task_names(), index.group_names()
    if args.only is not None:
        tasks, groups = [n for n in tasks if n in args.only], [n for n in groups if n in args.only]
    trust = args.library is not None
    by_kind = {kind: measure(index, names, extras, trust) for kind, names in (("tasks", tasks), ("groups", groups))}
    seconds = time.perf_counter() - start
    print(f"lm-eval library: {library} ({len(index.problems)} YAML file(s) skipped by the index)")
    for kind, tally in by_kind.items():
        print("\n".join(report(kind, tally, args.examples)))
    calls = ", ".join(f"{name} {n}" for name, n in registry_calls(Path(library)).items())
    print(f"task modules registering in lm-eval's own registries: {calls} (filters are bridged)")
    print(f"seconds: {seconds:.1f} (index {indexed:.1f}); CPU {time.process_time():.1f}")
    if args.json:
        args.json.write_text(
            json.dumps({k: {"loaded": t.loaded, "causes": t.causes} for k, t in by_kind.items()}, indent=1)
        )


if __name__ == "__main__":
    main()
