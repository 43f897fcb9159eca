"""The documentation cannot rot: its architecture page names every package and module (and only
those that exist), and the README stays short with every relative link resolving. Its shell blocks:
test_snippets.py; its pages as pages (titles, tables, the task fields): test_pages.py; the built
site: test_site.py.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README_MAX_LINES = 250


def evalflow_packages() -> list[str]:
    """Every folder of evalflow/ that holds code (a package, a namespace package, a kernel's source)."""
    source = ROOT / "evalflow"
    found = []
    for folder in sorted(p for p in source.rglob("*") if p.is_dir() and p.name != "__pycache__"):
        if any(f.suffix in (".py", ".c") for f in folder.iterdir() if f.is_file()):
            found.append(folder.relative_to(ROOT).as_posix() + "/")
    return found


def unnamed_packages(page: str, packages: list[str]) -> list[str]:
    return [p for p in packages if f"`{p}`" not in page]


def test_architecture_page_names_every_package():
    page = (DOCS / "architecture.md").read_text(encoding="utf-8")
    packages = evalflow_packages()
    assert "evalflow/models/hf/" in packages and "evalflow/stages/" in packages
    assert unnamed_packages(page, packages) == [], (
        "docs/architecture.md must name each package as `evalflow/<package>/`"
    )


def test_architecture_check_fails_for_a_package_the_page_does_not_name():
    page = (DOCS / "architecture.md").read_text(encoding="utf-8")
    assert unnamed_packages(page, [*evalflow_packages(), "evalflow/newroom/"]) == ["evalflow/newroom/"]


def evalflow_modules() -> dict[str, list[str]]:
    """Each package of evalflow/ (``evalflow/<package>/``) with its modules' names, ``__init__`` aside;
    ``evalflow/`` is the top level."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "evalflow").rglob("*.py")):
        if path.name != "__init__.py":
            found.setdefault(path.parent.relative_to(ROOT).as_posix() + "/", []).append(path.stem)
    return found


def page_modules(page: str) -> dict[str, set[str]]:
    """What the page's tables name: per package row (`` `evalflow/<package>/` ``), each bare name in
    backticks (a module of that package, by the page's convention); the top level's table, its
    `` `name.py` `` rows."""
    named: dict[str, set[str]] = {"evalflow/": set()}
    for line in page.splitlines():
        if row := re.match(r"\| `(evalflow/[\w/]*/)` \| (.*) \|$", line):
            named.setdefault(row.group(1), set()).update(re.findall(r"`([a-z_][a-z0-9_]*)`", row.group(2)))
        elif top := re.match(r"\| `(\w+)\.py` \|", line):
            named["evalflow/"].add(top.group(1))
    named["evalflow/"].discard("__init__")
    return named


def module_mismatches(page: str, modules: dict[str, list[str]]) -> tuple[list[str], list[str]]:
    """(modules of the tree the page does not name, names the page gives that the tree does not hold)."""
    named = page_modules(page)
    unnamed = [f"{pkg}{m}.py" for pkg, mods in modules.items() for m in mods if m not in named.get(pkg, set())]
    absent = [f"{pkg}{m}.py" for pkg, names in named.items() for m in sorted(names) if m not in modules.get(pkg, [])]
    paths = set(re.findall(r"`(evalflow/[\w/]*(?:\.py|/))`", page))
    absent += sorted(p for p in paths if not (ROOT / p).exists())
    return unnamed, absent


def test_architecture_page_names_every_module_and_only_modules_that_exist():
    page = (DOCS / "architecture.md").read_text(encoding="utf-8")
    unnamed, absent = module_mismatches(page, evalflow_modules())
    assert unnamed == [], "docs/architecture.md must name each module in its package's row (a bare `name`)"
    assert absent == [], "docs/architecture.md names modules or paths that are not in evalflow/"


def test_architecture_check_fails_for_a_module_left_out_and_a_stale_name():
    page = (DOCS / "architecture.md").read_text(encoding="utf-8")
    modules = evalflow_modules()
    assert "pipeline" in modules["evalflow/dag/"] and "errors" in modules["evalflow/"]
    modules["evalflow/dag/"] = [*modules["evalflow/dag/"], "newmodule"]
    stale = page.replace("| `evalflow/dag/` | ", "| `evalflow/dag/` | `gone`, ") + "\nSee `evalflow/dag/gone.py`.\n"
    unnamed, absent = module_mismatches(stale, modules)
    assert unnamed == ["evalflow/dag/newmodule.py"]
    assert absent == ["evalflow/dag/gone.py", "evalflow/dag/gone.py"]


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; its topics belong in docs/"


def relative_links(text: str) -> list[str]:
    """Markdown link targets that are not URLs or in-page anchors, without their #anchor."""
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    return [t.split("#")[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def test_readme_relative_links_resolve():
    links = relative_links((ROOT / "README.md").read_text(encoding="utf-8"))
    assert "docs/running.md" in links
    assert [t for t in links if not (ROOT / t).exists()] == []
