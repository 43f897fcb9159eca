"""Two runs of an image task whose rows name their images by file path, one image file edited in
between (the rows' text unchanged): compare refuses to pair them and names the document, the
report holds both runs' pictures of it, and explain names the edited file."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs

import pytest

from evalflow.errors import RunFolderError
from tests.support import images
from tests.support.models import VisionCountingModel
from tests.support.runs import Runner

VISION = "tests.support.models:VisionCountingModel"


@pytest.fixture
def edited(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """(run A, run B: document 3's image file edited, run C: as A, the pictures folder)."""
    library, pictures = images.path_image_task(tmp_path)
    rows = images.rows(6)
    VisionCountingModel.reset()
    run = Runner(library, tmp_path / "cache", tmp_path / "outputs")
    _, _, a = run("toy_paths", model=VISION)
    images.draw(9, "square", "blue").save(pictures / "3.png")
    _, _, b = run("toy_paths", model=VISION)
    rows[3]["image"].save(pictures / "3.png")
    _, _, c = run("toy_paths", model=VISION)
    return a, b, c, pictures


def test_compare_refuses_runs_whose_image_file_changed(edited: tuple[Path, Path, Path, Path]) -> None:
    from evalflow.insight.comparison import compare
    from evalflow.output.run_folder import load_run

    a, b, c, _ = edited
    run_a, run_b = load_run(a), load_run(b)
    assert run_a.doc_fingerprints("toy_paths", images=False) == run_b.doc_fingerprints("toy_paths", images=False)
    with pytest.raises(RunFolderError, match=r"document 3 \(and 0 more\) differs in its images' pixels"):
        compare(run_a, run_b, iters=100)
    (row,) = compare(run_a, load_run(c), iters=100)  # the file restored: the same documents, paired
    assert row.n == 6 and row.diff == 0


def test_report_shows_each_runs_image_of_the_edited_document(edited: tuple[Path, Path, Path, Path]) -> None:
    from evalflow.view.bundle import payloads
    from evalflow.view.payloads import Catalog

    a, b, _, _ = edited
    catalog = Catalog([a, b])
    shown = {
        (parse_qs(key.split("?", 1)[1])["id"][0], p["doc_id"]): p["images"][0]["src"]
        for key, p in payloads(catalog)
        if key.startswith("/api/sample?")
    }
    assert len(shown) == 12 and all(src.startswith("data:image/png;base64,") for src in shown.values())
    ids = sorted({run_id for run_id, _ in shown})
    assert shown[(ids[0], 3)] != shown[(ids[1], 3)]  # each run's own picture of the edited document
    assert all(shown[(ids[0], d)] == shown[(ids[1], d)] for d in range(6) if d != 3)


def test_explain_names_the_edited_image_file(edited: tuple[Path, Path, Path, Path]) -> None:
    from evalflow.insight.explanation import explain

    a, b, _, pictures = edited
    lines = explain(b, a)
    assert f"toy_paths load_docs re-ran: image file {pictures / '3.png'} changed" in lines
    assert not any("data file bytes changed" in line for line in lines)  # the JSONL itself did not change
