"""What the two served-model classes share: settings, the client, the server's description, and
answering a list of requests through :meth:`ServedModel.answer_each` as answers arrive.

The inference edge calls ``answer_each(rtype, requests, on_answer)`` when a model has it
(``evalflow.scale.answer_cache``) and persists each answer the moment ``on_answer`` receives it; the
three plain request-type methods are for use without the edge.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from evalflow.core.records import Generation, Request
from evalflow.errors import ConfigError, ModelError
from evalflow.models.api.server_settings import ApiSettings, identity, parse_settings, replica_configs
from evalflow.models.protocol import LanguageModel, OnAnswer

log = logging.getLogger(__name__)

__all__ = ["OnAnswer", "ServedModel", "grouped_by_kwargs"]


class ServedModel(LanguageModel):
    """An OpenAI-compatible endpoint answering lm-eval's request types (see the subclasses).

    It takes no run settings: ``model.batch_size`` is its prompts per request, not the run's."""

    KIND: ClassVar[str]
    ANSWERS_EACH: ClassVar[bool] = True  # answers are handed over as their HTTP responses arrive
    # payloads, tokens, alignment, client, and lm-eval's token rules they share with the HF backend
    CODE: ClassVar[tuple[str, ...]] = ("evalflow.models.api", "evalflow.models.lmeval_tokens")

    def __init__(self, **config: Any) -> None:
        from evalflow.models.api.client import ApiClient

        self.settings: ApiSettings = parse_settings(self.KIND, config)
        self.client = ApiClient(self.settings)
        self.server = self._describe_server()

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        """Torch- and HTTP-free: the API kind, ``model``, tokenizer, ``revision`` (see ``settings``)."""
        return identity(parse_settings(cls.KIND, config))

    @classmethod
    def replica_configs(cls, config: Mapping[str, Any], workers: int) -> list[dict[str, Any]]:
        """One Ray replica per server of a ``base_url`` list (``settings.replica_configs``)."""
        return replica_configs(config, workers)

    def _describe_server(self) -> Any:
        """What each server's ``/models`` reports (recorded in the run's manifest: one mapping, or
        a list for several servers), and the first contact: a wrong URL fails here, before any
        request is sent."""
        from evalflow.models.api.dialects import DIALECTS

        if not DIALECTS[self.settings.dialect].lists_models:  # Azure's deployments, llama.cpp's root URL
            described = [{"url": url, "models": None} for url in self.client.urls]
            return described[0] if len(described) == 1 else described
        described = [self._describe_one(i) for i in range(len(self.client.urls))]
        return described[0] if len(described) == 1 else described

    def _describe_one(self, server: int) -> dict[str, Any]:
        from evalflow.models.api.client import RefusedError

        url = self.client.urls[server]
        try:
            listed = self.client.get_json("/models", server)
        except RefusedError as exc:  # some hosted APIs have no /models; an unreachable server still fails here
            log.warning("%s", exc)
            return {"url": url, "models": None, "error": str(exc)}
        names = [m.get("id") for m in listed.get("data", []) if isinstance(m, dict)] if isinstance(listed, dict) else []
        if names and self.settings.model not in names:
            unlisted = (
                f"model.model '{self.settings.model}' is not among the models {url} serves "
                f"({', '.join(map(str, names))})"
            )
            if not self.settings.allow_unlisted:  # its answers would be cached under a name no server has
                raise ConfigError(
                    f"{unlisted}. Use one of those names; if the server's /models listing is "
                    "incomplete, set model.allow_unlisted=true."
                )
            log.warning("%s; used anyway (model.allow_unlisted=true)", unlisted)
        if self.settings.revision is None and server == 0:
            log.warning(
                "model.revision is not set: this server's answers are cached under model.model '%s' alone, "
                "so if the weights behind that name change, old answers would be reused. Set "
                "model.revision=<the checkpoint's hash or tag> and change it with the weights.",
                self.settings.model,
            )
        return {"url": url, "models": listed}

    def describe(self) -> dict[str, Any]:
        """For the manifest: the server's model list and the settings that are not secret."""
        return {
            "type": f"openai_{self.KIND}",
            "model": self.settings.model,
            "revision": self.settings.revision,
            "server": self.server,
        }

    def in_flight(self) -> int:
        """Requests the servers answer at once: ``num_concurrent`` x ``batch_size`` per serving one."""
        return (
            self.settings.num_concurrent * max(1, getattr(self.settings, "batch_size", 1)) * len(self.client.serving())
        )

    def served_counts(self) -> dict[str, int]:
        """HTTP requests each server answered so far (the manifest's ``inference.servers``)."""
        return dict(self.client.answered_by)

    def answer_each(self, rtype: str, requests: Sequence[Request], on_answer: OnAnswer) -> None:
        getattr(self, f"_{rtype}")(requests, on_answer)

    def _collect(self, rtype: str, requests: Sequence[Request]) -> list[Any]:
        out: list[Any] = [None] * len(requests)

        def keep(i: int, answer: Any) -> None:
            out[i] = answer

        self.answer_each(rtype, requests, keep)
        if any(a is None for a in out):
            raise ModelError(f"the server left {out.count(None)} of {len(out)} {rtype} requests unanswered")
        return out

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        return self._collect("loglikelihood", requests)

    def loglikelihood_rolling(self, requests: Sequence[Request]) -> list[float]:
        return self._collect("loglikelihood_rolling", requests)

    def generate_until(self, requests: Sequence[Request]) -> list[Generation]:
        return self._collect("generate_until", requests)

    @abc.abstractmethod
    def _loglikelihood(self, requests: Sequence[Request], on_answer: OnAnswer) -> None:
        """Answer (logprob, is_greedy) per request through ``on_answer(index, answer)``."""

    @abc.abstractmethod
    def _loglikelihood_rolling(self, requests: Sequence[Request], on_answer: OnAnswer) -> None:
        """Answer the total logprob of each text through ``on_answer(index, answer)``."""

    @abc.abstractmethod
    def _generate_until(self, requests: Sequence[Request], on_answer: OnAnswer) -> None:
        """Answer each request's :class:`Generation` (its text, why it stopped, its tokens) through
        ``on_answer(index, answer)``."""


def grouped_by_kwargs(requests: Sequence[Request]) -> list[list[int]]:
    """lm-eval's generation order: requests grouped by identical gen_kwargs, each group longest
    context first (``Collator(group_by="gen_kwargs", sort_fn=-len(context))``)."""
    import json

    groups: dict[str, list[int]] = {}
    for i, r in enumerate(requests):
        groups.setdefault(json.dumps(r.args[1], sort_keys=True, default=str), []).append(i)
    return [sorted(idx, key=lambda i: -len(str(requests[i].args[0]))) for idx in groups.values()]
