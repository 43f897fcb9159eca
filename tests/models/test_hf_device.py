"""``model.device``: ``auto`` and lm-eval's fallback resolved from what torch reports (every branch,
with torch's device queries patched), the fast engine kept to the devices it is proven on, and
where the device used is said: the run's log, the manifest, results.json; never the cache key."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
import torch

from evalflow import evaluate
from evalflow.core.records import Request
from evalflow.errors import ConfigError
from evalflow.models import registry
from evalflow.models.hf import HFModel, device, engine
from evalflow.models.hf.device import Device, Seen, resolve
from evalflow.models.hf.engine import REFERENCE, engine_paths, proven_paths

NONE, ONE_GPU, TWO_GPUS, MAC = Seen(0, False), Seen(1, False), Seen(2, False), Seen(0, True)


@pytest.mark.parametrize(
    "asked, seen, used",
    [
        ("auto", TWO_GPUS, "cuda"),  # lm-eval's device name for the first GPU
        ("auto", Seen(1, True), "cuda"),  # CUDA before MPS
        ("auto", MAC, "mps"),
        ("auto", NONE, "cpu"),
        ("cpu", TWO_GPUS, "cpu"),  # asked for and here: as asked
        ("cuda", ONE_GPU, "cuda"),
        ("cuda:1", TWO_GPUS, "cuda:1"),
        ("mps", MAC, "mps"),
        ("mps:0", MAC, "mps:0"),
        ("CUDA:0", ONE_GPU, "cuda:0"),
        ("xpu:1", Seen(0, False, (("xpu", 2),)), "xpu:1"),  # lm-eval's list has npu:N, xpu:N, hpu:N too
        ("hpu:0", Seen(0, False, (("hpu", 1),)), "hpu:0"),
    ],
)
def test_a_device_that_is_here_is_used_without_a_word(asked: str, seen: Seen, used: str) -> None:
    assert resolve(asked, seen) == Device(asked, used)


@pytest.mark.parametrize(
    "asked, seen, used, why",
    [
        ("cuda", NONE, "cpu", "torch sees no CUDA device here"),
        ("cuda:0", MAC, "cpu", "torch sees no CUDA device here"),  # lm-eval's fallback never picks MPS
        ("cuda:2", TWO_GPUS, "cuda", r"torch sees 2 CUDA devices \(cuda:0 to cuda:1\)"),  # lm-eval's: cuda if seen
        ("cuda:1", ONE_GPU, "cuda", r"torch sees 1 CUDA device \(cuda:0 to cuda:0\)"),
        ("mps", NONE, "cpu", "torch sees no MPS device here"),
        ("mps", ONE_GPU, "cuda", "torch sees no MPS device here"),
        ("mps:1", MAC, "cpu", "MPS has one device, mps:0"),
        ("xpu:0", ONE_GPU, "cuda", "torch sees 0 xpu devices here"),
        ("npu:1", Seen(0, False, (("npu", 1),)), "cpu", "torch sees 1 npu device here"),
    ],
)
def test_a_device_that_is_not_here_falls_back_as_lm_eval_does_with_a_warning(
    asked: str, seen: Seen, used: str, why: str
) -> None:
    got = resolve(asked, seen)
    assert got.used == used and got.warning is not None
    assert got.warning.startswith(f"model.device={asked} but ") and f"running on {used} instead" in got.warning
    assert "model.device=auto" in got.warning and re.search(why, got.warning)


@pytest.mark.parametrize("asked", ["gpu", "cuda0", "cuda:x", "auto:0", "xla", "", None, 0])
def test_a_name_that_is_no_device_is_refused_naming_the_choices(asked: object) -> None:
    with pytest.raises(
        ConfigError, match=r"model.device .* is not a device name; use one of auto, cpu, cuda, cuda:N, mps"
    ):
        resolve(asked, TWO_GPUS)


@pytest.mark.parametrize(
    "available, count, mps, want",
    [
        (False, 0, False, NONE),
        (False, 3, False, NONE),  # devices counted but not usable (no driver): none
        (True, 2, False, TWO_GPUS),
        (False, 0, True, MAC),
    ],
)
def test_what_torch_reports_is_read_from_its_device_queries(
    monkeypatch, available: bool, count: int, mps: bool, want: Seen
) -> None:
    monkeypatch.undo()  # the folder's fixture stands in for these queries
    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    assert device.seen() == want


def test_other_accelerators_are_counted_by_their_torch_backends(monkeypatch) -> None:
    monkeypatch.undo()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    fake = type("Backend", (), {"is_available": staticmethod(lambda: True), "device_count": staticmethod(lambda: 4)})
    monkeypatch.setattr(torch, "xpu", fake, raising=False)
    assert device.seen() == Seen(0, False, (("xpu", 4),))


def test_choose_logs_one_warning_line_naming_the_model(monkeypatch, caplog) -> None:
    monkeypatch.setattr(device, "seen", lambda: NONE)
    with caplog.at_level(logging.INFO, logger="evalflow.models.hf"):
        assert device.choose("cuda:0", "hf model").used == "cpu"
        assert device.choose("auto", "hf model").used == "cpu"
    assert [(r.levelno, r.getMessage()[:35]) for r in caplog.records] == [
        (logging.WARNING, "hf model: model.device=cuda:0 but t")
    ]


def test_the_fast_engine_runs_only_where_it_is_proven_unless_forced() -> None:
    fast = engine_paths("fast", True, "continuous", 4, True, True)
    assert {"cpu"} == engine.PROVEN_DEVICES
    assert proven_paths(fast, "cpu", False) == (fast, None)
    assert proven_paths(fast, "cuda", True) == (fast, None)
    assert proven_paths(REFERENCE, "cuda", False) == (REFERENCE, None)  # engine=reference: nothing to say
    for kind in ("cuda", "mps"):
        paths, line = proven_paths(fast, kind, False)
        assert paths == REFERENCE and line is not None and "\n" not in line
        assert f"not yet on {kind}" in line and "reference engine" in line
        assert "model.force_fast=true" in line and "benchmarks/gpu_check.py" in line


def test_a_device_asked_for_but_not_here_runs_on_the_cpu_with_the_same_answers(tiny_model_dir: Path, caplog) -> None:
    requests = [Request("loglikelihood", ("The cat sat on the", " mat"))]
    with caplog.at_level(logging.INFO, logger="evalflow.models.hf"):
        model = HFModel(str(tiny_model_dir), device="cuda:0")  # the folder's fixture: torch sees no GPU
    assert model.device == torch.device("cpu") and model.describe() == {"device": "cpu", "engine": "fast"}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "model.device=cuda:0 but torch sees no CUDA device here" in warnings[0]
    assert "hf model: runs on cpu (model.device=cuda:0)" in [r.getMessage() for r in caplog.records]
    assert model.loglikelihood(requests) == HFModel(str(tiny_model_dir), device="cpu").loglikelihood(requests)


def test_on_a_device_without_proof_the_model_runs_the_reference_engine(
    tiny_model_dir: Path, monkeypatch, caplog
) -> None:
    """As on a GPU: the CPU taken out of the proven devices, the model keeps the reference engine's
    paths, says so once, and gives the reference engine's answers; ``force_fast`` keeps the fast one."""
    monkeypatch.setattr(engine, "PROVEN_DEVICES", frozenset())
    with caplog.at_level(logging.WARNING, logger="evalflow.models.hf"):
        model = HFModel(str(tiny_model_dir), batch_size=3)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "not yet on cpu: this run uses the reference engine" in lines[0]
    assert model.paths == REFERENCE and model.fast is None
    assert model.describe() == {"device": "cpu", "engine": "reference"}
    forced = HFModel(str(tiny_model_dir), batch_size=3, force_fast=True)
    assert forced.paths != REFERENCE and forced.describe()["engine"] == "fast"
    with pytest.raises(ConfigError, match="model.force_fast"):
        HFModel(str(tiny_model_dir), force_fast="yes")


