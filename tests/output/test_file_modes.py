"""A run folder's files, and a report, get the mode ``open()`` gives a new file under the process's
umask (``cli.log``, opened by ``logging``, is the reference), not ``mkstemp``'s owner-only 0o600.
Each command runs in its own process under a umask set for it (``subprocess``'s ``umask=``), so the
test changes no process-wide state of its own."""

from __future__ import annotations

import stat
from pathlib import Path

from tests.support.cli import base_args, cli

UMASK = 0o027  # neither the usual 0o022 nor mkstemp's 0o077: a mode that matches it came from the umask


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_run_folder_and_report_files_have_open_modes(toy_library: Path, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    done = cli(base_args(toy_library, tmp_path / "cache") + ["limit=4", f"hydra.run.dir={folder}"], umask=UMASK)
    assert done.returncode == 0, done.stderr
    page = tmp_path / "report.html"
    reported = cli(["report", str(folder), f"out={page}"], umask=UMASK)
    assert reported.returncode == 0, reported.stderr

    expected = 0o666 & ~UMASK
    assert _mode(folder / "cli.log") == expected  # logging's open(): what every other file should match
    written = [folder / name for name in ("results.json", "manifest.json", "samples_toy_mc.jsonl")]
    written += [folder / ".hydra" / "config.yaml", page]
    assert {p.name: oct(_mode(p)) for p in written} == {p.name: oct(expected) for p in written}
