"""``generate_until`` for HFModel: lm-eval's batching and stop rules, with a shared prefix run once.

Requests are grouped by generation kwargs and sorted longest context first (lm-eval's order, so
batches hold the same requests as lm-eval's), contexts left-truncated to ``max_length -
max_gen_toks``, and each batch generated with ``model.generate`` and lm-eval's multi-token stop
criterion; the text is cut at the first stop sequence.

When the contexts of a batch start with the same tokens (gsm8k's ``first_n`` few-shot examples give
every document the same five examples), that prefix is run once, kept in the model's prefix memo
across batches, and ``generate`` starts from its key/values: the batch is laid out ``[prefix |
left padding | own tokens]`` with the padding masked, so each row sees exactly its own context at
its own positions, with the same padded length (hence the same ``max_length``) as without sharing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from evalflow.core.records import Request
from evalflow.errors import ModelError
from evalflow.models.hf.batching import chunk, plan_generation
from evalflow.models.hf.fast.prefix import common_prefix_len, plan_families
from evalflow.models.lmeval_tokens import hf_generate_kwargs, normalize_gen_kwargs, stop_sequences, strip_at_stops


@dataclass(frozen=True)
class GenerationSetup:
    """What generation needs from a loaded HFModel (which builds it, so imports point one way)."""

    model: Any
    tokenizer: Any
    device: Any
    max_length: int
    max_gen_toks: int  # default for requests that do not set it
    batch_size_for: Callable[[int], int]  # sequence length -> rows per batch
    decode_slots_for: Callable[[int], int]  # sequence length -> rows per continuous-batching step
    tok_encode: Callable[[str], list[int]]  # HFLM.tok_encode: orders requests by context length
    encode_context: Callable[[str], list[int]]  # HFLM.tok_batch_encode for one context
    share_prefixes: bool  # key/value reuse is on and passed the model's self-check
    kv_works: bool  # the model runs with evalflow's caches, masks and positions (the self-check passed)
    batching: str  # "continuous" (greedy rows leave the batch once they stop) or "lmeval" (lm-eval's batches)
    min_prefix: int  # shorter shared prefixes are run with their documents
    prefix_memo: Any  # PrefixMemo of kv.PrefixStates, shared with scoring
    draft_tokens: int = 0  # per row and decode step, copied from the row's own text (``lookup``); 0: none
    native_attention: bool = False  # decode steps' attention in the compiled kernel where it applies


def generate_until(setup: GenerationSetup, requests: Sequence[Request]) -> list[str]:
    """Generated text per request, cut at the first stop sequence (``until`` and EOS)."""
    eos = eos_text(setup)
    out: list[str | None] = [None] * len(requests)
    for indices, kwargs in kwargs_groups(setup, requests):
        for i, text in generate_group(setup, [requests[i] for i in indices], kwargs, eos):
            out[indices[i]] = text
    if any(o is None for o in out):
        raise RuntimeError("HFModel lost a request while batching; please report this bug")
    return out  # type: ignore[return-value]


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


@dataclass(frozen=True)
class Group:
    """Requests of one generation-kwargs group, ready to generate: stops, token budget, the
    left-truncated contexts and the shared-prefix length of each (``_family_prefixes``)."""

    until: tuple[str, ...]
    max_gen_toks: int
    encoded: list[list[int]]
    family_prefix: list[int]
    kwargs: dict[str, Any]  # the rest, for transformers' generate

    def continuous(self, setup: GenerationSetup) -> bool:
        """Whether the greedy continuous-batching loop (``decode``) answers this group."""
        return (
            setup.batching == "continuous"
            and setup.kv_works
            and hf_generate_kwargs(self.kwargs) == {"do_sample": False}
        )


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
    return Group(tuple(until), max_gen_toks, encoded, _family_prefixes(setup, encoded), kwargs)


def generate_group(
    setup: GenerationSetup, requests: list[Request], kwargs: dict[str, Any], eos: str | None
) -> list[tuple[int, str]]:
    """Generate for requests sharing generation kwargs: (position in ``requests``, text) pairs."""
    import torch

    from evalflow.models.hf import torch_ops
    from evalflow.models.hf.fast import kv

    group = prepare_group(setup, requests, kwargs, eos)
    until, max_gen_toks, encoded, family_prefix, kwargs = (
        list(group.until),
        group.max_gen_toks,
        group.encoded,
        group.family_prefix,
        group.kwargs,
    )
    if group.continuous(setup):
        return _generate_continuous(setup, encoded, family_prefix, until, max_gen_toks)
    sampled = bool(kwargs.get("do_sample"))
    size_for = (lambda i: 1) if sampled else (lambda i: setup.batch_size_for(len(encoded[i]) + max_gen_toks))
    results = []
    for batch in chunk(list(range(len(requests))), size_for):
        call_kwargs = dict(kwargs)
        padlen = max(len(encoded[i]) for i in batch)
        max_length = int(call_kwargs.pop("max_length", padlen + max_gen_toks))
        rng = torch_ops.seeded(requests[batch[0]].sample_seed(), setup.device) if sampled else nullcontext()
        contexts = [encoded[i] for i in batch]
        with torch.inference_mode(), rng:
            cache = None
            if setup.share_prefixes and _one_sequence_per_row(call_kwargs):
                prefix = _batch_prefix(setup, contexts, [family_prefix[i] for i in batch])
                cache = kv.generation_cache(setup.model, contexts, max_length, prefix, setup.device)
            new_tokens = torch_ops.generate_batch(
                setup.model, setup.tokenizer, contexts, until, max_length, call_kwargs, setup.device, cache
            )
        for i, toks in zip(batch, new_tokens):
            text = setup.tokenizer.decode(toks, skip_special_tokens=True)
            results.append((i, strip_at_stops(text, until)))
    return results


def _generate_continuous(
    setup: GenerationSetup, encoded: list[list[int]], family_prefix: list[int], until: list[str], max_gen_toks: int
) -> list[tuple[int, str]]:
    """Greedy generation with continuous batching (``decode``): rows leave as soon as they stop."""
    import torch

    from evalflow.models.hf.fast import decode

    slots = setup.decode_slots_for(max(len(c) for c in encoded) + max_gen_toks)
    stop = decode.StopWatch(until, setup.tokenizer)
    with torch.inference_mode():
        jobs = decode_jobs(setup, encoded, family_prefix)
        new_tokens = decode.greedy_until(
            setup.model,
            jobs,
            slots,
            max_gen_toks,
            stop,
            eos_ids(setup),
            setup.device,
            setup.draft_tokens,
            setup.native_attention,
        )
    return [(i, final_text(setup, toks, until)) for i, toks in enumerate(new_tokens)]


def decode_jobs(setup: GenerationSetup, encoded: list[list[int]], family_prefix: list[int]) -> list[Any]:
    """A ``decode.Job`` per context: its tokens and the memoized key/values of its family's prefix."""
    from evalflow.models.hf.fast import decode

    return [decode.Job(tuple(ctx), _batch_prefix(setup, [ctx], [n])) for ctx, n in zip(encoded, family_prefix)]


