"""Thumbnails of an image task's documents for the report, read from the run's own cache.

A samples row names its images by pixel hash (``{"__image__": digest, "width", "height", "mode"}``
in the request's ``visual`` list), never by bytes; the pixels are in the content-addressed image
table of the cache the run used (``manifest.json``'s ``cache_dir``). Each is shrunk to at most
``SIDE`` pixels and embedded as a PNG data URL, so the page stays self-contained and offline. An
image the cache no longer holds (or an lm-eval run, whose samples keep only a hash) is shown as its
label alone.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SIDE = 96  # a thumbnail's longer side, in pixels


class Thumbnails:
    """Per run, its cache's image table, opened on the first image and closed by :meth:`close`."""

    def __init__(self) -> None:
        self._stores: dict[str, Any] = {}

    def of_row(self, manifest: Mapping[str, Any], row: Mapping[str, Any]) -> list[dict[str, str]]:
        """``{"src": data URL or "", "label": "WxH MODE xxh3:…"}`` for each image of the row's first request."""
        args = list(row.get("arguments", {}).values())
        visual = (
            (args[0].get("arg_2") or {}).get("visual", []) if args and isinstance(args[0].get("arg_2"), dict) else []
        )
        out = []
        for ref in visual:
            if isinstance(ref, dict) and "__image__" in ref:
                label = f"{ref.get('width')}x{ref.get('height')} {ref.get('mode')} xxh3:{str(ref['__image__'])[:12]}"
                out.append({"src": self._thumbnail(manifest, ref), "label": label})
            else:  # lm-eval's samples: a hash or a repr, no pixels to show
                out.append({"src": "", "label": str(ref)[:40]})
        return out

    def _thumbnail(self, manifest: Mapping[str, Any], ref: Mapping[str, Any]) -> str:
        store = self._store(str(manifest.get("cache_dir") or ""))
        if store is None:
            return ""
        from evalflow.cache.image_store import MissingImage
        from evalflow.core.records import ImageRef

        try:
            image = store.image(
                ImageRef(str(ref["__image__"]), int(ref["width"]), int(ref["height"]), str(ref["mode"]))
            )
        except (MissingImage, OSError, ValueError, KeyError):
            return ""
        small = image.copy()
        small.thumbnail((SIDE, SIDE))
        buf = io.BytesIO()
        small.save(buf, format="PNG")
        return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")

    def _store(self, cache_dir: str) -> Any:
        if cache_dir not in self._stores:
            store = None
            if cache_dir and (Path(cache_dir) / "cache.db").is_file():
                from evalflow.cache.image_store import ImageStore
                from evalflow.cache.store import CacheStore

                store = ImageStore(CacheStore(cache_dir))
            self._stores[cache_dir] = store
        return self._stores[cache_dir]

    def close(self) -> None:
        for store in self._stores.values():
            if store is not None:
                store.store.close()
        self._stores.clear()
