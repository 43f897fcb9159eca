"""What a model is to evalflow: lm-eval's three request types, answered in bulk, plus a few
optional features with declared defaults (`LanguageModel`).

A model receives a list of `evalflow.records.Request` of one type and returns one answer
per request, in order:

- ``loglikelihood``: args ``(context, continuation)`` -> ``(logprob of continuation, is_greedy)``
- ``loglikelihood_rolling``: args ``(text,)`` -> total logprob of the text
- ``generate_until``: args ``(context, gen_kwargs)`` -> generated text (raw, stop sequence removed)

Models never see the cache: the inference edge (``evalflow.dag.answer_cache``) looks every request up
first and sends only the misses, so a model may sort and batch its list freely.

Subclassing `LanguageModel` is optional: evalflow reads every optional feature through
`feature`, which falls back to the base's default for a class or object that does not
declare it, so a duck-typed model with only the three methods keeps working.

Examples:
    >>> class Echo:                       # no base class: the contract's defaults apply
    ...     def loglikelihood(self, requests): return [(-1.0, True) for _ in requests]
    ...     def loglikelihood_rolling(self, requests): return [-1.0 for _ in requests]
    ...     def generate_until(self, requests): return ["" for _ in requests]
    >>> feature(Echo, "RUN_SETTINGS"), feature(Echo(), "identity")()
    ((), None)
"""

from __future__ import annotations

import abc
import inspect
from typing import Any, Callable, ClassVar, Mapping, Protocol, Sequence

from evalflow.records import Request

OnAnswer = Callable[[int, Any], None]


class AnswersRequests(Protocol):
    """Anything with the three request types: a model, or the caching edge in front of one."""

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]: ...

    def loglikelihood_rolling(self, requests: Sequence[Request]) -> list[float]: ...

    def generate_until(self, requests: Sequence[Request]) -> list[str]: ...


