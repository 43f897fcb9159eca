"""The speed engine of one loaded HF model: the one module ``HFModel`` imports from ``fast/``.

``HFModel`` imports it, inside a function, only when the fast engine runs (``model.engine=fast``
on a device it is proven on, ``engine.proven_paths``), so the reference path never loads ``fast/``
and no module of the HF answers' cache key imports it (``tests/models/test_hf_engine.py``).
:func:`start` runs the load-time checks, which may turn a path off (back to the reference path):
the private APIs are there (``probes``), linear layers packed (``packed_linear``), key/value reuse
reproducing the plain pass on this model (``kv.kv_reuse_error``). The :class:`FastEngine` it returns
plugs into the reference passes: ``scoring`` as ``score.ScoringSetup.shared``, ``generation`` as
``generate.GenerationSetup.answer_group``, and :meth:`FastEngine.generate_parts` streams greedy
generation across chunks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from evalflow.core.records import Generation, Request
from evalflow.models.hf.engine import Paths
from evalflow.models.hf.fast import probes
from evalflow.models.hf.fast.prefix import PrefixMemo
from evalflow.models.hf.fast.shared_generation import FastGeneration
from evalflow.models.hf.fast.shared_scoring import SharedScoring
from evalflow.models.hf.generate import GenerationSetup

log = logging.getLogger(__name__)

MIN_PREFIX = 8  # shorter shared prefixes save less than the extra pass costs
MEMO_ENTRIES, MEMO_BYTES = 8, 256 * 2**20  # prefixes' key/values kept across chunks (scoring and generation)


@dataclass(frozen=True)
class FastEngine:
    """The fast paths that passed the load-time checks, and what they share."""

    paths: Paths  # the paths asked for, less those a missing private API turned off
    packed_linears: int  # linear layers running through oneDNN
    scoring: SharedScoring | None  # prefix sharing in log-likelihood passes; None: the plain passes
    generation: FastGeneration

    @property
    def kv_works(self) -> bool:
        """The model runs with evalflow's caches, masks and positions (the self-check passed)."""
        return self.generation.kv_works

    @property
    def share_prefixes(self) -> bool:
        """Shared prefixes run once, in scoring and generation alike."""
        return self.scoring is not None

    def generate_parts(
        self, setup: GenerationSetup, chunks: Iterable[Sequence[Request]]
    ) -> Iterator[tuple[int, dict[int, Generation]]]:
        """Greedy generation in one decode loop fed chunk after chunk (``stream``)."""
        from evalflow.models.hf.fast import stream

        return stream.generate_parts(setup, self.generation, chunks)


def start(model: Any, device: Any, paths: Paths, decode_slots_for: Callable[[int], int]) -> FastEngine:
    """The fast engine for a loaded model: each of ``paths`` that applies here and passes its check."""
    paths = probes.available(paths)
    packed = 0
    if paths.packed_linear:
        from evalflow.models.hf.fast import packed_linear

        packed = packed_linear.pack_linears(model)
    kv_works, exact_keep = (
        _kv_reuse_works(model, device) if paths.prefix_sharing or paths.continuous else (False, False)
    )
    share = paths.prefix_sharing and kv_works
    memo: PrefixMemo[Any] = PrefixMemo(capacity=MEMO_ENTRIES, max_bytes=MEMO_BYTES, size_of=lambda s: s.nbytes)
    generation = FastGeneration(
        paths.continuous,
        kv_works,
        share,
        MIN_PREFIX,
        memo,
        paths.draft_tokens,
        paths.native_attention,
        decode_slots_for,
    )
    scoring = SharedScoring(memo, MIN_PREFIX, exact_keep) if share else None
    return FastEngine(paths, packed, scoring, generation)


def _kv_reuse_works(model: Any, device: Any) -> tuple[bool, bool]:
    """Whether key/value reuse applies to this architecture and reproduces the plain computation
    here, and whether the model takes a boolean ``[batch, length]`` ``logits_to_keep``."""
    from evalflow.models.hf.fast import kv

    if not kv.supports_kv_reuse(model):
        log.info("hf model: %s keeps the plain path (no key/value reuse)", type(model).__name__)
        return False, False
    exact_keep = kv.exact_keep_supported(model)
    try:
        error = kv.kv_reuse_error(model, device, exact_keep)
    except Exception as e:  # an architecture or transformers version the cache layers do not fit
        log.warning("hf model: key/value reuse fails on %s (%s); not using it", type(model).__name__, e)
        return False, exact_keep
    tolerance = 1e-3 if model.dtype.itemsize >= 4 else 0.1
    if not error <= tolerance:  # also catches NaN
        log.warning("hf model: key/value reuse differs from the plain pass by %.3g; not using it", error)
        return False, exact_keep
    return True, exact_keep
