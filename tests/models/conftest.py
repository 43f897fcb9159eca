"""Fixtures of the model tests: tiny random Llamas on disk (tests/support/tiny_models.py), one torch
thread, a CPU machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.tiny_models import build_tiny_model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama whose tokenizer prepends BOS, like Llama's own."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny_bos"), add_bos=True)


@pytest.fixture(scope="session")
def tiny_nobos_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama whose tokenizer adds no special tokens, like SmolLM2's."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny_nobos"), add_bos=False, seed=1)


@pytest.fixture(autouse=True)
def one_torch_thread(monkeypatch: pytest.MonkeyPatch):
    """Tiny models run fastest on one thread; on a busy 2-core machine torch's thread pool spins.

    HFModel sets torch's threads when it loads (model.threads, default all cores), so its default
    is pinned to one here too. Restored after each test, so nothing leaks into other test folders.
    """
    import torch

    from evalflow.models.hf import load

    monkeypatch.setattr(load, "default_threads", lambda: 1)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def cpu_machine(monkeypatch: pytest.MonkeyPatch):
    """These tests prove the fast paths on the CPU, where they are proven (engine.PROVEN_DEVICES):
    ``model.device=auto`` resolves to the CPU here even on a machine with a GPU, whose torch would
    otherwise send the tiny models to CUDA and the reference engine. ``test_hf_device`` patches
    torch's own device queries instead, to test the resolution itself."""
    from evalflow.models.hf import device

    monkeypatch.setattr(device, "seen", lambda: device.Seen(cuda=0, mps=False))
