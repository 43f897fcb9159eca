"""Debian's chromium, headless and offline, on a page a test wrote (the report tests load their HTML
in a real browser); a test skips where chromium is not installed."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed here (apt-get install chromium; .ci/run installs it)")
    return found


def browse(html: Path, *args: str, fragment: str = "") -> subprocess.CompletedProcess:
    """Chromium headless on the file (``#fragment`` appended), every network request sent to a
    closed port, in a fresh profile."""
    with tempfile.TemporaryDirectory(prefix="report_profile_") as profile:
        return subprocess.run(
            [
                chromium(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--enable-logging=stderr",
                "--v=0",
                "--proxy-server=127.0.0.1:9",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--virtual-time-budget=20000",
                *args,
                html.as_uri() + (f"#{fragment}" if fragment else ""),
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
