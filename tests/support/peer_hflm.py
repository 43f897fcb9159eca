"""lm-eval 0.4.13's HFLM as a reference, run in the peer venv (never imported into evalflow).

As a script (run by the peer venv's python):
    stdin: a JSON list of runs, each {"model_args": {...HFLM kwargs...}, "loglikelihood":
           [[ctx, cont], ...], "loglikelihood_rolling": [text, ...], "generate_until": [[ctx, kwargs], ...]}
    stdout: one JSON line: per run, the answers of each request type in request order.
As a module (imported by the tests): :func:`start` launches it in the background, :func:`finish`
collects its answers, so a test can load its own model meanwhile.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PEER_PYTHON = Path.home() / ".cache" / "evalflow-peer" / "venv" / "bin" / "python"
SKIP_REASON = f"lm-eval's peer venv is absent ({PEER_PYTHON}); build it with shared/parity/peer.sh --setup"


def available() -> bool:
    """The venv is complete: its ``lm_eval`` entry point is installed last, so a venv still being
    built (python there, lm-eval not yet) counts as absent, as in tests/parity/harness.missing."""
    return (PEER_PYTHON.parent / "lm_eval").is_file()


def has_package(name: str) -> bool:
    """Whether the peer venv has the package ``name`` (its folder in site-packages), e.g. peft,
    which lm-eval imports only for its ``peft`` argument."""
    return any(PEER_PYTHON.parent.parent.glob(f"lib/python*/site-packages/{name}/__init__.py"))


def start(runs: list[dict]) -> subprocess.Popen:
    """Launch lm-eval on ``runs`` in the background; one torch thread, offline."""
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    with tempfile.TemporaryFile("w+") as spec:  # the child reads its own copy of the descriptor
        json.dump(runs, spec)
        spec.seek(0)
        return subprocess.Popen(
            [str(PEER_PYTHON), __file__], stdin=spec, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )


def finish(proc: subprocess.Popen, timeout: float = 600) -> list[dict]:
    """The answers of a :func:`start` ed run; raises with lm-eval's stderr if it failed."""
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"lm-eval peer run failed:\n{err[-4000:]}")
    return json.loads(out.strip().splitlines()[-1])


def _run(spec: dict) -> dict:
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(device="cpu", **spec["model_args"])
    out = {}
    for rtype in ("loglikelihood", "loglikelihood_rolling", "generate_until"):
        args = spec.get(rtype) or []
        reqs = [Instance(rtype, {}, tuple(a) if isinstance(a, list) else (a,), i) for i, a in enumerate(args)]
        out[rtype] = getattr(lm, rtype)(reqs, disable_tqdm=True) if reqs else []
    return out


def main() -> None:
    import logging

    logging.disable(logging.WARNING)
    print(json.dumps([_run(spec) for spec in json.load(sys.stdin)]))


if __name__ == "__main__":
    main()
