"""``model.keep_freed_memory``: glibc keeps freed tensor memory, so it is reused rather than
page-faulted in afresh by the next op.

Each measurement runs in a fresh interpreter (the setting is process-wide and cannot be undone),
counting the kernel's minor page faults (``getrusage``): the event the setting exists to remove (on
SmolLM2 itself, a 30-document gsm8k run: 2.2 million faults by default, 0.34 million kept).
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from evalflow.errors import ConfigError
from evalflow.models.hf import HFModel, host_memory, load

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")

GROWING_BLOCKS = """
import ctypes, ctypes.util, json, resource, sys
from evalflow.models.hf import host_memory
applied = host_memory.keep_freed_memory() if sys.argv[1] == "keep" else False
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes, libc.memset.argtypes = [ctypes.c_void_p], [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for mib in range(1, 32):  # each block larger than the last, written, then freed: as a tensor's buffer is
    block = libc.malloc(mib << 20)
    libc.memset(block, 1, mib << 20)
    libc.free(block)
print(json.dumps({"applied": applied, "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before}))
"""


def growing_block_faults(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", GROWING_BLOCKS, mode], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_kept_memory_is_reused_instead_of_page_faulted_afresh():
    """Blocks of 1..31 MiB, each written and freed: glibc's defaults map each one afresh (every page
    faults: 496 MiB, ~127,000 pages); kept, the heap keeps the freed memory, and only the growth
    beyond the largest block so far faults (31 MiB, ~8,000 pages). Single-threaded and without
    torch, so the counts do not depend on scheduling (the decode loop's own counts do: ~18,000 kept
    against 38,000-145,000 by default, depending on what else runs on the machine)."""
    default, kept = growing_block_faults("default"), growing_block_faults("keep")
    assert kept["applied"] is True and default["applied"] is False
    assert default["faults"] > 100_000, default
    assert kept["faults"] < 12_000, kept


def test_the_setting_is_a_boolean(tiny_model_dir):
    assert load.parse_switch("keep_freed_memory", False, "") is False
    for bad in ("yes", 1, None):
        with pytest.raises(ConfigError, match="model.keep_freed_memory"):
            HFModel(str(tiny_model_dir), keep_freed_memory=bad)


def test_a_cpu_model_keeps_freed_memory_unless_told_not_to(tiny_model_dir, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(host_memory, "keep_freed_memory", lambda: calls.append("kept") or True)
    HFModel(str(tiny_model_dir), keep_freed_memory=False)
    assert calls == []
    HFModel(str(tiny_model_dir))  # the default, on the CPU
    assert calls == ["kept"]
