"""The pages as pages: each title is its nav label, tables end before the next paragraph, the task
guide names every field the task format declares, and the FAQ quotes messages evalflow prints."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import yaml

from evalflow.models.protocol import FEATURES
from evalflow.scoring.metric_functions import _RESERVED as METRIC_ENTRY_KEYS
from evalflow.taskspec.catalog.groups import AGG_FIELDS, GROUP_FIELDS
from evalflow.taskspec.format.loader import DROPPED_TASK_KEYS, HEADER_KEYS
from evalflow.taskspec.format.spec import TASK_FIELDS
from evalflow.taskspec.prompts.samplers import FEWSHOT_CONFIG_KEYS, SAMPLERS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


class _NavLoader(yaml.SafeLoader):
    """mkdocs.yml as data; its ``!ENV`` values are not needed here."""


_NavLoader.add_constructor("!ENV", lambda loader, node: None)


def nav_pages() -> list[tuple[str, str]]:
    """(label, file) of every page in mkdocs.yml's nav, sections flattened."""
    nav = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_NavLoader)["nav"]
    found: list[tuple[str, str]] = []

    def walk(items: list) -> None:
        for item in items:
            ((label, target),) = item.items()
            if isinstance(target, list):
                walk(target)
            else:
                found.append((label, target))

    walk(nav)
    return found


def title(page: Path) -> str | None:
    """A page's H1 (after its front matter; through a ``--8<--`` include of the whole page)."""
    text = page.read_text(encoding="utf-8")
    include = re.match(r'--8<-- "([^"]+)"', text)
    if include:
        text = (ROOT / include.group(1)).read_text(encoding="utf-8")
    text = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.DOTALL)
    heading = re.search(r"^# (.+)$", text, flags=re.MULTILINE)
    return heading.group(1).strip() if heading else None


def test_each_page_title_is_its_nav_label():
    mismatched = [(label, page, title(DOCS / page)) for label, page in nav_pages() if title(DOCS / page) != label]
    assert mismatched == []


def table_problems(text: str, page: str) -> list[str]:
    """A row that does not end with ``|`` (text pasted after it) and a table with no blank line
    after it: Markdown reads the next paragraph as more rows."""
    problems, lines, fence = [], text.splitlines(), False
    for i, line in enumerate(lines):
        fence = fence != line.startswith("```")
        if fence or line.startswith("```") or not line.startswith("|"):
            continue
        if not line.rstrip().endswith("|"):
            problems.append(f"{page}:{i + 1}: a table row must end with |")
        after = lines[i + 1] if i + 1 < len(lines) else ""
        if after.strip() and not after.startswith("|"):
            problems.append(f"{page}:{i + 2}: a blank line must follow a table")
    return problems


def test_tables_end_before_the_next_paragraph():
    pages = [ROOT / "README.md", ROOT / "benchmarks" / "RESULTS.md", *sorted(DOCS.glob("*.md"))]
    assert [p for page in pages for p in table_problems(page.read_text(encoding="utf-8"), page.name)] == []


def test_a_swallowed_paragraph_is_reported():
    text = "| a | b |\n|---|---|\n| 1 | 2 | More\ntext after.\n"
    assert table_problems(text, "x.md") == [
        "x.md:3: a table row must end with |",
        "x.md:4: a blank line must follow a table",
    ]


BUILT_INS = """import json, evalflow.scoring
from evalflow.models.registry import MODELS
from evalflow.scoring.registry import AGGREGATIONS, FILTERS, METRICS, REDUCTIONS
from evalflow.judges.parsers import JUDGE_PARSERS
print(json.dumps({"components": [*METRICS.names(), *AGGREGATIONS.names(), *FILTERS.names(), *REDUCTIONS.names()],
                  "models": list(MODELS.names()), "judge_parsers": list(JUDGE_PARSERS.names())}))"""


