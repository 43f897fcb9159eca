"""Parity of ``hf_multimodal`` with lm-eval's ``hf-multimodal`` on a tiny random VLM, three tasks.

Both sides load the same tiny LLaVA folder (:mod:`evalflow.models.hf.vlm.tiny_vlm`, SmolLM2's
tokenizer) and the same local rows (Pillow-drawn shapes and digits, written as hub-style parquet files with an ``Image``
column): ``toy_vqa`` (a task in lm-eval's YAML format), and lm-eval's own ``chartqa`` and
``mmmu`` YAML (``include``-d from the installed lm-eval, only the data pointed at local rows;
mmmu's documents carry one to three images, its ``doc_to_image`` is a ``!function``). lm-eval
runs through ``../shared/parity/peer.sh --model hf-multimodal``; evalflow in-process. Compared per
document: the prompt, the image count, the raw and filtered generations and every metric; and
each task's aggregates.

Both sides run one task per process, mmmu's single local subtask included: lm-eval's mmmu scoring
(``parse_multi_choice_response``) answers with ``random.choice`` from Python's global RNG when a
response names no option (every random-weights answer), and evalflow's metrics stage reproduces
the state lm-eval's run of that one task starts from (:mod:`evalflow.taskspec.format.lmeval_seeds`), so those
documents agree exactly too. Several mmmu subtasks in one lm-eval process would carry its draws
from subtask to subtask, which evalflow deliberately does not reproduce.
"""

from __future__ import annotations

import glob
import json
import os
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import images

PEER = Path(__file__).resolve().parents[3] / "shared" / "parity" / "peer.sh"
GEN_KWARGS = {"max_gen_toks": 8}  # chartqa and mmmu ask for 512 tokens; the tiny model's are noise anyway


@dataclass(frozen=True)
class Verdict:
    task: str
    docs: int
    same_prompts: int
    same_generations: int
    same_metrics: int
    aggregates: dict[str, tuple[Any, Any]]
    metric_diffs: tuple[int, ...] = ()  # documents whose metrics differ

    @property
    def ok(self) -> bool:
        agg = all(a == b for a, b in self.aggregates.values())
        return self.docs > 0 and self.same_prompts == self.same_generations == self.same_metrics == self.docs and agg

    def line(self) -> str:
        aggs = ", ".join(f"{k} {a} vs {b}" for k, (a, b) in sorted(self.aggregates.items()))
        return (
            f"{'PASS' if self.ok else 'FAIL'} {self.task}: {self.docs} docs, prompts {self.same_prompts}/{self.docs}, "
            f"generations {self.same_generations}/{self.docs}, metrics {self.same_metrics}/{self.docs}"
            + (f" (differ: documents {list(self.metric_diffs)})" if self.metric_diffs else "")
            + f"; {aggs}"
        )


def lm_eval_tasks_dir() -> Path:
    import lm_eval

    return Path(lm_eval.__file__).parent / "tasks"


