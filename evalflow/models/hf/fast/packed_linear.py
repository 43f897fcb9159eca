"""A model's linear layers through oneDNN with their weights packed once (``model.packed_linear``,
default on: fp32 models on the CPU).

Why: torch runs an fp32 ``nn.Linear`` on the CPU as an MKL GEMM over the weight in its plain
row-major layout, packing panels of it afresh at every call; on AMD CPUs MKL also takes a generic
code path. oneDNN's inner product over a weight reordered once into its own blocked layout (what
torch.compile's CPU backend does for frozen linears: ``mkldnn._reorder_linear_weight`` then
``mkldnn._linear_pointwise``) ran SmolLM2's projections 1.4-2.8x faster at a decode step's 1-40
rows and 1.15-1.35x on a 1,100-token prompt (AMD EPYC, 2 cores; the output projection 2.7x at 40
rows); gsm8k's decode steps took 18.7-19.2 against 27.0-33.7 s. The products are the same, summed
in another order: float noise (all 30 gsm8k generations identical), so, like the batch shape, not
part of the cache key.

Only exact ``nn.Linear`` modules are packed (a subclass, quantized or adapted, keeps its own
forward), only on the CPU in fp32 where torch has oneDNN, and each distinct weight shape is
checked once against ``F.linear`` (a mismatch keeps torch's layer, logged). The packed weight
replaces the plain one, so memory stays the same; a tied output embedding keeps its tensor (the
input embedding's), and the parameters left are copied out of the loaded file's memory mapping so
that it is released. ``weight`` stays readable as a meta tensor (shape and dtype, no data) for model
code that asks a projection for its dtype.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

import torch
import torch.nn.functional as F

log = logging.getLogger(__name__)

PACK_ROWS = 1024  # the row count oneDNN lays the weights out for; as fast at a decode step's 1-40 rows (measured)


class PackedLinear(torch.nn.Module):
    """``nn.Linear``'s forward over a oneDNN-packed copy of its weight (the plain one is dropped)."""

    def __init__(self, linear: torch.nn.Linear, keep_weight: bool = False) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), PACK_ROWS)
        self.bias = linear.bias
        self._weight = linear.weight if keep_weight else None
        self._meta = torch.empty(linear.weight.shape, dtype=linear.weight.dtype, device="meta")

    @property
    def weight(self) -> torch.Tensor:
        """The plain weight where it is shared (a tied embedding), else its shape and dtype only."""
        return self._weight if self._weight is not None else self._meta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}, oneDNN-packed"
        )


def unsupported(model: Any) -> str | None:
    """Why packing does not apply to this model, or None when it does."""
    if getattr(model, "hf_device_map", None):
        return "the model is spread over devices (accelerate)"
    if getattr(model, "dtype", None) != torch.float32:
        return f"the model runs in {getattr(model, 'dtype', 'an unknown dtype')}, not float32"
    if getattr(model, "device", torch.device("cpu")).type != "cpu":
        return "the model is not on the CPU"
    return onednn_missing()


def onednn_missing() -> str | None:
    """Why this torch build cannot pack linear layers, or None when it can."""
    if not torch.backends.mkldnn.is_available():
        return "this torch build has no oneDNN"
    try:
        torch.ops.mkldnn._reorder_linear_weight, torch.ops.mkldnn._linear_pointwise  # noqa: B018
    except (AttributeError, RuntimeError):
        return "this torch build lacks oneDNN's packed linear ops"
    return None


def pack_linears(model: Any) -> int:
    """Replace the model's ``nn.Linear`` layers by :class:`PackedLinear` where it applies; returns how
    many were packed (0 where it does not apply, the reason logged)."""
    reason = unsupported(model)
    if reason is not None:
        log.info("linear layers: torch's (oneDNN packing does not apply: %s)", reason)
        return 0
    tied = _tied_output_weight(model)
    agrees: dict[tuple[int, ...], bool] = {}
    packed: weakref.WeakKeyDictionary[torch.nn.Linear, PackedLinear] = weakref.WeakKeyDictionary()
    # the parents only: a replaced layer's plain weight is freed as soon as nothing holds it, so
    # packing never holds two copies of every weight at once
    parents = [m for m in model.modules() if any(type(c) is torch.nn.Linear for c in m.children())]
    for parent in parents:
        for name, child in list(parent.named_children()):
            if type(child) is not torch.nn.Linear:
                continue
            shape = tuple(child.weight.shape)
            if shape not in agrees:
                agrees[shape] = _agrees(child)
            if agrees[shape]:
                if child not in packed:  # a layer shared by two parents is packed once
                    packed[child] = PackedLinear(child, keep_weight=child.weight is tied)
                setattr(parent, name, packed[child])
            del child
    count = sum(isinstance(m, PackedLinear) for m in model.modules())
    if count:
        _own_remaining_parameters(model)
    refused = [shape for shape, ok in agrees.items() if not ok]
    if refused:
        log.warning("linear layers of shapes %s keep torch's kernel: oneDNN's packed result differed", refused)
    return count


def _own_remaining_parameters(model: Any) -> None:
    """Copy the parameters left (embeddings, norms) into memory of their own. transformers loads a
    safetensors file as one memory mapping that every parameter points into, and the mapping, all
    of its pages resident, lives until the last of them is freed: without the copies, the replaced
    weights' ~0.5 GB would stay (SmolLM2: 1,475 against 1,070 MiB resident after loading)."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.data = parameter.data.clone()


def _tied_output_weight(model: Any) -> torch.Tensor | None:
    """The input embedding's weight when the output layer shares it (else None)."""
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    return getattr(embeddings, "weight", None)


def _agrees(linear: torch.nn.Linear) -> bool:
    """Whether the packed layer computes ``F.linear`` on a made-up input, up to float summation order."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, linear.in_features, generator=generator)
    with torch.inference_mode():
        want = F.linear(x, linear.weight, linear.bias)
        got = PackedLinear(linear)(x)
    return bool(got.shape == want.shape and (got - want).abs().max() <= 1e-4 * (1 + want.abs().max()))
