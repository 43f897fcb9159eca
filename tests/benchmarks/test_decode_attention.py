"""benchmarks/decode_attention.py runs end to end (a small step) and its two kernels agree."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from evalflow.models.hf.fast import native_attention

SCRIPT = "decode_attention.py"  # run from a copy of benchmarks/ with no ../shared (conftest.benchmarks_alone)


@pytest.mark.skipif(
    not native_attention.cpu_supports() or native_attention._compiler() is None,
    reason="the kernel needs x86-64 with AVX2/FMA and a C compiler",
)
def test_the_benchmark_times_both_kernels_on_the_same_step(benchmarks_alone):
    done = subprocess.run(
        [
            sys.executable,
            str(benchmarks_alone / SCRIPT),
            "--rounds",
            "1",
            "--rows",
            "2",
            "--tokens",
            "2",
            "--prefill",
            "150",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    line = re.search(
        r"torch flash ([\d.]+) ms, native ([\d.]+) ms: ([\d.]+)x; max \|difference\| ([\d.e+-]+)", done.stdout
    )
    assert line, done.stdout
    assert float(line.group(1)) > 0 and float(line.group(2)) > 0
    assert float(line.group(4)) < 1e-5
    prefill = re.search(
        r"prompt prefill attention \(150 tokens.*sdpa ([\d.]+) ms, native ([\d.]+) ms .*"
        r"max \|difference\| to sdpa ([\d.e+-]+)",
        done.stdout,
    )
    assert prefill, done.stdout
    assert float(prefill.group(3)) < 1e-5
    if native_attention.has_avx512():
        assert "identical floats" in done.stdout
