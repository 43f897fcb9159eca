"""Where the checkout and the benchmark data beside it are, for tests that run files from them."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = (ROOT / ".." / "shared" / "data").resolve()
SHARED_MAP = ROOT / "conf" / "data_maps" / "shared.yaml"  # the data map that points the built-in tasks at SHARED_DATA