def eos_ids(setup: GenerationSetup) -> set[int]:
    """The token ids that end a greedy row (the model's generation config)."""
    eos = setup.model.generation_config.eos_token_id
    return set(eos if isinstance(eos, list) else [] if eos is None else [eos])


def final_text(setup: GenerationSetup, tokens: Sequence[int], until: Sequence[str]) -> str:
    """A row's generated tokens as the answer: decoded, cut at the first stop sequence."""
    return strip_at_stops(setup.tokenizer.decode(list(tokens), skip_special_tokens=True), list(until))


def _one_sequence_per_row(gen_kwargs: dict[str, Any]) -> bool:
    """Beam search and several returned sequences reorder and repeat cache rows, which only
    transformers' own cache supports; evalflow's generation cache serves one sequence per row."""
    return int(gen_kwargs.get("num_beams", 1) or 1) == 1 and int(gen_kwargs.get("num_return_sequences", 1) or 1) == 1


def _family_prefixes(setup: GenerationSetup, encoded: list[list[int]]) -> list[int]:
    """Per context, the length of the prefix it shares with other contexts of the group (0: none).

    Planned over the whole group, so batches of one request still find the shared prefix.
    """
    if not setup.share_prefixes:
        return [0] * len(encoded)
    families, _ = plan_families(encoded, [len(c) - 1 for c in encoded], setup.min_prefix)
    out = [0] * len(encoded)
    for fam in families:
        for i in fam.rows:
            out[i] = fam.prefix_len
    return out


def _batch_prefix(setup: GenerationSetup, contexts: list[list[int]], family_prefix: list[int]) -> Any:
    """The key/values of the prefix every context of the batch starts with, or None to run whole."""
    from evalflow.models.hf.fast import kv

    n = min(family_prefix)
    for ctx in contexts[1:]:
        n = min(n, common_prefix_len(contexts[0], ctx))
    if n < setup.min_prefix:
        return None
    prefix = contexts[0][:n]
    found = setup.prefix_memo.covering(prefix, setup.min_prefix)
    if found is not None:
        states, m = found
        return states.head(m)
    states = kv.prefix_states(setup.model, [prefix], setup.device).one(0)
    setup.prefix_memo.put(prefix, states)
    return states
