"""Parity of ``hf_multimodal`` with lm-eval 0.4.13's ``hf-multimodal``, one verdict line per task.

    python benchmarks/vlm_parity.py [--docs 6] [--work /tmp/evalflow-vlm-parity]

Builds the tiny random LLaVA (SmolLM2's tokenizer, fixed seed) and the local image tasks of
:mod:`tests.support.parity_vlm` (toy_vqa, lm-eval's chartqa and mmmu YAML on local rows), runs
lm-eval through ``../shared/parity/peer.sh`` and evalflow in-process, cold caches, and prints
per task how many documents have identical prompts (and image counts), identical raw and filtered
greedy generations and identical metrics, and both sides' aggregates. Exit status 0 iff all pass.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalflow.models.hf.vlm.tiny_vlm import build_tiny_vlm, smollm2_tokenizer  # noqa: E402
from tests.support import parity_vlm as h  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=6)
    parser.add_argument("--work", default="/tmp/evalflow-vlm-parity")
    parser.add_argument("--only", default="", help="tasks whose name contains this text")
    args = parser.parse_args()
    if not h.PEER.is_file():
        print(f"cannot run: {h.PEER} is missing")
        return 2
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    model = build_tiny_vlm(work / "vlm", tokenizer=smollm2_tokenizer())
    tasks = h.write_tasks(work, args.docs)
    ok = True
    for task in ("toy_vqa", "chartqa_local", "mmmu_local"):
        if args.only not in task:
            continue
        start = time.time()
        ours = h.run_evalflow(task, tasks, model, work / f"evalflow-{task}", work / f"cache-{task}")
        theirs = h.run_lm_eval(task, tasks, model, work / f"lm-eval-{task}")
        verdict = h.compare(task, ours, theirs)
        ok = ok and verdict.ok
        print(f"{verdict.line()} ({time.time() - start:.0f} s)", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
