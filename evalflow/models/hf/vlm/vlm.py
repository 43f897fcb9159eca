"""``hf_multimodal``: transformers vision-language models with lm-eval 0.4.13's ``hf-multimodal`` semantics.

    python -m evalflow model=hf_multimodal model.pretrained=/path/to/vlm task=chartqa batch_size=1

What lm-eval's ``HFMultimodalLM`` does, done the same way (``lm_eval/models/hf_vlms.py``):

- weights through ``AutoModelForImageTextToText``, the processor through ``AutoProcessor``
  (``min_pixels``/``max_pixels`` passed to it), the tokenizer being the processor's;
- without a chat template, each ``<image>`` in the prompt becomes the model's image token
  (``image_string``, else the decoded ``image_token_id``, else the config's ``image_token_id`` /
  ``image_token_index``); placeholders after the first ``max_images`` are removed, as are those
  images;
- with ``apply_chat_template=true`` the prompt arrives as chat messages (``CHAT_MESSAGES``) and
  each message's text is split at ``<image>`` into text and image parts (``interleave=true``), or
  its images put first (``interleave=false``), then rendered by the processor's chat template;
- ``image_width``/``image_height``/``image_max_side`` resize as lm-eval's ``resize_image``;
  ``convert_img_format`` converts images to RGB; LLaVA models get one flat image list per batch;
- ``generate_until``: requests grouped by generation kwargs, longest context first, batched by
  ``batch_size`` (an int; the run's default ``auto`` means 1, as lm-eval has no automatic batch
  size here), the processor's left-padded batch
  handed to ``model.generate`` with lm-eval's stop criteria, the EOS text added to the stops, and
  the decoded text cut at the first stop sequence.

Log-likelihood requests with images are refused before any call, as lm-eval raises
``NotImplementedError`` for them: a multiple-choice image task needs a generation version.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, ClassVar

from evalflow.core.records import Request
from evalflow.errors import ConfigError, ModelError
from evalflow.models.hf.device import choose, parse_device
from evalflow.models.hf.identity import IDENTITY_VERSION, library_versions, weights_identity
from evalflow.models.hf.vlm.prompts import render_prompt
from evalflow.models.protocol import LanguageModel

log = logging.getLogger(__name__)


class HFMultimodalModel(LanguageModel):
    """A transformers image-text-to-text model answering ``generate_until`` requests with images."""

    RUN_SETTINGS: ClassVar[tuple[str, ...]] = ("batch_size",)
    # its passes and what they use of the text backend (loading, plain passes, lm-eval's token rules)
    CODE: ClassVar[tuple[str, ...]] = (
        "evalflow.models.hf.vlm.vlm_passes",
        "evalflow.models.hf.vlm.prompts",
        "evalflow.models.hf.load",
        "evalflow.models.hf.identity",
        "evalflow.models.hf.torch_ops",
        "evalflow.models.hf.batching",
        "evalflow.models.lmeval_tokens",
    )
    CHAT_MESSAGES: ClassVar[bool] = True  # chat prompts arrive as messages: <image> becomes an image part
    MULTIMODAL: ClassVar[tuple[str, ...]] = ("generate_until",)

    def __init__(
        self,
        pretrained: str,
        *,
        revision: str | None = None,
        dtype: str = "auto",
        device: str = "auto",
        batch_size: int | str = 1,
        max_length: int | None = None,
        max_gen_toks: int = 256,
        truncation: bool = False,
        trust_remote_code: bool = False,
        image_token_id: int | None = None,
        image_string: str | None = None,
        interleave: bool = True,
        max_images: int = 999,
        convert_img_format: bool = False,
        min_pixels: int | None = None,
        max_pixels: int | None = None,
        image_width: int | None = None,
        image_height: int | None = None,
        image_max_side: int | None = None,
        threads: int | None = None,
        **unused: Any,
    ) -> None:
        from evalflow.models.hf import load
        from evalflow.models.hf.vlm import vlm_passes

        if unused:
            log.warning("hf_multimodal model: ignoring unknown config keys %s", sorted(unused))
        if batch_size == "auto":  # the run's default; lm-eval's hf-multimodal has no automatic batch size
            batch_size = 1
        if isinstance(batch_size, str) and not batch_size.isdigit():
            raise ConfigError(
                f"hf_multimodal: batch_size={batch_size!r}; give an int (lm-eval's hf-multimodal has no 'auto')."
            )
        if image_max_side and (image_width or image_height):
            raise ConfigError(
                "hf_multimodal: image_max_side cannot be combined with image_width/image_height "
                "(lm-eval refuses the ambiguous resize too); set one of them."
            )
        self.batch_size, self.max_gen_toks, self.truncation = int(batch_size), int(max_gen_toks), bool(truncation)
        self.interleave, self.max_images, self.rgb = bool(interleave), int(max_images), bool(convert_img_format)
        self.resize = (image_width, image_height, image_max_side)
        weights_identity(pretrained, revision, None)  # refuse a bad path before loading
        pixels = {k: v for k, v in (("min_pixels", min_pixels), ("max_pixels", max_pixels)) if v}
        placed = choose(device, "hf_multimodal model")
        self.parts = vlm_passes.load_vlm(
            pretrained,
            revision or "main",
            dtype,
            placed.used,
            trust_remote_code,
            pixels,
            load.parse_threads(threads),
            max_length,
        )
        log.info("hf_multimodal model: runs on %s (model.device=%s)", self.parts.device, device)
        self.image_token = image_string or self.parts.token_text(image_token_id)

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        """The weights' and processor's files (one folder fingerprint), the settings that change
        prompts or images, and library versions. Not included: ``batch_size``, ``device`` (``auto``
        or the device it resolved to: the same weights' answers wherever they run), ``threads``
        (speed only)."""
        pretrained = config.get("pretrained")
        if not isinstance(pretrained, str) or not pretrained:
            raise ConfigError(
                "model.pretrained is not set: give a local VLM folder or a hub id, "
                "e.g. model=hf_multimodal model.pretrained=/path/to/vlm."
            )
        parse_device(config.get("device", "auto"))  # not in the key, but a bad name is refused in a cached run too
        keys = (
            "dtype",
            "max_length",
            "max_gen_toks",
            "truncation",
            "image_token_id",
            "image_string",
            "interleave",
            "max_images",
            "convert_img_format",
            "min_pixels",
            "max_pixels",
            "image_width",
            "image_height",
            "image_max_side",
        )
        return {
            "backend": "hf-multimodal",
            "semantics": "lm-eval-0.4.13",
            "identity_version": IDENTITY_VERSION,
            "weights": weights_identity(pretrained, config.get("revision"), None),
            "settings": {k: config.get(k) for k in keys},
            "libraries": library_versions(),
        }

    def describe(self) -> dict[str, Any]:
        """For the manifest: the device the model ran on (``model.device`` resolved here)."""
        return {"device": str(self.parts.device)}

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        raise ModelError(_REFUSAL.format(rtype="loglikelihood"))

    def loglikelihood_rolling(self, requests: Sequence[Request]) -> list[float]:
        raise ModelError(_REFUSAL.format(rtype="loglikelihood_rolling"))

    def generate_until(self, requests: Sequence[Request]) -> list[str]:
        from evalflow.models.hf.vlm import vlm_passes

        for r in requests:
            if len(r.args) < 3:
                raise ModelError("hf_multimodal answers requests with images only; run text tasks with model=hf.")
        return vlm_passes.generate_until(self, requests)

    def prompt(self, context: str) -> str:
        """The text the processor receives: chat messages rendered with lm-eval's image parts, or
        ``<image>`` placeholders replaced by the model's image token."""
        return render_prompt(context, self.parts.processor, self.image_token, self.interleave, self.max_images)


_REFUSAL = (
    "hf_multimodal does not answer {rtype} requests: lm-eval's hf-multimodal raises NotImplementedError "
    "for them (no log-likelihoods of text after images). Run a generate_until version of the task."
)
