"""The read-only reader of a cache folder: the values the store wrote, read back without a
single byte of the folder changing (no access-time update, no culling, no corrupt entry dropped),
and nothing created where there is no cache."""

from __future__ import annotations

import os
from pathlib import Path

from evalflow.cache.image_store import ImageStore, stored_png
from evalflow.cache.readonly import read_value
from evalflow.cache.store import CacheStore
from evalflow.core.records import ImageRef


def _state(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder``: its bytes and modification time."""
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _filled(folder: Path) -> tuple[ImageRef, ImageRef]:
    """A cache with a small image (its bytes in cache.db), a large one (a value file), a value, and
    two damaged entries (bad bytes in the row; a value file cut short)."""
    from PIL import Image

    store = CacheStore(folder)
    try:
        images = ImageStore(store)
        small = images.put(Image.new("RGB", (2, 2), (1, 2, 3)))
        large = images.put(Image.frombytes("L", (256, 256), os.urandom(256 * 256)))
        store.put("answer", {"text": "forty-two"}, tag="request")
        store.raw.add("image:" + "ab" * 16, b"not an entry", retry=True)
        store.put("image:" + "cd" * 16, "A" * 70_000, tag="image")
        ((name,),) = store.raw._sql("SELECT filename FROM Cache WHERE key = ?", ("image:" + "cd" * 16,)).fetchall()
    finally:
        store.close()
    damaged = folder / name
    damaged.write_bytes(damaged.read_bytes()[:100])  # the "cd" entry's value file, cut short
    assert len(list(folder.rglob("*.val"))) == 2  # the large image's and the damaged one
    return small, large


def test_values_come_back_and_the_folder_is_unchanged(tmp_path: Path) -> None:
    from PIL import Image

    small, large = _filled(tmp_path / "cache")
    before = _state(tmp_path / "cache")
    assert read_value(tmp_path / "cache", "answer") == {"text": "forty-two"}
    for ref in (small, large):
        png = stored_png(tmp_path / "cache", ref.digest)
        assert png is not None and png.startswith(b"\x89PNG")
        with Image.open(__import__("io").BytesIO(png)) as image:
            assert image.size == (ref.width, ref.height)
    assert stored_png(tmp_path / "cache", "ab" * 16) is None  # bad bytes in the row
    assert stored_png(tmp_path / "cache", "cd" * 16) is None  # value file cut short
    assert stored_png(tmp_path / "cache", "ef" * 16) is None  # absent
    assert _state(tmp_path / "cache") == before


def test_no_cache_is_created_where_there_is_none(tmp_path: Path) -> None:
    assert read_value(tmp_path / "nothing", "answer") is None
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "cache.db").write_bytes(b"not sqlite")
    assert read_value(tmp_path / "empty", "answer") is None
    assert not (tmp_path / "nothing").exists()
    assert sorted(p.name for p in (tmp_path / "empty").iterdir()) == ["cache.db"]


def test_a_cache_open_in_a_writer_is_read_as_it_last_committed(tmp_path: Path) -> None:
    store = CacheStore(tmp_path / "cache")
    try:
        store.put("answer", "first", tag="request")
        assert read_value(tmp_path / "cache", "answer") == "first"
        store.put("later", "second", tag="request")
        assert read_value(tmp_path / "cache", "later") == "second"
    finally:
        store.close()
