"""Retries and failures through a fault-injecting proxy in front of the real (fixed) server, and the
API key kept out of every file evalflow writes."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalflow.models.api.client import ServerError
from tests.support.api_runs import completions_config
from tests.support.fault_proxy import FaultProxy

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def proxy(fixed_server):
    p = FaultProxy(fixed_server.url.removesuffix("/v1"), stall_seconds=25.0).start()
    yield p
    p.stop()


def test_faults_are_retried_then_every_answer_is_persisted_once(proxy, api_run, caplog):
    # after /models and the two alignment probes: a 429, a 500, a stall past the timeout, a drop
    proxy.faults = ["ok", "ok", "429", "500", "stall", "drop"]
    caplog.set_level(logging.WARNING, logger="evalflow.models.api.client")
    results, manifest, _ = api_run(
        completions_config(proxy.url + "/v1", timeout=20, num_concurrent=2), task="toy_mc", limit=2
    )
    assert proxy.faults_served == ["429", "500", "stall", "drop"]
    assert manifest["inference"]["computed"] == 8 and "acc,none" in results["results"]["toy_mc"]
    scored = [b for b in proxy.answered if b.get("echo") and b.get("logprobs") == 1]
    assert len(scored) == 8 + 1  # each of the 8 requests answered once (+1 alignment echo)
    assert len({json.dumps(b, sort_keys=True) for b in scored}) == len(scored)
    retries = [r.getMessage() for r in caplog.records if "retry" in r.getMessage()]
    # one retry per fault; aiohttp<3.10 may also find the dropped connection's pooled twin closed
    # (one more "connection failed" retry): a real fault the client must survive, not a miscount
    assert len([m for m in retries if "connection failed" not in m]) == 3
    assert any("HTTP 429" in m and "in 1.0 s" in m for m in retries)  # Retry-After: 1 honoured
    assert any("no answer within model.timeout=20 s" in m for m in retries)
    assert any("connection failed" in m for m in retries)


def test_final_failure_names_the_server_message_and_the_rerun_resumes(proxy, api_run):
    proxy.faults = ["ok", "ok", "ok", "500", "500"]  # probes, one answer, then two 500s
    with pytest.raises(ServerError) as err:
        api_run(completions_config(proxy.url + "/v1", max_retries=1), task="toy_mc", limit=2)
    message = str(err.value)
    assert "injected server error" in message and "1 of this batch's 8 requests" in message
    assert not (api_run.out / "run1" / "results.json").exists()
    _, manifest, _ = api_run(completions_config(proxy.url + "/v1"), task="toy_mc", limit=2)
    assert manifest["inference"]["cached"] == 1 and manifest["inference"]["computed"] == 7


def test_client_errors_are_not_retried(proxy, api_run):
    proxy.faults = ["ok", "ok", "400"]
    with pytest.raises(ServerError, match="refused the request with HTTP 400: .*injected bad request"):
        api_run(completions_config(proxy.url + "/v1", max_retries=3), task="toy_mc", limit=1)
    assert len(proxy.bodies) == 3  # the 400 was not sent again


def test_a_server_without_models_route_still_runs(proxy, api_run):
    proxy.models_missing = True
    _, manifest, _ = api_run(completions_config(proxy.url + "/v1", max_gen_toks=8), task="toy_gen", limit=1)
    server = manifest["inference"]["model"]["server"]
    assert server["models"] is None and "HTTP 404" in server["error"] and manifest["inference"]["computed"] == 1


def test_the_api_key_is_sent_but_written_nowhere(proxy, api_library, tmp_path):
    secret = "sk-evalflow-test-" + os.urandom(6).hex()
    out, cache = tmp_path / "run", tmp_path / "cache"
    config = completions_config(proxy.url + "/v1", api_key_env="EVALFLOW_TEST_KEY")
    overrides = [f"model.{k}={json.dumps(v) if isinstance(v, bool) else v}" for k, v in config.items() if k != "type"]
    cmd = [
        sys.executable,
        "-m",
        "evalflow",
        "model=openai_completions",
        *overrides,
        "task=toy_gen",
        "limit=1",
        "model.max_gen_toks=8",
        f"include_path=[{api_library}]",
        f"cache_dir={cache}",
        "bootstrap_iters=0",
        f"hydra.run.dir={out}",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVALFLOW_TEST_KEY": secret, "EVALFLOW_DEBUG": "1"}
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert all(h.get("Authorization") == f"Bearer {secret}" for h in proxy.headers)  # really used
    written = [p for p in list(out.rglob("*")) + list(cache.rglob("*")) if p.is_file()]
    assert any(p.name == "config.yaml" for p in written) and any(p.suffix == ".log" for p in written)
    leaks = [str(p) for p in written if secret.encode() in p.read_bytes()]
    assert not leaks and secret not in done.stdout + done.stderr
