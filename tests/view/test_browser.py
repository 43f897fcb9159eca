"""``evalflow view``'s front end in a real browser (Playwright driving Debian's chromium, headless,
every request that leaves the page's origin or file:// refused and counted), against a stand-in
server that answers exactly the contract's JSON (tests/support/view_pages.py): every field of every
view, including ones real runs of the dummy model never fill (judge, code execution, trackers,
a hostile task name and model name). It walks runs → run → samples (filter, search, open one) →
compare → explain, updates a running run in place until its results replace it without a reload,
and feeds hostile markup through every view, served and as a bundle opened from file://.
tests/view/test_browser_runs.py does the same over real run folders and the real server."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.support.view_pages import (
    EVIL,
    EVIL_TASK,
    IMG,
    LIVE,
    RUN_A,
    RUN_B,
    SCRIPT,
    TASK,
    TEXTAREA,
    Payloads,
    Watched,
    contract_payloads,
    route,
    stand_in_server,
    write_bundle,
)

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install evalflow[dev])")
expect = sync_api.expect


@pytest.fixture
def payloads() -> Payloads:
    return contract_payloads()


@pytest.fixture
def served(payloads: Payloads) -> Iterator[str]:
    with stand_in_server(payloads) as url:
        yield url


def test_walk_runs_run_samples_compare_explain(chromium_browser: Any, served: str, tmp_path: Path) -> None:
    watched = Watched(chromium_browser, served)
    page = watched.open(served + "#/runs")
    runs = page.locator("#runs tbody tr")
    expect(runs).to_have_count(4)
    page.fill("#runs-filter", "sweep")
    expect(runs).to_have_count(2)
    page.check("#runs-group")
    expect(page.locator("#runs tr.group")).to_have_text(
        re.compile(r"sweep sweep · \d{4}-\d\d-\d\d \d\d:\d\d — 2 jobs · varying model.seed = 0 \| 1")
    )
    page.locator("#runs th", has_text="toy_mc").click()
    expect(page.locator("#runs tbody tr:not(.group) td:nth-child(2)")).to_have_text([RUN_A, RUN_B])
    page.locator("#runs th", has_text="toy_mc").click()
    expect(page.locator("#runs tbody tr:not(.group) td:nth-child(2)")).to_have_text([RUN_B, RUN_A])
    page.locator(f"input[aria-label='select {RUN_A}']").check()
    page.locator(f"input[aria-label='select {RUN_B}']").check()
    page.screenshot(path=str(tmp_path / "runs.png"))
    page.click("#compare-link")
    expect(page.locator("#compare-rows tbody tr")).to_have_count(1)
    expect(page.locator("#flips .answer-a").first).to_have_text(f"wrong {SCRIPT}")
    expect(page.locator("#gate")).to_have_text(f"gate: pass {IMG}")
    page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)
    page.locator("#flips a", has_text="B 3").click()
    expect(page.locator("#sample h1")).to_have_text(f"{TASK} — document 3 (none)")
    page.goto(served + route("run", RUN_A))
    expect(page.locator("#results td.value")).to_have_text("0.6000")
    expect(page.locator("#stages tbody tr")).to_have_count(3)
    expect(page.locator("#command")).to_contain_text("python -m evalflow")
    page.screenshot(path=str(tmp_path / "run.png"), full_page=True)
    page.locator(".links a", has_text="samples: toy_mc").click()
    expect(page.locator("#samples tbody tr")).to_have_count(30)
    page.select_option("#q-correct", "false")
    expect(page.locator("#samples tbody tr")).to_have_count(10)
    assert "correct=false" in page.url
    page.select_option("#q-verdict", "no")
    expect(page.locator("#samples tbody tr")).to_have_count(10)
    page.fill("#q-text", "question 9 ")
    page.press("#q-text", "Enter")
    expect(page.locator("#samples tbody tr")).to_have_count(1)
    assert "text=question" in page.url
    page.reload()  # the hash keeps the query
    expect(page.locator("#samples tbody tr")).to_have_count(1)
    expect(page.locator("#q-text")).to_have_value("question 9 ")
    page.goto(served + route("samples", RUN_A, TASK))
    page.screenshot(path=str(tmp_path / "samples.png"), full_page=True)
    page.locator("#samples a", has_text="4").first.click()
    expect(page.locator("#choices tr.won td").first).to_contain_text("A ")
    expect(page.locator("#fewshot")).not_to_have_attribute("open", "")
    page.click("#fewshot summary")
    expect(page.locator("#fewshot pre")).to_be_visible()
    page.screenshot(path=str(tmp_path / "sample.png"), full_page=True)
    page.goto(served + route("explain", RUN_A))
    expect(page.locator("#explain-lines")).to_contain_text("inference: recomputed")
    page.select_option("#against", RUN_B)
    expect(page.locator("#explain .controls .muted")).to_have_text(f"compared with {RUN_B}")
    page.screenshot(path=str(tmp_path / "explain.png"), full_page=True)
    watched.assert_nothing_ran()


def test_live_run_updates_in_place(chromium_browser: Any, served: str, payloads: Payloads, tmp_path: Path) -> None:
    watched = Watched(chromium_browser, served)
    page = watched.open(served + route("run", LIVE))
    live_row = page.locator(f"#live-tasks tr[data-task='{TASK}']")
    expect(live_row.locator(".done")).to_have_text("10 / 100")
    page.evaluate("window.__same_page = true")
    payloads.live = {
        **payloads.live,
        "tasks": {TASK: {"done": 60, "total": 100, "rate": 5.0, "eta_s": 8.0}},
        "events": 9,
    }
    expect(live_row.locator(".done")).to_have_text("60 / 100")
    expect(live_row.locator(".rate")).to_have_text("5")
    expect(live_row.locator(".eta")).to_have_text("8s")
    page.screenshot(path=str(tmp_path / "live.png"))
    finished = {**payloads.by_key[f"/api/run?id={quote(LIVE, safe='')}"], "status": "complete"}
    finished["results"] = payloads.by_key[f"/api/run?id={quote(RUN_A, safe='')}"]["results"]
    payloads.by_key[f"/api/run?id={quote(LIVE, safe='')}"] = finished
    payloads.live = {**payloads.live, "status": "complete"}
    expect(page.locator("#results td.value")).to_have_text("0.6000")
    expect(page.locator("#live")).to_have_count(0)
    expect(page.locator("#run h1 .badge")).to_have_text("complete")
    assert page.evaluate("window.__same_page") is True  # no reload
    watched.assert_nothing_ran()


def hostile_routes() -> list[str]:
    """Every view, on the hostile run (and the pairs it takes part in)."""
    return [
        route("run", EVIL),
        route("samples", EVIL, EVIL_TASK),
        route("samples", EVIL, EVIL_TASK) + "?text=script",
        route("sample", EVIL, EVIL_TASK, "1") + "?filter=none",
        route("sample", EVIL, EVIL_TASK, "2") + "?filter=none",
        route("compare", RUN_A, EVIL),
        route("explain", EVIL),
        "#/wrong/" + ",".join(quote(i, safe="") for i in (RUN_A, EVIL)),
        "#/runs",
    ]


def visit_hostile(watched: Watched, base: str) -> None:
    page = watched.open(base + "#/runs")
    for hash_route in hostile_routes():
        page.evaluate("document.getElementById('main').removeAttribute('data-view')")
        page.goto(base + hash_route)
        expect(page.locator("main[data-view]")).to_have_count(1)
        expect(page.locator("main .error")).to_have_count(0)
        watched.assert_nothing_ran()
    page.goto(base + route("run", EVIL))
    expect(page.locator("#run h1")).to_contain_text(EVIL)
    expect(page.locator("#config")).to_contain_text(SCRIPT + IMG + TEXTAREA)
    expect(page.locator("#run li span", has_text="wandb")).to_contain_text("javascript:")
    page.goto(base + route("sample", EVIL, EVIL_TASK, "2") + "?filter=none")
    expect(page.locator("#target")).to_have_text(TEXTAREA)
    expect(page.locator("pre.generation")).to_have_text("javascript:window.__pwned='link'")
    page.goto(base + "#/wrong/" + ",".join(quote(i, safe="") for i in (RUN_A, EVIL)))
    expect(page.locator("#across .reasoning h3").first).to_have_text(f"{RUN_A} · {SCRIPT}")
    expect(page.locator("#across td.text").first).to_have_text(SCRIPT)
    page.goto(base + route("compare", RUN_A, EVIL))
    expect(page.locator("#flips .answer-b").first).to_have_text(f"right {IMG}")
    watched.assert_nothing_ran()


def test_hostile_output_runs_nothing_served(chromium_browser: Any, served: str) -> None:
    visit_hostile(Watched(chromium_browser, served), served)


def test_hostile_output_runs_nothing_in_a_bundle(chromium_browser: Any, payloads: Payloads, tmp_path: Path) -> None:
    index = write_bundle(payloads, tmp_path / "bundle")
    watched = Watched(chromium_browser, "file://")
    visit_hostile(watched, index.as_uri())
    page = watched.page
    page.goto(index.as_uri() + route("samples", RUN_A, TASK) + "?correct=false&offset=5")
    expect(page.locator("#samples-count")).to_have_text("6–10 of 10")
    expect(page.locator("#samples tbody tr").first).to_have_attribute("data-doc", "15")
    page.fill("#q-text", "answer 2")
    page.press("#q-text", "Enter")
    expect(page.locator("#samples tbody tr")).to_have_count(3)  # the wrong ones holding "answer 2": 21, 24, 27