@cache
def built_in_names() -> dict[str, list[str]]:
    """The registries' names in a fresh interpreter: what evalflow itself registers, not what other
    tests in this worker registered (the registries are process-wide)."""
    done = subprocess.run(
        [sys.executable, "-c", BUILT_INS],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def declared_task_names() -> list[str]:
    """Every key the task format declares (a task, a group, their entries) and every built-in
    component name a task YAML may give: what docs/writing-tasks.md must name."""
    keys = (
        *TASK_FIELDS,
        *HEADER_KEYS,
        *DROPPED_TASK_KEYS,
        *GROUP_FIELDS,
        *AGG_FIELDS,
        *FEWSHOT_CONFIG_KEYS,
        *METRIC_ENTRY_KEYS,
        *SAMPLERS,
    )
    return sorted(set(keys) | set(built_in_names()["components"]))


def unnamed(page: str, names: list[str]) -> list[str]:
    return [n for n in names if f"`{n}`" not in page]


def test_the_task_guide_names_every_declared_field_and_component():
    page = (DOCS / "writing-tasks.md").read_text(encoding="utf-8")
    names = declared_task_names()
    assert "doc_to_text" in names and "fewshot_indices" in names and "exact_match" in names
    assert unnamed(page, names) == [], "docs/writing-tasks.md must name each as `name`"


def test_the_task_guide_check_fails_for_a_field_it_does_not_name():
    page = (DOCS / "writing-tasks.md").read_text(encoding="utf-8")
    assert unnamed(page, [*declared_task_names(), "a_new_field"]) == ["a_new_field"]


def test_the_model_page_names_every_preset_model_type_and_contract_feature():
    page = (DOCS / "model-backends.md").read_text(encoding="utf-8")
    presets = [p.stem for p in (ROOT / "conf" / "model").glob("*.yaml")]
    assert "smollm2" in presets and "identity" in FEATURES
    assert unnamed(page, [*presets, *built_in_names()["models"], *FEATURES]) == []


def test_the_judges_page_names_every_built_in_judge_parser():
    page = (DOCS / "judges.md").read_text(encoding="utf-8")
    parsers = built_in_names()["judge_parsers"]
    assert "regex" in parsers
    assert unnamed(page, parsers) == [], "docs/judges.md's parser table must name each as `name`"


def string_pieces(source: str) -> set[str]:
    """The literal text of a module's strings: each constant, and each constant part of an f-string
    (its fields are the run's values), at least 8 characters long."""
    pieces = set()
    for node in ast.walk(ast.parse(source)):
        parts = node.values if isinstance(node, ast.JoinedStr) else [node]
        pieces |= {p.value for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str)}
    return {p for p in pieces if len(p.strip()) >= 8}


def covered(message: str, pieces: set[str]) -> float:
    """The share of ``message``'s characters that lie in some literal piece of the code."""
    hit = [False] * len(message)
    for piece in pieces:
        at = message.find(piece)
        while at != -1:
            hit[at : at + len(piece)] = [True] * len(piece)
            at = message.find(piece, at + 1)
    return sum(hit) / max(1, len(message))


def quoted_messages(page: str) -> list[str]:
    """The ```text blocks of the FAQ that quote what evalflow printed (``evalflow: ...``)."""
    return [
        m.strip()
        for m in re.findall(r"^```text\n(.*?)^```", page, flags=re.DOTALL | re.MULTILINE)
        if m.startswith("evalflow: ")
    ]


def unsourced(messages: list[str], pieces: set[str]) -> list[str]:
    """Messages of which less than a third is the code's literal text: quotes the code no longer
    prints. (The rest of a real message is the run's values: names, paths, a library's exception.)"""
    return [m for m in messages if covered(m.removeprefix("evalflow: error: "), pieces) < 1 / 3]


def test_the_faq_quotes_messages_evalflow_prints():
    pieces = set().union(*(string_pieces(f.read_text(encoding="utf-8")) for f in (ROOT / "evalflow").rglob("*.py")))
    messages = quoted_messages((DOCS / "faq.md").read_text(encoding="utf-8"))
    assert len(messages) >= 10
    assert unsourced(messages, pieces) == []
    invented = "evalflow: error: the flux capacitor of task 'x' is not charged; charge it with more gigawatts please"
    assert unsourced([invented], pieces) == [invented]
