"""The run's reasoning settings (``reasoning_effort``, ``thinking_budget``: evalflow/config/schema.py)
brought to the scored model exactly where they change what is asked of it, so they key exactly
those answers, and refused, before any model call, where they could change nothing:

- a model class with ``REASONING`` (a served chat model): both join its config, so its request
  bodies carry them and its identity (the answers' key) names them;
- else, with prompts rendered through a chat template evalflow applies (``hf``, ``vllm``,
  ``openai_completions`` under ``apply_chat_template``): ``reasoning_effort`` is one more
  ``chat_template_args`` key, as lm-eval users pass it (``chat_template_args={"reasoning_effort":
  "low"}``); it reaches the answers' key through the rendered prompts;
- else (plain prompts, a completions endpoint without a template, a model object): refused.

Judges get neither: a judge's own config says how hard it thinks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalflow.config.schema import RunSettings
from evalflow.errors import ConfigError
from evalflow.models.protocol import feature
from evalflow.models.registry import model_class

REASONING_SETTINGS = ("reasoning_effort", "thinking_budget")


def given(settings: RunSettings) -> dict[str, Any]:
    """The reasoning settings the run sets."""
    return {k: getattr(settings, k) for k in REASONING_SETTINGS if getattr(settings, k) is not None}


def scored_config(settings: RunSettings) -> Mapping[str, Any]:
    """The scored model's config, with the run's reasoning settings when its class takes them."""
    values = given(settings)
    if not values or not feature(model_class(str(settings.model["type"])), "REASONING"):
        return settings.model
    return {**settings.model, **values}  # conf/model/ has no such keys: the run's are the only ones


def template_args(settings: RunSettings) -> dict[str, Any] | None:
    """The chat template's keyword arguments: ``chat_template_args`` and the run's ``reasoning_effort``."""
    args = dict(settings.chat_template_args or {})
    effort = settings.reasoning_effort
    if effort is None:
        return args or None
    if args.get("reasoning_effort", effort) != effort:
        raise ConfigError(
            f"reasoning_effort={effort} and chat_template_args' reasoning_effort={args['reasoning_effort']!r} "
            "disagree; set it once (reasoning_effort= is the run setting; the template receives it)."
        )
    return {**args, "reasoning_effort": effort}


def check_reasoning(settings: RunSettings, model: Any, name: str) -> None:
    """Refuse a reasoning setting that could change nothing for ``model`` (a class, or an object
    handed to the run) named ``name``: one paragraph, before any model call."""
    values = given(settings)
    if not values:
        return
    cls = model if isinstance(model, type) else type(model)
    shown = " ".join(f"{k}={v}" for k, v in values.items())
    if not isinstance(model, type):
        raise ConfigError(
            f"{shown}, but the model is an object built by the caller ({name}), whose requests the run cannot "
            "change: build it with its own reasoning setting, or pass a model config instead of an object."
        )
    if feature(cls, "REASONING"):
        return
    if "thinking_budget" in values:
        raise ConfigError(
            f"thinking_budget={values['thinking_budget']}, but model {name} takes no thinking budget: only a "
            "served Anthropic model (model=openai_chat model.dialect=anthropic) does. Drop thinking_budget, or "
            "use reasoning_effort, which chat templates and OpenAI-style chat servers take."
        )
    if not settings.apply_chat_template or feature(cls, "CHAT_MESSAGES"):
        raise ConfigError(
            f"reasoning_effort={values['reasoning_effort']}, but model {name}'s prompts use no chat template "
            "(apply_chat_template is false, or the model renders its own), so it could change nothing. Set "
            "apply_chat_template=true (hf and vllm then render the template with reasoning_effort, as "
            "lm-eval's chat_template_args does), use a served chat model (model=openai_chat sends the "
            "request's reasoning_effort field), or drop reasoning_effort."
        )
