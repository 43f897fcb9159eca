"""The documentation cannot rot: its architecture page names every package, and the README stays
short with every relative link resolving. Its shell blocks: test_snippets.py; its pages as pages
(titles, tables, the task fields): test_pages.py; the built site: test_site.py.
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
