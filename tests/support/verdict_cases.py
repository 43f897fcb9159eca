"""HumanEval-style candidates and code_eval's verdict on each: the canonical answer, a wrong one,
and the wrong one followed by each trick that would pass if the exit status were the verdict
(tests/sandbox/test_verdicts.py, benchmarks/code_verdicts.py)."""

from __future__ import annotations

PROMPT = 'def mean(numbers: list) -> float:\n    """The arithmetic mean of numbers."""\n'
CANONICAL = "    return sum(numbers) / len(numbers)\n"
WRONG = "    return -1.0\n"
TEST = (
    "def check(candidate):\n"
    "    assert candidate([1.0, 2.0, 3.0]) == 2.0\n"
    "    assert candidate([4.0]) == 4.0\n"
    "\n"
    "check(mean)"
)

TRICKS = {
    "sys.exit(0)": "import sys\nsys.exit(0)\n",
    "os._exit(0)": "import os\nos._exit(0)\n",
    "builtin exit(0)": "exit(0)\n",
    "raise SystemExit": "raise SystemExit\n",
    "atexit handler os._exit(0)": "import atexit, os\natexit.register(lambda: os._exit(0))\n",
    "__del__ os._exit(0)": ("import os\nclass Bye:\n    def __del__(self):\n        os._exit(0)\nkeep = Bye()\n"),
    "'passed' to every fd 0-20": (
        "import os\nfor fd in range(21):\n    try:\n        os.write(fd, b'passed\\n')\n"
        "    except OSError:\n        pass\n"
    ),
    "rebinding os.write": (
        "import os\n_write = os.write\nos.write = lambda fd, data: _write(fd, data.replace(b'failed', b'passed'))\n"
    ),
}
"""Each trick, placed between the wrong answer and the test."""

CASES = {
    "canonical solution": (PROMPT + CANONICAL, True),
    "wrong answer": (PROMPT + WRONG, False),
    **{trick: (PROMPT + WRONG + code, False) for trick, code in TRICKS.items()},
}
"""name -> (candidate, code_eval's verdict)."""
