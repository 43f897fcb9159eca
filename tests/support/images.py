"""Image tasks for tests, generated with Pillow at test time (never committed as binaries).

Each document is a coloured shape with a digit on it, and three questions lm-eval's image tasks
would ask (the digit, the shape, the colour). ``write_parquet`` stores the images as the hub does
(a datasets ``Image`` column, read back as PIL by both evalflow and lm-eval); ``write_jsonl`` stores
them as base64 text, another form ``doc_to_image`` accepts.
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import io
import json
import random
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SHAPES = ("circle", "square", "triangle")


@functools.cache
def _shapes_images() -> ModuleType:
    """tasks/vision/shapes_images.py (a task's ``!function`` module, not a package): the one
    drawing of a shape with its digit, which the test images reuse. Loaded on first use (it
    imports Pillow), and not kept in sys.modules, so evalflow's own import of it is untouched."""
    spec = importlib.util.spec_from_file_location("_test_shapes_images", ROOT / "tasks" / "vision" / "shapes_images.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def draw(digit: int, shape: str, colour: str, size: int = 32) -> Any:
    """shapes_vqa's picture (its seven-segment digit: the same pixels on every Pillow version), 32 pixels wide."""
    return _shapes_images().draw(digit, shape, colour, size)


def rows(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` documents: an image and its digit, shape and colour (fixed by ``seed``)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        digit, shape, colour = rng.randrange(10), rng.choice(SHAPES), rng.choice(sorted(_shapes_images().COLOURS))
        out.append(
            {
                "id": i,
                "image": draw(digit, shape, colour),
                "digit": str(digit),
                "shape": shape,
                "colour": colour,
                "question": "What colour is the shape?",
                "answer": colour,
            }
        )
    return out


def png_b64(image: Any) -> str:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def write_jsonl(data: list[dict[str, Any]], path: Path) -> Path:
    path.write_text("".join(json.dumps({**r, "image": png_b64(r["image"])}) + "\n" for r in data))
    return path


def write_parquet(data: list[dict[str, Any]], path: Path) -> Path:
    """The rows as a parquet file with a datasets ``Image`` column, as hub image datasets are."""
    import datasets

    features = datasets.Features(
        {k: datasets.Image() if k == "image" else datasets.Value("int64" if k == "id" else "string") for k in data[0]}
    )
    datasets.Dataset.from_list(data, features=features).to_parquet(str(path))
    return path


VQA_YAML = """\
task: {name}
dataset_path: {builder}
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_image: {doc_to_image}
doc_to_text: "<image>{{{{question}}}} Answer:"
doc_to_target: answer
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 6
  do_sample: false
  temperature: 0.0
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


def write_task(folder: Path, name: str, data: Path, builder: str = "parquet", doc_to_image: str = "[image]") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.yaml").write_text(
        VQA_YAML.format(name=name, builder=builder, data=data, doc_to_image=doc_to_image)
    )
    return folder


def path_image_task(tmp_path: Path, n: int = 6) -> tuple[Path, Path]:
    """A task ``toy_paths`` whose ``n`` rows name their images by file path (``pictures/<id>.png``,
    written here): (the task library, the pictures folder)."""
    pictures = tmp_path / "pictures"
    pictures.mkdir()
    data = rows(n)
    for r in data:
        r["image"].save(pictures / f"{r['id']}.png")
    path = tmp_path / "test.jsonl"
    path.write_text(
        "".join(
            json.dumps({**{k: v for k, v in r.items() if k != "image"}, "image_path": str(pictures / f"{r['id']}.png")})
            + "\n"
            for r in data
        )
    )
    return write_task(tmp_path / "tasks", "toy_paths", path, builder="json", doc_to_image="image_path"), pictures
