"""``model.engine``: which engine computes an HF model's answers, and which fast paths it runs.

- ``reference``: lm-eval's passes and batches, none of the fast paths (no shared prefixes, no
  packed passes, lm-eval's generation batches through ``model.generate``, torch's linear layers,
  the logits of every position): lm-eval's floats.
- ``fast`` (the default): the speed engine, ``evalflow.models.hf.fast``. The same answers up to
  float summation order (greedy text identical, log-likelihoods within the parity tolerance;
  ``tests/models/test_hf_engine.py``), each path on where it applies and where the private torch
  and transformers APIs it uses are still there (``fast.probes``). Its fine switches
  (``prefix_sharing``, ``batching``, ``draft_tokens``, ``native_attention``, ``packed_linear``)
  exist for benchmarks' ablations; ``reference`` ignores them.

The engine is part of an HF answer's cache key (``HFModel.identity``): the two engines' floats
differ in the last digits, and a user asking for lm-eval's floats must never be served the fast
engine's. The fast modules' source is not in the key; the test above is what keeps them honest.

That test runs on the CPU, so the fast engine runs only on the device types it was proven on
(:data:`PROVEN_DEVICES`); elsewhere (CUDA, MPS) the model runs the reference engine, saying so in
one line, unless ``model.force_fast=true`` (what ``benchmarks/gpu_check.py`` sets to prove it on a
GPU against lm-eval). The key still names the engine asked for: the reference engine's answers are
the fast engine's up to float noise, as a path a probe turns off (``fast.probes``) is.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from evalflow.errors import ConfigError

ENGINES = ("fast", "reference")

# The device types where every fast path is proven equal to the reference engine (tests/models/
# test_hf_engine.py and the fast paths' own tests run on the CPU). Add a type only after
# benchmarks/gpu_check.py (for CUDA) agrees with lm-eval on it; docs/hf-models.md lists the proofs.
PROVEN_DEVICES = frozenset({"cpu"})


@dataclass(frozen=True)
class Paths:
    """The fast paths a model may run (each still subject to its own applicability check at load)."""

    prefix_sharing: bool  # each distinct token prefix run once, rows packed (``fast.prefix``, ``pack``, ``kv``)
    continuous: bool  # greedy generation in evalflow's decode loop (``fast.decode``, ``stream``)
    draft_tokens: int  # per decode step and row (``fast.lookup``); 0: one token a step
    native_attention: bool  # the decode loop's attention in the compiled kernel (``fast.native_attention``)
    packed_linear: bool  # linear layers through oneDNN (``fast.packed_linear``)
    logits_to_keep: bool  # scoring passes ask for the scored positions' logits only

    def without(self, *names: str) -> Paths:
        """These paths off (a missing private API): the reference path in their place."""
        paths = dataclasses.replace(self, **{n: False for n in names if n != "draft_tokens"})
        return dataclasses.replace(paths, draft_tokens=0) if "draft_tokens" in names else paths


REFERENCE = Paths(
    prefix_sharing=False,
    continuous=False,
    draft_tokens=0,
    native_attention=False,
    packed_linear=False,
    logits_to_keep=False,
)


def parse_engine(engine: object) -> str:
    """``fast`` or ``reference``, refused otherwise with what each means."""
    if engine not in ENGINES:
        raise ConfigError(
            f"model.engine {engine!r} is not one of {', '.join(ENGINES)}; set model.engine=fast (the default: "
            "the speed engine, the same answers up to float noise) or model.engine=reference (lm-eval's exact "
            "passes and floats, slower)."
        )
    return str(engine)


def engine_paths(
    engine: str, prefix_sharing: bool, batching: str, draft_tokens: int, native_attention: bool, packed_linear: bool
) -> Paths:
    """The paths an engine runs: none for ``reference``; for ``fast``, those its fine switches leave on."""
    if engine == "reference":
        return REFERENCE
    return Paths(
        prefix_sharing=prefix_sharing,
        continuous=batching == "continuous",
        draft_tokens=draft_tokens,
        native_attention=native_attention,
        packed_linear=packed_linear,
        logits_to_keep=True,
    )


def proven_paths(paths: Paths, device_type: str, force_fast: bool) -> tuple[Paths, str | None]:
    """The paths to run on a device of ``device_type``: ``paths`` where the fast engine is proven
    (or ``force_fast``), else the reference engine's, with the one line that says so."""
    if paths == REFERENCE or force_fast or device_type in PROVEN_DEVICES:
        return paths, None
    return REFERENCE, (
        f"hf model: the fast engine is proven equal to the reference engine on {', '.join(sorted(PROVEN_DEVICES))} "
        f"only, not yet on {device_type}: this run uses the reference engine (lm-eval's passes, the same answers, "
        "slower); model.force_fast=true runs the fast engine anyway, benchmarks/gpu_check.py checks it against lm-eval."
    )
