"""One lm-eval Python script, run by lm-eval 0.4.13 itself (the peer venv's python) and by evalflow
with its imports changed to ``evalflow.lm_eval``: a ``TaskManager`` with one ``include_path`` string,
``include_defaults=False``; ``get_task_dict`` of a name (a task with ``!function`` code)
and a whole task as a config dict; ``evaluate(HFLM, task_dict)``; ``simple_evaluate`` with a loaded
``PreTrainedModel`` as ``pretrained``; a model registered with lm-eval's ``@register_model``. Both
must give the same prompts, log-likelihoods (within 1e-5) and metrics. Skipped without the peer venv.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.parity_harness import PEER_VENV

LM_EVAL_IMPORTS = (
    "from lm_eval.tasks import TaskManager, get_task_dict\nfrom lm_eval.evaluator import evaluate, simple_evaluate\n"
)
EVALFLOW_IMPORTS = LM_EVAL_IMPORTS.replace("from lm_eval.", "from evalflow.lm_eval.")

SCRIPT = """\
import json, sys
{imports}
import torch
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from lm_eval.models.huggingface import HFLM
from transformers import AutoModelForCausalLM

library, model_dir, out = sys.argv[1:4]
data = library.rsplit("/", 1)[0] + "/data"
inline = {{  # a whole task as a config dict: toy_mc's, with one shot, under another name
    "task": "toy_inline", "dataset_path": "json", "training_split": "train", "test_split": "test",
    "dataset_kwargs": {{"data_files": {{"train": data + "/train.jsonl", "test": data + "/test.jsonl"}}}},
    "output_type": "multiple_choice", "doc_to_text": "Q: {{{{question}}}}\\nA:", "doc_to_target": "label",
    "doc_to_choice": "{{{{choices}}}}", "num_fewshot": 1, "metric_list": [{{"metric": "acc"}}],
}}


@register_model("script-lm")
class ScriptLM(LM):  # a user's model: scores a continuation by its length
    def __init__(self, scale=1, **kwargs):
        super().__init__()
        self.scale = scale

    def loglikelihood(self, requests):
        return [(-self.scale * len(r.args[1]), False) for r in requests]

    def loglikelihood_rolling(self, requests):
        return [-float(len(r.args[0])) for r in requests]

    def generate_until(self, requests):
        return ["" for _ in requests]


def record(results):
    return {{
        task: {{
            "metrics": results["results"][task],
            "prompts": [s["arguments"][0][0] for s in samples],
            "lls": [float(r[0]) for s in samples for r in s["filtered_resps"]],
        }}
        for task, samples in results["samples"].items()
    }}


tm = TaskManager(include_path=library, include_defaults=False)
# evaluate() alone seeds no few-shot sampler (lm-eval draws from the OS's entropy): zero-shot there
task_dict = get_task_dict(["toy_fn", {{**inline, "task": "toy_inline0", "num_fewshot": 0}}], tm)
lm = HFLM(pretrained=model_dir, device="cpu", dtype="float32")
runs = {{"evaluate": record(evaluate(lm, task_dict, limit=4, bootstrap_iters=0))}}
loaded = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
common = dict(tasks=["toy_mc", inline], task_manager=tm, limit=4, bootstrap_iters=0)
runs["loaded"] = record(simple_evaluate(model="hf", model_args={{"pretrained": loaded, "dtype": "float32"}}, **common))
runs["registered"] = record(simple_evaluate(model="script-lm", model_args="scale=2", **common))
open(out, "w").write(json.dumps(runs))
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("lm_eval.models.huggingface")
    from tests.support.tiny_models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_script"), add_bos=True)


def run_script(python: str, imports: str, library: Path, model: Path, work: Path) -> dict:
    script, out = work / "script.py", work / "out.json"
    script.write_text(SCRIPT.format(imports=imports))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env["EVALFLOW_CACHE"] = str(work / "cache")
    done = subprocess.run(
        [python, str(script), str(library), str(model), str(out)], env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def test_one_script_through_lm_eval_and_through_evalflow(toy_library: Path, tiny: Path, tmp_path: Path) -> None:
    if not (PEER_VENV / "bin" / "python").is_file():
        pytest.skip(f"lm-eval's reference venv is missing ({PEER_VENV})")
    (toy_library / "utils.py").write_text("def process_docs(ds):\n    return ds.select(range(5))\n")
    (toy_library / "toy_fn.yaml").write_text(
        "include: toy_mc.yaml\ntask: toy_fn\nprocess_docs: !function utils.process_docs\n"
    )
    (tmp_path / "peer").mkdir()
    (tmp_path / "ours").mkdir()
    peer = run_script(str(PEER_VENV / "bin" / "python"), LM_EVAL_IMPORTS, toy_library, tiny, tmp_path / "peer")
    ours = run_script(sys.executable, EVALFLOW_IMPORTS, toy_library, tiny, tmp_path / "ours")
    assert set(ours) == set(peer) == {"evaluate", "loaded", "registered"}
    for run in peer:
        assert set(ours[run]) == set(peer[run]), run
        for task, theirs in peer[run].items():
            mine = ours[run][task]
            assert mine["prompts"] == theirs["prompts"], (run, task)
            assert mine["lls"] == pytest.approx(theirs["lls"], abs=1e-5), (run, task)
            metrics = {k: v for k, v in theirs["metrics"].items() if "stderr" not in k}
            assert {k: mine["metrics"][k] for k in metrics} == pytest.approx(metrics, abs=1e-6), (run, task)
