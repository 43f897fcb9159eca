"""What a model is to evalflow: lm-eval's three request types, answered in bulk.

A model receives a list of :class:`~evalflow.records.Request` of one type and returns one answer
per request, in order:

- ``loglikelihood``: args ``(context, continuation)`` -> ``(logprob of continuation, is_greedy)``
- ``loglikelihood_rolling``: args ``(text,)`` -> total logprob of the text
- ``generate_until``: args ``(context, gen_kwargs)`` -> generated text (raw, stop sequence removed)

Models never see the cache: the inference edge (``evalflow.dag.inference``) looks every request up
first and sends only the misses, so a model may sort and batch its list freely.

Model identity (what the response cache is keyed by) is computed from the model's *config* without
loading it, by the model class's ``identity(**config)`` classmethod, so a fully cached run never
loads weights, or even imports torch.

Optional, declared on the class (served models use them, ``evalflow.models.api``):
``answer_each(rtype, requests, on_answer)`` hands answers over one by one as they arrive, so the
edge persists each at once; ``describe()`` says what the loaded model is (in the manifest);
``RUN_BATCH_SIZE = False`` keeps the run's ``batch_size`` from overriding the model config's;
``CHAT_MESSAGES = True`` asks for chat prompts as JSON message lists, ``chat_template_source(config)``
says where the chat template lives when it is not ``pretrained``/``tokenizer``.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from evalflow.records import Request


@runtime_checkable
class LanguageModel(Protocol):
    """The three request types of lm-eval, one list of requests at a time."""

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]: ...

    def loglikelihood_rolling(self, requests: Sequence[Request]) -> list[float]: ...

    def generate_until(self, requests: Sequence[Request]) -> list[str]: ...


def default_identity(model_type: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """Identity of a model whose outputs depend only on its config values."""
    return {"type": model_type, "config": dict(config)}
