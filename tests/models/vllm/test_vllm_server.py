"""The served backends against a real ``vllm serve`` (vLLM's CPU build, SmolLM2 fp32, eager) on
loopback: ``openai_completions`` passes the echo-alignment check (which refuses the stock llama.cpp
server, tests/models/api/test_server.py) and scores what ``model=vllm`` in-process scores;
``openai_chat`` generates through the chat template; a ``base_url`` list of two servers shares a run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalflow.models.api.alignment import PROMPT
from tests.support import vllm_side
from tests.support.fault_proxy import FaultProxy
from tests.support.vllm_runs import samples

pytest.importorskip("aiohttp")
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm")]

SERVED_TOLERANCE = 1e-4  # the same engine and weights in and out of process: float noise only


def completions(url: Any, folder: Path, **extra: Any) -> dict[str, Any]:
    return {
        "type": "openai_completions",
        "model": vllm_side.SERVED_NAME,
        "base_url": url,
        "tokenizer": str(folder),
        "revision": "smollm2-fp32",
        "max_length": 2048,
        "max_gen_toks": 48,
        "retry_wait": 0.05,
        **extra,
    }


def run(library: Path, out: Path, model: dict[str, Any], tasks: list[str], **values: Any) -> tuple[dict, dict]:
    from evalflow import evaluate

    results = evaluate(
        tasks,
        model,
        output_dir=out,
        include_path=[str(library)],
        cache_dir=str(out.parent / f"{out.name}-cache"),
        limit=8,
        num_fewshot=0,
        bootstrap_iters=0,
        **values,
    )
    return results, json.loads((out / "manifest.json").read_text())


def test_completions_pass_the_alignment_check_and_score_what_the_engine_scores(
    vllm_server, vllm_run, library, tmp_path
):
    proxy = FaultProxy(vllm_server.url.removesuffix("/v1")).start()
    try:
        _results, manifest = run(
            library, tmp_path / "served", completions(proxy.url + "/v1", vllm_run["folder"]), ["toy_mc", "toy_roll"]
        )
    finally:
        proxy.stop()
    probes = [b for b in proxy.bodies if PROMPT in json.dumps(b.get("prompt"))]
    assert len(probes) == 2 and probes[1]["echo"] is True  # the check ran, and vLLM passed it
    served = samples_of(tmp_path / "served", ["toy_mc", "toy_roll"])
    diffs = []
    for task in ("toy_mc", "toy_roll"):
        for s, e in zip(served[task], vllm_run["samples"][task], strict=True):
            for (s_answer,), (e_answer,) in zip(s["resps"], e["resps"], strict=True):
                s_value, e_value = (s_answer[0], e_answer[0]) if isinstance(s_answer, list) else (s_answer, e_answer)
                diffs.append(abs(s_value - e_value))
                if isinstance(s_answer, list):
                    assert s_answer[1] == e_answer[1]
    assert len(diffs) == 8 * 4 + 2 and max(diffs) < SERVED_TOLERANCE, max(diffs)
    assert manifest["inference"]["computed"] == 8 * 4 + 2


def test_generation_through_completions_equals_the_engines(vllm_server, vllm_run, library, tmp_path):
    run(library, tmp_path / "gen", completions(vllm_server.url, vllm_run["folder"]), ["toy_gen"])
    texts = [s["resps"][0][0] for s in samples_of(tmp_path / "gen", ["toy_gen"])["toy_gen"]]
    assert texts == [s["resps"][0][0] for s in vllm_run["samples"]["toy_gen"]]


def test_chat_generates_through_the_servers_chat_template(vllm_server, library, tmp_path):
    model = {
        "type": "openai_chat",
        "model": vllm_side.SERVED_NAME,
        "base_url": vllm_server.url,
        "max_gen_toks": 32,
        "retry_wait": 0.05,
    }
    results, manifest = run(library, tmp_path / "chat", model, ["toy_gen"], apply_chat_template=True)
    texts = [s["resps"][0][0] for s in samples_of(tmp_path / "chat", ["toy_gen"])["toy_gen"]]
    assert (
        manifest["inference"]["computed"] == 8
        and all(isinstance(t, str) for t in texts)
        and any(t.strip() for t in texts)
    )
    assert "exact_match,get-answer" in results["results"]["toy_gen"]


def test_two_servers_share_a_run_and_each_is_counted(vllm_server, vllm_run, library, tmp_path):
    """The same vLLM server at two addresses (directly and through a loopback proxy)."""
    proxy = FaultProxy(vllm_server.url.removesuffix("/v1")).start()
    urls = [vllm_server.url, proxy.url + "/v1"]
    try:
        _, manifest = run(
            library, tmp_path / "two", completions(urls, vllm_run["folder"], num_concurrent=2), ["toy_mc"]
        )
    finally:
        proxy.stop()
    counts = manifest["inference"]["servers"]
    assert set(counts) == set(urls) and all(n > 0 for n in counts.values()) and sum(counts.values()) == 32


def samples_of(out: Path, tasks: list[str]) -> dict[str, list[dict[str, Any]]]:
    return samples(out, tasks)
