"""Speed settings of HFModel that never change answers: torch threads, and the progress reporter
the inference edge shows while a model works through its requests."""

from __future__ import annotations

import io
import logging
import types

import pytest
import torch

from evalflow.errors import ConfigError
from evalflow.models.hf import HFModel, load
from evalflow.models.hf.load import parse_threads
from evalflow.scale.answer_cache import RequestProgress


def test_threads_are_set_when_the_model_loads(tiny_model_dir):
    HFModel(str(tiny_model_dir), threads=2)
    assert torch.get_num_threads() == 2
    HFModel(str(tiny_model_dir))  # default: every core this process may use (pinned to 1 in these tests)
    assert torch.get_num_threads() == 1


def test_default_threads_are_the_cores_this_process_may_use(monkeypatch):
    monkeypatch.undo()  # the folder's fixture pins the default to 1
    assert parse_threads(None) == load.default_threads() >= 1
    assert parse_threads(3) == 3
    for bad in (0, -2, "two", True, 1.5):
        with pytest.raises(ConfigError, match="model.threads"):
            parse_threads(bad)


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_logs_rate_and_eta_when_not_a_terminal(caplog):
    clock = iter([100.0, 110.0, 120.0, 121.0])  # one reading per call: a fifth call would raise StopIteration
    progress = RequestProgress(
        log_every=15.0,
        stream=io.StringIO(),
        clock=lambda: next(clock),
        timer=lambda tick, period: types.SimpleNamespace(stop=lambda: None),
    )  # no thread reads the clock
    with caplog.at_level(logging.INFO, logger="evalflow.scale.answer_cache"):
        progress(64, 256)  # t=100: the rate counts from here
        progress(128, 256)  # t=110: 10 s since the last line, under log_every: quiet
        progress(192, 256)  # t=120: 128 requests in 20 s
        progress(256, 256)  # t=121: done, always logged (192 in 21 s)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "inference: 192/256 requests, 6.4 requests/s, ETA 10 s",
        "inference: 256/256 requests, 9.14 requests/s",
    ]


def test_progress_draws_a_bar_on_a_terminal_and_closes_it():
    stream = Tty()
    progress = RequestProgress(stream=stream)
    progress(10, 30)
    assert progress.bar is not None
    progress(20, 30)
    progress(30, 30)
    assert progress.bar is None and "inference" in stream.getvalue() and "req/s" in stream.getvalue()
    progress(5, 10)  # a new list of requests starts a new bar
    assert progress.bar is not None and progress.total == 10
    progress.close()


def test_parallelize_lets_accelerate_place_the_layers_and_changes_no_number(tiny_model_dir, caplog, monkeypatch):
    import transformers

    from evalflow.core.records import Request

    requests = [
        Request("loglikelihood", ("The cat", " sat on the mat")),
        Request("loglikelihood", ("Paris is", " the capital")),
    ]
    whole = HFModel(str(tiny_model_dir), batch_size=2)
    calls: list[dict] = []
    real = transformers.AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(
        transformers.AutoModelForCausalLM, "from_pretrained", lambda *a, **k: calls.append(k) or real(*a, **k)
    )
    placed = HFModel(str(tiny_model_dir), batch_size=2, parallelize=True, max_cpu_memory="2GiB")
    assert calls[0]["device_map"] == "auto" and list(calls[0]["max_memory"]) == ["cpu"]
    assert placed.device == torch.device("cpu")
    assert placed.loglikelihood(requests) == whole.loglikelihood(requests)
    with caplog.at_level(logging.WARNING, logger="evalflow.models.hf.hf_model"):
        HFModel(str(tiny_model_dir), device_map="auto")
    assert "only with parallelize=true" in caplog.text


def test_accelerate_args_follow_lm_eval():
    assert load.accelerate_args(False, None, None, None, "./offload") == {}
    args = load.accelerate_args(True, None, None, "8GiB", "/tmp/off")
    assert args == {"device_map": "auto", "max_memory": {"cpu": "8GiB"}, "offload_folder": "/tmp/off"}
    assert load.accelerate_args(True, "sequential", None, None, "x")["device_map"] == "sequential"
