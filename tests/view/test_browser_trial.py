"""What a new user's first trial of ``evalflow view`` met, in a real browser over real run folders
(two dummy runs that flip, a hostile one, an lm-eval folder), served and as a bundle: no stray
"null" beside the compare hint, one short model name with the full one in its title, an lm-eval run
with a short label and no explain or manifest, samples controls only for filters that can match, no
gate verdict unless max_drop is set, explain naming the run it compared with and offering only the
choices it can show, the same pipeline-filter dropdown in a bundle, and an empty folder said so."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.runs import Runner
from tests.support.toy_tasks import write_toy_library
from tests.support.view_pages import Watched, route, serving
from tests.support.view_server_runs import make_view_runs

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install evalflow[dev])")
pytest.importorskip("aiohttp", reason="aiohttp is not installed (pip install evalflow[view])")
expect = sync_api.expect

from evalflow.view.bundle import write_bundle  # noqa: E402
from evalflow.view.payloads import Catalog, summary  # noqa: E402
from evalflow.view.server import make_app  # noqa: E402


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("view_trial")
    root = tmp / "outputs"
    folders = make_view_runs(Runner(write_toy_library(tmp), tmp / "cache", root), root)
    catalog = Catalog([root])
    by_folder = {e.folder.resolve(): e for e in catalog.entries.values() if e.layout == "evalflow"}
    summaries = {name: summary(catalog, by_folder[f.resolve()]) for name, f in folders.items() if name != "peer"}
    summaries["peer"] = summary(catalog, next(e for e in catalog.entries.values() if e.layout == "lm-eval"))
    out = tmp / "bundle"
    write_bundle([root], out)
    return {"root": root, "tmp": tmp, "runs": summaries, "bundle": (out / "index.html").as_uri()}


@pytest.fixture(scope="module")
def served(site: dict[str, Any]) -> Iterator[str]:
    with serving(make_app([site["root"]])) as url:
        yield url


def test_runs_list_labels_and_actions(chromium_browser: Any, served: str, site: dict[str, Any]) -> None:
    runs = site["runs"]
    watched = Watched(chromium_browser, served)
    page = watched.open(served + "#/runs")
    actions = page.locator("#runs").locator("xpath=preceding::div[contains(@class,'controls')][1]")
    expect(actions).to_contain_text("select two runs to compare")
    expect(actions).not_to_contain_text("null")
    page.locator(f"input[aria-label='select {runs['a']['id']}']").check()
    expect(actions).to_contain_text("Across selected runs")
    expect(actions).not_to_contain_text("null")
    peer = runs["peer"]
    link = page.locator("#runs").locator(f"a[title='{peer['id']}']")
    expect(link).to_have_text(re.compile(r"^[^/]+ · \d{4}-\d\d-\d\d \d\d:\d\d$"))  # the model folder and date
    row = page.locator("#runs tbody tr", has=page.locator(f"a[title='{peer['id']}']"))
    model = row.locator(f"td[title='{peer['model']}']")
    expect(model).to_have_text(peer["model_label"])
    assert len(peer["model_label"]) < len(peer["model"])
    watched.assert_nothing_ran()


def test_lm_eval_run_has_no_explain_or_manifest(chromium_browser: Any, served: str, site: dict[str, Any]) -> None:
    runs = site["runs"]
    page = Watched(chromium_browser, served).open(served + route("run", runs["peer"]["id"]))
    expect(page.locator("#no-manifest")).to_contain_text("lm-eval's output folders have no manifest")
    expect(page.locator("#run .links a", has_text="explain")).to_have_count(0)
    page.goto(served + route("explain", runs["b"]["id"]))
    options = page.locator("#against option")
    expect(options).to_have_count(3)  # the closest earlier run, a and hostile: never the lm-eval run
    assert runs["peer"]["id"] not in options.evaluate_all("os => os.map(o => o.value)")


def test_samples_show_only_filters_that_can_match(chromium_browser: Any, served: str, site: dict[str, Any]) -> None:
    run_id = site["runs"]["a"]["id"]
    for base, origin in ((served, served), (site["bundle"], "file://")):
        page = Watched(chromium_browser, origin).open(base + route("samples", run_id, "toy_mc"))
        expect(page.locator("#samples tbody tr").first).to_be_visible()
        expect(page.locator("#q-verdict")).to_have_count(0)  # no judge
        expect(page.locator("#q-has_image")).to_have_count(0)  # no images
        expect(page.locator("#samples thead th", has_text="verdict")).to_have_count(0)
        expect(page.locator("select#q-filter")).to_have_count(1)  # the same dropdown, served and bundled


def test_compare_gates_only_when_asked(chromium_browser: Any, served: str, site: dict[str, Any]) -> None:
    a, b = site["runs"]["a"]["id"], site["runs"]["b"]["id"]
    page = Watched(chromium_browser, served).open(served + route("compare", a, b))
    expect(page.locator("#compare-rows tbody tr").first).to_be_visible()
    expect(page.locator("#compare-rows th", has_text="verdict")).to_have_count(0)
    expect(page.locator("#compare")).not_to_contain_text("max_drop=0")
    page.fill("#gate-max_drop", "0.05")
    page.click("#gate-form button")
    expect(page.locator("#gate")).to_contain_text("gate: ")
    expect(page.locator("#compare-rows th", has_text="verdict")).to_have_count(1)
    assert "max_drop=0.05" in page.url
    page.reload()  # the hash keeps the gate
    expect(page.locator("#gate-max_drop")).to_have_value("0.05")


def test_explain_names_its_run_and_offers_only_what_it_can_show(
    chromium_browser: Any, served: str, site: dict[str, Any]
) -> None:
    runs = site["runs"]
    page = Watched(chromium_browser, served).open(served + route("explain", runs["b"]["id"]))
    expect(page.locator("#explain-compared li").first).to_contain_text("compared with " + runs["a"]["id"])
    bundled = Watched(chromium_browser, "file://").open(site["bundle"] + route("explain", runs["b"]["id"]))
    values = bundled.locator("#against option").evaluate_all("os => os.map(o => o.value)")
    assert len(values) == 3
    for value in values[1:]:  # every choice the bundle offers opens
        bundled.select_option("#against", value)
        expect(bundled.locator("#explain-lines")).to_be_visible()
        expect(bundled.locator(".error")).to_have_count(0)
        expect(bundled.locator("#explain .controls .muted")).to_have_text("compared with " + value)


def test_an_empty_folder_says_no_runs_were_found(chromium_browser: Any, tmp_path: Path) -> None:
    empty = tmp_path / "outputs"
    empty.mkdir()
    with serving(make_app([empty])) as url:
        page = Watched(chromium_browser, url).open(url + "#/runs")
        expect(page.locator("#no-runs")).to_contain_text(f"No runs were found under {empty}")
        expect(page.locator("#no-runs")).to_contain_text("python -m evalflow")
