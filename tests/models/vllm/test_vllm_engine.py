"""model=vllm on the real engine (vLLM's CPU build in its side venv, SmolLM2 fp32, eager): one
``python -m evalflow model=vllm`` run of a multiple-choice, a generation and a rolling task, its
answers against evalflow's ``hf`` backend on the same weights (lm-eval's reference engine), then a
fully cached re-run that never imports vLLM. Started once per test session (~1.5 min)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.models.api.conftest import ROLL_TEXTS, ROLL_YAML
from tests.support import vllm_side

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm")]

TASKS = ["toy_mc", "toy_gen", "toy_roll"]
SHARED_KEYS = {"max_gen_toks": 48}
LOGPROB_TOLERANCE = 1e-3  # the HF parity tests' (measured here: see test_log_likelihoods_match_the_hf_backend)


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.conftest import GEN_YAML, MC_YAML, _rows

    root = tmp_path_factory.mktemp("vllm-tasks")
    data, lib = root / "data", root / "tasks"
    data.mkdir()
    lib.mkdir()
    for name, rows in (("train", _rows(10, 100)), ("test", _rows(40))):
        (data / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (data / "roll.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in ROLL_TEXTS))
    for name, text in (("toy_mc", MC_YAML), ("toy_gen", GEN_YAML), ("toy_roll", ROLL_YAML)):
        (lib / f"{name}.yaml").write_text(text.format(data=data))
    return lib


def run_args(folder: Path, library: Path, cache: Path, out: Path) -> list[str]:
    return ["model=vllm", f"model.pretrained={folder}", "model.dtype=float32", "model.enforce_eager=true",
            "model.max_model_len=2048", *(f"model.{k}={v}" for k, v in SHARED_KEYS.items()),
            f"task=[{','.join(TASKS)}]", "limit=8", "num_fewshot=0", "bootstrap_iters=0",
            f"include_path=[{library}]", f"cache_dir={cache}", f"hydra.run.dir={out}"]


@pytest.fixture(scope="module")
def vllm_run(library: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    why = vllm_side.missing()
    if why:
        pytest.skip(why)
    folder = vllm_side.smollm2_folder()
    root = tmp_path_factory.mktemp("vllm-run")
    done = vllm_side.run_evalflow(run_args(folder, library, root / "cache", root / "out"), cwd=root)
    assert done.returncode == 0, done.stderr[-4000:]
    return {"folder": folder, "root": root, "out": root / "out", "samples": samples(root / "out")}


def samples(out: Path) -> dict[str, list[dict[str, Any]]]:
    return {t: sorted((json.loads(line) for line in (out / f"samples_{t}.jsonl").read_text().splitlines()),
                      key=lambda s: s["doc_id"]) for t in TASKS}


@pytest.fixture(scope="module")
def hf_samples(library: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """The same tasks through evalflow's hf backend, lm-eval's reference engine, on the GGUF's weights."""
    from evalflow import evaluate
    from evalflow.models.smollm2 import SMOLLM2_GGUF, smollm2_dir

    out = tmp_path_factory.mktemp("hf-run")
    model = {"type": "hf", "pretrained": smollm2_dir(), "gguf_file": SMOLLM2_GGUF, "dtype": "float32",
             "engine": "reference", **SHARED_KEYS}
    evaluate(TASKS, model, output_dir=out, include_path=[str(library)], cache_dir=str(out / "cache"), limit=8,
             num_fewshot=0, bootstrap_iters=0, batch_size=8)
    return samples(out)


def test_log_likelihoods_match_the_hf_backend(vllm_run: dict[str, Any], hf_samples: dict[str, Any]) -> None:
    diffs = []
    for task in ("toy_mc", "toy_roll"):
        for v, h in zip(vllm_run["samples"][task], hf_samples[task], strict=True):
            assert v["doc_id"] == h["doc_id"] and v["arguments"] == h["arguments"]
            for (v_answer,), (h_answer,) in zip(v["resps"], h["resps"], strict=True):
                v_value, h_value = (v_answer[0], h_answer[0]) if isinstance(v_answer, list) else (v_answer, h_answer)
                diffs.append(abs(v_value - h_value))
                if isinstance(v_answer, list):
                    assert v_answer[1] == h_answer[1], (task, v["doc_id"])  # greedy flags identical
            assert v["acc" if task == "toy_mc" else "word_perplexity"] == pytest.approx(
                h["acc" if task == "toy_mc" else "word_perplexity"], rel=1e-3)
    assert len(diffs) == 8 * 4 + 2 and max(diffs) < LOGPROB_TOLERANCE, max(diffs)


def test_greedy_generations_equal_the_hf_backends(vllm_run: dict[str, Any], hf_samples: dict[str, Any]) -> None:
    v_texts = [s["resps"][0][0] for s in vllm_run["samples"]["toy_gen"]]
    h_texts = [s["resps"][0][0] for s in hf_samples["toy_gen"]]
    assert v_texts == h_texts and any(t.strip() for t in v_texts)


def test_the_run_records_vllm_and_its_identity(vllm_run: dict[str, Any]) -> None:
    manifest = json.loads((vllm_run["out"] / "manifest.json").read_text())
    text = json.dumps(manifest)
    assert '"backend": "vllm"' in text and "gpu_memory_utilization" not in text.split('"identity"')[-1][:2000]


def test_a_cached_rerun_never_imports_vllm(vllm_run: dict[str, Any], library: Path) -> None:
    root = vllm_run["root"]
    probe = (
        "import sys, json, traceback\n"
        "first = {}\n"
        "class Watch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name in ('torch', 'vllm') and name not in first:\n"
        "            first[name] = ''.join(traceback.format_stack(limit=12))\n"
        "sys.meta_path.insert(0, Watch())\n"
        "sys.argv = ['evalflow', *json.loads(sys.argv[1])]\n"
        "from evalflow.commands.main import entry\n"
        "try:\n    entry()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print(json.dumps(first))")
    args = run_args(vllm_run["folder"], library, root / "cache", root / "again")
    python = str(vllm_side.cpu_venv.venv_python(vllm_side.venv()))
    done = subprocess.run([python, "-c", probe, json.dumps(args)], cwd=root, env=vllm_side.env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert imported == {}, "\n".join(f"{name} imported from:\n{stack}" for name, stack in imported.items())
    assert samples(root / "again") == vllm_run["samples"]
