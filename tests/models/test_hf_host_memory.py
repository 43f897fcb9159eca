"""``model.keep_freed_memory``: glibc keeps freed tensor memory, so the decode loop stops page-faulting.

Each measurement runs in a fresh interpreter (the setting is process-wide and cannot be undone):
the continuous-batching decode loop on a random two-layer model of SmolLM2-135M's widths, ten
prompts of ~1,000 tokens, 4 rows, 24 new tokens each, counting the kernel's minor page faults
(``getrusage``): the event the setting exists to remove (on SmolLM2 itself, a 30-document gsm8k
run: 2.2 million faults by default, 0.34 million kept).
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

DECODE_FAULTS = """
import json, resource, sys
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from evalflow.models.hf import decode, host_memory
applied = host_memory.keep_freed_memory() if sys.argv[1] == "keep" else False
torch.set_num_threads(2)
torch.manual_seed(0)
config = LlamaConfig(vocab_size=4096, hidden_size=576, intermediate_size=1536, num_hidden_layers=2,
                     num_attention_heads=9, num_key_value_heads=3, attn_implementation="sdpa")
model = LlamaForCausalLM(config).eval()
class NoText:
    def encode(self, text, add_special_tokens=False): return []
    def decode(self, tokens): return ""
draw = torch.Generator().manual_seed(1)
jobs = [decode.Job(tuple(torch.randint(0, 4096, (n,), generator=draw).tolist()), None)
        for n in (1000, 1078, 950, 1040, 990, 1100, 1020, 980, 1010, 1060)]
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
with torch.inference_mode():
    out = decode.greedy_until(model, jobs, 4, 24, decode.StopWatch([], NoText()), set(), torch.device("cpu"), draft=4)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({"applied": applied, "faults": faults, "tokens": [len(t) for t in out]}))
"""


def decode_faults(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", DECODE_FAULTS, mode], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_kept_memory_cuts_the_decode_loops_page_faults():
    default, kept = decode_faults("default"), decode_faults("keep")
    assert kept["applied"] is True and default["applied"] is False
    assert default["tokens"] == kept["tokens"] == [24] * 10  # the same work on both sides
    assert kept["faults"] * 3 < default["faults"], (kept, default)  # measured: ~18,000 against ~126,000


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
