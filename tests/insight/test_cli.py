"""The four subcommands as the README shows them, through `python -m evalflow`."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import cli
from tests.support.runs import Runner


def test_readme_commands(runner: Runner, tmp_path: Path) -> None:
    _, _, a = runner(limit=8)
    _, _, b = runner(limit=8, num_fewshot=1)

    explained = cli(["explain", str(b)])
    assert explained.returncode == 0 and "toy_mc fewshot re-ran: num_fewshot: 0 → 1" in explained.stdout

    compared = cli(["compare", str(a), str(b), "--json"])
    assert compared.returncode == 0, compared.stderr
    assert json.loads(compared.stdout)["rows"][0]["n"] == 8

    out = tmp_path / "rescored"
    rescored = cli(
        [
            "rescore",
            str(a / "samples_toy_mc.jsonl"),
            "task=toy_mc",
            f"include_path=[{runner.library}]",
            f"cache_dir={runner.cache}",
            f"out={out}",
        ]
    )
    assert rescored.returncode == 0, rescored.stderr
    assert (
        json.loads((out / "results.json").read_text())["results"]["toy_mc"]["acc,none"]
        == json.loads((a / "results.json").read_text())["results"]["toy_mc"]["acc,none"]
    )

    page = tmp_path / "report.html"
    reported = cli(["report", str(a), str(b), f"out={page}"])
    assert reported.returncode == 0, reported.stderr
    assert page.read_text().lower().startswith("<!doctype html>")

    refused = cli(["compare", str(a), str(tmp_path)])
    assert (
        refused.returncode == 2 and refused.stderr.startswith("evalflow: error: ") and "Traceback" not in refused.stderr
    )
