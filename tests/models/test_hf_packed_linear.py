"""``model.packed_linear``: every nn.Linear through oneDNN with its weight packed once, the same
numbers as torch's linear layers up to float summation order, only where it applies."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from evalflow.core.records import Request
from evalflow.errors import ConfigError
from evalflow.models.hf import HFModel
from evalflow.models.hf.fast import packed_linear
from tests.support.generation import gen

needs_onednn = pytest.mark.skipif(
    packed_linear.onednn_missing() is not None, reason="torch without oneDNN's packed linear"
)


def _linears(model: torch.nn.Module) -> list[torch.nn.Module]:
    return [m for m in model.modules() if isinstance(m, (torch.nn.Linear, packed_linear.PackedLinear))]


@needs_onednn
def test_a_packed_layer_computes_torchs_linear_on_any_row_count():
    torch.manual_seed(0)
    layer = torch.nn.Linear(48, 80)
    packed = packed_linear.PackedLinear(layer)
    for shape in [(1, 48), (5, 48), (2, 7, 48), (1, 1100, 48)]:
        x = torch.randn(shape)
        assert torch.allclose(packed(x), F.linear(x, layer.weight, layer.bias), atol=1e-5)
    assert packed.weight.is_meta and packed.weight.shape == (80, 48) and packed.weight.dtype == torch.float32


@needs_onednn
def test_the_model_runs_packed_with_the_answers_of_torchs_layers(tiny_model_dir: Path):
    plain = HFModel(str(tiny_model_dir), batch_size=3, packed_linear=False)
    packed = HFModel(str(tiny_model_dir), batch_size=3)
    layers = _linears(packed.model)
    assert plain.fast.packed_linears == 0 and packed.fast.packed_linears == len(layers) > 0
    assert all(isinstance(m, packed_linear.PackedLinear) for m in layers)
    assert not any(isinstance(m, packed_linear.PackedLinear) for m in _linears(plain.model))
    output = packed.model.get_output_embeddings()
    if output.weight is packed.model.get_input_embeddings().weight:  # tied: the shared tensor stays readable
        assert not output.weight.is_meta
    requests = [
        Request("loglikelihood", (c, x)) for c, x in [("The cat", " sat"), ("Paris is", " big"), ("3 + 3 =", " 6")]
    ]
    for (lp, greedy), (ref_lp, ref_greedy) in zip(packed.loglikelihood(requests), plain.loglikelihood(requests)):
        assert lp == pytest.approx(ref_lp, abs=1e-5) and greedy == ref_greedy
    prompts = [gen(q, until=[], max_gen_toks=10) for q in ["The cat sat", "Once upon", "1 2 3"]]
    assert packed.generate_until(prompts) == plain.generate_until(prompts)


@needs_onednn
def test_a_shape_whose_packed_result_differs_keeps_torchs_layer(tiny_model_dir: Path, monkeypatch, caplog):
    monkeypatch.setattr(packed_linear, "_agrees", lambda linear: linear.out_features != linear.in_features)
    with caplog.at_level(logging.WARNING, logger=packed_linear.__name__):
        model = HFModel(str(tiny_model_dir), batch_size=2)
    square = [m for m in _linears(model.model) if m.in_features == m.out_features]
    assert square and all(type(m) is torch.nn.Linear for m in square)
    assert model.fast.packed_linears == len(_linears(model.model)) - len(square)
    assert "keep torch's kernel" in caplog.text


def test_subclasses_other_dtypes_and_devices_are_left_alone():
    class Adapted(torch.nn.Linear):  # a subclass (LoRA, quantized) has its own forward
        pass

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.adapted, self.embed = Adapted(4, 4), torch.nn.Embedding(3, 4)

        @property
        def dtype(self) -> torch.dtype:
            return self.embed.weight.dtype

    tiny = Tiny()
    assert packed_linear.pack_linears(tiny) == 0 and type(tiny.adapted) is Adapted
    assert "bfloat16" in packed_linear.unsupported(Tiny().to(torch.bfloat16))
    spread = Tiny()
    spread.hf_device_map = {"": 0}
    assert "accelerate" in packed_linear.unsupported(spread)


def test_the_setting_must_be_a_boolean(tiny_model_dir: Path):
    with pytest.raises(ConfigError, match="model.packed_linear"):
        HFModel(str(tiny_model_dir), packed_linear="yes")


def _in_file_mappings(model: torch.nn.Module, folder: Path) -> int:
    """How many of the model's parameters point into a memory mapping of a file in ``folder``."""
    ranges = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        if str(folder) in line:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            ranges.append((lo, hi))
    return sum(any(lo <= p.data_ptr() < hi for lo, hi in ranges) for p in model.parameters())


@needs_onednn
@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux's /proc")
def test_packing_releases_the_loaded_files_memory_mapping(tiny_model_dir: Path):
    """transformers maps the weights file and points every parameter into it; the mapping stays
    resident while any of them does, so the parameters left after packing are copied out of it."""
    plain = HFModel(str(tiny_model_dir), batch_size=1, packed_linear=False)
    if not _in_file_mappings(plain.model, tiny_model_dir):
        pytest.skip("this transformers version copies the weights out of the file itself")
    packed = HFModel(str(tiny_model_dir), batch_size=1)
    assert packed.fast.packed_linears > 0 and _in_file_mappings(packed.model, tiny_model_dir) == 0
