"""`show` names each image of a prompt by size and pixel hash; the HTML report shows thumbnails."""

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


def test_report_embeds_each_documents_thumbnails(vqa_library: Path, tmp_path: Path) -> None:
    from PIL import Image

    from evalflow.insight.report_build import document_view, expand, run_labels

    VisionCountingModel.reset()
    _, _, folder = Runner(vqa_library, tmp_path / "cache", tmp_path / "out")("toy_vqa", model=VISION)
    runs = expand([folder])
    (view,) = document_view(runs, run_labels(runs, {}))
    images = [d["images"] for d in view["docs"]]
    assert len(images) == 6 and all(len(i) == 1 for i in images)
    first = images[0][0]
    assert first["label"].startswith("32x32 RGB xxh3:") and first["src"].startswith("data:image/png;base64,")
    thumb = Image.open(io.BytesIO(base64.b64decode(first["src"].split(",", 1)[1])))
    assert thumb.size == (32, 32)  # never enlarged (at most 96 px)
    assert len({i[0]["src"] for i in images}) == 6


def test_thumbnails_render_in_a_real_browser(vqa_library: Path, tmp_path: Path) -> None:
    import re

    from evalflow.commands.report import main
    from tests.support.browser import browse

    VisionCountingModel.reset()
    _, _, folder = Runner(vqa_library, tmp_path / "cache", tmp_path / "out")("toy_vqa", model=VISION)
    out = tmp_path / "report.html"
    assert main([str(folder), f"out={out}"]) == 0
    loaded = browse(out, "--dump-dom", fragment="docs-toy_vqa")  # opens the task's documents
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert [line for line in loaded.stderr.splitlines() if ":CONSOLE" in line] == []
    assert len(re.findall(r'<img src="data:image/png;base64,', loaded.stdout)) == 6
    assert len(re.findall(r"<figcaption>32x32 RGB xxh3:", loaded.stdout)) == 6
