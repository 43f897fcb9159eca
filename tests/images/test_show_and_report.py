"""`show` names each image of a prompt by size and pixel hash; the report (and a bundle) embed each
document's image from the run's cache."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest

from tests.support.models import VisionCountingModel
from tests.support.runs import Runner

VISION = "tests.support.models:VisionCountingModel"


def test_show_prints_placeholders_with_each_images_size_and_hash(
    vqa_library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evalflow.commands.show import main

    assert main(["task=toy_vqa", f"include_path=[{vqa_library}]", f"cache_dir={tmp_path / 'cache'}", "n=2"]) == 0
    out = capsys.readouterr().out
    assert out.count("<image>What colour is the shape? Answer:") == 2
    lines = [line for line in out.splitlines() if line.startswith("images (")]
    assert len(lines) == 2 and all("[1] 32x32 RGB xxh3:" in line for line in lines)
    assert lines[0] != lines[1]  # two documents, two images, two hashes


def test_report_embeds_each_documents_image(vqa_library: Path, tmp_path: Path) -> None:
    from PIL import Image

    from evalflow.view.bundle import payloads
    from evalflow.view.payloads import Catalog

    VisionCountingModel.reset()
    _, _, folder = Runner(vqa_library, tmp_path / "cache", tmp_path / "out")("toy_vqa", model=VISION)
    samples = [p for key, p in payloads(Catalog([folder])) if key.startswith("/api/sample?")]
    images = [s["images"] for s in samples]
    assert len(images) == 6 and all(len(i) == 1 for i in images)
    first = images[0][0]
    assert first["digest"] and first["src"].startswith("data:image/png;base64,")
    thumb = Image.open(io.BytesIO(base64.b64decode(first["src"].split(",", 1)[1])))
    assert thumb.size == (32, 32)  # never enlarged
    assert len({i[0]["src"] for i in images}) == 6
