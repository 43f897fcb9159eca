"""The documentation cannot rot: its marked snippets run, its architecture page names every
package, and the README stays short with every relative link resolving.

A runnable snippet is a fenced ``bash`` block right after a ``<!-- runnable -->`` line, in
README.md or docs/*.md (docs/contributing.md says what may be marked). Each of its
``python -m evalflow`` lines runs in a temporary folder, its run folder and cache pointed there.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MARKER = "<!-- runnable -->"
MAX_SNIPPETS = 6  # keeps the test well under a minute
README_MAX_LINES = 250
SUBCOMMANDS_WITHOUT_MODEL = ("show", "validate")
SHIPPED_DATA_TASKS = ("arith_mc",)  # built-in tasks whose data ships with evalflow (no hub, no ../shared)


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def runnable_blocks(text: str) -> list[list[str]]:
    """The command lines of each fenced block that follows a runnable marker (comments dropped)."""
    blocks, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        assert i + 1 < len(lines) and lines[i + 1].startswith("```bash"), f"{MARKER} must sit right above a ```bash fence"
        end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
        body = [ln.split(" #")[0].strip() for ln in lines[i + 2 : end]]
        blocks.append([ln for ln in body if ln and not ln.startswith("#")])
    return blocks


def snippets() -> list[tuple[str, str]]:
    found = []
    for path in doc_files():
        for block in runnable_blocks(path.read_text(encoding="utf-8")):
            found += [(path.relative_to(ROOT).as_posix(), line) for line in block]
    return found


def check_snippet(line: str) -> list[str]:
    """The words after ``python -m evalflow``, refused unless the line needs nothing beyond the install."""
    words = shlex.split(line)
    assert words[:3] == ["python", "-m", "evalflow"], f"a runnable line must be a python -m evalflow command: {line}"
    args = words[3:]
    tasks = [a.split("=", 1)[1] for a in args if a.startswith("task=")]
    assert tasks and all(t in SHIPPED_DATA_TASKS for t in tasks), f"runnable lines use a task whose data ships: {line}"
    if args[0] not in SUBCOMMANDS_WITHOUT_MODEL:
        assert "model=dummy" in args, f"a runnable run uses model=dummy: {line}"
        assert any(a.startswith("limit=") and float(a.split("=", 1)[1]) <= 20 for a in args), f"a small limit: {line}"
    return args


SNIPPETS = snippets()


def test_snippets_are_few_and_present():
    assert 1 <= len(SNIPPETS) <= MAX_SNIPPETS, [s for _, s in SNIPPETS]


@pytest.mark.parametrize(("where", "line"), SNIPPETS, ids=[f"{w}:{i}" for i, (w, _) in enumerate(SNIPPETS)])
def test_runnable_snippet_exits_0(where, line, tmp_path):
    args = check_snippet(line)
    settings = [f"cache_dir={tmp_path / 'cache'}"]
    if args[0] not in SUBCOMMANDS_WITHOUT_MODEL:
        folder = "hydra.sweep.dir" if "-m" in args or "--multirun" in args else "hydra.run.dir"
        settings.append(f"{folder}={tmp_path / 'run'}")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "evalflow", *args, *settings], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{where}: {line}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


def test_runnable_marker_refuses_a_command_that_needs_more():
    with pytest.raises(AssertionError, match="model=dummy"):
        check_snippet("python -m evalflow model=smollm2 task=arith_mc limit=5")
    with pytest.raises(AssertionError, match="task whose data ships"):
        check_snippet("python -m evalflow model=dummy task=arc_easy limit=5 data_map=shared")


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
    assert unnamed_packages(page, packages) == [], "docs/architecture.md must name each package as `evalflow/<package>/`"


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
