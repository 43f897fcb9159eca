"""What a model is to evalflow: lm-eval's three request types, answered in bulk, plus a few
optional features with declared defaults (:class:`LanguageModel`).

A model receives a list of :class:`~evalflow.core.records.Request` of one type and returns one answer
per request, in order:

- ``loglikelihood``: args ``(context, continuation)`` -> ``(logprob of continuation, is_greedy)``
- ``loglikelihood_rolling``: args ``(text,)`` -> total logprob of the text
- ``generate_until``: args ``(context, gen_kwargs)`` -> generated text (raw, stop sequence removed),
  a ``str`` or a :class:`~evalflow.core.records.Generation` (the text and its
  :class:`~evalflow.core.records.Finish`: why it stopped, its token counts, a served model's
  separate reasoning), which evalflow's own backends return

Models never see the cache: the inference edge (``evalflow.scale.answer_cache``) looks every request up
first and sends only the misses, so a model may sort and batch its list freely.

Subclassing :class:`LanguageModel` is optional: evalflow reads every optional feature through
:func:`feature`, which falls back to the base's default for a class or object that does not
declare it, so a duck-typed model with only the three methods keeps working.

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
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

from evalflow.core.records import Generation, Request

OnAnswer = Callable[[int, Any], None]


class AnswersRequests(Protocol):
    """Anything with the three request types: a model, or the caching edge in front of one."""

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]: ...

    def loglikelihood_rolling(self, requests: Sequence[Request]) -> list[float]: ...

    def generate_until(self, requests: Sequence[Request]) -> Sequence[str | Generation]: ...


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
    # True: the scored model's config takes the run's reasoning_effort and thinking_budget (a served
    # chat model sends them in each request), so they key its answers; False: a reasoning effort
    # reaches it only through a chat template's arguments (hf, vllm), or is refused.
    REASONING: ClassVar[bool] = False

    @abc.abstractmethod
    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]: ...

    @abc.abstractmethod
    def loglikelihood_rolling(self, requests: Sequence[Request]) -> list[float]: ...

    @abc.abstractmethod
    def generate_until(self, requests: Sequence[Request]) -> Sequence[str | Generation]: ...

    @classmethod
    def identity(cls, **config: Any) -> Any:
        """Plain data the response cache is keyed by, computed from the config without loading
        anything (weights' hashes, a served checkpoint's revision). None: the config's values.

        An object handed to ``evaluate(model=obj)`` is asked ``identity()`` with no arguments;
        None there means its answers are never cached."""
        return None

    @classmethod
    def chat_template_source(cls, config: Mapping[str, Any]) -> Mapping[str, Any]:
        """The keys (``pretrained``, ``gguf_file``, ``tokenizer``) that locate the chat template."""
        return dict(config)

    def describe(self) -> Any:
        """What the loaded model is, for the manifest (a server's model list); None: nothing."""
        return None

    def answer_each(self, rtype: str, requests: Sequence[Request], on_answer: OnAnswer) -> None:
        """Hand each answer to ``on_answer(index, answer)``; used when ``ANSWERS_EACH`` is true."""
        for i, answer in enumerate(getattr(self, rtype)(requests)):
            on_answer(i, answer)

    def in_flight(self) -> int:
        """With ``ANSWERS_EACH``: how many requests the model answers at once (a server's
        ``num_concurrent``); the edge keeps about twice that many handed to it, across chunks and
        tasks, so it never waits for the next chunk."""
        return 1

    def served_counts(self) -> Mapping[str, int] | None:
        """Requests each server answered (the manifest's ``inference.servers``); None: no servers."""
        return None

    @classmethod
    def replica_configs(cls, config: Mapping[str, Any], workers: int) -> list[dict[str, Any]]:
        """Each of ``workers`` Ray replicas' model config (the same one, unless the config names
        one resource per replica, e.g. several servers)."""
        return [dict(config) for _ in range(workers)]


FEATURES = (
    "RUN_SETTINGS",
    "CHAT_MESSAGES",
    "ANSWERS_EACH",
    "CODE",
    "MULTIMODAL",
    "REASONING",
    "identity",
    "chat_template_source",
    "describe",
    "answer_each",
    "in_flight",
    "served_counts",
    "replica_configs",
)


def feature(model: Any, name: str) -> Any:
    """``model``'s (a class or an object) own ``name``, else the contract's default, bound to it as
    the base's would be: duck-typed models get the same defaults as subclasses. Looked up on the
    class, as Python looks up methods, so an object's ``__getattr__`` never answers for its class."""
    if name not in FEATURES:
        raise AttributeError(f"'{name}' is not a feature of the model contract ({', '.join(FEATURES)})")
    instance, owner = (None, model) if isinstance(model, type) else (model, type(model))
    found = inspect.getattr_static(owner, name, None)
    if found is None:
        found = inspect.getattr_static(LanguageModel, name)
    return found.__get__(instance, owner) if hasattr(found, "__get__") else found


def default_identity(model_type: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """Identity of a model whose outputs depend only on its config values."""
    return {"type": model_type, "config": dict(config)}
