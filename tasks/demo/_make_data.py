"""Write the demo task's data: one-digit addition and subtraction as 4-way multiple choice.

``python tasks/demo/_make_data.py`` rewrites ``arith_mc_test.jsonl`` (60 questions) and
``arith_mc_train.jsonl`` (8 few-shot examples) deterministically; the files are committed, this
script documents where they come from. Distractors are the answer +-1..3 or +10, never negative,
and the correct choice's position is shuffled. SmolLM2-135M-Instruct scores about 0.4 accuracy
zero-shot (chance is 0.25), so the default run shows a real, non-trivial number.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 7
N_TEST, N_TRAIN = 60, 8


def make_rows(n: int, rnd: random.Random, seen: set[tuple[int, str, int]]) -> list[dict[str, object]]:
    """``n`` distinct questions ``a op b`` with one correct and three distractor choices."""
    rows: list[dict[str, object]] = []
    while len(rows) < n:
        a, b, op = rnd.randint(1, 9), rnd.randint(1, 9), rnd.choice("+-")
        if op == "-" and a < b:
            a, b = b, a
        if (a, op, b) in seen:
            continue
        seen.add((a, op, b))
        result = a + b if op == "+" else a - b
        distractors: set[int] = set()
        while len(distractors) < 3:
            d = result + rnd.choice([-3, -2, -1, 1, 2, 3, 10])
            if d >= 0 and d != result:
                distractors.add(d)
        choices = [str(result)] + [str(d) for d in sorted(distractors)]
        rnd.shuffle(choices)
        rows.append({"question": f"What is {a} {op} {b}?", "choices": choices, "answer": choices.index(str(result))})
    return rows


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def main() -> None:
    rnd, seen = random.Random(SEED), set[tuple[int, str, int]]()
    write_jsonl(HERE / "arith_mc_test.jsonl", make_rows(N_TEST, rnd, seen))
    write_jsonl(HERE / "arith_mc_train.jsonl", make_rows(N_TRAIN, rnd, seen))


if __name__ == "__main__":
    main()
