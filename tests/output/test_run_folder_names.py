"""Every file name of a run folder is spelled in one module, ``evalflow/output/run_paths.py``.

The test reads every string literal of the package's code (docstrings aside: they describe, they
do not build paths) and fails on a word that names a run-folder file: evalflow's ``results.json``,
``manifest.json``, ``samples_<task>.jsonl`` and ``.hydra/`` snapshot, lm-eval's
``results_<date>.json`` and ``samples_<task>_<date>.jsonl``. A module that needs one, as a path or
in a message, takes it from ``run_paths``. ``config.yaml`` is not searched for: it is also the
name of ``conf/config.yaml``, the packaged config, which is not a run folder's file.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "evalflow"
NAMES_MODULE = PACKAGE / "output" / "run_paths.py"

WHOLE_NAMES = ("results.json", "manifest.json", "events.jsonl", "overrides.yaml", "hydra.yaml", ".hydra")

# Rooms below `output` cannot import it; these words there name a run folder in prose or as
# Hydra's own marker, not as a path evalflow builds: (module, word) -> why.
BELOW_OUTPUT = {
    ("evalflow/config/messages.py", "samples_<task>.jsonl"): "a message of the config room, below output",
    ("evalflow/taskspec/catalog/index_scan.py", ".hydra"): "any Hydra app's run folder, skipped by the task scan",
}


def names_a_run_file(word: str) -> bool:
    """Whether ``word`` (one whitespace-separated piece of a literal) spells a run-folder file name
    or a piece of one (``"samples_"`` before ``{task}``, ``"results_*.json"``)."""
    word = word.strip("`'\"()[],;:")
    if any(name in word for name in WHOLE_NAMES):
        return True
    base = word.rsplit("/", 1)[-1]
    for prefix, suffix in (("samples_", ".jsonl"), ("results_", ".json")):
        if base.startswith(prefix) and (base.endswith((suffix, "_")) or "*" in base):
            return True
    return False


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the strings that stand alone as statements: docstrings (a module's, a class's, a
    function's, a constant's below it)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }


def literal_words(path: Path) -> Iterator[tuple[int, str]]:
    """(line, word) of every word of every string literal in ``path`` that is not a docstring
    (f-strings: their literal pieces)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            for word in node.value.split():
                yield node.lineno, word


def spelled_outside() -> list[str]:
    """``path:line: word`` for each run-folder file name spelled outside run_paths.py."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == NAMES_MODULE:
            continue
        relative = path.relative_to(ROOT).as_posix()
        for line, word in literal_words(path):
            if names_a_run_file(word) and (relative, word) not in BELOW_OUTPUT:
                found.append(f"{relative}:{line}: {word}")
    return found


def test_run_folder_file_names_are_spelled_only_in_run_paths() -> None:
    found = spelled_outside()
    assert not found, "run-folder file names spelled outside evalflow/output/run_paths.py:\n" + "\n".join(found)


def test_the_names_module_spells_each_name() -> None:
    words = [w for _, w in literal_words(NAMES_MODULE)]
    assert all(any(name in w for w in words) for name in WHOLE_NAMES)
    assert any(w.startswith("samples_") for w in words) and any(w.startswith("results_") for w in words)


def test_the_search_finds_each_way_a_name_is_built() -> None:
    """The words the search must catch, and some it must not (identifiers, prose about results)."""
    caught = ["results.json", "`results.json`", "samples_", "samples_*.jsonl", "samples_<task>.jsonl",
              "results_", "results_*.json", "out/.hydra/config.yaml", "(manifest.json,"]  # fmt: skip
    passed = ["samples_text", "results_table(lines)", "results", "samples", "config.yaml", ".jsonl"]
    assert [w for w in caught if not names_a_run_file(w)] == []
    assert [w for w in passed if names_a_run_file(w)] == []
