"""A requested file name is read only from under its run folder: every way out is refused before a
file is opened, and a link that stays inside is followed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evalflow.view.safe_paths import UnsafePath, resolve_under, unsafe_reason

ESCAPES = [
    "../secret.txt",
    "images/../../secret.txt",
    "/etc/passwd",
    "%2e%2e/secret.txt",
    "%2E%2E%2Fsecret.txt",
    "%252e%252e%252fsecret.txt",
    "%25252e%25252e/secret.txt",
    "..%2fsecret.txt",
    "..\\secret.txt",
    "images\\..\\..\\secret.txt",
    "C:\\secret.txt",
    "cat.png\x00.txt",
    "cat.png%00",
    "%2fetc%2fpasswd",
    "",
]


@pytest.fixture
def run_folder(tmp_path: Path) -> Path:
    """tmp/run (cat.png, images/dog.png, a link inside, a link out, a looping link) beside tmp/secret.txt."""
    (tmp_path / "secret.txt").write_text("outside")
    run = tmp_path / "run"
    (run / "images").mkdir(parents=True)
    (run / "cat.png").write_bytes(b"\x89PNG cat")
    (run / "images" / "dog.png").write_bytes(b"\x89PNG dog")
    os.symlink(run / "cat.png", run / "images" / "inside.png")
    os.symlink(tmp_path / "secret.txt", run / "out.png")
    os.symlink(tmp_path, run / "up")
    os.symlink(run / "loop", run / "loop")
    return run


@pytest.mark.parametrize("name", ESCAPES)
def test_every_escape_is_refused_by_its_text(run_folder: Path, name: str) -> None:
    assert unsafe_reason(name) is not None
    with pytest.raises(UnsafePath):
        resolve_under(run_folder, name)


@pytest.mark.parametrize("name", ["out.png", "up/secret.txt", "up/run/cat.png/../../secret.txt", "loop", "missing.png"])
def test_links_out_loops_and_missing_files_are_refused(run_folder: Path, name: str) -> None:
    with pytest.raises(UnsafePath):
        resolve_under(run_folder, name)


@pytest.mark.parametrize(
    "name,content",
    [("cat.png", b"\x89PNG cat"), ("images/dog.png", b"\x89PNG dog"), ("images/inside.png", b"\x89PNG cat")],
)
def test_files_inside_are_found(run_folder: Path, name: str, content: bytes) -> None:
    assert resolve_under(run_folder, name).read_bytes() == content


def test_a_folder_is_not_a_file(run_folder: Path) -> None:
    with pytest.raises(UnsafePath, match="not a file"):
        resolve_under(run_folder, "images")
