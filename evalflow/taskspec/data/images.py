"""lm-eval's ``doc_to_image``, with images as content-addressed references rather than objects.

A task is multimodal when its YAML sets ``doc_to_image`` (or ``doc_to_audio``), as in lm-eval
(``ConfigurableTask.MULTIMODAL``). ``doc_to_image`` is resolved per document as lm-eval 0.4.13's
``ConfigurableTask.doc_to_image`` does it: a list resolves each entry and drops the ``None`` ones;
a string naming a field is that field; any other string is a Jinja template whose rendering is a
Python literal; a ``!function`` is called on the document. What comes out may be a PIL image, a
datasets image dict (``{"bytes": ..., "path": ...}``), raw bytes, a base64 string (or a
``data:image/...;base64,`` URL) or a file path; each becomes an :class:`~evalflow.core.records.ImageRef`
whose digest hashes the pixels, and whose PNG is stored once in the cache
(:class:`~evalflow.cache.image_store.ImageStore`).

Documents are JSON data in evalflow, so an image column is turned into an ``ImageRef`` when the
rows are read (:func:`plain_image`); a ``!function`` ``doc_to_image`` (lm-eval's mmmu) still
receives PIL images, decoded back from the store, as it would under lm-eval.

An image named by a file *path* is read when the instances stage runs; the file's bytes are part
of the data's identity (:mod:`evalflow.taskspec.data.image_files`), so editing it re-runs exactly the
requests of the documents that show it.
"""

from __future__ import annotations

import ast
import base64
import binascii
import io
import os
from collections.abc import Mapping
from typing import Any

from evalflow.core.records import ImageRef
from evalflow.errors import DataError, TaskError
from evalflow.taskspec.format.spec import FunctionRef, TaskConfig
from evalflow.taskspec.prompts.templates import apply_template, call_task_function

MULTIMODAL_FIELDS = ("doc_to_image", "doc_to_audio")


def is_multimodal(task: TaskConfig) -> bool:
    """lm-eval's ``MULTIMODAL`` flag: the task config sets ``doc_to_image`` or ``doc_to_audio``."""
    return task.doc_to_image is not None or bool(task.doc_to_audio)


def is_image_value(value: Any) -> bool:
    """Whether a dataset value is an image as the datasets library yields it (PIL, or undecoded)."""
    if hasattr(value, "tobytes") and hasattr(value, "mode") and hasattr(value, "size"):
        return True
    if isinstance(value, (bytes, bytearray)):  # JSON cannot hold bytes: an image, or a clear refusal
        return True
    return (
        isinstance(value, Mapping)
        and set(value) == {"bytes", "path"}
        and (
            isinstance(value["bytes"], (bytes, bytearray))
            or (value["bytes"] is None and isinstance(value["path"], str))
        )
    )


def plain_image(value: Any, images: Any) -> ImageRef:
    """An image column's value as a reference, its pixels put in ``images``."""
    ref: ImageRef = images.put(to_pil(value, where="a data column"))
    return ref


def doc_images(task: TaskConfig, doc: Mapping[str, Any], doc_id: int, images: Any) -> tuple[ImageRef, ...]:
    """The document's images (lm-eval's ``doc_to_image(doc)``), as references into ``images``."""
    if task.doc_to_audio:
        raise TaskError(
            f"task '{task.task}' ({task.source}) sets doc_to_audio; evalflow runs image tasks only "
            "(doc_to_image). Remove doc_to_audio, or run the task with lm-eval."
        )
    found = _resolve(task, task.doc_to_image, doc, doc_id, images)
    values = found if isinstance(found, list) else [found]
    return tuple(_as_ref(v, task, doc_id, images) for v in values if v is not None)


def _resolve(task: TaskConfig, spec: Any, doc: Mapping[str, Any], doc_id: int, images: Any) -> Any:
    if isinstance(spec, (list, tuple)):
        resolved = [_resolve(task, s, doc, doc_id, images) for s in spec]
        return [v for v in resolved if v is not None]
    if isinstance(spec, str):
        if spec in doc:
            return doc[spec]
        text = apply_template(spec, doc, task=task, what="doc_to_image", doc_id=doc_id)
        try:
            return ast.literal_eval(text)
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            raise TaskError(
                f"task '{task.task}' ({task.source}), doc_to_image, document {doc_id}: the template "
                f"{spec!r} rendered {text[:120]!r}, which is not a Python literal (lm-eval reads it with "
                "ast.literal_eval). Name an image field, or render a quoted path or a list of them."
            ) from None
    if callable(spec) or isinstance(spec, FunctionRef):
        as_pil = {k: _pil_values(v, images) for k, v in doc.items()}
        return call_task_function(spec, as_pil, task=task, what="doc_to_image", doc_id=doc_id, doc=doc)
    return None  # lm-eval: any other value means no image


def _pil_values(value: Any, images: Any) -> Any:
    """Document values with references turned back into PIL images (what task code expects)."""
    if isinstance(value, ImageRef):
        return images.image(value)
    if isinstance(value, list):
        return [_pil_values(v, images) for v in value]
    return value


def _as_ref(value: Any, task: TaskConfig, doc_id: int, images: Any) -> ImageRef:
    if isinstance(value, ImageRef):
        return value
    where = f"task '{task.task}' ({task.source}), doc_to_image, document {doc_id}"
    ref: ImageRef = images.put(to_pil(value, where=where))
    return ref


def to_pil(value: Any, *, where: str) -> Any:
    """A PIL image from any of the forms lm-eval's datasets hand over, or a clear DataError."""
    from PIL import Image, UnidentifiedImageError

    if hasattr(value, "tobytes") and hasattr(value, "mode"):
        return value
    data: bytes | None = None
    if isinstance(value, Mapping) and "bytes" in value:
        data = value["bytes"] if value["bytes"] is not None else None
        if data is None and isinstance(value.get("path"), str):
            value = value["path"]
        elif isinstance(data, str):
            value, data = data, None
    if isinstance(value, (bytes, bytearray)):
        data = bytes(value)
    elif data is None and isinstance(value, str):
        data = _str_bytes(value, where)
    if data is None:
        raise DataError(
            f"{where}: got a {type(value).__name__} ({str(value)[:80]!r}), which is not an image. "
            "doc_to_image must give PIL images, image bytes, base64 text, a file path, or a list of them."
        )
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except (UnidentifiedImageError, OSError) as exc:
        raise DataError(
            f"{where}: the image data could not be decoded ({exc}). Check the dataset's image column."
        ) from None
    return image


def _str_bytes(text: str, where: str) -> bytes:
    """A file path's bytes, else the bytes of base64 text (a ``data:`` URL or bare)."""
    if text.startswith("data:") and "," in text:
        text = text.split(",", 1)[1]
    elif len(text) < 4096 and os.path.isfile(text):
        with open(text, "rb") as fh:
            return fh.read()
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise DataError(
            f"{where}: {text[:80]!r} is neither an existing image file nor base64 image data. "
            "Fix the path (relative paths resolve against the working directory) or the column."
        ) from None
