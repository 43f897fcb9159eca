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

from evalflow.core.records import Generation, Request
from evalflow.errors import ConfigError, ModelError
from evalflow.models.hf.device import choose, parse_device
from evalflow.models.hf.identity import IDENTITY_VERSION, library_versions, tokenizer_identity, weights_identity
from evalflow.models.hf.vlm.prompts import render_prompt
from evalflow.models.protocol import LanguageModel

log = logging.getLogger(__name__)

# the settings that change prompts or images: the answers' key
KEYED = (
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
# HFLM's arguments HFMultimodalLM takes and its image passes never read (its processor is loaded
# without them, its generation has no autocast, no log-softmax, no logits cache): accepted,
# checked as lm-eval checks them (the dtype names), and changing nothing, as in lm-eval
INERT = frozenset({"logits_cache", "softmax_dtype", "mixed_precision_dtype", "use_fast_tokenizer", "backend"})


class HFMultimodalModel(LanguageModel):
    """A transformers image-text-to-text model answering ``generate_until`` requests with images."""

    RUN_SETTINGS: ClassVar[tuple[str, ...]] = ("batch_size",)
    # its passes and what they use of the text backend (loading, plain passes, lm-eval's token rules)
    CODE: ClassVar[tuple[str, ...]] = (
        "evalflow.models.hf.vlm.vlm_passes",
        "evalflow.models.hf.vlm.prompts",
        "evalflow.models.hf.load",
        "evalflow.models.hf.lmeval_args",
        "evalflow.models.hf.adapters",
        "evalflow.models.hf.identity",
        "evalflow.models.hf.torch_ops",
        "evalflow.models.hf.finish",
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
        tokenizer: str | None = None,
        gguf_file: str | None = None,
        add_bos_token: bool | None = None,
        prefix_token_id: int | None = None,
        parallelize: bool = False,
        device_map: Any = None,
        max_memory_per_gpu: int | str | None = None,
        max_cpu_memory: int | str | None = None,
        offload_folder: str = "./offload",
        **hflm: Any,
    ) -> None:
        """``hflm``: lm-eval HFLM's loading arguments (``lmeval_args.CONFIG_KEYS``: the adapter,
        the quantizers, ``subfolder``, ``tp_plan``, ``from_pretrained_kwargs``, ...) and the ones
        HFMultimodalLM inherits but never reads on image requests (:data:`INERT`)."""
        from evalflow.models.hf import lmeval_args, load
        from evalflow.models.hf.vlm import vlm_passes

        unused = sorted(set(hflm) - lmeval_args.CONFIG_KEYS - INERT)
        if unused:
            log.warning("hf_multimodal model: ignoring unknown config keys %s", unused)
        if image_max_side and (image_width or image_height):
            raise ConfigError(
                "hf_multimodal: image_max_side cannot be combined with image_width/image_height "
                "(lm-eval refuses the ambiguous resize too); set one of them."
            )
        self.batch_size, self.max_gen_toks, self.truncation = (
            _batch_size(batch_size),
            int(max_gen_toks),
            bool(truncation),
        )
        self.interleave, self.max_images, self.rgb = bool(interleave), int(max_images), bool(convert_img_format)
        self.resize = (image_width, image_height, image_max_side)
        self.add_bos_token, self.custom_prefix_token_id = add_bos_token, prefix_token_id
        args = lmeval_args.checked({**hflm, "parallelize": parallelize}, refuse_seq2seq=False)
        weights_identity(pretrained, revision, gguf_file, args.subfolder)  # refuse a bad path before loading
        pixels = {k: v for k, v in (("min_pixels", min_pixels), ("max_pixels", max_pixels)) if v}
        placement = load.accelerate_args(parallelize, device_map, max_memory_per_gpu, max_cpu_memory, offload_folder)
        self.parts = vlm_passes.load_vlm(
            pretrained,
            revision or "main",
            dtype,
            choose(device, "hf_multimodal model").used,
            trust_remote_code,
            (tokenizer or pretrained, pixels),
            load.parse_threads(threads),
            max_length,
            (gguf_file, args, placement),
        )
        log.info("hf_multimodal model: runs on %s (model.device=%s)", self.parts.device, device)
        self.image_token = image_string or self.parts.token_text(image_token_id)

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        """The weights' and processor's files (one folder fingerprint; the processor's source
        apart where it is not that folder: ``tokenizer``, or ``pretrained`` beside a ``subfolder``
        or GGUF file), the settings that change prompts or images, HFLM's loading arguments that
        change the weights (``lmeval_args.weights_key``, as for hf), and library versions. Not
        included: ``batch_size``, ``device`` (``auto`` or the device it resolved to: the same
        weights' answers wherever they run), ``threads`` (speed only), the placement arguments
        (``parallelize``, ``device_map``, memory limits, ``offload_folder``, ``tp_plan``), and
        :data:`INERT` (lm-eval's image passes never read them) with ``add_bos_token`` and
        ``prefix_token_id`` (they order requests, hence batches, and nothing else)."""
        from evalflow.models.hf import lmeval_args

        pretrained = config.get("pretrained")
        if not isinstance(pretrained, str) or not pretrained:
            raise ConfigError(
                "model.pretrained is not set: give a local VLM folder or a hub id, "
                "e.g. model=hf_multimodal model.pretrained=/path/to/vlm."
            )
        parse_device(config.get("device", "auto"))  # not in the key, but a bad name is refused in a cached run too
        args = lmeval_args.checked(config, refuse_seq2seq=False)
        revision, gguf_file = config.get("revision"), config.get("gguf_file")
        processor = config.get("tokenizer") or (pretrained if args.subfolder or gguf_file else None)
        return {
            "backend": "hf-multimodal",
            "semantics": "lm-eval-0.4.13",
            "identity_version": IDENTITY_VERSION,
            "weights": weights_identity(pretrained, revision, gguf_file, args.subfolder),
            "processor": tokenizer_identity(processor, revision),
            "settings": {k: config.get(k) for k in KEYED},
            "libraries": library_versions(),
            **lmeval_args.weights_key(args, revision),
        }

    def describe(self) -> dict[str, Any]:
        """For the manifest: the device the model ran on (``model.device`` resolved here)."""
        return {"device": str(self.parts.device)}

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        raise ModelError(_REFUSAL.format(rtype="loglikelihood"))

    def loglikelihood_rolling(self, requests: Sequence[Request]) -> list[float]:
        raise ModelError(_REFUSAL.format(rtype="loglikelihood_rolling"))

    def generate_until(self, requests: Sequence[Request]) -> list[Generation]:
        from evalflow.models.hf.vlm import vlm_passes

        for r in requests:
            if len(r.args) < 3:
                raise ModelError("hf_multimodal answers requests with images only; run text tasks with model=hf.")
        return vlm_passes.generate_until(self, requests)

    def prompt(self, context: str) -> str:
        """The text the processor receives: chat messages rendered with lm-eval's image parts, or
        ``<image>`` placeholders replaced by the model's image token."""
        return render_prompt(context, self.parts.processor, self.image_token, self.interleave, self.max_images)


def _batch_size(batch_size: int | str) -> int:
    """The run's ``batch_size``: its default ``auto`` means 1 (lm-eval's hf-multimodal has no
    automatic batch size)."""
    if batch_size == "auto":
        return 1
    if isinstance(batch_size, str) and not batch_size.isdigit():
        raise ConfigError(
            f"hf_multimodal: batch_size={batch_size!r}; give an int (lm-eval's hf-multimodal has no 'auto')."
        )
    return int(batch_size)


_REFUSAL = (
    "hf_multimodal does not answer {rtype} requests: lm-eval's hf-multimodal raises NotImplementedError "
    "for them (no log-likelihoods of text after images). Run a generate_until version of the task."
)
