"""results.json's model fields with ``peft`` and ``delta`` model args, against lm-eval 0.4.13's
``HFLM.get_model_info`` on the same tiny model, LoRA adapter and delta weights (run in the peer
venv): ``model_num_parameters`` counts the loaded model (the adapter's parameters too), and
``peft_sha``/``delta_sha`` are written (``""`` for a local folder, as lm-eval's failed hub lookup
gives). Skips when the peer venv, or peft in either venv, is absent."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from evalflow.models.hf import HFModel
from evalflow.output.model_info import lm_eval_fields
from tests.support import peer_hflm
from tests.support.tiny_models import build_tiny_delta, build_tiny_lora, build_tiny_model

pytestmark = [
    pytest.mark.skipif(not peer_hflm.available(), reason=peer_hflm.SKIP_REASON),
    pytest.mark.skipif(not peer_hflm.has_package("peft"), reason="peft is not installed in lm-eval's peer venv"),
]

# lm-eval's HFLM built on each variant's model args; its get_model_info printed as JSON
PEER = """
import json, sys
from lm_eval.models.huggingface import HFLM
infos = [HFLM(device="cpu", **args).get_model_info() for args in json.loads(sys.argv[1])]
print(json.dumps(infos, default=str))
"""


def _theirs(variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    done = subprocess.run(
        [str(peer_hflm.PEER_PYTHON), "-c", PEER, json.dumps(variants)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_adapter_and_delta_model_info_is_lm_evals(tmp_path: Path) -> None:
    pytest.importorskip("peft")
    base = build_tiny_model(tmp_path / "base", add_bos=True)
    variants = [
        {"pretrained": str(base), "peft": str(build_tiny_lora(base, tmp_path / "lora"))},
        {"pretrained": str(base), "delta": str(build_tiny_delta(base, tmp_path / "delta"))},
    ]
    for args, theirs in zip(variants, _theirs(variants)):
        _, ours = lm_eval_fields({"type": "hf", **args}, HFModel.identity(**args))
        fields = ("model_num_parameters", "model_sha", "peft_sha", "delta_sha")
        assert {k: ours.get(k) for k in fields} == {k: theirs.get(k) for k in fields}, args
    base_only = lm_eval_fields({"type": "hf", "pretrained": str(base)}, HFModel.identity(pretrained=str(base)))[1]
    assert ours["model_num_parameters"] == base_only["model_num_parameters"]  # a delta adds no parameter
