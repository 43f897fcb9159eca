"""Greedy generation with continuous batching: a finished row leaves at once, a waiting one joins.

lm-eval runs a batch of ``generate_until`` requests until its longest row stops, so every row of
the batch pays for the slowest one. Here the batch is a set of ``slots``; each step feeds one token
per occupied slot, and a row that meets a stop sequence, EOS or its ``max_gen_toks`` frees its slot,
which the next waiting request takes before the following step. Each request's answer is the same
function of its own context as in lm-eval (greedy: the argmax of the last position's logits), up to
the float noise of running in a differently shaped batch.

The key/values live in one buffer per layer, ``[slots, kv_heads, capacity, head_dim]``
(:class:`SlotLayer`): a slot holds its row's context (its few-shot prefix copied from the prefix
memo, then its own tokens, run once when it joins: ``kv.generation_cache``) and the tokens
generated so far. Rows have different lengths, so every step passes each row's position and a mask
of its filled columns, and writes each row's new key/values at its own column. When every job
starts with the same memoized prefix, the slots hold only what follows it, and the step's
attention reads that prefix once for all rows; with grouped-query attention, each key/value head
is read once for its group of query heads, not copied per query head (``shared_attention``); on an
x86 CPU the rows' own columns go through a compiled kernel that reads each row's filled columns
only (``native_attention``; the step passes their counts, ``visible``, next to the mask).

The step does no work that grows with the generated length apart from attention itself: greedy is
an argmax of one logit row (no softmax, no logits processors), and stop sequences are checked on a
window of the newest tokens only (:class:`StopWatch`), as lm-eval's ``MultiTokenEOSCriteria`` does.
A stop sequence the window misses (one spread over more tokens) is still cut from the text
afterwards, exactly as in lm-eval, where the same miss keeps the row running too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from transformers.cache_utils import Cache, DynamicLayer

from evalflow.models.hf.fast import kv, native_attention, shared_attention
from evalflow.models.hf.fast.lookup import NgramIndex
from evalflow.models.hf.fast.prefix import common_prefix_len
from evalflow.models.hf.torch_ops import cache_argument

_T = TypeVar("_T")


@dataclass(frozen=True)
class Job:
    """One request to generate for: its context tokens and the memoized key/values of a prefix of them."""

    context: tuple[int, ...]
    prefix: kv.PrefixStates | None  # key/values of context[: prefix.lengths[0]], or None


class SlotLayer(DynamicLayer):
    """One layer's key/values for every slot; row ``r`` writes the step's ``j``-th token at column
    ``write_at[r, j]``.

    ``update`` returns the buffer's first ``width`` columns (a view, no copy); columns a row has not
    filled hold stale or zero values, which the step's mask hides.
    """

    def __init__(self, slots: int, capacity: int) -> None:
        super().__init__()
        self.slots, self.capacity = slots, capacity
        self.key_buffer: torch.Tensor | None = None
        self.value_buffer: torch.Tensor | None = None
        self.write_at = torch.zeros((slots, 1), dtype=torch.long)
        self.width = 0
        self.is_initialized = True

    def load(self, slot: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Put one row's key/values ``[1, kv_heads, n, head_dim]`` at the start of ``slot``."""
        key_buffer, value_buffer = self._buffers(keys)
        key_buffer[slot, :, : keys.shape[-2]] = keys[0]
        value_buffer[slot, :, : keys.shape[-2]] = values[0]

    def _buffers(self, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.key_buffer is None or self.value_buffer is None:  # allocated once, at the first row
            shape = (self.slots, like.shape[1], self.capacity, like.shape[-1])
            self.key_buffer, self.value_buffer = like.new_zeros(shape), like.new_zeros(shape)
        return self.key_buffer, self.value_buffer

    def drop(self, row: int, columns: int) -> None:
        """Remove ``row``: the last row moves into its place (its first ``columns`` columns are
        copied) and the buffers become views one row shorter, so a shrinking batch stops
        computing empty slots without copying the others."""
        if self.key_buffer is not None and self.value_buffer is not None:
            last = self.key_buffer.shape[0] - 1
            if row != last:
                self.key_buffer[row, :, :columns] = self.key_buffer[last, :, :columns]
                self.value_buffer[row, :, :columns] = self.value_buffer[last, :, :columns]
            self.key_buffer, self.value_buffer = self.key_buffer[:last], self.value_buffer[:last]
        self.slots -= 1

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        key_buffer, value_buffer = self._buffers(key_states)
        rows = torch.arange(key_states.shape[0], device=self.write_at.device)[:, None]
        key_buffer[rows, :, self.write_at] = key_states.transpose(1, 2)  # [rows, tokens, kv_heads, dim]
        value_buffer[rows, :, self.write_at] = value_states.transpose(1, 2)
        self.keys, self.values = key_buffer[:, :, : self.width], value_buffer[:, :, : self.width]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.width

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.width, 0


class StopWatch:
    """lm-eval's stop test for one row: a stop sequence in the decoded last few generated tokens.

    The window is the longest sequence's token count plus two (a model may spell ``"\\n\\n"`` as
    two ``"\\n"`` tokens), so one check costs the same however long the row has run.
    """

    def __init__(self, stops: Sequence[str], tokenizer: Any) -> None:
        self.stops = [s for s in stops if s]
        self.tokenizer = tokenizer
        lengths = [len(tokenizer.encode(s, add_special_tokens=False)) for s in self.stops]
        self.lookback = max(lengths, default=0) + 2

    def hit(self, generated: Sequence[int]) -> bool:
        if not self.stops:
            return False
        recent = self.tokenizer.decode(list(generated[-self.lookback :]))
        return any(s in recent for s in self.stops)


def greedy_until(
    model: Any,
    jobs: Sequence[Job],
    slots: int,
    max_new: int,
    stop: StopWatch,
    eos_ids: set[int],
    device: Any,
    draft: int = 0,
    native: bool = False,
) -> list[list[int]]:
    """The greedy continuation of each job (stop sequence or EOS token included), in job order.

    Jobs enter in the given order as slots free up; at most ``slots`` rows run per step and each
    row generates at most ``max_new`` tokens; with ``draft``, each step also checks up to that many
    tokens per row copied from the row's own text (``lookup``); with ``native``, the steps'
    attention runs the compiled kernel where it applies (``native_attention``).
    """
    out: list[list[int]] = [[] for _ in jobs]
    for j, tokens in greedy_stream(model, jobs, slots, max_new, stop, eos_ids, device, draft=draft, native=native):
        out[j] = tokens
    return out


More = Callable[[Callable[[Job], bool]], Sequence[Job]]
"""``more(fits)``: further jobs for a running loop, each one ``fits`` accepts (empty: none now)."""


def greedy_stream(
    model: Any,
    jobs: Sequence[Job],
    slots: int,
    max_new: int,
    stop: StopWatch,
    eos_ids: set[int],
    device: Any,
    more: More | None = None,
    draft: int = 0,
    native: bool = False,
) -> Iterator[tuple[int, list[int]]]:
    """:func:`greedy_until` as a stream: ``(job index, its tokens)`` as each row stops.

    With ``more``, the batch stays full past the given jobs: whenever a row is free and no job
    waits, ``more(fits)`` is asked for further jobs (numbered after the ones before), which must
    fit this loop's buffers and shared prefix (``fits``); the first empty answer ends the asking,
    and the rows drain. So a caller can feed the requests of its next chunk of work into the slots
    its current chunk frees, rather than running each chunk down to one row."""
    loop = _Loop(
        model, list(jobs), max(1, slots if more is not None else min(slots, len(jobs))), max_new, device, draft, native
    )
    dtype = model.dtype if model.dtype.is_floating_point else torch.float32
    while loop.waiting or any(j >= 0 for j in loop.rows):
        with torch.inference_mode(), shared_attention.active(model) if loop.own_attention else nullcontext():
            if more is not None and not loop.fill(more):
                more = None
                if not loop.rows:  # no buffer yet: size it for the jobs there are, as without ``more``
                    loop.resize(min(loop.slots, len(loop.waiting)))
            loop.fill(None)
            if more is None:
                loop.compact()
            finished = loop.step(dtype, stop, eos_ids)
        for j in finished:
            yield j, loop.out[j]


class _Loop:
    """The state of one continuous-batching run: the slot buffers, which job each row holds, and
    what each row feeds next."""

    def __init__(
        self, model: Any, jobs: list[Job], slots: int, max_new: int, device: Any, draft: int = 0, native: bool = False
    ) -> None:
        self.model, self.jobs, self.slots, self.max_new, self.device = model, jobs, slots, max_new, device
        self.draft = max(0, draft)  # draft tokens a row may propose per step (lookup); they need room too
        self.own_attention = shared_attention.applies(model)  # grouped queries, and a shared prefix if any
        self.group = shared_attention.query_group(model) if self.own_attention else 1
        self.shared = _shared_prefix(jobs) if self.own_attention else None
        self.skip = self.shared.lengths[0] if self.shared is not None else 0  # columns held once, outside the slots
        self.capacity = max(len(j.context) for j in jobs) - self.skip + max_new + self.draft
        self.layers = [SlotLayer(slots, self.capacity) for _ in range(kv.num_layers(model))]
        cache = Cache(layers=list(self.layers))  # the same layer objects, in transformers' list type
        self.step_kwargs: dict[str, Any] = {str(cache_argument(model)): cache, "use_cache": True}
        if self.own_attention:
            self.step_kwargs["decode_step"] = True
        if self.shared is not None:
            self.step_kwargs["shared_prefix"] = self.shared
        self.native = _native_kernel(model) if native and self.own_attention else None
        if self.native is not None:
            self.step_kwargs["native"] = self.native
        self.waiting = deque(range(len(jobs)))
        self.rows: list[int] = []  # the job in each buffer row, -1 once it has finished
        self.lengths: list[int] = []  # tokens each row has run = position of the token it feeds next
        self.feed: list[int] = []  # the token each row feeds next
        self.index: list[NgramIndex | None] = []  # each row's text, for its draft tokens (with ``draft``)
        self.out: list[list[int]] = [[] for _ in jobs]

    def fits(self, job: Job) -> bool:
        """Whether ``job`` can join this loop: room in the buffers and, when the rows read one
        shared prefix, the same prefix (memoized as far as the shared part) and a token after it."""
        if len(job.context) - self.skip + self.max_new + self.draft > self.capacity:
            return False
        if self.shared is None:
            return True
        return (
            job.prefix is not None
            and job.prefix.lengths[0] >= self.skip
            and len(job.context) - 1 >= self.skip
            and common_prefix_len(self.jobs[0].context, job.context) >= self.skip
        )

    def resize(self, slots: int) -> None:
        """Run at most ``slots`` rows (before the first row joins: the buffers do not exist yet)."""
        self.slots = max(1, slots)
        for layer in self.layers:
            layer.slots = self.slots

    def free_rows(self) -> list[int]:
        return [r for r, j in enumerate(self.rows) if j < 0] + list(range(len(self.rows), self.slots))

    def fill(self, more: More | None) -> bool:
        """With ``more``: ask it for jobs until as many wait as rows are free; False once it has
        none. Without: put waiting jobs into the free rows."""
        if more is not None:
            while len(self.waiting) < len(self.free_rows()):
                extra = list(more(self.fits))
                if not extra:
                    return False
                if not all(self.fits(job) for job in extra):
                    raise RuntimeError("a job that does not fit joined a decode loop; please report this bug")
                self.waiting.extend(range(len(self.jobs), len(self.jobs) + len(extra)))
                self.jobs.extend(extra)
                self.out.extend([] for _ in extra)
            return True
        for r in self.free_rows():
            if not self.waiting:
                break
            j = self.waiting.popleft()
            _join(self.model, self.layers, r, self.jobs[j], self.skip, self.device, self.native)
            if r == len(self.rows):  # the first fill: a new row, set just below
                for ints in (self.rows, self.lengths, self.feed):
                    ints.append(0)
                self.index.append(None)
            context = self.jobs[j].context
            self.rows[r], self.lengths[r], self.feed[r] = j, len(context) - 1, context[-1]
            self.index[r] = NgramIndex(context) if self.draft else None
        return True

    def compact(self) -> None:
        """Nothing left to take the free rows: stop computing them (and the rows never filled)."""
        while self.slots > len(self.rows):
            for layer in self.layers:
                layer.drop(self.slots - 1, 0)
            self.slots -= 1
        while -1 in self.rows:
            r = self.rows.index(-1)
            for layer in self.layers:
                layer.drop(r, self.lengths[-1] - self.skip)
            for ints in (self.rows, self.lengths, self.feed):
                _move_last(ints, r)
            _move_last(self.index, r)
            self.slots -= 1

    def step(self, dtype: Any, stop: StopWatch, eos_ids: set[int]) -> list[int]:
        """One pass: every row's next token and its draft tokens; returns the jobs that stopped."""
        drafts = [self._draft(r) for r in range(len(self.rows))]
        span = 1 + max(map(len, drafts))
        positions = torch.tensor(self.lengths, dtype=torch.long)[:, None] + torch.arange(span)
        columns = positions - self.skip
        width = int(columns[:, -1].max()) + 1
        for layer in self.layers:
            layer.write_at, layer.width = columns.to(self.device), width
        filled = torch.arange(width)[None, None, :] <= columns[:, :, None]  # [rows, span, width]
        mask = torch.zeros(filled.shape, dtype=dtype).masked_fill_(~filled, torch.finfo(dtype).min)
        mask = shared_attention.grouped_mask(mask, self.group) if self.own_attention else mask[:, None]
        if (
            self.native is not None
        ):  # the mask's visibility as counts: grouped query g * span + t sees columns[:, t] + 1
            self.step_kwargs["visible"] = (columns + 1).repeat(1, self.group).to(self.device)
        ids = torch.tensor(
            [[self.feed[r], *d, *[0] * (span - 1 - len(d))] for r, d in enumerate(drafts)], dtype=torch.long
        )
        logits = self.model(
            ids.to(self.device),
            attention_mask=mask.to(self.device),
            position_ids=positions.to(self.device),
            logits_to_keep=1 if span == 1 else 0,
            **self.step_kwargs,
        ).logits
        finished = []
        for r, (draft, choices) in enumerate(zip(drafts, logits.argmax(dim=-1).tolist())):  # [rows, span]
            if self._accept(r, draft, choices, stop, eos_ids):
                finished.append(self.rows[r])
                self.rows[r] = -1
        return finished

    def _draft(self, r: int) -> list[int]:
        """Row ``r``'s draft tokens for this step, within its remaining ``max_new`` budget."""
        index = self.index[r]
        if index is None:
            return []
        return index.propose(min(self.draft, self.max_new - len(self.out[self.rows[r]]) - 1))

    def _accept(self, r: int, draft: list[int], choices: list[int], stop: StopWatch, eos_ids: set[int]) -> bool:
        """Append row ``r``'s greedy tokens of this step: the model's choice after the fed token,
        then after each draft token for as long as the drafts equal those choices (a draft equal to
        the choice before it was fed the very token the one-token loop would feed). Stop rules are
        checked after every token, as one token a step would; True if the row stopped."""
        generated = self.out[self.rows[r]]
        index = self.index[r]
        for j, token in enumerate(choices[: len(draft) + 1]):
            generated.append(token)
            self.lengths[r] += 1
            self.feed[r] = token
            if index is not None:
                index.append(token)
            if token in eos_ids or len(generated) >= self.max_new or stop.hit(generated):
                return True
            if j == len(draft) or draft[j] != token:
                return False
        return False


def _native_kernel(model: Any) -> native_attention.Kernel | None:
    """The compiled decode attention for this model's head size, if it runs here: fp32 on a CPU."""
    if model.dtype != torch.float32 or getattr(model, "device", torch.device("cpu")).type != "cpu":
        return None
    config = getattr(model.config, "text_config", None) or model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return native_attention.kernel(int(head_dim))


def _shared_prefix(jobs: Sequence[Job]) -> kv.PrefixStates | None:
    """The memoized prefix every job starts with (cut to what all share, and to leave each job
    at least its last token to feed), or None when some job has none."""
    prefixes = [j.prefix for j in jobs if j.prefix is not None]
    if len(prefixes) < len(jobs):
        return None
    n = min(min(p.lengths[0] for p in prefixes), min(len(j.context) for j in jobs) - 1)
    for job in jobs[1:]:
        n = min(n, common_prefix_len(jobs[0].context, job.context))
    return prefixes[0].head(n) if n > 0 else None


def _join(
    model: Any,
    layers: list[SlotLayer],
    slot: int,
    job: Job,
    skip: int,
    device: Any,
    native: native_attention.Kernel | None,
) -> None:
    """Run the job's context (all but its last token, after its memoized prefix) into ``slot``,
    leaving out its first ``skip`` columns (the prefix every row shares); its attention through
    the compiled kernel when given (``native``)."""
    if len(job.context) - 1 <= skip:
        return  # nothing of its own before the token the first step feeds
    row = kv.generation_layers(
        model,
        [list(job.context)],
        len(job.context) - 1,
        job.prefix,
        device,
        {"native": native} if native is not None else None,
    )
    for target, source in zip(layers, row):
        states = source.states()
        if states is not None:  # always, with tokens run: the context's own or its prefix's
            keys, values = states
            target.load(slot, keys[:, :, skip:], values[:, :, skip:])


def _move_last(values: list[_T], r: int) -> None:
    """Row ``r`` removed: the last row's value takes its place (the buffers' rows move the same way)."""
    values[r] = values[-1]
    values.pop()
