"""benchmarks/gpu_check.py end to end on CPU with ``--tiny``, so the GPU check cannot rot between
the times a GPU is lent: evalflow's HFModel and lm-eval's HFLM (the peer venv) on one random
2-layer Llama in bf16, every workload compared."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tests.support import peer_hflm
from tests.support.paths import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not peer_hflm.available(), reason=peer_hflm.SKIP_REASON)]


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gpu_check", module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_tiny_runs_end_to_end_and_both_sides_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "figures.json"
    assert load_script().main(["--tiny", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["dtype"] == "bfloat16" and result["device"] == "cpu" and result["model"]["parameters"] > 0
    arc, mmlu, gen = (result["workloads"][n] for n in ("arc_easy", "mmlu", "gen"))
    assert arc["requests"] == 6 * 4 and mmlu["requests"] == 4 * 4 and gen["prompts"] == 3
    for w in (arc, mmlu):
        assert w["finite"] and w["within_tol"] == w["requests"] and w["same_choice"] == w["questions"]
    assert gen["identical"] == gen["prompts"] and gen["tokens"] > 0
    assert all(w["evalflow_tokens_per_s"] > 0 and w["lm_eval_tokens_per_s"] > 0 for w in (arc, mmlu, gen))
    assert "greedy generations identical" in capsys.readouterr().out


def test_a_missing_cuda_device_is_one_clear_line() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(SystemExit, match="no CUDA device here; run with --tiny"):
        load_script().main([])
