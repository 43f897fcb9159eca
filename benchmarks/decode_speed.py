"""Tokens/s of evalflow's greedy decode loop against a plain ``model.generate``, at 1 and 8 rows.

    python benchmarks/decode_speed.py --rounds 2 [--threads 1] [--docs 8] [--tokens 48]

SmolLM2-135M fp32 on gsm8k 5-shot contexts from ``../shared/data``, greedy, no stop sequence. Each
figure is (time to generate ``tokens + 1`` tokens - time to generate 1 token) / new tokens, so the
prompt's processing cancels out and only the decode loop is timed: ``model.generate`` on
left-padded batches (lm-eval's way) against ``evalflow.models.hf.fast.decode.greedy_until`` (continuous
batching, the few-shot prefix's key/values shared), and the same loop with that prefix copied into
every decode slot and attended per row (as before ``shared_attention``). Printed per setting: tokens/s by wall clock and
by this process's CPU time (CPU time is steadier on a shared machine; with ``--threads 1`` it is the
single-core figure), and the foreign CPU load during the measurement, computed as
``benchmarks/measure.py`` does (above ~0.05 the wall figures are disturbed). The minimum time
over rounds is used.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
DATA = (ROOT / ".." / "shared" / "data" / "gsm8k").resolve()
MEASURE = Path(__file__).resolve().with_name("measure.py")  # carried in benchmarks/


def _busy_seconds() -> Callable[[], float]:
    spec = importlib.util.spec_from_file_location("measure", MEASURE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.busy_seconds  # type: ignore[no-any-return]


def gsm8k_contexts(docs: int, shots: int = 5) -> list[str]:
    """lm-eval's gsm8k prompt: ``shots`` first training examples, then the question."""

    def rows(name: str, n: int) -> list[dict[str, str]]:
        with open(DATA / f"{name}.jsonl") as fh:
            return [json.loads(line) for _, line in zip(range(n), fh)]

    prefix = "".join(f"Question: {d['question']}\nAnswer: {d['answer']}\n\n" for d in rows("train", shots))
    return [prefix + f"Question: {d['question']}\nAnswer:" for d in rows("test", docs)]


def timed(fn: Callable[[], Any], rounds: int, busy: Callable[[], float]) -> tuple[float, float, float]:
    """(min wall s, min CPU s, worst foreign fraction) of ``rounds`` calls."""
    walls, cpus, foreign = [], [], 0.0
    for _ in range(rounds):
        b0, w0, c0 = busy(), time.perf_counter(), time.process_time()
        fn()
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        foreign = max(foreign, max(0.0, busy() - b0 - cpu) / (wall * (os.cpu_count() or 1)))
        walls.append(wall)
        cpus.append(cpu)
    return min(walls), min(cpus), foreign


def decode_report(rounds: int, threads: int | None = None, docs: int = 8, tokens: int = 48) -> list[str]:
    import torch

    from evalflow.config.smollm2 import SMOLLM2_GGUF, smollm2_dir
    from evalflow.models.hf import HFModel, generate
    from evalflow.models.hf.fast import decode, shared_attention

    lm = HFModel(smollm2_dir(), gguf_file=SMOLLM2_GGUF, dtype="float32", threads=threads, device="cpu")  # CPU figures
    busy = _busy_seconds()
    contexts = [lm.encode_generation_context(c) for c in gsm8k_contexts(docs)]
    pad = lm.tokenizer.pad_token_id

    def plain(rows: int, new: int) -> None:
        for start in range(0, len(contexts), rows):
            batch = contexts[start : start + rows]
            width = max(map(len, batch))
            ids = torch.tensor([[pad] * (width - len(c)) + c for c in batch])
            mask = (torch.arange(width)[None] >= torch.tensor([width - len(c) for c in batch])[:, None]).long()
            lm.model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=new,
                min_new_tokens=new,
                do_sample=False,
                pad_token_id=pad,
            )

    setup = generate.GenerationSetup(
        lm.model,
        lm.tokenizer,
        lm.device,
        lm.max_length,
        tokens,
        lm.batch_size_for,
        lm.tok_encode,
        lm.encode_generation_context,
    )
    with torch.inference_mode():  # each context after its family's memoized prefix, as the fast engine runs it
        jobs = lm.fast.generation.decode_jobs(setup, contexts)
    no_stop = decode.StopWatch([], lm.tokenizer)

    def ours(rows: int, new: int) -> None:
        with torch.inference_mode():
            decode.greedy_until(lm.model, jobs, rows, new, no_stop, set(), lm.device)

    def ours_prefix_per_row(rows: int, new: int) -> None:
        with mock.patch.object(shared_attention, "applies", return_value=False):
            ours(rows, new)

    lines = []
    for rows in (1, 8):
        runs = (
            ("model.generate", plain),
            ("evalflow decode", ours),
            ("evalflow decode, prefix per row", ours_prefix_per_row),
        )
        for name, run in runs:
            full = timed(functools.partial(run, rows, tokens + 1), rounds, busy)
            one = timed(functools.partial(run, rows, 1), rounds, busy)
            n = tokens * len(contexts)
            lines.append(
                f"decode {name} at {rows} row(s): {n / (full[0] - one[0]):.1f} tokens/s wall, "
                f"{n / (full[1] - one[1]):.1f} tokens/s CPU ({torch.get_num_threads()} threads); "
                f"foreign CPU {max(full[2], one[2]):.2f}"
            )
            print(lines[-1], flush=True)
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--docs", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=48)
    args = parser.parse_args()
    decode_report(args.rounds, args.threads, args.docs, args.tokens)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
