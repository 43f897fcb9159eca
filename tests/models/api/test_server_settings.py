"""A served model's cache identity: what changes it, what does not, and that computing it touches
neither torch, nor the HTTP client, nor the network."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evalflow.errors import ConfigError
from evalflow.models.registry import model_identity

ROOT = Path(__file__).resolve().parents[3]
BASE = {"type": "openai_completions", "model": "m", "base_url": "http://127.0.0.1:9/v1", "tokenizer": None}


@pytest.fixture
def tok_file(tmp_path: Path) -> Path:
    path = tmp_path / "tok.gguf"
    path.write_bytes(b"tokenizer one")
    return path


def ident(**change):
    return model_identity({**BASE, **change})


@pytest.mark.parametrize(
    "key, value",
    [
        ("model", "other"),
        ("revision", "abc123"),
        ("max_length", 4096),
        ("max_gen_toks", 64),
        ("seed", 1),
        ("tokenized_requests", False),
        ("add_bos_token", True),
    ],
)
def test_answer_changing_settings_change_the_identity(key, value):
    assert ident(**{key: value}) != ident()


@pytest.mark.parametrize(
    "key, value",
    [
        ("base_url", "http://10.0.0.5:8000/v1/completions"),
        ("num_concurrent", 8),
        ("batch_size", 4),
        ("max_retries", 9),
        ("timeout", 5),
        ("retry_wait", 0.1),
        ("check_logprobs", False),
        ("headers", {"X-Team": "eval"}),
        ("api_key_env", "MY_KEY"),
    ],
)
def test_speed_location_and_secret_settings_do_not(key, value):
    assert ident(**{key: value}) == ident()


def test_url_is_part_of_the_identity_only_when_asked():
    a = ident(identity_includes_url=True)
    assert a != ident(identity_includes_url=True, base_url="http://other:8000/v1")
    assert a == ident(identity_includes_url=True, base_url="http://127.0.0.1:9/v1/")


def test_tokenizer_file_by_content_not_path(tok_file: Path, tmp_path: Path):
    moved = tmp_path / "moved.gguf"
    moved.write_bytes(tok_file.read_bytes())
    assert ident(tokenizer=str(tok_file)) == ident(tokenizer=str(moved))
    moved.write_bytes(b"tokenizer two")
    assert ident(tokenizer=str(tok_file)) != ident(tokenizer=str(moved))


def test_chat_and_completions_never_share_answers():
    assert model_identity({**BASE, "type": "openai_chat"}) != ident()


def test_the_api_key_is_never_in_the_identity(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123")
    assert "sk-secret-123" not in repr(ident())


def test_bad_settings_are_refused_with_the_key():
    with pytest.raises(ConfigError, match="model.base_url"):
        ident(base_url=None)
    with pytest.raises(ConfigError, match="model.num_concurrent"):
        ident(num_concurrent=0)
    with pytest.raises(ConfigError, match="model.api_key"):
        ident(api_key="sk-x")  # a key in the config would be written to the snapshot: refused


def test_identity_imports_neither_torch_nor_the_http_client():
    code = (
        "import sys; from evalflow.models.registry import model_identity; "
        f"model_identity({BASE!r}); model_identity({{**{BASE!r}, 'type': 'openai_chat'}}); "
        "bad = [m for m in ('torch', 'transformers', 'aiohttp', 'tenacity') if m in sys.modules]; "
        "assert not bad, bad"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
    )
    assert out.returncode == 0, out.stderr