def chartqa_rows(n: int, seed: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for r in images.rows(n, seed):
        out.append(
            {
                "image": r["image"],
                "query": f"What is the digit on the {r['colour']} {r['shape']}?",
                "label": [r["digit"]],
                "human_or_machine": rng.randrange(2),
            }
        )
    return out


def mmmu_rows(n: int, seed: int = 2) -> list[dict[str, Any]]:
    """MMMU's schema: image_1..image_7 (unused ones None), options as a literal, a letter answer."""
    base = images.rows(3 * n, seed)
    out = []
    for i in range(n):
        k = 1 + i % 3  # one to three images
        question = " ".join(f"<image {j + 1}>" for j in range(k)) + " Which shape is shown first?"
        row: dict[str, Any] = {
            "id": f"validation_Art_{i}",
            "question": question,
            "options": repr(list(images.SHAPES)),
            "explanation": "",
            "answer": "ABC"[images.SHAPES.index(base[3 * i]["shape"])],
            "question_type": "multiple-choice" if i % 4 else "open",
            "subfield": "toy",
            "img_type": "['Diagrams']",
            "topic_difficulty": "Easy",
        }
        for j in range(7):
            row[f"image_{j + 1}"] = base[3 * i + j]["image"] if j < k else None
        if row["question_type"] == "open":
            row["answer"] = base[3 * i]["shape"]
        out.append(row)
    return out


def write_tasks(folder: Path, n: int = 6) -> Path:
    """The three tasks' YAML and parquet data under ``folder``; returns the task folder."""
    import datasets

    tasks = folder / "tasks"
    images.write_task(tasks, "toy_vqa", images.write_parquet(images.rows(n), folder / "toy_vqa.parquet"))
    for name, rows, split, template in (
        ("chartqa_local", chartqa_rows(n), "test", lm_eval_tasks_dir() / "chartqa" / "chartqa.yaml"),
        ("mmmu_local", mmmu_rows(n), "validation", lm_eval_tasks_dir() / "mmmu" / "_template_yaml"),
    ):
        feats = {
            k: (
                datasets.Image()
                if k.startswith("image")
                else datasets.Sequence(datasets.Value("string"))
                if k == "label"
                else datasets.Value("int64")
                if isinstance(v, int)
                else datasets.Value("string")
            )
            for k, v in rows[0].items()
        }
        data = folder / f"{name}.parquet"
        datasets.Dataset.from_list(rows, features=datasets.Features(feats)).to_parquet(str(data))
        (tasks / f"{name}.yaml").write_text(
            f"include: {template}\ntask: {name}\ndataset_path: parquet\ndataset_name: null\n"
            f"dataset_kwargs:\n  data_files:\n    {split}: {data}\n"
        )
    return tasks


def run_evalflow(task: str, tasks: Path, model_dir: Path, out: Path, cache: Path) -> Path:
    from evalflow import evaluate

    evaluate(
        task,
        {"type": "hf_multimodal", "pretrained": str(model_dir), "dtype": "float32"},
        include_path=[str(tasks)],
        cache_dir=str(cache),
        output_dir=str(out),
        bootstrap_iters=0,
        gen_kwargs=GEN_KWARGS if task != "toy_vqa" else None,
    )
    return out


def run_lm_eval(task: str, tasks: Path, model_dir: Path, out: Path) -> Path:
    """peer.sh with the VLM (its default GGUF argument unset), the venv with Pillow (PEER_VENV)."""
    gen = ["--gen_kwargs", ",".join(f"{k}={v}" for k, v in GEN_KWARGS.items())] if task != "toy_vqa" else []
    env = {**os.environ, "PEER_OUT": str(out)}
    if (Path(sys.executable).parent / "lm_eval").exists():  # this venv has lm-eval and Pillow (peer's may lack Pillow)
        env.setdefault("PEER_VENV", sys.prefix)
    cmd = [
        "bash",
        str(PEER),
        task,
        "--model",
        "hf-multimodal",
        "--model_args",
        f"pretrained={model_dir},dtype=float32,gguf_file=None",
        "--include_path",
        str(tasks),
        "--batch_size",
        "1",
        *gen,
    ]
    subprocess.run(cmd, check=True, env=env, cwd=str(out.parent), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return out


def compare(task: str, ours: Path, theirs: Path) -> Verdict:
    mine = {r["doc_id"]: r for r in map(json.loads, (ours / f"samples_{task}.jsonl").read_text().splitlines())}
    (peer_file,) = glob.glob(str(theirs / "*" / f"samples_{task}_*.jsonl"))
    peer = {r["doc_id"]: r for r in map(json.loads, Path(peer_file).read_text().splitlines())}
    prompts = gens = metrics = 0
    diffs = []
    for doc_id, a in mine.items():
        b = peer.get(doc_id)
        if b is None:
            continue
        ga, gb = a["arguments"]["gen_args_0"], b["arguments"]["gen_args_0"]
        prompts += ga["arg_0"] == gb["arg_0"] and len(ga["arg_2"]["visual"]) == len(gb["arg_2"]["visual"])
        gens += a["resps"] == b["resps"] and a["filtered_resps"] == b["filtered_resps"]
        same = all(a[m] == b[m] for m in a["metrics"])
        metrics += same
        if not same:
            diffs.append(doc_id)
    (results_file,) = glob.glob(str(theirs / "*" / "results_*.json"))
    theirs_res = json.loads(Path(results_file).read_text())["results"][task]
    ours_res = json.loads((ours / "results.json").read_text())["results"][task]
    aggs = {k: (ours_res.get(k), v) for k, v in theirs_res.items() if "," in k and "stderr" not in k}
    return Verdict(task, len(mine), prompts, gens, metrics, aggs, tuple(diffs))
