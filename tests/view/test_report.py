"""``evalflow report``: the viewer as one self-contained HTML file, opened from ``file://`` in a real
browser (Debian's chromium) with every request but the page itself refused: two real runs of the
dummy model open on their comparison (paired rows, flipped documents), their results side by
side, a run whose task texts are hostile markup walked through every view with nothing executed,
and ``docs=N`` leaving documents out with a note where it does."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path
from typing import Any

import pytest

from evalflow.commands.report import main
from evalflow.errors import ConfigError
from evalflow.view.single_file import write_single_file
from tests.support.runs import Runner
from tests.support.toy_tasks import write_toy_library
from tests.support.view_pages import Watched
from tests.support.view_server_runs import make_view_runs

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install evalflow[dev])")
expect = sync_api.expect


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Pages of: the pair a, b (every document); the pair with docs=3; the hostile run alone."""
    tmp = tmp_path_factory.mktemp("report")
    root = tmp / "outputs"
    runs = make_view_runs(Runner(write_toy_library(tmp), tmp / "cache", root), root)
    pages = {"pair": tmp / "pair.html", "few": tmp / "few.html", "hostile": tmp / "hostile.html"}
    assert main([str(runs["a"]), str(runs["b"]), f"out={pages['pair']}"]) == 0
    assert main([str(runs["a"]), str(runs["b"]), f"out={pages['few']}", "docs=3"]) == 0
    assert main([str(runs["hostile"]), f"out={pages['hostile']}"]) == 0
    return {"runs": runs, "pages": pages, "tmp": tmp}


def opened(browser: Any, page_file: Path, hash_route: str = "") -> Watched:
    """The page from file://, any request for another URL recorded and refused."""
    url = page_file.as_uri()
    watched = Watched(browser, url)
    watched.open(url + hash_route)
    return watched


def test_one_file_whose_policy_allows_only_its_own_blocks(reports: dict[str, Any]) -> None:
    html = reports["pages"]["pair"].read_text(encoding="utf-8")
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert policy and "unsafe-inline" not in policy.group(1) and "default-src 'none'" in policy.group(1)
    inline = re.findall(r"<(script|style)>(.*?)</\1>", html, flags=re.S)
    assert [tag for tag, _ in inline] == ["style", "script"]
    for _, body in inline:
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy.group(1)
    assert not re.search(r"""(src|href)=["']?(https?:|//|static/|data/)""", html)  # nothing else to load


def test_pair_opens_on_compare_offline(chromium_browser: Any, reports: dict[str, Any], shots: Path) -> None:
    watched = opened(chromium_browser, reports["pages"]["pair"])
    page = watched.page
    expect(page.locator("main[data-view='compare']")).to_be_visible()
    expect(page.locator("#compare-rows tbody tr").first).to_be_visible()
    expect(page.locator("#flips tbody tr").first).to_be_visible()
    expect(page.locator("#mode")).to_have_text("report (one file)")
    page.click("#results-link")
    expect(page.locator("main[data-view='results'] table.results").first).to_be_visible()
    header = page.locator("table.results thead th").all_inner_texts()
    assert any(h.startswith("A: ") for h in header) and any(h.startswith("B: ") for h in header)
    assert "B − A" in header and "p" in header
    page.screenshot(path=str(shots / "report.png"))
    page.click("text=compare: the documents that flipped")
    page.locator("#flips tbody tr a").first.click()
    expect(page.locator("#sample #prompt")).to_be_visible()
    page.goto(reports["pages"]["pair"].as_uri() + "#/runs")
    expect(page.locator("#runs tbody tr")).to_have_count(2)
    watched.assert_nothing_ran()


def test_hostile_text_executes_nothing(chromium_browser: Any, reports: dict[str, Any]) -> None:
    watched = opened(chromium_browser, reports["pages"]["hostile"])
    page = watched.page
    expect(page.locator("main[data-view='run']")).to_be_visible()
    page.locator("a[href^='#/samples/']").first.click()
    expect(page.locator("#samples tbody tr").first).to_be_visible()
    for doc in range(4):
        page.locator(f"#samples tbody tr[data-doc='{doc}'] a").first.click()
        expect(page.locator("#sample #prompt")).to_be_visible()
        if doc == 0:
            expect(page.locator("#sample #prompt")).to_contain_text("</script><script>")  # shown as text
        page.go_back()
        expect(page.locator("#samples tbody tr").first).to_be_visible()
    page.fill("#q-text", "</textarea>")
    page.click("#samples-form button[type=submit]")
    expect(page.locator("#samples-count")).to_contain_text("of")
    for hash_route in ("#/runs", "#/wrong/.", "#/results/.", "#/explain/."):
        page.goto(reports["pages"]["hostile"].as_uri() + hash_route)
        expect(page.locator(f"main[data-view='{hash_route[2:].split('/')[0]}']")).to_be_visible()
    watched.assert_nothing_ran()


def test_docs_n_leaves_documents_out_with_a_note(chromium_browser: Any, reports: dict[str, Any]) -> None:
    few, full = reports["pages"]["few"], reports["pages"]["pair"]
    assert few.stat().st_size < full.stat().st_size
    watched = opened(chromium_browser, few)
    page = watched.page
    expect(page.locator("#flips tbody tr").first).to_be_visible()
    run_id = page.locator("#compare li a").first.inner_text()
    page.goto(few.as_uri() + f"#/samples/{run_id}/toy_mc")
    expect(page.locator("#samples tbody tr")).to_have_count(20)  # every row listed
    expect(page.locator("p.note")).to_contain_text("first 3 documents")
    page.locator("#samples tbody tr[data-doc='2'] a").click()
    expect(page.locator("#sample #prompt")).to_be_visible()
    page.go_back()
    page.locator("#samples tbody tr[data-doc='7'] a").click()
    expect(page.locator("#left-out")).to_contain_text("does not hold this document")
    watched.assert_nothing_ran()


def test_refuses_no_runs_and_a_page_inside_a_run(reports: dict[str, Any]) -> None:
    empty = reports["tmp"] / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match="no run found"):
        write_single_file([empty], reports["tmp"] / "x.html")
    inside = reports["runs"]["a"] / "report.html"
    with pytest.raises(ConfigError, match="inside the run folder"):
        write_single_file([reports["runs"]["a"]], inside)
    assert not inside.exists()


def test_opens_on_one_run_two_runs_compared_or_more_side_by_side(reports: dict[str, Any]) -> None:
    from evalflow.view.payloads import Catalog
    from evalflow.view.single_file import ordered_ids, start_route

    runs = reports["runs"]
    catalog = Catalog([runs["b"], runs["a"], runs["hostile"]])  # the command line's order, not the newest first
    ids = ordered_ids(catalog)
    assert [catalog.entries[i].folder for i in ids] == [runs["b"], runs["a"], runs["hostile"]]
    assert start_route(ids) == "#/results/0%3A.,1%3A.,2%3A."
    assert start_route(ids[:2]) == "#/compare/0%3A./1%3A." and start_route(["sweep/0"]) == "#/run/sweep%2F0"
