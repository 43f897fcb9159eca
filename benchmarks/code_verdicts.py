"""Code verdicts side by side: evalflow's (each backend) and the reference code_eval's, per hostile case.

    python benchmarks/code_verdicts.py

The cases are ``tests/sandbox/test_verdicts.py``'s CASES: a HumanEval-style canonical solution, a
wrong answer, and the wrong answer followed by each trick that passed when exit status 0 was the
verdict (issue 38, item 1). The reference column is ``../shared/parity/code_eval.py``, the offline
stand-in for the hub metric that lm-eval's humaneval and mbpp load (left out when ../shared is
absent). The first column is the old verdict (exit status 0 under the subprocess backend), shown
for contrast. Exit status 0 iff every other column agrees with code_eval's expected verdict.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalflow.sandbox import Limits, run_program, sandbox  # noqa: E402
from evalflow.scoring.code_exec import program  # noqa: E402
from tests.sandbox.test_verdicts import CASES, TEST  # noqa: E402

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
