"""Two runs of an image task whose rows name their images by file path, one image file edited in
between (the rows' text unchanged): compare refuses to pair them and names the document, the
report shows both runs' pictures of it, and explain names the edited file."""

from __future__ import annotations

from pathlib import Path

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


def test_report_shows_each_runs_image_where_they_differ(edited: tuple[Path, Path, Path, Path]) -> None:
    from evalflow.insight.report_build import document_view, expand

    a, b, _, _ = edited
    (view,) = document_view(expand([a, b]), ["A", "B"])
    shown = {d["doc_id"]: d["images"] for d in view["docs"]}
    assert all(len(shown[d]) == 1 and not shown[d][0]["label"].startswith("A:") for d in shown if d != 3)
    first, second = shown[3]
    assert first["label"].startswith("A: 32x32 RGB xxh3:") and second["label"].startswith("B: 32x32 RGB xxh3:")
    assert first["src"] != second["src"] and first["src"].startswith("data:image/png;base64,")
    assert view["disagree"] >= 1 and next(d for d in view["docs"] if d["doc_id"] == 3)["disagree"]


def test_explain_names_the_edited_image_file(edited: tuple[Path, Path, Path, Path]) -> None:
    from evalflow.insight.explanation import explain

    a, b, _, pictures = edited
    lines = explain(b, a)
    assert f"toy_paths load_docs re-ran: image file {pictures / '3.png'} changed" in lines
    assert not any("data file bytes changed" in line for line in lines)  # the JSONL itself did not change
