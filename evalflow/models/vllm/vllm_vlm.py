"""vLLM with images, ``model=vllm_vlm``: lm-eval 0.4.13's ``--model vllm-vlm`` (``VLLM_VLM``).

    python -m evalflow model=vllm_vlm model.pretrained=/path/to/vlm task=chartqa include_path=lm_eval

It is ``model=vllm`` (:class:`~evalflow.models.vllm.vllm_model.VLLMModel`: one engine, its
tokenizer, its request rules) plus what ``VLLM_VLM`` adds, done the same way
(``lm_eval/models/vllm_vlms.py``):

- the processor (``AutoProcessor``) is loaded beside the engine; under ``apply_chat_template``
  the prompt arrives as chat messages (``CHAT_MESSAGES``) and each message's ``<image>``
  placeholders become image parts (``interleave``, else images first), rendered by the
  processor's chat template; text tasks' chat prompts are rendered by it too, as lm-eval's
  ``apply_chat_template`` is the processor's for every request;
- without a chat template, placeholders after the first ``max_images`` are dropped and the rest
  stay ``<image>``, which the model's vLLM processor expands into its image tokens;
- a generate_until request with images goes to vLLM as ``TextPrompt(prompt=text,
  multi_modal_data={"image": images})``: the text tokenized by vLLM, not truncated, at most
  ``max_images`` images, each resized first as lm-eval's ``resize_image`` (``image_width``,
  ``image_height``, ``image_max_side``); ``max_images`` other than 999 becomes the engine's
  ``limit_mm_per_prompt``; sampling kwargs, stops and the token budget are ``model=vllm``'s;
- requests without images (a text task) are ``model=vllm``'s; log-likelihoods of text after
  images are refused before any call (``MULTIMODAL``), as lm-eval's ``vllm-vlm`` cannot score
  them either.

Its answers are keyed by everything ``model=vllm``'s are, plus the image settings above.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

from evalflow.core.records import Generation, Request
from evalflow.errors import ConfigError
from evalflow.models.hf.vlm.prompts import DEFAULT_IMAGE_PLACEHOLDER, render_prompt, resize
from evalflow.models.vllm import request_rules as rules
from evalflow.models.vllm.vllm_model import VLLMModel

NO_IMAGE_LIMIT = 999  # lm-eval's max_images default: no limit_mm_per_prompt given to the engine
# the settings that change what the model is shown, keyed into the answers' identity
IMAGE_SETTINGS = ("interleave", "max_images", "image_width", "image_height", "image_max_side")


class VLLMVisionModel(VLLMModel):
    """A ``vllm.LLM`` on a vision-language model, answering generate_until requests with images."""

    CODE: ClassVar[tuple[str, ...]] = (*VLLMModel.CODE, "evalflow.models.hf.vlm.prompts")
    CHAT_MESSAGES: ClassVar[bool] = True  # chat prompts arrive as messages: <image> becomes an image part
    RUN_SETTINGS: ClassVar[tuple[str, ...]] = ()  # think_end_token: lm-eval's VLLM_VLM never reads it
    think_end_token = None  # so vLLM stops at the task's stop sequences, as VLLM_VLM's does
    MULTIMODAL: ClassVar[tuple[str, ...]] = ("generate_until",)

    def __init__(
        self,
        pretrained: str,
        *,
        interleave: bool = True,
        max_images: int = NO_IMAGE_LIMIT,
        image_width: int | None = None,
        image_height: int | None = None,
        image_max_side: int | None = None,
        **config: Any,
    ) -> None:
        self.resize = check_resize(image_width, image_height, image_max_side)
        self.interleave, self.max_images = bool(interleave), int(max_images)
        engine_args = {**config, **image_limit(self.max_images, config.get("limit_mm_per_prompt"))}
        super().__init__(pretrained, **engine_args)
        from evalflow.models.vllm import vllm_calls as engine

        self.processor = engine.load_processor(
            pretrained, config.get("revision"), bool(config.get("trust_remote_code", False))
        )

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        """``model=vllm``'s identity, plus the image settings (:data:`IMAGE_SETTINGS`, lm-eval's
        defaults filled in). The processor and its chat template are files of the weights' folder,
        already in ``weights``."""
        check_resize(config.get("image_width"), config.get("image_height"), config.get("image_max_side"))
        defaults = {"interleave": True, "max_images": NO_IMAGE_LIMIT}
        return {
            **super().identity(**config),
            "backend": "vllm-vlm",
            "images": {k: config.get(k, defaults.get(k)) for k in IMAGE_SETTINGS},
        }

    def prompt(self, context: str) -> str:
        """The text vLLM receives: chat messages rendered by the processor with image parts, or
        plain text with the placeholders after ``max_images`` dropped."""
        return render_prompt(context, self.processor, DEFAULT_IMAGE_PLACEHOLDER, self.interleave, self.max_images)

    def _rendered(self, requests: Sequence[Request]) -> list[Request]:
        return [replace(r, args=(self.prompt(r.args[0]), *r.args[1:])) for r in requests]

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        return super().loglikelihood(self._rendered(requests))

    def loglikelihood_rolling(self, requests: Sequence[Request]) -> list[float]:
        return super().loglikelihood_rolling(self._rendered(requests))

    def generate_until(self, requests: Sequence[Request]) -> list[Generation]:
        """Requests with images through :func:`vllm_calls.generate_with_images`, the rest through
        ``model=vllm``'s generation (lm-eval's fallback for text-only requests)."""
        rendered = self._rendered(requests)
        visual = [i for i, r in enumerate(rendered) if has_images(r)]
        out: list[Generation] = [Generation("")] * len(rendered)
        plain = [i for i in range(len(rendered)) if i not in set(visual)]
        if plain:
            for i, text in zip(plain, super().generate_until([rendered[i] for i in plain]), strict=True):
                out[i] = text
        if visual:
            for i, text in zip(visual, self._generate_with_images([rendered[i] for i in visual]), strict=True):
                out[i] = text
        return out

    def _generate_with_images(self, requests: Sequence[Request]) -> list[Generation]:
        from evalflow.models.vllm import vllm_calls as engine

        prompts, params, stops = [], [], []
        for r in requests:
            kwargs, until, max_gen_toks = self.sampling(r)
            prompts.append(image_prompt(r.args[0], r.args[2]["visual"], self.max_images, self.resize))
            params.append({"max_tokens": max_gen_toks, "stop": until, **kwargs})
            stops.append(until)
        order = longest_text_first([self.tok_encode(text) for text, _ in prompts], [text for text, _ in prompts])
        found = engine.generate_with_images(
            self.llm, [prompts[i] for i in order], [params[i] for i in order], self.lora
        )
        return self.answers(rules.restore_order(order, found), stops, params)


def has_images(request: Request) -> bool:
    """Whether a request carries images (lm-eval's layout: a third argument ``{"visual": [...]}``)."""
    return len(request.args) > 2 and bool((request.args[2] or {}).get("visual"))


def image_prompt(
    text: str, images: Sequence[Any], max_images: int, size: tuple[int | None, int | None, int | None]
) -> tuple[str, list[Any]]:
    """One prompt as ``VLLM_VLM`` hands it to vLLM: the rendered text and its first ``max_images``
    images, each resized as lm-eval's ``resize_image``."""
    return text, [resize(image, *size) for image in images][:max_images]


def longest_text_first(tokens: Sequence[Sequence[int]], texts: Sequence[str]) -> list[int]:
    """lm-eval's ``Collator`` order for these requests: most context tokens first, ties by text."""
    return sorted(range(len(texts)), key=lambda i: (-len(tokens[i]), texts[i]))


def image_limit(max_images: int, given: Any) -> dict[str, Any]:
    """The engine's ``limit_mm_per_prompt``: lm-eval sets ``{"image": max_images}`` when
    ``max_images`` is not its default; one given by name is kept."""
    if given is not None or max_images == NO_IMAGE_LIMIT:
        return {}
    return {"limit_mm_per_prompt": {"image": max_images}}


def check_resize(
    width: int | None, height: int | None, max_side: int | None
) -> tuple[int | None, int | None, int | None]:
    """The resize settings, refusing what lm-eval refuses: ``image_max_side`` with a width or height."""
    if max_side and (width or height):
        raise ConfigError(
            "vllm_vlm: model.image_max_side cannot be combined with model.image_width/image_height (lm-eval's "
            "vllm-vlm refuses the ambiguous resize too); set one of them."
        )
    return width, height, max_side
