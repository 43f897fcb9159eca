"""openai_chat sends a task's images as lm-eval's local-chat-completions does: the same request
bodies (base64 PNG image_url parts before the text) for the same task, recorded on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.chat_recorder import ChatRecorder

MODEL = "tiny-vlm"


def _evalflow_bodies(library: Path, tmp_path: Path) -> tuple[list, dict]:
    from evalflow import evaluate

    with ChatRecorder(MODEL) as rec:
        results = evaluate(
            "toy_vqa",
            {"type": "openai_chat", "model": MODEL, "base_url": rec.url},
            include_path=[str(library)],
            cache_dir=str(tmp_path / "cache"),
            apply_chat_template=True,
            bootstrap_iters=0,
            output_dir=str(tmp_path / "run"),
        )
    return rec.bodies, results


def test_image_parts_in_lm_eval_layout(vqa_library: Path, tmp_path: Path) -> None:
    bodies, _ = _evalflow_bodies(vqa_library, tmp_path)
    assert len(bodies) == 6
    content = bodies[0]["messages"][-1]["content"]
    assert [p["type"] for p in content] == ["image_url", "text"]
    assert (
        content[0]["image_url"]["url"].startswith("data:image/png;base64,")
        and content[0]["image_url"]["detail"] == "auto"
    )
    assert content[1]["text"] == "<image>What colour is the shape? Answer:"


def test_same_bodies_as_lm_eval_local_chat_completions(vqa_library: Path, tmp_path: Path) -> None:
    lm_eval = pytest.importorskip("lm_eval")
    pytest.importorskip("tenacity")
    from lm_eval.tasks import TaskManager

    ours, results = _evalflow_bodies(vqa_library, tmp_path)
    with ChatRecorder(MODEL) as rec:
        peer = lm_eval.simple_evaluate(
            model="local-chat-completions",
            model_args=f"model={MODEL},base_url={rec.url}/chat/completions,num_concurrent=1",
            tasks=["toy_vqa"],
            apply_chat_template=True,
            task_manager=TaskManager(include_path=str(vqa_library), include_defaults=False),
            bootstrap_iters=0,
        )
    key = lambda b: b["messages"][-1]["content"][0]["image_url"]["url"]  # noqa: E731 - order: by image
    assert sorted(ours, key=key) == sorted(rec.bodies, key=key)
    assert results["results"]["toy_vqa"]["exact_match,none"] == peer["results"]["toy_vqa"]["exact_match,none"]
