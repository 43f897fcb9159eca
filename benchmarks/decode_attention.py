"""One gsm8k decode step's attention: the compiled kernel (``native_attention``) against torch's CPU
flash kernel on the same inputs, interleaved in the same run.

    python benchmarks/decode_attention.py --rounds 5 [--rows 8] [--tokens 5] [--prefill 1100]

Shapes of SmolLM2-135M (30 layers, 3 key/value heads of 64 under 9 query heads) in evalflow's decode
loop: ``rows`` slots with their own lengths (900 to 1,300 columns, buffers of 1,500 columns, one
per layer so the step streams its key/values from memory as a real one does), each row fed
``tokens`` tokens (its next token and draft tokens). torch's kernel gets the step's mask (the
padding of shorter rows included, as the decode loop passes it); the native kernel gets each
query's visible column count. Prints ms per step (min of rounds), the ratio, the largest
difference between the two outputs, and the foreign CPU load (``benchmarks/measure.py``;
above ~0.05 the figures are disturbed).

A second line times one layer of a prompt's prefill (``--prefill`` tokens, one row, causal):
torch's ``sdpa`` (what transformers runs) against the kernel (``shared_attention._causal_prefill``)
and, on a CPU with AVX-512, against the kernel's AVX2 build, whose floats it must equal exactly.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from types import SimpleNamespace  # noqa: E402

import torch.nn.functional as F  # noqa: E402
from decode_speed import _busy_seconds, timed  # noqa: E402

from evalflow.models.hf.fast import native_attention, shared_attention  # noqa: E402

LAYERS, KV_HEADS, GROUP, HEAD_DIM, CAPACITY = 30, 3, 3, 64, 1500


def step_inputs(rows: int, tokens: int) -> dict:
    torch.manual_seed(0)
    lengths = torch.randint(900, 1300 - tokens, (rows,))
    columns = lengths[:, None] + torch.arange(tokens)  # the column each fed token writes
    width = int(columns.max()) + 1
    filled = torch.arange(width)[None, None, :] <= columns[:, :, None]
    mask = torch.zeros(filled.shape).masked_fill_(~filled, torch.finfo(torch.float32).min)
    buffers = [
        (torch.randn(rows, KV_HEADS, CAPACITY, HEAD_DIM), torch.randn(rows, KV_HEADS, CAPACITY, HEAD_DIM))
        for _ in range(LAYERS)
    ]
    return {
        "query": torch.randn(rows, KV_HEADS, GROUP * tokens, HEAD_DIM),
        "layers": [(k[:, :, :width], v[:, :, :width]) for k, v in buffers],
        "mask": shared_attention.grouped_mask(mask, GROUP),
        "visible": (columns + 1).repeat(1, GROUP),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=5)
    parser.add_argument("--prefill", type=int, default=1100, help="a prompt's tokens for the prefill line (0: none)")
    args = parser.parse_args()
    attend = native_attention.kernel(HEAD_DIM)
    if attend is None:
        sys.exit("the native kernel does not run on this machine (see the log line above)")
    x = step_inputs(args.rows, args.tokens)
    scale = HEAD_DIM**-0.5

    def torch_step() -> list:
        return [shared_attention._softmax_part(x["query"], k, v, x["mask"], scale) for k, v in x["layers"]]

    def native_step() -> list:
        return [attend(x["query"], k, v, x["visible"], scale) for k, v in x["layers"]]

    diff = max(float((a[0] - b[0]).abs().max()) for a, b in zip(torch_step(), native_step()))
    busy = _busy_seconds()
    best = {"torch": float("inf"), "native": float("inf")}
    foreign = 0.0
    for _ in range(args.rounds):  # interleaved, so drift hits both alike
        for name, fn in (("torch", torch_step), ("native", native_step)):
            wall, _, disturbed = timed(fn, 1, busy)
            best[name], foreign = min(best[name], wall), max(foreign, disturbed)
    print(
        f"decode step attention ({args.rows} rows x {args.tokens} tokens, {LAYERS} layers, "
        f"{torch.get_num_threads()} threads): "
        f"torch flash {best['torch'] * 1e3:.1f} ms, native {best['native'] * 1e3:.1f} ms: "
        f"{best['torch'] / best['native']:.2f}x; max |difference| {diff:.1e}; worst foreign CPU {foreign:.2f}"
    )
    if args.prefill:
        print(prefill_line(args.prefill, args.rounds, attend), flush=True)


def prefill_line(tokens: int, rounds: int, attend: native_attention.Kernel) -> str:
    """One layer's causal prefill of ``tokens`` tokens: sdpa, the kernel, and its AVX2 build (where
    the kernel is the AVX-512 one), interleaved over ``rounds``; min ms each."""
    torch.manual_seed(1)
    query = torch.randn(1, KV_HEADS * GROUP, tokens, HEAD_DIM)
    key, value = torch.randn(2, 1, KV_HEADS, tokens, HEAD_DIM).unbind(0)
    causal = SimpleNamespace(is_causal=True)
    runs = {
        "sdpa": lambda: F.scaled_dot_product_attention(query, key, value, is_causal=True, enable_gqa=True).transpose(
            1, 2
        )
    }
    wide = getattr(attend, "vector_width", 8) == 16
    builds = {"native": attend, **({"native AVX2": native_attention.kernel(HEAD_DIM, avx512=False)} if wide else {})}
    for name, kernel in builds.items():
        runs[name] = lambda kernel=kernel: shared_attention._causal_prefill(
            kernel, causal, query, key, value, None, None
        )
    outs = {name: run() for name, run in runs.items()}
    diff = float((outs["native"] - outs["sdpa"]).abs().max())
    busy = _busy_seconds()
    best, foreign = {name: float("inf") for name in runs}, 0.0
    for _ in range(rounds):
        for name, run in runs.items():
            wall, _, disturbed = timed(run, 1, busy)
            best[name], foreign = min(best[name], wall), max(foreign, disturbed)
    flops = tokens * tokens * KV_HEADS * GROUP * HEAD_DIM * 2  # scores and values over the causal half
    line = (
        f"prompt prefill attention ({tokens} tokens, one layer, {torch.get_num_threads()} threads): "
        f"sdpa {best['sdpa'] * 1e3:.2f} ms, native {best['native'] * 1e3:.2f} ms "
        f"({flops / best['native'] / 1e9:.0f} GFLOP/s, {'AVX-512' if wide else 'AVX2'}): "
        f"{best['sdpa'] / best['native']:.2f}x"
    )
    if wide:
        same = torch.equal(outs["native"], outs["native AVX2"])
        line += (
            f"; AVX2 build {best['native AVX2'] * 1e3:.2f} ms: AVX-512 {best['native AVX2'] / best['native']:.2f}x, "
            f"{'identical' if same else 'DIFFERENT'} floats"
        )
    return line + f"; max |difference| to sdpa {diff:.1e}; worst foreign CPU {foreign:.2f}"


if __name__ == "__main__":
    main()
