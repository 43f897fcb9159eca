"""The private torch and transformers APIs the fast paths use, each probed when a model loads.

None of these is a public, versioned interface: an upgrade of torch or transformers may rename or
remove one. Rather than fail inside a run, :func:`available` checks each at load and turns off
the paths that use a missing one, with one logged line: those requests then take the reference
path (lm-eval's passes), which uses none of them. docs/hf-models.md lists the same table.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from evalflow.models.hf.engine import Paths

log = logging.getLogger("evalflow.models.hf")


def _has(module: str, *names: str) -> Callable[[], bool]:
    """A probe: ``module`` imports and has every one of ``names`` (dotted: attributes of attributes)."""

    def probe() -> bool:
        try:
            obj = importlib.import_module(module)
        except ImportError:
            return False
        for name in names:
            target = obj
            for part in name.split("."):
                try:
                    target = getattr(target, part)
                except (AttributeError, RuntimeError):  # torch.ops raise RuntimeError for a missing op
                    return False
        return True

    return probe


@dataclass(frozen=True)
class Probe:
    """One private API, the fast paths that use it, and how to tell it is there."""

    api: str
    paths: tuple[str, ...]  # Paths fields turned off when it is missing
    present: Callable[[], bool]


PROBES: tuple[Probe, ...] = (
    Probe(
        "torch.ops.mkldnn._reorder_linear_weight, _linear_pointwise (fast.packed_linear)",
        ("packed_linear",),
        _has("torch", "ops.mkldnn._reorder_linear_weight", "ops.mkldnn._linear_pointwise"),
    ),
    Probe(
        "transformers.cache_utils.DynamicLayer, Cache (fast.kv, fast.decode: evalflow's cache layers)",
        ("prefix_sharing", "continuous"),
        _has("transformers.cache_utils", "DynamicLayer", "Cache"),
    ),
    Probe(
        "transformers.masking_utils.AttentionMaskInterface, sdpa_mask; transformers.AttentionInterface "
        "(fast.shared_attention: the decode loop's attention)",
        ("continuous",),
        lambda: (
            _has("transformers.masking_utils", "AttentionMaskInterface", "sdpa_mask")()
            and _has("transformers", "AttentionInterface")()
        ),
    ),
    Probe(
        "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu (fast.shared_attention: split attention "
        "with its log-sum-exp)",
        ("continuous",),
        _has("torch", "ops.aten._scaled_dot_product_flash_attention_for_cpu"),
    ),
)


def available(paths: Paths) -> Paths:
    """``paths`` less those whose private APIs this torch and transformers lack (one log line each)."""
    for probe in PROBES:
        wanted = [p for p in probe.paths if getattr(paths, p)]
        if wanted and not probe.present():
            log.warning(
                "hf model: %s is missing in this torch/transformers; %s off (the reference path)",
                probe.api,
                ", ".join(wanted),
            )
            paths = paths.without(*wanted)
    return paths
