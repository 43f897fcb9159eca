"""Served models: errors that point the way, and an identity that is right (issue 20, items 5 and 9).

Against the real llama.cpp server (through the fault proxy, which counts what is sent): a token-id
prompt it rejects with HTTP 500 and a validation error is not retried and names
model.tokenized_requests=false; a 401 names the key's variable, not retries or timeouts; a
model.model the server does not list is refused (model.allow_unlisted=true opts out); an unset
model.revision is warned about."""

from __future__ import annotations

import logging

import pytest

from evalflow.errors import ConfigError
from evalflow.models.api.client import ServerError, is_validation_error
from tests.support import served
from tests.support.api_runs import completions_config
from tests.support.fault_proxy import FaultProxy


@pytest.fixture
def proxy(fixed_server):
    p = FaultProxy(fixed_server.url.removesuffix("/v1")).start()
    yield p
    p.stop()


def test_token_id_prompts_are_refused_once_with_the_setting_that_fixes_them(proxy, api_run):
    with pytest.raises(ServerError) as err:
        api_run(completions_config(proxy.url + "/v1", tokenized_requests=True, max_retries=3), task="toy_mc", limit=1)
    message = str(err.value)
    assert "set model.tokenized_requests=false" in message and "HTTP 500" in message
    assert "max_retries" not in message
    token_prompts = [b for b in proxy.bodies if isinstance(b.get("prompt"), list)]
    assert len(token_prompts) == 1  # sent once: the server's validation error is not retried


def test_a_refused_key_names_its_variable(proxy, api_run, monkeypatch):
    monkeypatch.delenv("EVALFLOW_TEST_KEY", raising=False)
    proxy.faults = ["ok", "ok", "401"]  # the two alignment probes, then the first request
    with pytest.raises(ServerError) as err:
        api_run(
            completions_config(proxy.url + "/v1", api_key_env="EVALFLOW_TEST_KEY", max_retries=3),
            task="toy_mc",
            limit=1,
        )
    message = str(err.value)
    assert "refused the API key with HTTP 401" in message and "$EVALFLOW_TEST_KEY, which is not set" in message
    assert "max_retries" not in message and "timeout" not in message


def test_a_model_name_the_server_does_not_list_is_refused(proxy, api_run, caplog):
    misspelled = served.MODEL_NAME + "-typo"
    with pytest.raises(
        ConfigError, match=f"model.model '{misspelled}' is not among the models .*model.allow_unlisted=true"
    ):
        api_run(completions_config(proxy.url + "/v1", model=misspelled), task="toy_mc", limit=1)
    assert proxy.bodies == []  # refused before any request
    caplog.set_level(logging.WARNING, logger="evalflow.models.api.served")
    results, _, _ = api_run(
        completions_config(proxy.url + "/v1", model=misspelled, allow_unlisted=True, check_logprobs=False),
        task="toy_mc",
        limit=1,
    )
    assert "acc,none" in results["results"]["toy_mc"]
    assert any("used anyway (model.allow_unlisted=true)" in r.getMessage() for r in caplog.records)


def test_an_unset_revision_is_warned_about(proxy, api_run, caplog):
    caplog.set_level(logging.WARNING, logger="evalflow.models.api.served")
    api_run(completions_config(proxy.url + "/v1", max_gen_toks=4), task="toy_gen", limit=1)
    assert any("model.revision is not set" in r.getMessage() for r in caplog.records)
    caplog.clear()
    api_run(completions_config(proxy.url + "/v1", max_gen_toks=4, revision="q4_1-2024"), task="toy_gen", limit=1)
    assert not any("model.revision" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "body,deterministic",
    [
        (
            "{\"error\": {\"message\": \"[{'type': 'string_type', 'loc': ('body', 'prompt', 'str'), "
            '\'msg\': \'Input should be a valid string\'}]", "type": "internal_server_error"}}',
            True,
        ),
        ('{"detail": [{"loc": ["body", "prompt"], "msg": "field required"}]}', True),
        ('{"error": {"message": "1 validation error for CompletionRequest"}}', True),
        ('{"error": {"message": "CUDA out of memory"}}', False),
        ('{"error": {"message": "injected server error"}}', False),
    ],
)
def test_validation_errors_are_told_from_passing_faults(body: str, deterministic: bool) -> None:
    assert is_validation_error(body) is deterministic
