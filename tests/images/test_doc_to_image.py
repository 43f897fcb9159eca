"""lm-eval's doc_to_image forms, each resolved to references that hash the pixels."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from evalflow.cache.image_store import ImageStore, with_pixels
from evalflow.cache.store import CacheStore
from evalflow.core.records import ImageRef, Request
from evalflow.errors import DataError, TaskError
from evalflow.taskspec.data.images import doc_images, plain_image
from evalflow.taskspec.format.spec import TaskConfig
from tests.support.images import draw, png_b64


@pytest.fixture
def store(tmp_path: Path):
    cache = CacheStore(tmp_path / "cache")
    yield ImageStore(cache)
    cache.close()


def _task(spec, **kw) -> TaskConfig:
    return TaskConfig(task="t", doc_to_image=spec, source="t.yaml", **kw)


def test_every_form_of_one_image_gives_one_reference(store: ImageStore, tmp_path: Path) -> None:
    img = draw(3, "circle", "red")
    path = tmp_path / "a.png"
    img.save(path)
    jpeg_free = base64.b64decode(png_b64(img))
    forms = {
        "pil": img,
        "bytes": jpeg_free,
        "b64": png_b64(img),
        "data_url": "data:image/png;base64," + png_b64(img),
        "path": str(path),
        "hub_dict": {"bytes": jpeg_free, "path": None},
    }
    refs = {name: doc_images(_task("x"), {"x": value}, 0, store) for name, value in forms.items()}
    assert len(set(refs.values())) == 1
    (ref,) = refs["pil"]
    assert (ref.width, ref.height, ref.mode) == (32, 32, "RGB")
    assert store.image(ref).tobytes() == img.tobytes()


def test_list_jinja_and_function_forms(store: ImageStore, tmp_path: Path) -> None:
    a, b = draw(1, "square", "blue"), draw(2, "triangle", "green")
    doc = {
        "image_1": plain_image(a, store),
        "image_2": plain_image(b, store),
        "image_3": None,
        "file": str(tmp_path / "b.png"),
    }
    b.save(doc["file"])
    listed = doc_images(_task(["image_1", "image_3", "image_2"]), doc, 0, store)
    assert [r.digest for r in listed] == [doc["image_1"].digest, doc["image_2"].digest]  # None dropped
    assert doc_images(_task("{{ [file] }}"), doc, 0, store) == (doc["image_2"],)  # Jinja -> literal -> path
    module = tmp_path / "utils.py"
    module.write_text("def pick(doc):\n    return [doc['image_2'].rotate(90), doc['image_1']]\n")
    from evalflow.taskspec.format.loader import function_ref

    ref = function_ref("utils.pick", str(tmp_path))
    rotated, first = doc_images(_task(ref), doc, 0, store)
    assert first == doc["image_1"] and rotated.digest not in {doc["image_1"].digest, doc["image_2"].digest}


def test_pixels_not_paths_key_requests(store: ImageStore) -> None:
    from evalflow.scale.answer_cache import request_key

    one, other = draw(1, "circle", "red"), draw(1, "circle", "red")
    other.putpixel((0, 0), (0, 0, 0))  # one pixel differs
    r1 = Request("generate_until", ("<image>Q", {"until": []}, {"visual": [store.put(one)]}))
    r2 = Request("generate_until", ("<image>Q", {"until": []}, {"visual": [store.put(other)]}))
    r1b = Request("generate_until", ("<image>Q", {"until": []}, {"visual": [store.put(one.copy())]}))
    assert request_key("m", r1) == request_key("m", r1b) != request_key("m", r2)
    shown = with_pixels(r1, store).args[2]["visual"][0]
    assert shown.size == (32, 32) and not isinstance(shown, ImageRef)


def test_bad_values_are_clear_errors(store: ImageStore) -> None:
    with pytest.raises(DataError, match="neither an existing image file nor base64"):
        doc_images(_task("x"), {"x": "not/a/file.png"}, 4, store)
    with pytest.raises(DataError, match="document 4: got a int"):
        doc_images(_task("x"), {"x": 7}, 4, store)
    with pytest.raises(TaskError, match="not a Python literal"):
        doc_images(_task("{{ x }} !"), {"x": 7}, 4, store)
    with pytest.raises(TaskError, match="doc_to_audio"):
        doc_images(_task("x", doc_to_audio="a"), {"x": 7}, 4, store)
