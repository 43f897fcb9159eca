"""``generate_until`` for HFModel by lm-eval's rules: the reference path.

Requests are grouped by generation kwargs and sorted longest context first (lm-eval's order, so
batches hold the same requests as lm-eval's), contexts left-truncated to ``max_length -
max_gen_toks``, and each batch generated with ``model.generate`` and lm-eval's multi-token stop
criterion; the text is cut at the first stop sequence, and how each row ended read back from its
tokens (:mod:`evalflow.models.hf.finish`).

This module's source is part of every HF answer's cache key (``hf_model.SEMANTICS``): it holds
what an answer *is*, nothing that only makes it faster. The fast engine plugs in per kwargs group
as :attr:`GenerationSetup.answer_group` (``evalflow.models.hf.fast.shared_generation``: greedy
continuous batching, a shared prefix run once); it gets the group this module prepared and runs
:func:`generate_batches` for what it does not batch its own way. This module never imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from evalflow.core.records import Generation, Request
from evalflow.errors import ModelError
from evalflow.models.hf.batching import chunk, plan_generation
from evalflow.models.hf.finish import eos_token_ids, generation_finish
from evalflow.models.lmeval_tokens import normalize_gen_kwargs, stop_sequences, strip_at_stops

Answers = list[tuple[int, Generation]]  # (position in the group's requests, answer)
# The key/values a batch of the group starts from, or None for transformers' own cache:
# (the batch's positions in the group, generate's max_length, its kwargs) -> cache.
CacheFor = Callable[[list[int], int, dict[str, Any]], Any]


@dataclass(frozen=True)
class Group:
    """Requests of one generation-kwargs group, ready to generate: stops, token budget and the
    left-truncated contexts."""

    until: tuple[str, ...]
    max_gen_toks: int
    encoded: list[list[int]]
    kwargs: dict[str, Any]  # the rest, for transformers' generate


@dataclass(frozen=True)
class GenerationSetup:
    """What generation needs from a loaded HFModel (which builds it, so imports point one way)."""

    model: Any
    tokenizer: Any
    device: Any
    max_length: int
    max_gen_toks: int  # default for requests that do not set it
    batch_size_for: Callable[[int], int]  # sequence length -> rows per batch
    tok_encode: Callable[[str], list[int]]  # HFLM.tok_encode: orders requests by context length
    encode_context: Callable[[str], list[int]]  # HFLM.tok_batch_encode for one context
    # The fast engine's answers for one prepared group; None: lm-eval's batches (generate_batches).
    answer_group: Callable[[GenerationSetup, Sequence[Request], Group], Answers] | None = None


def generate_until(setup: GenerationSetup, requests: Sequence[Request]) -> list[Generation]:
    """Generated text per request, cut at the first stop sequence (``until`` and EOS), with its finish."""
    eos = eos_text(setup)
    out: list[Generation | None] = [None] * len(requests)
    answer = setup.answer_group or generate_batches
    for indices, kwargs in kwargs_groups(setup, requests):
        members = [requests[i] for i in indices]
        for i, generation in answer(setup, members, prepare_group(setup, members, kwargs, eos)):
            out[indices[i]] = generation
    texts = [o for o in out if o is not None]
    if len(texts) != len(out):
        raise RuntimeError("HFModel lost a request while batching; please report this bug")
    return texts


def eos_text(setup: GenerationSetup) -> str | None:
    """The EOS token as text: a stop sequence of every request (lm-eval's)."""
    eos_id = setup.tokenizer.eos_token_id
    return setup.tokenizer.decode(eos_id, skip_special_tokens=False) if eos_id is not None else None


def kwargs_groups(setup: GenerationSetup, requests: Sequence[Request]) -> list[tuple[list[int], dict[str, Any]]]:
    """lm-eval's groups of requests by generation kwargs (each sorted longest context first), with
    the group's normalized kwargs."""
    contexts = [str(r.args[0]) for r in requests]
    raw_kwargs = [dict(r.args[1]) if len(r.args) > 1 and r.args[1] else {} for r in requests]
    encoded_len: dict[str, int] = {}

    def n_tokens(text: str) -> int:
        if text not in encoded_len:
            encoded_len[text] = len(setup.tok_encode(text))
        return encoded_len[text]

    return [
        (indices, normalize_gen_kwargs(raw_kwargs[indices[0]], setup.max_gen_toks))
        for indices in plan_generation(contexts, raw_kwargs, n_tokens)
    ]


def prepare_group(
    setup: GenerationSetup, requests: Sequence[Request], kwargs: dict[str, Any], eos: str | None
) -> Group:
    """The requests' contexts encoded and truncated as lm-eval does, refusing what cannot run."""
    kwargs = dict(kwargs)
    until = stop_sequences(kwargs.pop("until", None), eos)
    max_gen_toks = int(kwargs.pop("max_gen_toks"))
    max_ctx_len = setup.max_length - max_gen_toks
    if max_ctx_len <= 0:
        raise ModelError(
            f"max_gen_toks {max_gen_toks} leaves no room for a context in the model's max_length "
            f"{setup.max_length}; lower generation_kwargs.max_gen_toks or raise model.max_length."
        )
    encoded = [setup.encode_context(str(r.args[0]))[-max_ctx_len:] for r in requests]
    for r, ctx in zip(requests, encoded):
        if not ctx:
            raise ModelError(
                f"the context of generate_until request {r.args[0]!r} encodes to no tokens and "
                "this tokenizer adds no BOS, so there is nothing to continue; give it a prompt."
            )
    return Group(tuple(until), max_gen_toks, encoded, kwargs)


def generate_batches(
    setup: GenerationSetup, requests: Sequence[Request], group: Group, cache_for: CacheFor | None = None
) -> Answers:
    """lm-eval's batches of one kwargs group through ``model.generate``; sampled requests one at a
    time, seeded from the request. ``cache_for``: the fast engine's key/values a batch starts from."""
    import torch

    from evalflow.models.hf import torch_ops

    until = list(group.until)
    sampled = bool(group.kwargs.get("do_sample"))
    size_for = (
        (lambda i: 1) if sampled else (lambda i: setup.batch_size_for(len(group.encoded[i]) + group.max_gen_toks))
    )
    results: Answers = []
    for batch in chunk(list(range(len(requests))), size_for):
        call_kwargs = dict(group.kwargs)
        padlen = max(len(group.encoded[i]) for i in batch)
        max_length = int(call_kwargs.pop("max_length", padlen + group.max_gen_toks))
        rng = torch_ops.seeded(requests[batch[0]].sample_seed(), setup.device) if sampled else nullcontext()
        contexts = [group.encoded[i] for i in batch]
        with torch.inference_mode(), rng:
            cache = cache_for(batch, max_length, call_kwargs) if cache_for is not None else None
            new_tokens = torch_ops.generate_batch(
                setup.model, setup.tokenizer, contexts, until, max_length, call_kwargs, setup.device, cache
            )
        results.extend(
            (i, final_answer(setup, toks, until, len(group.encoded[i]))) for i, toks in zip(batch, new_tokens)
        )
    return results


def final_answer(setup: GenerationSetup, tokens: Sequence[int], until: Sequence[str], prompt_tokens: int) -> Generation:
    """A row's generated tokens as the answer: decoded, cut at the first stop sequence, and how it
    ended (``prompt_tokens``: its context's length, after truncation)."""
    tokenizer = setup.tokenizer
    text = strip_at_stops(tokenizer.decode(list(tokens), skip_special_tokens=True), list(until))
    finish = generation_finish(
        tokens,
        prompt_tokens,
        until,
        eos_token_ids(setup.model, tokenizer),
        eos_text(setup),
        lambda ids: str(tokenizer.decode(ids, skip_special_tokens=False)),
    )
    return Generation(text, finish)
