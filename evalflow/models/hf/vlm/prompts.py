"""How lm-eval 0.4.13's VLMs (``hf-multimodal``, ``vllm-vlm``) build a prompt and its images, as
pure functions shared by evalflow's ``hf_multimodal`` and ``vllm_vlm``: ``<image>`` placeholders
(kept up to ``max_images``), chat messages with image parts rendered by a processor's chat template,
and ``resize_image``. No torch, no transformers: the processor is passed in.

>>> replace_placeholders("<image>a<image>b", "<image>", "<IMG>", 1)
'<IMG>ab'
>>> [p["type"] for p in image_parts("x<image>y", interleave=True, max_images=9)]
['text', 'image', 'text']
"""

from __future__ import annotations

import json
from typing import Any

DEFAULT_IMAGE_PLACEHOLDER = "<image>"  # lm-eval's placeholder in task prompts


def render_prompt(context: str, processor: Any, image_token: str, interleave: bool, max_images: int) -> str:
    """The text a VLM receives for ``context``, as lm-eval's ``hf-multimodal`` and ``vllm-vlm`` build
    it: chat messages (the few-shot stage's JSON) with each ``<image>`` an image part, rendered by the
    processor's chat template (continuing a final assistant message); plain text with its
    ``<image>`` placeholders made ``image_token``, those after the first ``max_images`` dropped."""
    chat = _messages(context)
    if chat is None:
        return replace_placeholders(context, DEFAULT_IMAGE_PLACEHOLDER, image_token, max_images)
    history = [dict(m, content=image_parts(str(m["content"]), interleave, max_images)) for m in chat]
    add_generation_prompt = not (history and history[-1]["role"] == "assistant")
    return str(
        processor.apply_chat_template(
            history, add_generation_prompt=add_generation_prompt, continue_final_message=not add_generation_prompt
        )
    )


def replace_placeholders(string: str, placeholder: str, image_token: str, max_images: int) -> str:
    """lm-eval's ``replace_placeholders``: the first ``max_images`` placeholders become the image
    token, later ones are removed."""
    parts = string.split(placeholder)
    out = []
    for count, part in enumerate(parts[:-1]):
        out.append(part)
        if count < max_images:
            out.append(image_token)
    out.append(parts[-1])
    return "".join(out)


def image_parts(text: str, interleave: bool, max_images: int) -> list[dict[str, Any]]:
    """One message's content as lm-eval's ``HFMultimodalLM.apply_chat_template`` lays it out."""
    if not interleave:
        count = min(max_images, text.count(DEFAULT_IMAGE_PLACEHOLDER))
        return [{"type": "image", "image": None}] * count + [
            {"type": "text", "text": text.replace(DEFAULT_IMAGE_PLACEHOLDER, "")}
        ]
    pieces = text.split(DEFAULT_IMAGE_PLACEHOLDER)
    content: list[dict[str, Any]] = []
    for i, piece in enumerate(pieces):
        if piece:
            content.append({"type": "text", "text": piece})
        if i < len(pieces) - 1 and i < max_images:
            content.append({"type": "image"})
    return content


def resize(image: Any, width: int | None, height: int | None, max_side: int | None) -> Any:
    """lm-eval's ``resize_image`` (aspect ratio kept, never enlarged, bicubic)."""
    from PIL import Image

    w, h = image.size
    if width is not None and height is not None:
        if w <= width and h <= height:
            return image
        ratio = min(width / w, height / h)
        size = (int(w * ratio), int(h * ratio))
    elif width is not None:
        if w <= width:
            return image
        size = (width, int((h / w) * width))
    elif height is not None:
        if h <= height:
            return image
        size = (int((w / h) * height), height)
    elif max_side is not None:
        if max(w, h) <= max_side:
            return image
        size = (max_side, int((h / w) * max_side)) if w > h else (int((w / h) * max_side), max_side)
    else:
        return image
    return image.resize((max(1, size[0]), max(1, size[1])), Image.Resampling.BICUBIC)


def _messages(context: str) -> list[dict[str, Any]] | None:
    """The chat messages of a context the few-shot stage wrote as JSON, else None (plain text)."""
    if not context.startswith("[{"):
        return None
    try:
        value = json.loads(context)
    except ValueError:
        return None
    if isinstance(value, list) and all(isinstance(m, dict) and "role" in m and "content" in m for m in value):
        return value
    return None
