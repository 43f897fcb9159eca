"""SmolLM2's linear layers: torch's ``F.linear`` (MKL) against oneDNN over packed weights
(``model.packed_linear``), interleaved in the same run, at a decode step's and a prompt's row counts.

    python benchmarks/packed_linear.py --rounds 3 [--rows 1 5 40 1100] [--layers 30]

Shapes of SmolLM2-135M (hidden 576, MLP 1536, 3 key/value heads of 64, vocabulary 49,152), random
fp32 weights, ``--layers`` distinct matrices per shape so that, as in a real pass, they stream from
memory rather than sit in cache (the output layer: 2). Prints per shape and row count the ms of
both (min of rounds), the ratio, the largest difference of the two results, and the foreign CPU
load (``benchmarks/measure.py``; above ~0.05 the figures are disturbed).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from decode_speed import _busy_seconds, timed  # noqa: E402

from evalflow.models.hf.fast import packed_linear  # noqa: E402

SHAPES = {"gate/up": (1536, 576), "down": (576, 1536), "q/o": (576, 576), "k/v": (192, 576), "output": (49152, 576)}


def _runs(x: torch.Tensor, plain: list[torch.nn.Linear], packed: list[Any]) -> dict[str, Callable[[], list[Any]]]:
    """The two ways of applying the layers to ``x``, each a call of no arguments to time."""
    return {
        "torch": lambda: [F.linear(x, layer.weight) for layer in plain],
        "packed": lambda: [layer(x) for layer in packed],
    }


def shape_lines(rows: list[int], layers: int, rounds: int, scale: int = 1) -> list[str]:
    """One line per weight shape (``scale`` divides every size, for a quick check)."""
    busy = _busy_seconds()
    lines = []
    for name, (out_features, in_features) in SHAPES.items():
        count = 2 if name == "output" else layers
        plain = [torch.nn.Linear(in_features // scale, out_features // scale, bias=False) for _ in range(count)]
        packed = [packed_linear.PackedLinear(layer) for layer in plain]
        cells = []
        for n in rows:
            x = torch.randn(1, n, in_features // scale)
            runs = _runs(x, plain, packed)
            with torch.inference_mode():
                diff = max(float((a - b).abs().max()) for a, b in zip(runs["torch"](), runs["packed"]()))
                best, foreign = {k: float("inf") for k in runs}, 0.0
                for _ in range(rounds):
                    for key, run in runs.items():
                        wall, _, disturbed = timed(run, 1, busy)
                        best[key], foreign = min(best[key], wall), max(foreign, disturbed)
            cells.append(
                f"{n} rows: torch {best['torch'] * 1e3:.3f} ms, packed {best['packed'] * 1e3:.3f} ms, "
                f"{best['torch'] / best['packed']:.2f}x (max |difference| {diff:.1e}, foreign CPU {foreign:.2f})"
            )
        lines.append(f"{name} ({count} x {out_features // scale}x{in_features // scale}): " + "; ".join(cells))
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 5, 40, 1100])
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--scale", type=int, default=1, help="divide every size by this (a quick check)")
    args = parser.parse_args()
    reason = packed_linear.onednn_missing()
    if reason is not None:
        sys.exit(f"packed linear layers do not run here: {reason}")
    print(f"{torch.get_num_threads()} threads", flush=True)
    shape_lines(args.rows, args.layers, args.rounds, args.scale)


if __name__ == "__main__":
    main()
