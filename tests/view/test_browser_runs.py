"""``evalflow view`` end to end in a real browser: the real server (evalflow.view.server) over real run
folders of the dummy model (two runs of the toy tasks under two salts, so documents flip; a run
whose documents and choices are hostile markup; an lm-eval output folder), its static bundle opened
from file://, and a run of the dummy model held mid-way (tests/support/live_runs.py) that the page
follows live until its results appear, with no reload. The screenshots of docs/view.md come from
here (``EVALFLOW_VIEW_SCREENSHOTS=1``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import pytest

from tests.support.live_runs import live_run
from tests.support.runs import Runner
from tests.support.toy_tasks import write_toy_library
from tests.support.view_pages import Watched, route, serving
from tests.support.view_server_runs import HOSTILE, make_view_runs

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install evalflow[dev])")
pytest.importorskip("aiohttp", reason="aiohttp is not installed (pip install evalflow[view])")
expect = sync_api.expect

from evalflow.view.bundle import write_bundle  # noqa: E402  (needs aiohttp-free imports only, but after the skips)
from evalflow.view.server import make_app  # noqa: E402


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The runs under one root, and each one's id as the server names it."""
    tmp = tmp_path_factory.mktemp("view_browser")
    root = tmp / "outputs"
    runs = make_view_runs(Runner(write_toy_library(tmp), tmp / "cache", root), root)
    return {"root": root, "tmp": tmp, "folders": runs}


@pytest.fixture(scope="module")
def served(site: dict[str, Any]) -> Iterator[str]:
    with serving(make_app([site["root"]])) as url:
        yield url


def ids_of(url: str, folders: dict[str, Path]) -> dict[str, str]:
    """name -> run id, from the server's runs list."""
    with urlopen(url + "api/runs") as response:
        runs = json.load(response)["runs"]
    by_path = {Path(r["path"]).resolve(): r["id"] for r in runs}
    out = {}
    for name, folder in folders.items():
        found = [i for p, i in by_path.items() if p == folder.resolve() or folder.resolve() in p.parents]
        out[name] = found[0]
    return out


def test_walk_real_runs(chromium_browser: Any, served: str, site: dict[str, Any], shots: Path) -> None:
    ids = ids_of(served, site["folders"])
    watched = Watched(chromium_browser, served)
    page = watched.open(served + "#/runs")
    expect(page.locator("#runs tbody tr")).to_have_count(len(site["folders"]))
    expect(page.locator("#runs tbody .badge").first).to_have_text("complete")
    page.locator(f"input[aria-label='select {ids['a']}']").check()
    page.locator(f"input[aria-label='select {ids['b']}']").check()
    page.screenshot(path=str(shots / "runs.png"))
    page.click("#compare-link")
    expect(page.locator("#compare-rows tbody tr").first).to_be_visible()
    flips = page.locator("#flips tbody tr")
    expect(flips.first).to_be_visible()
    page.screenshot(path=str(shots / "compare.png"), full_page=True)
    flips.first.locator("a", has_text="B").click()
    expect(page.locator("#sample #target")).to_be_visible()
    page.goto(served + route("run", ids["a"]))
    expect(page.locator("#results tbody tr[data-task='toy_mc'] td.value")).to_have_text(re.compile(r"^\d\.\d{4}$"))
    expect(page.locator("#stages tbody tr").first).to_be_visible()
    page.screenshot(path=str(shots / "run.png"), full_page=True)
    page.locator(".links a[data-task='toy_mc']").click()
    rows = page.locator("#samples tbody tr")
    expect(rows).to_have_count(20)
    page.select_option("#q-correct", "false")
    expect(page.locator("#samples-count")).not_to_have_text("1–20 of 20")
    wrong = rows.count()
    assert 0 < wrong < 20
    page.screenshot(path=str(shots / "samples.png"), full_page=True)
    page.goto(served + route("samples", ids["a"], "toy_mc"))
    page.fill("#q-text", "What is 3 plus")
    page.press("#q-text", "Enter")
    expect(rows).to_have_count(1)
    rows.first.locator("a").click()
    expect(page.locator("#choices tr.won")).to_have_count(1)
    expect(page.locator("#prompt")).to_contain_text("What is 3 plus")
    page.screenshot(path=str(shots / "sample.png"), full_page=True)
    page.goto(served + route("run", ids["peer"]))  # lm-eval's own output folder
    expect(page.locator("#results tbody tr[data-task='arc_easy'] td.value").first).to_have_text(
        re.compile(r"^\d\.\d{4}$")
    )
    page.goto(served + route("explain", ids["b"]))
    page.select_option("#against", ids["a"])
    expect(page.locator("#explain-lines")).not_to_be_empty()
    expect(page.locator("#explain-stages tbody tr").first).to_be_visible()
    page.screenshot(path=str(shots / "explain.png"), full_page=True)
    watched.assert_nothing_ran()


