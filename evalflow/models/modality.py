"""The refusal lm-eval gives before any call: a multimodal task needs a model that takes images.

lm-eval 0.4.13's ``evaluate`` raises when a task with ``doc_to_image``/``doc_to_audio`` meets a
model without ``MULTIMODAL``; evalflow does the same at task selection, naming the task, its file
and the backends that answer image requests, and also refuses a request type the chosen backend
does not answer with images (lm-eval's hf-multimodal has no image log-likelihoods).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from evalflow.errors import ConfigError
from evalflow.models.protocol import feature
from evalflow.taskspec.data.images import is_multimodal
from evalflow.taskspec.format.spec import TaskConfig

MULTIMODAL_BACKENDS = (
    "hf_multimodal (transformers VLMs)",
    "vllm_vlm (VLMs in vLLM)",
    "openai_chat (served VLMs: vLLM, SGLang)",
)


def refuse_unanswerable(tasks: Iterable[TaskConfig], model: Any, name: str) -> None:
    """Raise a ConfigError for the first multimodal task ``model`` (a class or object) cannot answer."""
    answers = tuple(feature(model, "MULTIMODAL"))
    for task in tasks:
        if not is_multimodal(task):
            continue
        rtype = "loglikelihood" if task.output_type == "multiple_choice" else task.output_type
        if not answers:
            raise ConfigError(
                f"task '{task.task}' ({task.source}) is multimodal (it sets doc_to_image), but model "
                f"'{name}' takes text only: it would run without its images. Use a backend that takes "
                f"images: {', '.join(MULTIMODAL_BACKENDS)}, e.g. model=hf_multimodal model.pretrained=DIR."
            )
        if rtype not in answers:
            raise ConfigError(
                f"task '{task.task}' ({task.source}) sends {rtype} requests with images (output_type "
                f"{task.output_type}), which model '{name}' does not answer with images (it answers "
                f"{', '.join(answers)}), as lm-eval's counterpart does not. Use a generate_until "
                "version of the task, or another backend."
            )
