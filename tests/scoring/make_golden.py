"""Regenerate tests/scoring/golden/*.json: the golden cases' inputs with lm-eval's own answers.

    python tests/scoring/make_golden.py        (needs lm-eval's venv, see tests/support/scoring_golden.py's PEER_PYTHON)

The tests then check evalflow against these files, with or without that venv; when it is present,
test_golden_files_match_lm_eval also recomputes them, so a stale or hand-edited file fails.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # golden_cases, beside this script
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))  # the checkout, for tests.support

from golden_cases import CASES

from tests.support.scoring_golden import GOLDEN, run_oracle


def main() -> None:
    GOLDEN.mkdir(exist_ok=True)
    for kind, make in CASES.items():
        cases = make()
        answers = run_oracle(kind, cases)
        failed = [(c, a) for c, a in zip(cases, answers) if "error" in a]
        if failed:
            raise SystemExit(f"lm-eval failed on {kind} cases: {failed}")
        body = {
            "generated_by": "lm-eval 0.4.13 (tests/scoring/peer_oracle.py via make_golden.py)",
            "cases": [{"input": c, "expected": a} for c, a in zip(cases, answers)],
        }
        (GOLDEN / f"{kind}.json").write_text(json.dumps(body, indent=1, allow_nan=True, ensure_ascii=False) + "\n")
        print(f"{kind}: {len(cases)} cases")


if __name__ == "__main__":
    main()
