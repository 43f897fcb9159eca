"""How fast can any fp32 implementation run hf_speed's gsm8k workload on this machine? A lower bound.

    python benchmarks/gsm8k_bound.py [--lm-eval-seconds 152.2] [--rows 8]

gsm8k draws its five examples at random per document, so no two prompts share a prefix and every
prompt must be run whole once (lm-eval at batch size 1 runs exactly these passes too). After that,
each greedy token costs one decode step shared by up to ``--rows`` rows, and a step must at least
read every weight once and each row's key/values once. This script runs evalflow on the workload
(gsm8k 5-shot, 30 documents, SmolLM2-135M fp32, cold cache) for its prompts and generations, then
measures on this machine:

- the prompt floor: one forward pass per prompt, batch size 1, as both tools run them;
- the decode floor: (weight bytes per step + key/value bytes of each row's columns) / the memory
  read bandwidth (the best of five sums over a 1 GiB tensor), with steps = generated tokens / rows.

It prints both floors and, for lm-eval's measured inference time (``--lm-eval-seconds``, the
better of batch size 1 and 8 from ``hf_speed.py --only gsm8k``), the largest throughput ratio any
implementation could show: lm-eval's time / (prompt floor + decode floor).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_evalflow(work: Path) -> list[dict]:
    args = [
        "task=gsm8k",
        "model=smollm2",
        "model.device=cpu",
        "data_map=shared",
        "num_fewshot=5",
        "limit=30",
        "batch_size=8",
        f"cache_dir={work / 'cache'}",
        f"hydra.run.dir={work / 'run'}",
        "bootstrap_iters=0",
    ]
    subprocess.run([sys.executable, "-m", "evalflow", *args], cwd=ROOT, check=True, capture_output=True)
    with open(work / "run" / "samples_gsm8k.jsonl") as fh:
        return [json.loads(line) for line in fh]


def read_bandwidth() -> float:
    import torch

    data = torch.ones(2**28)  # 1 GiB of float32
    best = math.inf
    for _ in range(5):
        start = time.perf_counter()
        data.sum()
        best = min(best, time.perf_counter() - start)
    return data.numel() * 4 / best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lm-eval-seconds", type=float, default=152.2)
    parser.add_argument("--rows", type=int, default=8)
    args = parser.parse_args()
    import torch

    from evalflow.config.smollm2 import SMOLLM2_GGUF, smollm2_dir
    from evalflow.models.hf import HFModel

    with tempfile.TemporaryDirectory(prefix="gsm8k_bound_") as tmp:
        samples = run_evalflow(Path(tmp))
    samples = [s for s in samples if s["filter"] == "strict-match"]
    lm = HFModel(smollm2_dir(), gguf_file=SMOLLM2_GGUF, dtype="float32", device="cpu")  # a CPU bound, on any machine
    prompts = [lm.encode_generation_context(s["arguments"]["gen_args_0"]["arg_0"]) for s in samples]
    generated = [len(lm.tok_encode(s["resps"][0][0])) for s in samples]
    with torch.inference_mode():
        lm.model(torch.tensor([prompts[0]]), logits_to_keep=1)  # warm-up
        start = time.perf_counter()
        for p in prompts:
            lm.model(torch.tensor([p]), logits_to_keep=1)
        prompt_floor = time.perf_counter() - start
    config = lm.model.config
    kv_per_token = (
        config.num_hidden_layers
        * 2
        * config.num_key_value_heads
        * (config.hidden_size // config.num_attention_heads)
        * 4
    )
    weights = sum(p.numel() * p.element_size() for p in lm.model.parameters())
    kv_reads = sum(kv_per_token * sum(len(p) + t for t in range(n)) for p, n in zip(prompts, generated))
    steps = math.ceil(sum(generated) / args.rows)
    bandwidth = read_bandwidth()
    decode_floor = (steps * weights + kv_reads) / bandwidth
    floor = prompt_floor + decode_floor
    print(f"prompts: {len(prompts)}, {sum(map(len, prompts))} tokens, run whole one at a time: {prompt_floor:.1f} s")
    print(
        f"generated: {sum(generated)} tokens in >= {steps} steps of {args.rows} rows; "
        f"weights {weights / 2**20:.0f} MiB, key/values read {kv_reads / 2**30:.2f} GiB in all; "
        f"read bandwidth {bandwidth / 1e9:.1f} GB/s: decode floor {decode_floor:.1f} s"
    )
    print(
        f"floor {floor:.1f} s: against lm-eval's {args.lm_eval_seconds:.1f} s "
        f"no implementation exceeds {args.lm_eval_seconds / floor:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
