"""The browser of tests/view/: Debian's chromium driven by Playwright, headless, one per module;
its tests skip, saying why, where either is missing. ``shots``: where the screenshots of
docs/view.md go (docs/images/view/ with ``EVALFLOW_VIEW_SCREENSHOTS=1``, else a temporary folder)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.view_pages import CHROMIUM, DOCS_IMAGES


@pytest.fixture(scope="module")
def chromium_browser() -> Iterator[Any]:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed (pip install evalflow[dev])"
    )
    if not CHROMIUM.exists():
        pytest.skip(f"chromium is not installed at {CHROMIUM} (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = DOCS_IMAGES if os.environ.get("EVALFLOW_VIEW_SCREENSHOTS") else tmp_path / "shots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
