"""Parity with lm-eval 0.4.13 on the issue's acceptance scope, one verdict line per setting.

    python benchmarks/parity.py                       # the full scope (about three hours on two cores)
    python benchmarks/parity.py --short               # the default test suite's short scope
    python benchmarks/parity.py --only arc_easy       # settings whose task matches
    python benchmarks/parity.py --compare-only --name NAME   # re-compare the outputs left in --work
    python benchmarks/parity.py --list                # the settings' names, for --name NAME

Each setting runs lm-eval (``../shared/parity/peer.sh``) and evalflow with SmolLM2 on the local
data, cold caches, and compares every document with ``../shared/parity/compare.py``: identical
prompts, log-likelihoods within 1e-3, identical greedy flags and per-document metrics; for every
generating task the share of identical generations (at least 95%), each differing document listed
with where its two texts part; each task's and group's aggregates from both results files.
Work folders stay in --work for inspection. Exit status 0 iff all pass.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.parity_harness import FULL, SHORT, compare_setting, missing, run_setting  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--short", action="store_true", help="the default test suite's short scope")
    parser.add_argument("--only", default="", help="run the settings whose task contains this text")
    parser.add_argument("--name", action="append", default=[], help="run the setting of exactly this name (repeatable)")
    parser.add_argument(
        "--compare-only", action="store_true", help="compare the outputs already in --work, run nothing"
    )
    parser.add_argument("--list", action="store_true", help="print the settings' names and exit")
    parser.add_argument("--work", default="/tmp/evalflow-parity", help="folder for both sides' outputs")
    args = parser.parse_args()
    if missing():
        print(f"cannot run: {missing()}")
        return 2
    settings = [
        s for s in (SHORT if args.short else FULL) if args.only in s.task and (not args.name or s.name in args.name)
    ]
    if args.list:
        print("\n".join(s.name for s in settings))
        return 0
    verdicts, ok = [], True
    for setting in settings:
        start = time.time()
        try:
            work = Path(args.work) / setting.slug
            report = compare_setting(setting, work) if args.compare_only else run_setting(setting, work)
        except (RuntimeError, StopIteration) as err:  # a side did not run (StopIteration: no results file to compare)
            verdicts.append(f"{setting.name}: PARITY FAILS (a side did not run) [{time.time() - start:.0f} s]")
            print(verdicts[-1], "\n    " + str(err).replace("\n", "\n    ")[-3000:], flush=True)
            ok = False
            continue
        verdicts.append(f"{report.verdict} [{time.time() - start:.0f} s]")
        print(verdicts[-1], flush=True)
        for line in report.generation_diffs:
            print(f"    differing generation: {line}", flush=True)
        for line in report.aggregate_diffs:
            print(f"    differing aggregate: {line}", flush=True)
        for line in report.aggregate_close:
            print(f"    aggregate within 1e-3 (from log-likelihoods): {line}", flush=True)
        for task, (code, out) in report.outputs.items():
            if code:
                print(
                    f"    {task}:\n" + "\n".join("      " + line for line in out.strip().splitlines()[-12:]), flush=True
                )
        ok = ok and report.ok
    print("\n".join(["", "verdicts:", *verdicts]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
