"""`python -m evalflow --help` names evalflow and lists every subcommand from its declaration."""

from __future__ import annotations

import os
import subprocess
import sys

from evalflow.commands.main import SUBCOMMANDS, declaration
from tests.support.paths import ROOT


def test_help_names_evalflow_and_every_subcommand() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "evalflow", "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "__main__" not in done.stdout and "powered by Hydra" not in done.stdout
    assert done.stdout.startswith("evalflow: ")
    for name in SUBCOMMANDS:
        command = declaration(name)
        assert command.summary.strip(), f"subcommand {name} has no one-line summary"
        assert f"python -m evalflow {name} {command.words()}  {command.summary}" in done.stdout
    assert (
        "a model preset in conf/model/: anthropic_chat, azure_openai_chat, dummy, gguf_server, hf, hf_multimodal, "
        "llama3" in done.stdout
    )  # listed from conf/model/
    assert "conf/data_maps/ (shared)" in done.stdout


def test_version_names_the_installed_version_and_the_checkout_it_runs_from() -> None:
    """``--version`` is evalflow's (Hydra's own flag would name Hydra), read from the installed
    metadata; tests/config/test_distribution.py runs it from an installed wheel."""
    from importlib import metadata

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "evalflow", "--version"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"evalflow {metadata.version('evalflow')} (source checkout {ROOT})\n"
