"""The nouns that flow between the stages of the DAG.

Every record is a frozen dataclass: a stage returns new records and never mutates the ones it was
given (lm-eval's ``Instance.resps.append`` is the counter-example). Records hold only JSON-friendly
values (str, int, float, bool, None, tuples, dicts with str keys, other records) so the cache can
store them as data, never as pickles.

    load_docs -> DocSet -> fewshot -> Contexts -> instances -> Instances -> inference -> Responses
    -> filters -> Filtered -> metrics -> Scores -> aggregate -> TaskResult

Tasks with judge metrics add two stages between filters and metrics:
``Filtered -> judge_requests -> JudgeRequests -> judge_inference -> JudgeResponses -> metrics``.

This module imports nothing from evalflow.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

RequestType = Literal["loglikelihood", "loglikelihood_rolling", "generate_until"]
REQUEST_TYPES: tuple[str, ...] = ("loglikelihood", "loglikelihood_rolling", "generate_until")

Doc = Mapping[str, Any]
"""A dataset row as the datasets library yields it (JSON values)."""


@dataclass(frozen=True)
class DocSet:
    """The documents of one task: the evaluated split and the split few-shot examples come from."""

    eval_split: str
    docs: tuple[Doc, ...]
    fewshot_split: str | None = None
    fewshot_docs: tuple[Doc, ...] | None = None
    fingerprint: str = ""  # of the data the docs were read from; recorded in the manifest


@dataclass(frozen=True)
class Context:
    """The prompt of one document: description, few-shot examples and the document's own text.

    ``prompt`` is a tuple for multiple-input tasks (winogrande), where each choice is a context.
    ``fewshot_ids`` records which documents were drawn as examples, so a run can be audited.
    """

    doc_id: int
    prompt: str | tuple[str, ...]
    fewshot_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Request:
    """One call to a model. Equal requests to one model get one cached response.

    ``args`` is ``(context, continuation)`` for loglikelihood, ``(text,)`` for
    loglikelihood_rolling and ``(context, gen_kwargs)`` for generate_until. ``repeat`` and
    ``seed`` only matter for sampled generation: k samples are k distinct requests.
    """

    type: RequestType
    args: tuple[Any, ...]
    repeat: int = 0
    seed: int | None = None

    def sample_seed(self) -> int:
        """The seed a backend samples this request with, stable across processes and batches:
        from its ``seed`` and ``repeat``, so repeat k of a document is the same sample whichever
        chunk, batch or replica answers it (torch's RNG for ``hf``, ``SamplingParams.seed`` for ``vllm``)."""
        digest = hashlib.sha256(f"{self.seed}:{self.repeat}".encode()).digest()
        return int.from_bytes(digest[:4], "little")


@dataclass(frozen=True)
class Instance:
    """A request tied to the document and position (choice index) it scores."""

    doc_id: int
    idx: int
    request: Request


@dataclass(frozen=True)
class ImageRef:
    """One image, by the hash of its pixels: what documents and requests hold instead of the image.

    The PNG bytes live once in the cache under ``image:<digest>`` (:mod:`evalflow.cache.image_store`),
    however many documents or requests show the image; a request's key hashes ``digest``, so an
    edited image changes exactly the keys of the requests that show it. ``digest`` is the xxhash
    of the mode, size and raw pixel bytes, so a re-encoded but identical image keeps its key.
    """

    digest: str
    width: int
    height: int
    mode: str

    def __str__(self) -> str:
        return f"<image {self.width}x{self.height} {self.mode} {self.digest[:12]}>"

    def as_json(self) -> dict[str, Any]:
        """How samples files show the image: ``__image__`` marks it (the report's thumbnails read it)."""
        return {"__image__": self.digest, "width": self.width, "height": self.height, "mode": self.mode}


Response = Any
"""A model's raw answer: ``(logprob, is_greedy)``, a float (rolling) or a str (generation)."""

STOP_REASONS: tuple[str, ...] = ("stop", "eos", "length", "thinking_unclosed", "error")
"""Why a generation ended: at a stop sequence, at the end-of-sequence token, at ``max_gen_toks``,
inside a thinking part that never closed (derived: see :meth:`Finish.stop_with`), or with an error."""
TRUNCATED: frozenset[str] = frozenset({"length", "thinking_unclosed"})
"""The stop reasons of a generation that did not finish: its score says nothing about the model's answer."""


@dataclass(frozen=True)
class Finish:
    """How one generation ended and what it cost, as its backend reported it (transformers'
    generated tokens, vLLM's and the served APIs' ``finish_reason`` and ``usage``).

    Kept beside the text in the cached answer, so a cached run reports the same stop reasons and
    token counts without the model. ``None`` everywhere: the backend did not say (a model of
    your own that returns plain strings, or an answer cached before evalflow recorded this)."""

    stop_reason: str | None = None  # one of STOP_REASONS but "thinking_unclosed"; None: not reported
    prompt_tokens: int | None = None
    completion_tokens: int | None = None  # every generated token, a thinking part's included
    reasoning_tokens: int | None = None  # of those, the separate reasoning's (a served ``reasoning_content``)
    reasoning: str | None = None  # a served model's reasoning, split off the answer by its server
    # a backend that cuts the thinking off itself (a served chat model's model.think_end_token):
    # whether its marker was there; None: the backend cut nothing (the run's think_end_token decides)
    thinking_closed: bool | None = None

    def stop_with(self, text: str, think_end_token: str | None) -> str | None:
        """The stop reason a run reports for the generation ``text``: ``thinking_unclosed`` when the
        backend's own marker never came, or when the run declares a thinking marker
        (``think_end_token``) that the text never reaches and no reasoning was split off (lm-eval
        then scores the whole text, thinking included); else what the backend said."""
        if self.stop_reason == "error":
            return self.stop_reason
        if self.thinking_closed is False:
            return "thinking_unclosed"
        if think_end_token and self.reasoning is None and think_end_token not in text:
            return "thinking_unclosed"
        return self.stop_reason


@dataclass(frozen=True)
class Generation:
    """A ``generate_until`` answer with its :class:`Finish`: what evalflow's backends return (a
    model may also return a plain ``str``, whose finish is unknown)."""

    text: str
    finish: Finish = Finish()


def generation_text(answer: Any) -> Any:
    """The text of a generation answer (a :class:`Generation` or a plain ``str``); other answers as they are."""
    return answer.text if isinstance(answer, Generation) else answer


@dataclass(frozen=True)
class Responses:
    """Raw model outputs aligned with the instances they answer: ``values`` as lm-eval's models
    return them (a generation's text), and for generations the backend's :class:`Finish`
    (``None`` for the other request types; empty for responses stored before it was recorded)."""

    values: tuple[Response, ...]
    finishes: tuple[Finish | None, ...] = ()


@dataclass(frozen=True)
class Filtered:
    """Per filter pipeline: the responses of each lm-eval instance after that pipeline.

    An lm-eval instance is one ``(doc_id, idx)`` pair; its responses are the answers to all its
    repeats (one for non-sampled requests). ``by_filter[name][i]`` belongs to ``keys[i]``.
    With ``repeats > 1``, ``by_sample[name][i][j]`` is repeat j's answer through the pipeline on
    its own, for the pipelines that treat samples one at a time (what reductions score).
    """

    keys: tuple[tuple[int, int], ...]
    by_filter: Mapping[str, tuple[Any, ...]]
    by_sample: Mapping[str, tuple[tuple[Any, ...], ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class JudgeItem:
    """One answer to grade: judge metric ``metric``'s request for document ``doc_id``'s filtered
    ``response`` (each distinct answer of a document once, every repeat's included)."""

    metric: str
    doc_id: int
    response: str
    request: Request


@dataclass(frozen=True)
class JudgeRequests:
    items: tuple[JudgeItem, ...] = ()


@dataclass(frozen=True)
class JudgeResponses:
    """The judge models' raw answers, aligned with ``JudgeRequests.items``."""

    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scores:
    """Per filter pipeline, per document: the metric values of that document."""

    doc_ids: tuple[int, ...]
    by_filter: Mapping[str, tuple[Mapping[str, Any], ...]]
    targets: tuple[Any, ...] = ()  # doc_to_target of each document, as the samples file shows it
    # with reductions: per filter, per document, each sample's metric values (the samples file shows them)
    by_sample: Mapping[str, tuple[tuple[Mapping[str, Any], ...], ...]] = field(default_factory=dict)
    # judge metrics: per filter, per document, {metric: ({"response", "judge_output", "score"}, ...)};
    # "score" None: the judge's answer did not parse
    judged: Mapping[str, tuple[Mapping[str, tuple[Mapping[str, Any], ...]], ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskResult:
    """One task's aggregated numbers in lm-eval's layout (``"acc,none"`` and ``"acc_stderr,none"``)."""

    task: str
    metrics: Mapping[str, Any]
    higher_is_better: Mapping[str, bool | None]  # None: the metric declares no direction (lm-eval writes null)
    n_samples: Mapping[str, int] = field(default_factory=dict)


RECORD_TYPES: tuple[type, ...] = (
    DocSet,
    Context,
    Request,
    Instance,
    ImageRef,
    Finish,
    Generation,
    Responses,
    Filtered,
    JudgeItem,
    JudgeRequests,
    JudgeResponses,
    Scores,
    TaskResult,
)


# The fields of a samples row that are not metrics (evalflow/output/samples.py): no metric may take them.
SAMPLE_FIELDS = frozenset(
    {
        "doc_id",
        "doc",
        "target",
        "arguments",
        "resps",
        "filtered_resps",
        "filter",
        "metrics",
        "doc_hash",
        "prompt_hash",
        "target_hash",
        "filtered_samples",
        "sample_metrics",
        "judge",
        "judge_unparsed",
        "finish",
    }
)
