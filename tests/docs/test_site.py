"""The built site (``python -m mkdocs build --strict``, as .ci/run builds it): no warning, no raw
Sphinx role in any page (the API reference's docstrings are Google style, rendered as parameter
tables), and a 404 page whose links hold under the sub-path the site is published at."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED_AT = "https://docs.example.org/evalflow/"  # a site published under a sub-path
SPHINX_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc|obj):`?")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVALFLOW_DOCS_URL": PUBLISHED_AT, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return folder


def raw_roles(html: str) -> list[str]:
    """Sphinx cross-reference roles left as text (mkdocstrings renders Markdown, not reST): a role
    shows as ``:class:`` before a code span; one written inside code (a page naming roles) is fine."""
    prose = re.sub(r"<(code|pre)\b.*?</\1>", " ", html, flags=re.DOTALL)
    return SPHINX_ROLE.findall(re.sub(r"<[^>]+>", "", prose))


def test_no_page_shows_a_raw_sphinx_role(site: Path) -> None:
    found = {p.relative_to(site).as_posix(): raw_roles(p.read_text(encoding="utf-8")) for p in site.rglob("*.html")}
    assert {page: roles for page, roles in found.items() if roles} == {}


def test_the_role_check_fails_on_a_raw_role() -> None:
    assert raw_roles("<p>see :class:<code>Registry</code> and :func:`run`</p>") == [":class:", ":func:`"]
    assert raw_roles("<p>a role such as <code>:class:</code> is Sphinx's</p>") == []


def test_the_api_reference_has_parameter_tables(site: Path) -> None:
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    assert api.count('<span class="doc-section-title">Parameters:</span>') >= 10


def test_the_404_page_links_under_the_published_path(site: Path) -> None:
    """The page is served for a missing address at any depth, so its own links (styles, scripts,
    the nav) must be absolute: under the path of ``site_url`` (mkdocs.yml: EVALFLOW_DOCS_URL)."""
    page = (site / "404.html").read_text(encoding="utf-8")
    links = re.findall(r'(?:href|src)="([^"#][^"]*)"', page)
    own = [link for link in links if not link.startswith(("https:", "http:"))]
    assert len(own) > 20 and [link for link in own if not link.startswith("/evalflow/")] == []
