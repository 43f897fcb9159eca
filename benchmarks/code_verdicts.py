"""Code verdicts side by side: evalflow's (each backend) and the reference code_eval's, per hostile case.

    python benchmarks/code_verdicts.py

The cases are ``tests/sandbox/test_verdicts.py``'s CASES: a HumanEval-style canonical solution, a
wrong answer, and the wrong answer followed by each trick that passed when exit status 0 was the
verdict (issue 38, item 1). The reference column is ``../shared/parity/code_eval.py``, the offline
stand-in for the hub metric that lm-eval's humaneval and mbpp load (left out when ../shared is
absent), and lm-eval 0.4.13 itself: its humaneval metric (``lm_eval.tasks.humaneval.utils.pass_at_k``,
which calls ``evaluate.load("code_eval")``) run in the peer venv of ``../shared/parity/peer.sh``
(``$PEER_VENV`` or ``~/.cache/evalflow-peer/venv``) with that stand-in served as the hub metric, as
peer.sh serves it. The first column is the old verdict (exit status 0 under the subprocess backend), shown
for contrast. Exit status 0 iff every other column agrees with code_eval's expected verdict.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalflow.sandbox import Limits, run_program, sandbox  # noqa: E402
from evalflow.scoring.code_exec import program  # noqa: E402
from tests.support.verdict_cases import CASES, TEST  # noqa: E402

REFERENCE = ROOT.parent / "shared" / "parity" / "code_eval.py"


def _reference() -> Callable[[str], bool] | None:
    """code_eval.py's own runner (``_run``), or None without ../shared."""
    if not REFERENCE.is_file():
        return None
    spec = importlib.util.spec_from_file_location("reference_code_eval", REFERENCE)
    assert spec and spec.loader
    module: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return lambda text: bool(module._run(text, 10.0)[0])


PEER_VENV = Path(os.environ.get("PEER_VENV", Path.home() / ".cache" / "evalflow-peer" / "venv"))
LM_EVAL_PASS_AT_1 = """
import json, sys
from lm_eval.tasks.humaneval.utils import pass_at_k
for candidate, test in json.load(sys.stdin):
    print(pass_at_k(references=[test], predictions=[[candidate]], k=[1])["pass@1"])
"""


def _lm_eval_verdicts() -> list[bool] | None:
    """lm-eval's own humaneval pass@1 of each case, in the peer venv (None without it)."""
    python = PEER_VENV / "bin" / "python"
    if not python.is_file() or not REFERENCE.is_file():
        return None
    with tempfile.TemporaryDirectory() as modules:
        metric = Path(modules) / "evaluate_modules" / "metrics" / "evaluate-metric--code_eval" / ("0" * 64)
        metric.mkdir(parents=True)
        shutil.copy(REFERENCE, metric / "code_eval.py")
        for folder in (metric, metric.parent, metric.parent.parent, metric.parent.parent.parent):
            (folder / "__init__.py").touch()
        env = {
            **os.environ,
            "HF_ALLOW_CODE_EVAL": "1",
            "HF_MODULES_CACHE": modules,
            "HF_EVALUATE_OFFLINE": "1",
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
        }
        cases = [[candidate, TEST] for candidate, _ in CASES.values()]
        done = subprocess.run(
            [str(python), "-c", LM_EVAL_PASS_AT_1],
            input=json.dumps(cases),
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    if done.returncode != 0:
        raise RuntimeError(f"lm-eval's pass_at_k failed in {PEER_VENV}:\n{done.stderr[-2000:]}")
    return [float(line) == 1.0 for line in done.stdout.split()]


def main() -> int:
    plain = sandbox("subprocess")
    old = lambda text: plain.run([sys.executable, "-I", "-c", text], Limits(wall_seconds=10)).returncode == 0  # noqa: E731
    columns: dict[str, Callable[[str], bool]] = {}
    for name in ("bwrap", "subprocess"):
        box = sandbox(name)
        if box.unavailable() is None:
            columns[f"evalflow {name}"] = lambda text, box=box: run_program(box, text, Limits(wall_seconds=10))
    reference = _reference()
    if reference is not None:
        os.environ.setdefault("HF_ALLOW_CODE_EVAL", "1")
        columns["code_eval.py (reference)"] = reference
    lm_eval = _lm_eval_verdicts()
    if lm_eval is not None:
        by_program = {program(candidate, TEST): verdict for (candidate, _), verdict in zip(CASES.values(), lm_eval)}
        columns["lm-eval 0.4.13 humaneval"] = by_program.__getitem__
    header = ["case", "expected", "exit status 0 (old)", *columns]
    rows = []
    agree = True
    for case, (candidate, expected) in CASES.items():
        text = program(candidate, TEST)
        verdicts = [run(text) for run in columns.values()]
        agree &= all(v is expected for v in verdicts)
        rows.append([case, _word(expected), _word(old(text)), *map(_word, verdicts)])
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"{'all agree' if agree else 'DISAGREEMENT'}: {len(rows)} cases, {len(columns)} columns")
    return 0 if agree else 1


def _word(passed: bool) -> str:
    return "passed" if passed else "failed"


if __name__ == "__main__":
    raise SystemExit(main())
