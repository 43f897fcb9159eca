"""HFModel.identity: what the response cache is keyed by, computed without torch or the weights."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evalflow.errors import ConfigError, ModelError
from evalflow.models.hf import HFModel

REPO = Path(__file__).resolve().parents[2]


def ident(**config) -> dict:
    return HFModel.identity(**config)


def test_identity_ignores_batching_and_device_but_not_what_changes_outputs(tiny_model_dir):
    base = ident(pretrained=str(tiny_model_dir))
    speed = {
        "batch_size": 16,
        "max_batch_size": 8,
        "device": "cuda",
        "threads": 1,
        "prefix_sharing": False,
        "batching": "lmeval",
        "draft_tokens": 0,
        "memo_gguf": False,
        "native_attention": False,
        "packed_linear": False,
        "force_fast": True,
    }
    for key, value in speed.items():
        assert ident(pretrained=str(tiny_model_dir), **{key: value}) == base, key
    changes = {
        "dtype": "bfloat16",
        "max_length": 64,
        "add_bos_token": False,
        "truncation": True,
        "max_gen_toks": 32,
        "tokenizer": str(tiny_model_dir),
        "engine": "reference",  # lm-eval's floats, never served the fast engine's
    }
    for key, value in changes.items():
        assert ident(pretrained=str(tiny_model_dir), **{key: value}) != base, key


def test_identity_follows_file_contents_not_paths(tiny_model_dir, tmp_path):
    moved = shutil.copytree(tiny_model_dir, tmp_path / "moved")
    assert ident(pretrained=str(moved)) == ident(pretrained=str(tiny_model_dir))
    (moved / "README.md").write_text("notes do not change outputs")
    assert ident(pretrained=str(moved)) == ident(pretrained=str(tiny_model_dir))


def test_identity_changes_when_weights_change(tiny_model_dir, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    edited = shutil.copytree(tiny_model_dir, tmp_path / "edited")
    model = AutoModelForCausalLM.from_pretrained(edited)
    with torch.no_grad():
        model.lm_head.weight[0, 0] += 1.0
    model.save_pretrained(edited)
    assert ident(pretrained=str(edited)) != ident(pretrained=str(tiny_model_dir))


def test_gguf_identity_is_the_file_contents(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "m.gguf").write_bytes(b"GGUF one")
    (b / "m.gguf").write_bytes(b"GGUF one")
    (b / "other.gguf").write_bytes(b"GGUF two")
    assert ident(pretrained=str(a), gguf_file="m.gguf") == ident(pretrained=str(b), gguf_file="m.gguf")
    assert ident(pretrained=str(b), gguf_file="other.gguf") != ident(pretrained=str(b), gguf_file="m.gguf")
    with pytest.raises(ModelError, match="gguf_file 'nope.gguf'"):
        ident(pretrained=str(a), gguf_file="nope.gguf")


def test_hub_ids_use_the_locally_cached_commit(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    refs = tmp_path / "models--org--model" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text("a" * 40)
    weights = ident(pretrained="org/model")["weights"]
    assert weights == {
        "hub_id": "org/model",
        "revision": "main",
        "commit": "a" * 40,
        "gguf_file": None,
        "subfolder": "",
    }
    assert ident(pretrained="org/model", revision="v2")["weights"]["commit"] is None  # unknown: not guessed
    assert ident(pretrained="org/model", revision="b" * 40)["weights"]["commit"] == "b" * 40
    (refs / "main").write_text("c" * 40)
    assert ident(pretrained="org/model")["weights"]["commit"] == "c" * 40


def test_bad_pretrained_values(tmp_path):
    with pytest.raises(ConfigError, match="model.pretrained is not set"):
        ident(pretrained=None)
    with pytest.raises(ModelError, match="not a folder"):
        ident(pretrained=str(tmp_path / "missing"))
    with pytest.raises(ModelError, match="holds no weight"):
        ident(pretrained=str(tmp_path))


def test_importing_the_module_and_identity_import_neither_torch_nor_transformers(tiny_model_dir):
    code = (
        "import sys, json\n"
        "from evalflow.models.hf import HFModel\n"
        f"HFModel.identity(pretrained={str(tiny_model_dir)!r}, dtype='float32')\n"
        "print(json.dumps(sorted(m for m in ('torch', 'transformers', 'tokenizers') if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
