"""lm-eval's served model types and their arguments through the front door: each mapped onto a
served preset with lm-eval's meaning, secrets kept out of everything written, ``--device``
ignored with a note, and every model type lm-eval registers either mapped or refused with a
paragraph (checked against lm-eval 0.4.13's own registry when the peer venv is there)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from evalflow.errors import ConfigError
from evalflow.lmeval_compat.model_map import MODELS, REFUSED_MODELS
from evalflow.lmeval_compat.parser import parse
from evalflow.lmeval_compat.translate import translate
from tests.support.parity_harness import PEER_VENV
from tests.support.parity_harness import missing as peer_missing


def tr(model: str, args: str, *extra: str):
    return translate(parse(["--model", model, "--model_args", args, "--tasks", "t", *extra]))


def test_lm_evals_chat_recipe_runs_as_documented():
    t = tr(
        "local-chat-completions",
        "model=NAME,base_url=http://h:1/v1/chat/completions,tokenizer_backend=None,tokenized_requests=False",
        "--apply_chat_template",
    )
    assert t.preset == "openai_chat" and "model.tokenizer_backend=null" in t.overrides
    assert any("tokenized_requests: ignored" in n for n in t.notes)


def test_template_api_arguments_map_with_lm_evals_meaning():
    t = tr(
        "local-completions",
        "pretrained=m,base_url=http://h:1/v1/completions,tokenizer_backend=tiktoken,eos_string=</s>,"
        "revision=abc,verify_certificate=False,ca_cert_path=/ca.pem,custom_prefix_token_id=0,truncate=True,"
        "use_fast_tokenizer=False,num_concurrent=4,timeout=30,max_retries=2",
    )
    for override in (
        "model.model=m",
        "model.tokenizer_revision=abc",
        "model.tokenizer_backend=tiktoken",
        "model.eos_string='</s>'",
        "model.verify_certificate=false",
        "model.custom_prefix_token_id=0",
        "model.use_fast_tokenizer=false",
    ):
        assert override in t.overrides, override
    assert any(n.startswith("--model_args truncate: ignored") for n in t.notes)


def test_secrets_reach_the_model_through_the_environment_only(monkeypatch):
    monkeypatch.setenv("EVALFLOW_LMEVAL_AUTH_TOKEN", "")
    monkeypatch.delenv("EVALFLOW_LMEVAL_AUTH_TOKEN")
    t = translate(
        parse(
            [
                "--model",
                "local-completions",
                "--model_args",
                '{"model": "m", "base_url": "http://h:1/v1", "auth_token": "tok-123", "header": {"X-Key": "k-456"}}',
                "--tasks",
                "t",
            ]
        )
    )
    written = json.dumps([t.overrides, t.native(), t.lm_model_args, t.notes, repr(t)])
    assert "tok-123" not in written and "k-456" not in written
    assert "model.auth_token_env=EVALFLOW_LMEVAL_AUTH_TOKEN" in t.overrides
    assert "EVALFLOW_LMEVAL_AUTH_TOKEN" not in os.environ  # translate is pure: execute() sets them
    assert t.environment["EVALFLOW_LMEVAL_AUTH_TOKEN"] == "tok-123"
    assert json.loads(t.environment["EVALFLOW_LMEVAL_HEADER"]) == {"X-Key": "k-456"}


def test_device_and_trust_remote_code_with_a_served_model_are_ignored_with_a_note():
    t = tr("gguf", "base_url=http://h:1", "--device", "cuda:0", "--trust_remote_code")
    assert t.preset == "gguf_server" and not any("device" in o or "trust_remote" in o for o in t.overrides)
    assert sum(n.endswith("(the server runs the model)") for n in t.notes) == 2


@pytest.mark.parametrize(
    "model, preset, implied",
    [
        ("gguf", "gguf_server", ["model.base_url='http://h:1'"]),
        ("anthropic-chat-completions", "anthropic_chat", []),
        ("azure-openai-chat-completions", "azure_openai_chat", []),
        ("openai-chat-completions", "openai_chat", ["model.dialect=openai_hosted"]),
        ("openai-completions", "openai_completions", ["model.tokenizer_backend=tiktoken"]),
    ],
)
def test_other_api_model_types_map_onto_the_served_presets(model, preset, implied):
    t = tr(model, "base_url=http://h:1")
    assert t.preset == preset and all(o in t.overrides for o in implied)


def test_gguf_ignores_what_lm_evals_gguf_ignores():
    t = tr("gguf", "base_url=http://h:1,model=x,max_gen_toks=5")
    assert [o for o in t.overrides if o.startswith("model.")] == ["model.base_url='http://h:1'"]
    assert sum("lm-eval's gguf model ignores" in n for n in t.notes) == 2


@pytest.mark.parametrize("name", sorted(REFUSED_MODELS))
def test_an_unwrapped_engine_is_refused_with_one_paragraph(name):
    with pytest.raises(ConfigError) as err:
        tr(name, "pretrained=x")
    text = str(err.value)
    assert f"--model {name}: " in text and "evalflow wraps no such engine. Instead: " in text and "\n" not in text


@pytest.mark.skipif(peer_missing() is not None, reason=str(peer_missing()))
def test_every_model_type_lm_eval_registers_is_mapped_or_refused():
    code = "import json; from lm_eval.models import MODEL_MAPPING; print(json.dumps(sorted(MODEL_MAPPING)))"
    out = subprocess.run([str(PEER_VENV / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True)
    registered = set(json.loads(out.stdout)) | {"azure-openai-chat-completions"}  # registered by decorator only
    assert registered - set(MODELS) - set(REFUSED_MODELS) == set()
    assert set(MODELS) & set(REFUSED_MODELS) == set()


API_TYPES = sorted(name for name, mapped in MODELS.items() if mapped.unknown == "ignore")


@pytest.mark.parametrize("name", API_TYPES)
def test_unknown_keywords_of_an_api_model_are_ignored_as_lm_eval_ignores_them(name):
    t = tr(name, "base_url=http://h:1/v1,foo=1,bar=x")
    assert not any("foo" in o or "bar" in o for o in t.overrides if "model." in o)  # (task metadata has them)
    said = [n for n in t.notes if " foo" in n or " bar" in n]
    assert said and all("ignored" in n for n in said)
    if not name.startswith(("gguf", "ggml")):  # gguf says it of every argument but two, one line each
        assert len(said) == 1 and "foo, bar" in said[0]


@pytest.mark.parametrize("name", API_TYPES)
def test_lm_evals_api_models_take_unknown_keywords_and_never_read_them(name, monkeypatch):
    registry = pytest.importorskip("lm_eval.api.registry")
    pytest.importorskip("tenacity")
    if name.startswith("azure"):
        pytest.importorskip("openai")  # lm-eval's azure class imports the openai package
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY"):
        monkeypatch.setenv(variable, "k")
    import lm_eval.models  # noqa: F401  # registers lm-eval's model types

    lm = registry.get_model(name).create_from_arg_string(
        "model=m,base_url=http://127.0.0.1:9/v1/completions,tokenizer_backend=None,foo=1,bar=x"
    )
    assert not hasattr(lm, "foo") and not hasattr(lm, "bar")


def test_azure_reads_lm_evals_environment_variables_and_never_writes_the_key(toy_library, tmp_path):
    """``--model azure-openai-chat-completions`` with no model args, as lm-eval runs it: the endpoint,
    deployment and API version come from lm-eval's variables, the key is sent as lm-eval sends it
    (``Authorization: Bearer``) and lands in no file of the run folder or the cache."""
    from tests.support.chat_recorder import ChatRecorder
    from tests.support.cli import cli

    key = "sk-azure-7f3c0e1d"
    out, cache = tmp_path / "out", tmp_path / "cache"
    with ChatRecorder("dep-1") as rec:
        env = {
            "AZURE_OPENAI_ENDPOINT": rec.url.removesuffix("/v1"),
            "AZURE_OPENAI_DEPLOYMENT_NAME": "dep-1",
            "AZURE_OPENAI_API_VERSION": "2024-10-21",
            "AZURE_OPENAI_API_KEY": key,
            "EVALFLOW_CACHE": str(cache),
        }
        argv = ["--model", "azure-openai-chat-completions", "--tasks", "toy_gen", "--include_path", str(toy_library)]
        done = cli(
            ["lm-eval", *argv, "--apply_chat_template", "--limit", "2", "--log_samples", "--output_path", str(out)],
            env_extra=env,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(rec.requests) == 2
    for path, headers in rec.requests:
        assert path == "/openai/deployments/dep-1/chat/completions?api-version=2024-10-21"
        assert headers["Authorization"] == f"Bearer {key}"
    assert key not in done.stdout + done.stderr
    written = [p for folder in (out, cache) for p in folder.rglob("*") if p.is_file()]
    assert written and not [p for p in written if key.encode() in p.read_bytes()]
    assert any(b"dep-1" in p.read_bytes() for p in out.rglob("*.json"))  # the deployment is recorded
