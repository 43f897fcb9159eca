"""A cached run from the command line imports what it needs and no more: numpy stays unloaded (its
scores come from the cache), and so do the subcommands' modules, whose declarations only ``--help``
reads (Hydra resolves the help template on every run; evalflow.commands.main builds the subcommand
lines only when help was asked for; tests/commands/test_cli_help.py checks those lines)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT

CODE = """
import json, sys
from evalflow.commands.main import entry
sys.argv = ["evalflow", *sys.argv[1:]]
try:
    entry()
except SystemExit as exc:
    assert not exc.code, exc.code
loaded = [m for m in ("numpy", "evalflow.insight.comparison", "evalflow.commands.report") if m in sys.modules]
print(json.dumps(loaded))
"""


def _run(tmp_path: Path, name: str) -> list[str]:
    args = [
        "model=dummy",
        "task=arith_mc",
        "limit=5",
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={tmp_path / name}",
    ]
    done = subprocess.run(
        [sys.executable, "-c", CODE, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_cached_run_imports_neither_numpy_nor_the_subcommands(tmp_path: Path) -> None:
    _run(tmp_path, "cold")
    assert _run(tmp_path, "cached") == []