def test_the_key_never_names_the_device_nor_force_fast(tiny_model_dir: Path) -> None:
    """The same weights' answers wherever they run (float noise aside, as batch shapes): ``auto``,
    what it resolves to and a fallback share one key: neither the literal ``auto`` nor a device enters it."""
    base = {"type": "hf", "pretrained": str(tiny_model_dir)}
    keys = [registry.model_identity({**base, "device": d}) for d in ("auto", "cpu", "cuda", "cuda:1", "mps")]
    assert all(k == keys[0] for k in keys) and "device" not in json.dumps(keys[0])
    assert registry.model_identity({**base, "force_fast": True}) == keys[0]
    for kind in ("hf", "hf_multimodal"):  # a bad name is refused by the key too: a cached run never loads the model
        with pytest.raises(ConfigError, match="model.device 'gpu' is not a device name"):
            registry.model_identity({**base, "type": kind, "device": "gpu"})


def test_the_device_used_is_in_the_manifest_and_results(tiny_model_dir: Path, tmp_path: Path) -> None:
    config = {"type": "hf", "pretrained": str(tiny_model_dir)}
    evaluate("arith_mc", config, limit=2, cache_dir=tmp_path / "cache", output_dir=tmp_path / "run")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert manifest["inference"]["model"] == {"device": "cpu", "engine": "fast"}
    assert results["config"]["device"] == "cpu" and results["evalflow"]["model"]["device"] == "auto"
    evaluate("arith_mc", config, limit=2, cache_dir=tmp_path / "cache", output_dir=tmp_path / "again")
    cached = json.loads((tmp_path / "again" / "manifest.json").read_text())
    assert cached["inference"]["computed"] == 0 and "model" not in cached["inference"]  # loaded nowhere
    assert json.loads((tmp_path / "again" / "results.json").read_text())["config"]["device"] == "auto"
