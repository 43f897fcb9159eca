"""model=vllm without vLLM: its cache key (``VLLMModel.identity``), its preset, and the settings it
refuses before any engine starts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evalflow.errors import ConfigError, ModelError
from evalflow.models.registry import model_class, model_identity
from evalflow.models.vllm.vllm_model import SPEED_ONLY, VLLMModel

REPO = Path(__file__).resolve().parents[3]


def ident(folder: Path, **config) -> dict:
    return model_identity({"type": "vllm", "pretrained": str(folder), **config})


def test_the_key_ignores_memory_batching_and_parallelism_but_not_what_changes_answers(tiny_model_dir, tmp_path):
    base = ident(tiny_model_dir)
    for key, value in {
        "gpu_memory_utilization": 0.5,
        "tensor_parallel_size": 4,
        "max_num_seqs": 8,
        "seed": 7,
        "enable_prefix_caching": True,
        "max_num_batched_tokens": 4096,
    }.items():
        assert ident(tiny_model_dir, **{key: value}) == base, key
    lora = tmp_path / "lora"
    lora.mkdir()
    (lora / "adapter_config.json").write_text('{"r": 8}')
    changes = {
        "dtype": "bfloat16",
        "max_model_len": 1024,
        "max_length": 512,
        "add_bos_token": True,
        "prefix_token_id": 0,
        "max_gen_toks": 32,
        "truncation_side": "middle",
        "enforce_eager": True,
        "quantization": "fp8",
        "tokenizer": str(tiny_model_dir),
        "lora_local_path": str(lora),
        "kv_cache_dtype": "fp8",
    }  # an engine argument the class does not name: in the key
    for key, value in changes.items():
        assert ident(tiny_model_dir, **{key: value}) != base, key
    assert SPEED_ONLY.isdisjoint(changes)


def test_the_key_follows_the_weights_and_the_adapters_contents(tiny_model_dir, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(tiny_model_dir, copy)
    assert ident(copy) == ident(tiny_model_dir)  # a moved folder keeps its cache
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "rms_norm_eps": 1e-3}))
    assert ident(copy) != ident(tiny_model_dir)
    lora = tmp_path / "lora"
    lora.mkdir()
    with pytest.raises(ModelError, match="has no adapter_config.json; give the folder a LoRA adapter was saved to"):
        ident(tiny_model_dir, lora_local_path=str(lora))  # before any engine starts
    (lora / "adapter_config.json").write_text('{"r": 8}')
    (lora / "adapter_model.safetensors").write_bytes(b"a")
    first = ident(tiny_model_dir, lora_local_path=str(lora))
    (lora / "adapter_model.safetensors").write_bytes(b"b")
    assert ident(tiny_model_dir, lora_local_path=str(lora)) != first


def test_the_key_and_the_class_import_neither_torch_nor_vllm(tiny_model_dir):
    probe = (
        "import sys, json; from evalflow.models.registry import model_identity; "
        f"model_identity({{'type': 'vllm', 'pretrained': {str(tiny_model_dir)!r}}}); "
        "print(json.dumps(sorted(m for m in ('torch', 'vllm', 'transformers') if m in sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_settings_lm_eval_refuses_or_evalflow_runs_otherwise_are_refused_before_vllm_starts(tiny_model_dir):
    with pytest.raises(ConfigError, match="workers=2 worker_resources='{num_gpus: 2}'"):
        VLLMModel(str(tiny_model_dir), data_parallel_size=2, tensor_parallel_size=2)
    with pytest.raises(ConfigError, match="both set"):
        ident(tiny_model_dir, max_length=512, max_model_len=1024)
    with pytest.raises(ConfigError, match="truncation_side"):
        ident(tiny_model_dir, truncation_side="both")
    with pytest.raises(ConfigError, match="model.pretrained is not set"):
        model_identity({"type": "vllm"})


def test_a_run_without_vllm_installed_is_one_paragraph_on_how_to_get_it(tiny_model_dir):
    import importlib.util

    from evalflow.errors import ModelError

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed in this Python")
    with pytest.raises(ModelError, match=r"vllm-cpu-venv builds vLLM's CPU build"):
        VLLMModel(str(tiny_model_dir))


def test_the_preset_names_the_class_and_composes(tiny_model_dir):
    from evalflow.config.compose import compose_settings

    assert model_class("vllm") is VLLMModel
    settings = compose_settings(
        task="arith_mc",
        preset="vllm",
        overrides=[f"model.pretrained={tiny_model_dir}", "model.dtype=float32", "+model.kv_cache_dtype=auto"],
        values={},
    )
    model = dict(settings.model)
    assert model["type"] == "vllm" and model["kv_cache_dtype"] == "auto" and model["truncation_side"] == "left"
    assert model_identity(model)["engine_args"] == {"kv_cache_dtype": "auto"}


def test_the_chat_template_comes_from_the_tokenizer_folder_vllm_loads(tiny_model_dir, tmp_path):
    """lm-eval's VLLM renders prompts with its tokenizer's apply_chat_template: evalflow reads the
    same template, from ``tokenizer`` (else ``pretrained``), without vLLM, as for the hf backend."""
    from transformers import AutoTokenizer

    from evalflow.taskspec.prompts.chat_templates import chat_template

    template = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.chat_template = template
    tok.save_pretrained(tmp_path / "tok")
    source = VLLMModel.chat_template_source(
        {"type": "vllm", "pretrained": str(tiny_model_dir), "tokenizer": str(tmp_path / "tok")}
    )
    assert chat_template(source)[0] == template


def test_stopping_signals_during_engine_start_are_delivered_once_it_is_up(monkeypatch):
    """vLLM's start-up swallows the exception a SIGTERM handler raises; held and sent again after
    the constructor returns, the signal reaches evalflow's handler (which ends the run)."""
    import os
    import signal
    import types

    from evalflow.models.vllm import vllm_calls as engine

    class Stopped(Exception):
        pass

    def stop(signum, frame):
        raise Stopped(signum)

    class SwallowingLLM:  # as vLLM's start-up behaved: a KeyboardInterrupt-like exception lost
        def __init__(self, **kwargs):
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                sum(range(1000))  # the handler runs here, between bytecodes
            except BaseException:
                pass
            self.kwargs = kwargs

    monkeypatch.setattr(engine, "require_vllm", lambda: None)
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=SwallowingLLM))
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        with pytest.raises(Stopped):
            engine.load_llm({"model": "m"})
        assert signal.getsignal(signal.SIGTERM) is stop
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_an_engine_argument_vllm_does_not_take_is_one_paragraph(monkeypatch):
    import types

    from evalflow.models.vllm import vllm_calls as engine

    def llm(**kwargs):
        raise TypeError("EngineArgs.__init__() got an unexpected keyword argument 'enforce_eagr'")

    monkeypatch.setattr(engine, "require_vllm", lambda: None)
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=llm))
    with pytest.raises(ModelError, match=r"model.enforce_eagr: vLLM's engine takes no argument 'enforce_eagr'"):
        engine.load_llm({"model": "m", "enforce_eagr": True})