class LanguageModel(abc.ABC):
    """The model contract, after inspect_ai's ``ModelAPI``: three abstract request types, and
    every optional feature declared here with the default a model gets when it says nothing.

    The flags and classmethods are read from the class, before the model is built (a fully cached
    run never builds it); ``describe`` and ``answer_each`` from the built model."""

    # Run-level settings (names in evalflow/config/schema.py, e.g. batch_size, max_batch_size) the
    # constructor takes besides the model config's keys. None by default, so a class of your own
    # receives exactly the keys of its model config.
    RUN_SETTINGS: ClassVar[tuple[str, ...]] = ()
    # True: prompts under apply_chat_template arrive as JSON message lists (a chat API applies its
    # own template); False: rendered with the template chat_template_source() points at.
    CHAT_MESSAGES: ClassVar[bool] = False
    # True: answer_each() hands answers over as they arrive (a served model with requests in
    # flight), and the edge persists each at once; False: one list of answers per chunk.
    ANSWERS_EACH: ClassVar[bool] = False
    # Modules or packages (dotted names) whose code computes the answers, besides the files that
    # define the class and its bases: their source is part of the model's identity, so a fix to
    # it never serves answers cached before it.
    CODE: ClassVar[tuple[str, ...]] = ()
    # The request types this model answers with images (a task with doc_to_image); empty: a
    # text-only model, which evalflow refuses such tasks for before any call, as lm-eval does.
    MULTIMODAL: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        """Score each continuation after its context (lm-eval's `loglikelihood`).

        Args:
            requests: Requests whose `args` are `(context, continuation)`.

        Returns:
            Per request, in order: the continuation's total log-probability, and whether greedy
                decoding from the context would produce exactly the continuation.
        """

    @abc.abstractmethod
    def loglikelihood_rolling(self, requests: Sequence[Request]) -> list[float]:
        """Score each whole text (lm-eval's `loglikelihood_rolling`: perplexity tasks).

        Args:
            requests: Requests whose `args` are `(text,)`.

        Returns:
            Per request, in order: the whole text's total log-probability.
        """

    @abc.abstractmethod
    def generate_until(self, requests: Sequence[Request]) -> list[str]:
        """Generate a continuation of each context (lm-eval's `generate_until`).

        Args:
            requests: Requests whose `args` are `(context, gen_kwargs)`; `gen_kwargs` holds `until`
                (the stop sequences), `max_gen_toks` and the sampling settings. Sampled repeats
                are separate requests, told apart by `repeat` and `seed`.

        Returns:
            Per request, in order: the generated text, cut before the first stop sequence.
        """

    @classmethod
    def identity(cls, **config: Any) -> Any:
        """Plain data the response cache is keyed by, beyond the class's code.

        Computed from the config without loading anything (weights' hashes, a served checkpoint's
        revision), since a fully cached run never builds the model. An object handed to
        `evaluate(model=obj)` is asked `identity()` with no arguments; None there means its
        answers are never cached.

        Args:
            **config: The model config's keys, as the constructor receives them.

        Returns:
            JSON-like data (its `name`, if any, is the model name in results.json), or None: the
                config's values.
        """
        return None

    @classmethod
    def chat_template_source(cls, config: Mapping[str, Any]) -> Mapping[str, Any]:
        """Where the chat template comes from, for prompts under `apply_chat_template`.

        Args:
            config: The model config.

        Returns:
            The keys (`pretrained`, `gguf_file`, `tokenizer`) that locate the chat template.
        """
        return dict(config)

    def describe(self) -> Any:
        """What the loaded model is, for the manifest (a server's model list).

        Returns:
            JSON-like data, or None: nothing to record.
        """
        return None

    def answer_each(self, rtype: str, requests: Sequence[Request], on_answer: OnAnswer) -> None:
        """Hand over each answer as it arrives; used instead of the list when `ANSWERS_EACH` is true.

        Args:
            rtype: The request type, the name of one of the three methods.
            requests: Requests of that type.
            on_answer: Called as `on_answer(index, answer)` once per request, in any order.
        """
        for i, answer in enumerate(getattr(self, rtype)(requests)):
            on_answer(i, answer)

    def in_flight(self) -> int:
        """How many requests the model answers at once, with `ANSWERS_EACH`.

        The edge keeps about twice that many handed to it, across chunks and tasks, so it never
        waits for the next chunk.

        Returns:
            A served model's `num_concurrent`; 1 by default.
        """
        return 1

    def served_counts(self) -> Mapping[str, int] | None:
        """Requests each server answered (the manifest's `inference.servers`).

        Returns:
            Server address to request count, or None: no servers.
        """
        return None

    @classmethod
    def replica_configs(cls, config: Mapping[str, Any], workers: int) -> list[dict[str, Any]]:
        """The model config of each Ray replica (`workers=N`).

        Args:
            config: The run's model config.
            workers: The number of replicas.

        Returns:
            One config per replica: the same one, unless the config names one resource per replica
                (several servers).
        """
        return [dict(config) for _ in range(workers)]


FEATURES = ("RUN_SETTINGS", "CHAT_MESSAGES", "ANSWERS_EACH", "CODE", "MULTIMODAL", "identity", "chat_template_source",
            "describe", "answer_each", "in_flight", "served_counts", "replica_configs")


def feature(model: Any, name: str) -> Any:
    """An optional feature of a model, its own or the contract's default: duck-typed models get
    the same defaults as subclasses.

    Looked up on the class, as Python looks up methods, so an object's `__getattr__` never answers
    for its class.

    Args:
        model: A model class or object.
        name: One of the contract's optional features (`FEATURES`).

    Returns:
        The model's own `name`, else `LanguageModel`'s, bound to the model as the base's would be.

    Raises:
        AttributeError: `name` is not a feature of the contract.
    """
    if name not in FEATURES:
        raise AttributeError(f"'{name}' is not a feature of the model contract ({', '.join(FEATURES)})")
    instance, owner = (None, model) if isinstance(model, type) else (model, type(model))
    found = inspect.getattr_static(owner, name, None)
    if found is None:
        found = inspect.getattr_static(LanguageModel, name)
    return found.__get__(instance, owner) if hasattr(found, "__get__") else found


def default_identity(model_type: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """Identity of a model whose outputs depend only on its config values.

    Args:
        model_type: The `model.type` name.
        config: The model config without `type`.

    Returns:
        `{"type": model_type, "config": config}`.
    """
    return {"type": model_type, "config": dict(config)}
