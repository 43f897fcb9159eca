"""Images stored once, by the hash of their pixels: the cache's content-addressed image table.

Documents and requests hold :class:`~evalflow.core.records.ImageRef` (a digest, a size, a mode); the
image itself is PNG bytes under ``image:<digest>`` in the run's cache, written once however many
documents, requests or runs show it. PNG is lossless, so the pixels a model receives from the
store are exactly the pixels the dataset held (a JPEG's decoded pixels, not its bytes).

    store = ImageStore(CacheStore(dir))
    ref = store.put(PIL.Image.new("RGB", (8, 8)))   # ImageRef(digest=..., width=8, height=8, mode='RGB')
    store.image(ref).size                          # (8, 8)

Pillow is imported only when an image is really handled, so text tasks never import it.
"""

from __future__ import annotations

import base64
import io
from typing import Any

import xxhash

from evalflow.core.records import ImageRef

KEY_PREFIX = "image:"
# Modes PNG stores as they are; any other (CMYK, YCbCr from some JPEGs) is stored converted to RGB,
# which is also what every vision processor turns it into.
PNG_MODES = frozenset({"1", "L", "LA", "I", "I;16", "P", "RGB", "RGBA"})


class MissingImage(LookupError):
    """An image a document refers to is no longer in the cache (removed by ``cache gc``)."""


def pixel_digest(image: Any) -> str:
    """The xxhash of an image's mode, size and raw pixels: equal exactly when the pixels are."""
    head = f"{image.mode};{image.width}x{image.height};".encode()
    return xxhash.xxh3_128_hexdigest(head + image.tobytes())


def png_bytes(image: Any) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def storable(image: Any) -> Any:
    """The image in a mode PNG keeps exactly (loaded, so lazily decoded files are read now)."""
    image.load()
    return image if image.mode in PNG_MODES else image.convert("RGB")


class ImageStore:
    """Puts and gets images in a :class:`~evalflow.cache.store.CacheStore` (or any object with its
    ``get``/``put``), keeping a per-process memo so one run decodes each image once."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._memo: dict[str, Any] = {}

    def put(self, image: Any) -> ImageRef:
        image = storable(image)
        ref = ImageRef(pixel_digest(image), image.width, image.height, image.mode)
        if ref.digest not in self._memo:
            key = KEY_PREFIX + ref.digest
            from evalflow.cache.store import MISSING

            if self.store.get(key) is MISSING:
                self.store.put(key, base64.b64encode(png_bytes(image)).decode("ascii"), tag="image")
            self._memo[ref.digest] = image
        return ref

    def png(self, ref: ImageRef) -> bytes:
        """The stored PNG bytes of ``ref`` (what a served model receives, base64-encoded)."""
        if ref.digest in self._memo:
            return png_bytes(self._memo[ref.digest])
        return base64.b64decode(self._read(ref))

    def image(self, ref: ImageRef) -> Any:
        """``ref`` as a PIL image, decoded from the store once per process."""
        if ref.digest not in self._memo:
            from PIL import Image

            decoded = Image.open(io.BytesIO(base64.b64decode(self._read(ref))))
            decoded.load()
            self._memo[ref.digest] = decoded
        return self._memo[ref.digest]

    def _read(self, ref: ImageRef) -> str:
        from evalflow.cache.store import MISSING

        value = self.store.get(KEY_PREFIX + ref.digest)
        if value is MISSING:
            raise MissingImage(
                f"image {ref} is not in the cache ({getattr(self.store, 'directory', 'the store')}); "
                "it was removed after the documents showing it were cached (cache gc). Run "
                "`python -m evalflow cache clear` or use a fresh cache_dir, so the documents are read again."
            )
        return str(value)


def stored_png(directory: Any, digest: str) -> bytes | None:
    """The PNG bytes stored for the image with this pixel digest in the cache folder
    ``directory``, read without writing anything (:mod:`evalflow.cache.readonly`: the viewer
    reads caches it was pointed at); None when absent or damaged."""
    import binascii

    from evalflow.cache.readonly import read_value

    value = read_value(directory, KEY_PREFIX + digest)
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def visual_refs(request: Any) -> list[ImageRef]:
    """The images a request shows: its last argument's ``visual`` list (lm-eval's layout), else none."""
    args = request.args
    last = args[-1] if args else None
    if isinstance(last, dict) and "visual" in last:
        return [v for v in last["visual"] if isinstance(v, ImageRef)]
    return []


def with_pixels(request: Any, images: ImageStore) -> Any:
    """``request`` with its image references replaced by PIL images, as a model receives it; a
    text request is returned as it is. The references stay what the cache keys hash."""
    import dataclasses

    refs = visual_refs(request)
    if not refs:
        return request
    aux = dict(request.args[-1])
    aux["visual"] = [images.image(v) if isinstance(v, ImageRef) else v for v in aux["visual"]]
    return dataclasses.replace(request, args=tuple(request.args[:-1]) + (aux,))
