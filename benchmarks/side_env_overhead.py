"""What running task code in a side environment costs: per call, and for MATH's process_docs.

    python benchmarks/side_env_overhead.py            # 2000 calls; MATH test, 5,000 rows

Prints:

- per call: a trivial ``!function`` (returns its document's length) called in-process and through
  the ``antlr4-4.11`` worker, in microseconds; the difference is the pickle + pipe round trip;
- a minerva_math ``process_results`` call through the worker (sympy's simplify dominates);
- MATH-size ``process_docs``: minerva_math's (a ``datasets.Dataset.map`` over all 5,000 rows of
  ../shared/data/hendrycks_math/test) through the worker, and the same rows through hendrycks_math's
  process_docs in-process, with the pickled sizes of the Dataset sent and received.

Needs lm-eval's task code (the ``lm-eval-tasks`` extra) and the side environment (provisioned on
first use). Nothing here is asserted; tests/taskspec/test_side_env*.py hold the checks.
"""

from __future__ import annotations

import argparse
import importlib.util
import pickle
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalflow.taskspec.format.loader import function_ref, resolve_function  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "hendrycks_math" / "test"
TRIVIAL = "def size(doc):\n    return len(doc)\n\ndef same(x):\n    return x\n"


def _per_call(fn: Callable[[Any], Any], calls: int) -> float:
    """Median of 5 rounds, in microseconds per call."""
    doc = {"problem": "x" * 200, "solution": "y" * 400, "answer": "1"}
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls // 5):
            fn(doc)
        rounds.append((time.perf_counter() - start) / (calls // 5) * 1e6)
    return statistics.median(rounds)


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _rows(cache: str) -> Any:
    """MATH's test split (5,000 rows), memory-mapped from its own datasets cache folder."""
    import datasets

    files = sorted(str(p) for p in DATA.glob("*.jsonl"))
    return datasets.load_dataset("json", data_files={"test": files}, cache_dir=cache)["test"]


def _leaderboard_in_process(tasks: Path) -> Callable[[Any], Any]:
    """leaderboard_math_hard's process_docs imported here, bypassing the side environment (its
    import works under antlr 4.9; only its parse_latex calls fail), to time the same function."""
    spec = importlib.util.spec_from_file_location("_bench_leaderboard", tasks / "leaderboard" / "math" / "utils.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.process_docs  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    import datasets
    import lm_eval

    datasets.disable_progress_bars()
    tasks = Path(lm_eval.__file__).parent / "tasks"
    scratch = Path(tempfile.mkdtemp(prefix="side-env-bench-"))
    (scratch / "plain").mkdir()
    (scratch / "plain" / "utils.py").write_text(TRIVIAL)
    (scratch / "side").mkdir()
    (scratch / "side" / "utils.py").write_text("import antlr4\n" + TRIVIAL)
    local = resolve_function(function_ref("utils.size", str(scratch / "plain")))
    remote = resolve_function(function_ref("utils.size", str(scratch / "side")))
    remote({})  # the worker is started and the module imported
    print(
        f"per call (a 3-key document): in-process {_per_call(local, args.calls):.1f} us, "
        f"through the worker {_per_call(remote, args.calls):.1f} us"
    )
    same = resolve_function(function_ref("utils.same", str(scratch / "side")))
    mapped, in_memory = _rows(str(scratch / "a")), datasets.Dataset.from_list(list(_rows(str(scratch / "a"))))
    seconds, _ = _timed(lambda: same(datasets.Dataset.from_list([{"a": 1}])))
    print(f"the worker's first Dataset (it imports datasets): {seconds:.2f} s")
    for name, rows in (("memory-mapped", mapped), ("in-memory", in_memory)):
        seconds, back = _timed(lambda rows=rows: same(rows))
        print(
            f"a {len(back)}-row {name} Dataset to the worker and back: {seconds * 1e3:.0f} ms "
            f"({len(pickle.dumps(rows)) / 1e3:.0f} kB pickled)"
        )
    here, there = (
        _leaderboard_in_process(tasks),
        resolve_function(function_ref("utils.process_docs", str(tasks / "leaderboard" / "math"))),
    )
    for name, fn, cache in (("in-process", here, "b"), ("through the worker", there, "c")):
        rows = _rows(str(scratch / cache))
        seconds, out = _timed(lambda fn=fn, rows=rows: list(fn(rows)))
        print(f"leaderboard_math_hard process_docs {name}: {len(rows)} rows -> {len(out)} docs in {seconds:.2f} s")
    results = resolve_function(function_ref("utils.process_results", str(tasks / "minerva_math")))
    doc = {"problem": "p", "solution": "so $\\boxed{\\frac{1}{2}}$", "answer": "\\frac{1}{2}"}
    answer = ["Final Answer: The final answer is $0.5$. I hope it is correct."]
    results(doc, answer)
    seconds, _ = _timed(lambda: [results(doc, answer) for _ in range(20)])
    print(f"minerva_math process_results through the worker: {seconds / 20 * 1e3:.1f} ms per call (sympy's own work)")


if __name__ == "__main__":
    main()
