"""openai_completions and openai_chat against the real llama.cpp server (``../shared/serve``):
generation on the stock server, log-likelihoods on the fixed one, the alignment guard refusing the
stock one, a fully cached run with the server gone, and a server killed mid-run."""

from __future__ import annotations

import json
import math

import pytest

from evalflow.core.records import Request
from evalflow.errors import EvalflowError, ModelError
from evalflow.models.api.alignment import MisalignedLogprobs
from evalflow.models.registry import build_model
from tests.support import served
from tests.support.api_runs import ROLL_TEXTS, chat_config, completions_config
from tests.support.fault_proxy import FaultProxy


def samples(folder, task):
    return [json.loads(line) for line in (folder / f"samples_{task}.jsonl").read_text().splitlines()]


def test_generation_through_completions(stock_server, api_run):
    results, manifest, folder = api_run(completions_config(stock_server.url, max_gen_toks=24), task="toy_gen", limit=2)
    assert "exact_match,get-answer" in results["results"]["toy_gen"]
    rows = samples(folder, "toy_gen")
    assert len(rows) == 2 and all(isinstance(r["resps"][0][0], str) and r["resps"][0][0] for r in rows)
    assert manifest["inference"]["computed"] == 2
    assert manifest["inference"]["model"]["server"]["models"]["data"][0]["id"] == served.MODEL_NAME


def test_generation_through_chat_sends_the_messages(stock_server, api_run):
    _, manifest, folder = api_run(
        chat_config(stock_server.url, max_gen_toks=24), task="toy_gen", limit=2, apply_chat_template=True, num_fewshot=1
    )
    rows = samples(folder, "toy_gen")
    messages = json.loads(rows[0]["arguments"]["gen_args_0"]["arg_0"])
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]  # few-shot as turns, as lm-eval
    assert all(r["resps"][0][0] for r in rows)
    assert manifest["inference"]["computed"] == 2


def test_chat_without_a_chat_template_is_refused(stock_server, api_run):
    with pytest.raises(EvalflowError, match="apply_chat_template=true"):
        api_run(chat_config(stock_server.url, max_gen_toks=8), task="toy_gen", limit=1)


def test_chat_refuses_loglikelihood_tasks(stock_server, api_run):
    with pytest.raises(ModelError, match="Loglikelihood is not supported for chat completions"):
        api_run(chat_config(stock_server.url), task="toy_mc", limit=1)


def test_alignment_check_refuses_the_stock_server(stock_server, api_run):
    with pytest.raises(MisalignedLogprobs, match="misaligned echoed log-probabilities") as err:
        api_run(completions_config(stock_server.url), task="toy_mc", limit=2)
    assert "check_logprobs=false" in str(err.value)
    assert not (api_run.out / "run1" / "results.json").exists()


def test_check_logprobs_false_skips_the_check(stock_server, api_run):
    results, manifest, _ = api_run(completions_config(stock_server.url, check_logprobs=False), task="toy_mc", limit=1)
    assert manifest["inference"]["computed"] == 4 and "acc,none" in results["results"]["toy_mc"]


def test_loglikelihood_on_the_fixed_server_then_fully_cached_without_a_server(fixed_server, api_run):
    proxy = FaultProxy(fixed_server.url.removesuffix("/v1")).start()
    config = completions_config(proxy.url + "/v1")
    try:
        first, m1, folder = api_run(config, task="toy_mc", limit=3)
    finally:
        proxy.stop()  # the "server" is gone: connections are refused from now on
    assert m1["inference"]["computed"] == 12
    rows = samples(folder, "toy_mc")
    assert all(len(r["resps"]) == 4 and all(math.isfinite(x[0][0]) and x[0][0] < 0 for x in r["resps"]) for r in rows)
    assert first["results"]["toy_mc"]["acc,none"] >= 2 / 3  # the right sum is the likeliest here
    again, m2, _ = api_run({**config, "num_concurrent": 4}, task="toy_mc", limit=3)  # a speed setting: same cache
    assert m2["inference"]["computed"] == 0 and "model" not in m2["inference"]  # never built, never connected
    assert again["results"] == first["results"]


def test_rolling_loglikelihood_on_the_fixed_server(fixed_server):
    model = build_model(completions_config(fixed_server.url))
    rolled = model.loglikelihood_rolling([Request("loglikelihood_rolling", (t,)) for t in ROLL_TEXTS])
    # one window each: the text after the prefix token, i.e. a loglikelihood with BOS text as context
    bos = model.tokens.tok.bos_token
    direct = model.loglikelihood([Request("loglikelihood", (bos, t)) for t in ROLL_TEXTS])
    assert rolled == pytest.approx([d[0] for d in direct], abs=1e-3)
    small = build_model(completions_config(fixed_server.url, max_length=12, check_logprobs=False))
    windows = [small.tokens.rolling_inputs(t) for t in ROLL_TEXTS]
    assert all(len(w) > 1 for w in windows)  # several windows per text, summed
    parts = small.loglikelihood_rolling([Request("loglikelihood_rolling", (t,)) for t in ROLL_TEXTS])
    assert all(math.isfinite(p) and p < r for p, r in zip(parts, rolled))  # less context: less likely


def test_rolling_task_end_to_end(fixed_server, api_run):
    results, manifest, _ = api_run(completions_config(fixed_server.url), task="toy_roll")
    assert manifest["inference"]["computed"] == 2
    assert 1 < results["results"]["toy_roll"]["word_perplexity,none"] < 1000


def test_server_killed_mid_run_gives_a_clean_error_and_the_rerun_resumes(fixed_server, api_run, monkeypatch):
    from evalflow.models.api import client

    doomed = served.LlamaServer.start(fixed=True)
    post_all = client.ApiClient.post_all

    def stop_after_five_answers(
        self, path, bodies, on_answer, read=None
    ):  # in the client's loop, before the next request
        answered = []

        def counted(i, answer):
            on_answer(i, answer)
            answered.append(i)
            if len(bodies) > 1 and len(answered) == 5:
                doomed.stop()

        return post_all(self, path, bodies, counted, read)

    monkeypatch.setattr(client.ApiClient, "post_all", stop_after_five_answers)
    try:
        with pytest.raises(client.ServerError) as err:
            api_run(completions_config(doomed.url, max_retries=1), task="toy_mc", limit=5)
    finally:
        doomed.stop()
    message = str(err.value)
    assert "connection failed" in message and "5 of this batch's 20 requests" in message and "run again" in message
    assert not (api_run.out / "run1" / "results.json").exists()
    monkeypatch.setattr(client.ApiClient, "post_all", post_all)
    _, manifest, _ = api_run(completions_config(fixed_server.url), task="toy_mc", limit=5)  # moved server: same cache
    assert manifest["inference"]["cached"] == 5 and manifest["inference"]["computed"] == 15