def hostile_walk(watched: Watched, base: str, ids: dict[str, str]) -> None:
    """Every view of the hostile run (across runs: with run a, the pair a bundle holds); nothing
    runs, and the markup shows as text."""
    run_id = ids["hostile"]
    page = watched.open(base + route("explain", run_id))
    for hash_route in [
        route("run", run_id),
        route("samples", run_id, "toy_hostile"),
        route("samples", run_id, "toy_hostile") + "?text=script",
        *(route("sample", run_id, "toy_hostile", str(d)) + "?filter=none" for d in range(5)),
        "#/wrong/" + ",".join(route(i)[2:] for i in sorted([ids["a"], run_id])),
        "#/runs",
    ]:
        page.evaluate("document.getElementById('main').removeAttribute('data-view')")
        page.goto(base + hash_route)
        expect(page.locator("main[data-view]")).to_have_count(1)
        expect(page.locator("main .error")).to_have_count(0)
        watched.assert_nothing_ran()
    page.goto(base + route("sample", run_id, "toy_hostile", "0") + "?filter=none")
    expect(page.locator("#prompt")).to_contain_text(HOSTILE[0])
    expect(page.locator("#choices")).to_contain_text(HOSTILE[1])
    watched.assert_nothing_ran()


def test_hostile_run_runs_nothing_served(chromium_browser: Any, served: str, site: dict[str, Any]) -> None:
    hostile_walk(Watched(chromium_browser, served), served, ids_of(served, site["folders"]))


def test_hostile_run_runs_nothing_in_the_bundle(chromium_browser: Any, served: str, site: dict[str, Any]) -> None:
    out = site["tmp"] / "bundle"
    write_bundle([site["root"]], out)
    hostile_walk(Watched(chromium_browser, "file://"), (out / "index.html").as_uri(), ids_of(served, site["folders"]))


def test_live_run_followed_until_its_results(chromium_browser: Any, tmp_path: Path, shots: Path) -> None:
    with live_run(tmp_path) as run, serving(make_app([tmp_path])) as url:
        run.wait_progress()
        watched = Watched(chromium_browser, url)
        page = watched.open(url + "#/runs")
        expect(page.locator("#runs .badge")).to_have_text("running")
        page.locator("#runs tbody a").first.click()
        live = page.locator("#live-tasks tbody tr")
        expect(live.first.locator(".done")).to_have_text(
            "4 / 40"
        )  # 10 documents, 4 choices each; one chunk of 4 answered
        page.evaluate("window.__same_page = true")
        page.screenshot(path=str(shots / "live.png"))
        run.release()
        run.wait_done()
        expect(page.locator("#run h1 .badge")).to_have_text("complete")
        expect(page.locator("#results tbody tr[data-task='toy_mc']")).to_have_count(1)
        expect(page.locator("#live")).to_have_count(0)
        assert page.evaluate("window.__same_page") is True
        watched.assert_nothing_ran()


def test_live_run_that_fails_turns_failed_in_place(chromium_browser: Any, tmp_path: Path) -> None:
    with live_run(tmp_path) as run, serving(make_app([tmp_path])) as url:
        run.wait_progress()
        watched = Watched(chromium_browser, url)
        page = watched.open(url + "#/runs")
        page.locator("#runs tbody a").first.click()
        expect(page.locator("#live-tasks tbody tr")).to_have_count(1)
        page.evaluate("window.__same_page = true")
        run.release(fail=True)
        with pytest.raises(Exception, match="told to fail"):
            run.wait_done()
        expect(page.locator("#run h1 .badge")).to_have_text("failed")
        expect(page.locator("#live")).to_have_count(0)
        assert page.evaluate("window.__same_page") is True
        watched.assert_nothing_ran()
