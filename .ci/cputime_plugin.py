"""Records each test's CPU time (self + reaped children) and wall time to $CPU_LOG as TSV: where CI's
time goes, load-independent. Use:

    CPU_LOG=/tmp/cpu.tsv PYTHONPATH=.ci python -m pytest -p cputime_plugin; sort -t$'\t' -k2 -rn /tmp/cpu.tsv
"""

import os
import resource
import time

import pytest

_LOG = os.environ.get("CPU_LOG", "/tmp/cpu_times.tsv")


def _cpu() -> float:
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    c0, w0 = _cpu(), time.monotonic()
    yield
    with open(_LOG, "a") as f:
        f.write(f"{item.nodeid}\t{_cpu() - c0:.2f}\t{time.monotonic() - w0:.2f}\n")
