"""The torch side of ``hf_multimodal``: loading a VLM and lm-eval's ``generate_until`` passes.

Imported when the model is built, never by a cached run. See :mod:`evalflow.models.hf.vlm.vlm` for
the semantics; each function names the lm-eval method it follows.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import transformers

from evalflow.core.records import Generation, Request
from evalflow.errors import ConfigError
from evalflow.models.hf import load
from evalflow.models.hf.finish import eos_token_ids, generation_finish
from evalflow.models.hf.lmeval_args import PLAIN, LoadArgs
from evalflow.models.hf.load import configure_pad_token, torch_dtype_of
from evalflow.models.hf.torch_ops import StopOnSequence
from evalflow.models.hf.vlm.prompts import resize
from evalflow.models.lmeval_tokens import prefix_token, resolve_max_length, stop_sequences, strip_at_stops, tok_encode


@dataclass(frozen=True)
class VLMParts:
    """A loaded VLM: weights, processor (and its tokenizer), device and context window."""

    model: Any
    processor: Any
    tokenizer: Any
    device: Any
    max_length: int

    def token_text(self, image_token_id: int | None) -> str:
        """lm-eval's image token: ``image_token_id`` (or the config's) decoded without skipping specials."""
        config = self.model.config
        token_id = (
            image_token_id or getattr(config, "image_token_id", None) or getattr(config, "image_token_index", None)
        )
        if token_id is None:
            raise ConfigError(
                "hf_multimodal: the model's config has no image_token_id/image_token_index; set "
                "model.image_token_id=N or model.image_string=TEXT (the token that marks an image)."
            )
        return str(self.tokenizer.decode([int(token_id)], skip_special_tokens=False))


def load_vlm(
    pretrained: str,
    revision: str,
    dtype: str,
    device: str,
    trust_remote_code: bool,
    processor_args: tuple[str, dict[str, int]],
    threads: int,
    max_length: int | None,
    weights: tuple[str | None, LoadArgs, dict[str, Any]] = (None, PLAIN, {}),
) -> VLMParts:
    """HFMultimodalLM's loading: ``AutoProcessor`` from its source (``processor_args``: the
    ``tokenizer`` model arg, else ``pretrained``; lm-eval's ``subfolder`` and ``use_fast_tokenizer``
    never reach it) with ``min_pixels``/``max_pixels``, then ``AutoModelForImageTextToText`` through
    hf's own loader (``load.load_weights``: ``weights`` is the GGUF file, HFLM's loading arguments
    and accelerate's placement), the adapter or delta over it, placed on ``device`` (a torch device
    name this machine has: ``device.choose`` resolved ``model.device``) unless placed at load."""
    source, pixels = processor_args
    gguf_file, args, placement = weights
    torch.set_num_threads(threads)
    torch_dtype_of(dtype)  # refuse a bad value before the slow load
    processor = transformers.AutoProcessor.from_pretrained(
        source, revision=revision, trust_remote_code=trust_remote_code, **pixels
    )
    tokenizer = processor.tokenizer
    image_text = transformers.AutoModelForImageTextToText
    placement = load.placement_for(args, placement, device)

    def from_source(where: str, delta: bool = False) -> Any:
        return load.load_weights(
            image_text, where, dtype, revision, trust_remote_code, args, placement, gguf_file, delta=delta
        )

    model = load.adapted(from_source(pretrained), tokenizer, revision, args, lambda d: from_source(d, delta=True))
    dev = load.placed(model, device, placement, args)
    configure_pad_token(tokenizer)
    window = int(max_length) if max_length else resolve_max_length(model.config, tokenizer)
    return VLMParts(model, processor, tokenizer, dev, window)


def generate_until(vlm: Any, requests: Sequence[Request]) -> list[Generation]:
    """HFMultimodalLM.generate_until: group by kwargs, longest context first, batches of ``batch_size``."""
    tok = vlm.parts.tokenizer
    prefix = prefix_token(tok, vlm.custom_prefix_token_id)  # lm-eval's sort key: HFLM.tok_encode
    order = sorted(
        range(len(requests)),
        key=lambda i: (-len(tok_encode(tok, requests[i].args[0], vlm.add_bos_token, prefix)), requests[i].args[0]),
    )
    groups: dict[str, list[int]] = {}
    for i in order:
        groups.setdefault(repr(sorted(dict(requests[i].args[1]).items())), []).append(i)
    out: list[Generation] = [Generation("")] * len(requests)
    for members in groups.values():
        for start in range(0, len(members), vlm.batch_size):
            batch = members[start : start + vlm.batch_size]
            for i, answer in zip(batch, _generate_batch(vlm, [requests[i] for i in batch])):
                out[i] = answer
    return out


def _generate_batch(vlm: Any, batch: list[Request]) -> list[Generation]:
    parts: VLMParts = vlm.parts
    tok = parts.tokenizer
    kwargs = copy.deepcopy(_plain(dict(batch[0].args[1])))
    eos = tok.decode(tok.eos_token_id, skip_special_tokens=False) if tok.eos_token_id is not None else None
    until = stop_sequences(kwargs.pop("until", None), eos)
    max_gen_toks = int(kwargs.pop("max_gen_toks", vlm.max_gen_toks))
    contexts = [vlm.prompt(r.args[0]) for r in batch]
    images = [[resize(img, *vlm.resize) for img in r.args[2]["visual"]][: vlm.max_images] for r in batch]
    if vlm.rgb:
        images = [[img.convert("RGB") for img in row] for row in images]
    inputs = _encode(parts, contexts, images, parts.max_length - max_gen_toks, vlm.truncation)
    width = inputs["input_ids"].shape[1]
    kwargs.setdefault("max_length", width + max_gen_toks)
    prompt_tokens = inputs["attention_mask"].sum(dim=1).tolist()  # the tokens each row saw, padding left out
    generated = _model_generate(parts, inputs, until, kwargs)
    eos_ids = eos_token_ids(parts.model, tok)

    def decode(ids: list[int]) -> str:
        return str(tok.decode(ids, skip_special_tokens=False))

    answers = []
    for row, seen in zip(generated.tolist(), prompt_tokens):
        text = strip_at_stops(tok.decode(row[width:], skip_special_tokens=True), until)
        answers.append(Generation(text, generation_finish(row[width:], int(seen), until, eos_ids, eos, decode)))
    return answers


def _encode(parts: VLMParts, contexts: list[str], images: list[list[Any]], left_truncate: int, truncation: bool) -> Any:
    """HFMultimodalLM.tok_batch_multimodal_encode: the processor's left-padded batch."""
    tok = parts.tokenizer
    before, tok.padding_side = tok.padding_side, "left"
    try:
        visual: Any = images
        if getattr(parts.model.config, "model_type", "") == "llava":  # lm-eval: one flat list for llava
            visual = [img for row in images for img in row]
        enc = parts.processor(
            images=visual, text=contexts, truncation=truncation, padding="longest", return_tensors="pt"
        )
    finally:
        tok.padding_side = before
    enc = enc.to(parts.device, parts.model.dtype)
    if left_truncate:
        enc["input_ids"] = enc["input_ids"][:, -left_truncate:]
        enc["attention_mask"] = enc["attention_mask"][:, -left_truncate:]
    return enc


def _model_generate(parts: VLMParts, inputs: Any, until: list[str], kwargs: dict[str, Any]) -> Any:
    """HFMultimodalLM._model_multimodal_generate: greedy unless sampling is asked for."""
    kwargs["temperature"] = kwargs.get("temperature", 0.0)
    do_sample = kwargs.get("do_sample")
    if kwargs.get("temperature") == 0.0 and do_sample is None:
        kwargs["do_sample"] = do_sample = False
    if do_sample is False and kwargs.get("temperature") == 0.0:
        kwargs.pop("temperature")
    rows, width = inputs["input_ids"].shape[0], inputs["input_ids"].shape[1]
    # transformers<5's Idefics3 processor also returns token_type_ids, which generate() refuses (the
    # model never reads them): lm-eval would stop there; leaving them out changes no token
    inputs = {k: v for k, v in inputs.items() if k != "token_type_ids"}
    criteria = transformers.StoppingCriteriaList([StopOnSequence(s, parts.tokenizer, width, rows) for s in until])
    with torch.no_grad():
        return parts.model.generate(
            **inputs, stopping_criteria=criteria, pad_token_id=parts.tokenizer.pad_token_id, use_cache=True, **kwargs
        )


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
