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

from evalflow.models.lmeval_tokens import strip_at_stops
from tests.support import vllm_side
from tests.support.vllm_runs import LOGPROB_TOLERANCE, cached_generations, run_args, samples

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm")]


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
                h["acc" if task == "toy_mc" else "word_perplexity"], rel=1e-3
            )
    assert len(diffs) == 8 * 4 + 2 and max(diffs) < LOGPROB_TOLERANCE, max(diffs)


def test_greedy_generations_equal_the_hf_backends(vllm_run: dict[str, Any], hf_samples: dict[str, Any]) -> None:
    v_texts = [s["resps"][0][0] for s in vllm_run["samples"]["toy_gen"]]
    h_texts = [s["resps"][0][0] for s in hf_samples["toy_gen"]]
    assert v_texts == h_texts and any(t.strip() for t in v_texts)


def test_generations_end_and_count_tokens_as_the_hf_backends_do(vllm_run: dict[str, Any], hf_run: Path) -> None:
    """vLLM's finish_reason and stop_reason, and its token counts, give each cached answer the
    Finish the hf backend reads back from its tokens for the same generation."""
    ours = sorted(cached_generations(vllm_run["root"] / "cache"), key=repr)
    theirs = sorted(cached_generations(hf_run / "cache"), key=repr)
    assert len(ours) == 8 and ours == theirs
    reasons = {g.finish.stop_reason for g in ours}
    assert reasons <= {"stop", "eos", "length"} and len(reasons) > 1, reasons
    assert all(g.finish.completion_tokens <= 48 for g in ours)  # SHARED_KEYS' max_gen_toks


def test_a_thinking_marker_lets_vllm_generate_past_the_tasks_stops(vllm_run: dict[str, Any], library: Path) -> None:
    """lm-eval 0.4.13's VLLM with think_end_token hands vLLM the EOS text alone as its stop; the
    task's stops are cut after the thinking part. So the cached raw generation runs on past them
    (a second engine: the marker changes what vLLM generates), is the plain run's answer once cut
    at them, and ends at EOS or the token budget, never at a stop sequence."""
    root = vllm_run["root"]
    args = [a for a in run_args(vllm_run["folder"], library, root / "think-cache", root / "think") if "task=" not in a]
    done = vllm_side.run_evalflow([*args, "task=toy_gen", "think_end_token='</think>'"], cwd=root)
    assert done.returncode == 0, done.stderr[-4000:]
    thinking = samples(root / "think", ["toy_gen"])["toy_gen"]
    until = ["\n\n", "Question:"]  # toy_gen's
    raw = [s["resps"][0][0] for s in thinking]
    plain = [s["resps"][0][0] for s in vllm_run["samples"]["toy_gen"]]
    assert [strip_at_stops(text, until) for text in raw] == plain
    assert any(len(r) > len(p) for r, p in zip(raw, plain))  # generated on past a stop sequence
    finishes = [g.finish for g in cached_generations(root / "think-cache")]
    assert len(finishes) == 8 and {f.stop_reason for f in finishes} <= {"eos", "length"}


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
        "print(json.dumps(first))"
    )
    args = run_args(vllm_run["folder"], library, root / "cache", root / "again")
    python = str(vllm_side.cpu_venv.venv_python(vllm_side.venv()))
    done = subprocess.run(
        [python, "-c", probe, json.dumps(args)],
        cwd=root,
        env=vllm_side.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert imported == {}, "\n".join(f"{name} imported from:\n{stack}" for name, stack in imported.items())
    assert samples(root / "again") == vllm_run["samples"]


def test_the_gpu_checks_vllm_backend_runs_end_to_end_on_the_cpu_build(tmp_path: Path) -> None:
    """benchmarks/gpu_check.py --backend vllm --tiny: evalflow's VLLMModel and lm-eval's VLLM on one random
    2-layer Llama, so the check a lent GPU runs cannot rot in between."""
    why = vllm_side.missing()
    if why:
        pytest.skip(why)
    out = tmp_path / "figures.json"
    python = str(vllm_side.cpu_venv.venv_python(vllm_side.venv()))
    script = str(vllm_side.ROOT / "benchmarks" / "gpu_check.py")
    done = subprocess.run(
        [python, script, "--tiny", "--backend", "vllm", "--dtype", "float32", "--json", str(out)],
        env=vllm_side.env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["backend"] == "vllm"
    for name in ("arc_easy", "mmlu"):
        w = result["workloads"][name]
        assert w["finite"] and w["within_tol"] == w["requests"] and w["greedy_flags_equal"] == w["requests"]
    assert result["workloads"]["gen"]["identical"] == result["workloads"]["gen"]["prompts"]
