"""benchmarks/packed_linear.py runs end to end (shrunken shapes) and both sides agree."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from evalflow.models.hf.fast import packed_linear

SCRIPT = "packed_linear.py"  # run from a copy of benchmarks/ with no ../shared (conftest.benchmarks_alone)


@pytest.mark.skipif(packed_linear.onednn_missing() is not None, reason="torch without oneDNN's packed linear")
def test_the_benchmark_times_both_kinds_of_layer_on_every_shape(benchmarks_alone):
    done = subprocess.run(
        [
            sys.executable,
            str(benchmarks_alone / SCRIPT),
            "--rounds",
            "1",
            "--rows",
            "1",
            "7",
            "--layers",
            "2",
            "--scale",
            "8",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    cells = re.findall(
        r"(\d+) rows: torch ([\d.]+) ms, packed ([\d.]+) ms, ([\d.]+)x \(max \|difference\| ([\d.e+-]+)", done.stdout
    )
    assert len(cells) == 5 * 2, done.stdout  # five shapes, two row counts
    assert all(
        float(torch_ms) > 0 and float(packed_ms) > 0 and float(diff) < 1e-4 for _, torch_ms, packed_ms, _, diff in cells
    )
