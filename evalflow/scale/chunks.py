"""Which requests travel together to a model replica (pure).

A chunk is the unit a replica is handed and leased. Requests that
share a context (the continuations of one multiple-choice question, the k samples of one prompt)
form a *family*: a model computes their shared prefix once only if they arrive together, so a
chunk never splits a family. Chunks depend only on the ordered misses, ``chunk_size`` and the
token budget, never on the worker count, so every replica count batches exactly the same requests
together.

**Chunks are sized by work, not by request count.** A chunk closes before it would hold more than
``chunk_size`` requests or more than ``budget`` tokens of work, whichever comes first. Work is
estimated from the text alone (no tokenizer at the edge: ``len(text) / 4`` tokens, English's
typical 4 characters per token), and a generated token costs ``GENERATED_WEIGHT`` prompt tokens:
each is a sequential forward step, where prompt tokens share one batched pass (SmolLM2 on this
repository's CPU: ~11,000 prompt tokens/s against 45 generated tokens/s at 8 rows; on a GPU the
gap is smaller, hence 64 rather than 250). With the defaults (512 requests, 2^18 tokens):

- arc_easy 0-shot (~40 tokens a request) fills 512-request chunks: large chunks let the model
  sort by length and batch with little padding (the last round measured arc_easy and mmlu
  10-15% faster at 512 requests a chunk than at 64);
- mmlu 5-shot (~600 tokens) gets ~430 requests a chunk;
- gsm8k generation (256 new tokens) gets ~15 requests a chunk, 0-shot or 5-shot.

So a chunk is about the same amount of model time whatever the task (~25 s of SmolLM2 on this
CPU); any task of more than one chunk's work gives several replicas chunks to answer. A chunk is
what is leased and batched together, not what is saved together: a local model with
``answer_parts`` (the HF model) hands answers back batch by batch and the edge saves them as they
come (``evalflow.scale.dispatch.answered_parts``), so a killed run loses the batches in flight; a
Ray replica answers whole chunks, so a killed driver loses its replicas' chunks in flight.

>>> from evalflow.core.records import Request
>>> reqs = [Request("loglikelihood", ("Q1", c)) for c in "abc"] + [Request("loglikelihood", ("Q2", "d"))]
>>> [[r.args for _, r in c] for c in plan_chunks(list(enumerate(reqs)), 2)]
[[('Q1', 'a'), ('Q1', 'b'), ('Q1', 'c')], [('Q2', 'd')]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from evalflow.core.records import Request

K = TypeVar("K")

CHUNK_SIZE = 512  # requests a chunk holds at most, unless the run sets chunk_size
# ... for a model answering each request as it arrives (ANSWERS_EACH: a served model): its server
# batches the concurrent requests itself, so a chunk is only what is leased and saved together;
# small ones start the first request sooner (a shorter first chunk to tokenize) and keep Ray
# replicas (one per server, dealt whole chunks) busy until the run's last requests, where
# 512-request chunks left one replica a chunk behind the other (mmlu at limit=20: 9 chunks, 2,504
# requests against 2,048, so two servers gave 1.79x one, not ~2x)
ANSWERS_EACH_CHUNK_SIZE = 64
BUDGET_TOKENS = 2**18  # estimated prompt tokens of work per chunk (see the module docstring)
CHARS_PER_TOKEN = 4
GENERATED_WEIGHT = 64  # a generated token's cost in prompt tokens
DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's default, for a generation request that does not set it


def family(request: Request) -> Any:
    """What a request shares its prefix with: its context and its images, if any (one prompt
    shown with different images is different input); a rolling request stands alone."""
    if request.type == "loglikelihood_rolling" or not request.args:
        return None
    context = request.args[0] if isinstance(request.args[0], str) else repr(request.args[0])
    last = request.args[-1]
    if len(request.args) > 2 and isinstance(last, dict) and "visual" in last:
        return (context, tuple(getattr(v, "digest", repr(v)) for v in last["visual"]))
    return context


def work(request: Request) -> int:
    """A request's estimated cost in prompt tokens: its text, plus its generated tokens weighted."""
    text = sum(len(a) for a in request.args if isinstance(a, str))
    tokens = -(-text // CHARS_PER_TOKEN)
    if request.type == "generate_until":
        kwargs = request.args[1] if len(request.args) > 1 and isinstance(request.args[1], dict) else {}
        new = kwargs.get("max_gen_toks", DEFAULT_MAX_GEN_TOKS)
        tokens += GENERATED_WEIGHT * (new if isinstance(new, int) and new > 0 else DEFAULT_MAX_GEN_TOKS)
    return max(1, tokens)


def chunk_size(setting: int | None, answers_each: bool) -> int:
    """The run's ``chunk_size`` if set, else the default for the model's kind.

    >>> chunk_size(None, False), chunk_size(None, True), chunk_size(8, True)
    (512, 64, 8)
    """
    if setting is not None:
        return setting
    return ANSWERS_EACH_CHUNK_SIZE if answers_each else CHUNK_SIZE


def plan_chunks(
    ordered: Sequence[tuple[K, Request]], chunk_size: int, budget: int = BUDGET_TOKENS
) -> list[list[tuple[K, Request]]]:
    """Consecutive runs of ``ordered`` of at most ``chunk_size`` requests and ``budget`` tokens of
    :func:`work`, except that a family (adjacent requests with one context) is never split: a
    chunk closes early rather than cut one, and a family over either limit is a chunk of its own."""
    chunks: list[list[tuple[K, Request]]] = []
    current: list[tuple[K, Request]] = []
    spent = 0
    start = 0
    while start < len(ordered):
        fam = family(ordered[start][1])
        end = start + 1
        while fam is not None and end < len(ordered) and family(ordered[end][1]) == fam:
            end += 1
        members = list(ordered[start:end])
        cost = sum(work(r) for _, r in members)
        if current and (len(current) + len(members) > chunk_size or spent + cost > budget):
            chunks.append(current)
            current, spent = [], 0
        current.extend(members)
        spent += cost
        start = end
    if current:
        chunks.append(current)
    return chunks
