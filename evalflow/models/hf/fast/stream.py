"""Greedy generation across chunks of requests: one continuous-batching loop fed chunk after chunk.

The inference edge hands a local model its misses in chunks (``evalflow.scale.chunks``), and saves
answers as they are handed back (``evalflow.scale.dispatch.answered_parts``), so a killed run
loses at most the rows in flight. Generation chunks are small (a chunk is sized by estimated work:
~15 gsm8k requests), and a decode loop confined to one chunk runs its last rows alone: 30 gsm8k
documents at 8 slots ran as two loops each draining from 8 rows to 1. Here the loop asks for the
next chunk as soon as a row frees and no request waits
(:func:`evalflow.models.hf.fast.decode.greedy_stream`), so the slots stay full from the run's first
request to its last, and each row's answer is handed back the moment it stops, as
``(chunk number, {request index: answer})``.

Each chunk is prepared exactly as :func:`generate.generate_until` prepares it alone (lm-eval's order
and truncation; the fast engine's family prefixes planned over the chunk and their memoized
key/values, ``shared_generation``), so a request's answer is the same function of its own context:
only which rows share a decode step changes, as it does with any other batch composition (float
summation order, see ``decode``). A chunk that cannot join the running loop (other generation
kwargs, several kwargs groups, sampled generation, a context longer than the loop's buffers, another
shared prefix) waits until that loop has drained, then runs on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from evalflow.core.records import Generation, Request
from evalflow.models.hf import generate
from evalflow.models.hf.fast.shared_generation import FastGeneration, eos_ids

Source = Iterator[tuple[int, Sequence[Request]]]


@dataclass(frozen=True)
class Lane:
    """One chunk ready for the decode loop: its requests form one greedy kwargs group."""

    n: int  # the chunk's number (pull order)
    size: int  # its requests
    order: list[int]  # the request each job answers, in join order
    jobs: list[Any]  # decode.Job, in join order
    until: tuple[str, ...]
    max_gen_toks: int
    slots: int

    def joins(self, other: Lane, fits: Callable[[Any], bool]) -> bool:
        return self.until == other.until and self.max_gen_toks == other.max_gen_toks and all(map(fits, other.jobs))


def generate_parts(
    setup: generate.GenerationSetup, fast: FastGeneration, chunks: Iterable[Sequence[Request]]
) -> Iterator[tuple[int, dict[int, Generation]]]:
    """``(n, {i: answer})`` for request ``i`` of the ``n``-th list of ``chunks``: a row of the decode
    loop as soon as it stops; a chunk that cannot join the loop whole, once it is answered
    (``setup.answer_group`` being ``fast.answer_group``)."""
    source: Source = enumerate(chunks)
    pending = _pull(setup, fast, source)
    while pending is not None:
        if isinstance(pending, Lane):
            run = _Run(setup, fast, pending, source)
            yield from run.answers()
            # the loop may end without asking for more (its last rows stopping at one step)
            pending = run.held if run.held is not None or run.exhausted else _pull(setup, fast, source)
        else:
            n, requests = pending
            yield n, dict(enumerate(generate.generate_until(setup, requests)))
            pending = _pull(setup, fast, source)


def _pull(
    setup: generate.GenerationSetup, fast: FastGeneration, source: Source
) -> Lane | tuple[int, Sequence[Request]] | None:
    """The next chunk, as a :class:`Lane` when the decode loop can answer it, else as it came."""
    import torch

    pulled = next(source, None)
    if pulled is None:
        return None
    n, requests = pulled
    groups = generate.kwargs_groups(setup, requests)
    if len(groups) != 1:
        return pulled
    indices, kwargs = groups[0]
    with torch.inference_mode():
        group = generate.prepare_group(setup, [requests[i] for i in indices], kwargs, generate.eos_text(setup))
        if not fast.greedy(group):
            return pulled
        jobs = fast.decode_jobs(setup, group.encoded)
    slots = fast.decode_slots_for(max(len(c) for c in group.encoded) + group.max_gen_toks)
    return Lane(n, len(requests), indices, jobs, group.until, group.max_gen_toks, slots)


class _Run:
    """One decode loop over the first lane and every later one that joins it; ``held`` is the
    chunk pulled that could not join (None: the source is exhausted)."""

    def __init__(self, setup: generate.GenerationSetup, fast: FastGeneration, first: Lane, source: Source) -> None:
        self.setup, self.fast, self.first, self.source = setup, fast, first, source
        self.held: Lane | tuple[int, Sequence[Request]] | None = None
        self.owner: list[tuple[int, int]] = []  # per job: (chunk number, request index)
        self.prompt_tokens: list[int] = []  # per job: its context's length
        self.left: dict[int, int] = {}
        self.exhausted = False

    def answers(self) -> Iterator[tuple[int, dict[int, Generation]]]:
        from evalflow.models.hf.fast import decode

        setup, fast, first = self.setup, self.fast, self.first
        self._add(first)
        stop = decode.StopWatch(list(first.until), setup.tokenizer)
        rows = decode.greedy_stream(
            setup.model,
            first.jobs,
            first.slots,
            first.max_gen_toks,
            stop,
            eos_ids(setup),
            setup.device,
            self._more,
            fast.draft_tokens,
            fast.native_attention,
        )
        for j, tokens in rows:
            n, i = self.owner[j]
            self.left[n] -= 1
            if not self.left[n]:
                del self.left[n]
            yield n, {i: generate.final_answer(setup, tokens, first.until, self.prompt_tokens[j])}
        if self.left:
            raise RuntimeError("HFModel lost a request while batching; please report this bug")

    def _add(self, lane: Lane) -> None:
        self.owner.extend((lane.n, i) for i in lane.order)
        self.prompt_tokens.extend(len(job.context) for job in lane.jobs)
        self.left[lane.n] = lane.size

    def _more(self, fits: Callable[[Any], bool]) -> list[Any]:
        """The decode loop's refill: the next chunk's jobs if it joins, else nothing (for good)."""
        if self.held is not None or self.exhausted:
            return []
        pulled = _pull(self.setup, self.fast, self.source)
        if pulled is None:
            self.exhausted = True
            return []
        if isinstance(pulled, Lane) and self.first.joins(pulled, fits):
            self._add(pulled)
            return pulled.jobs
        self.held = pulled
        return []
