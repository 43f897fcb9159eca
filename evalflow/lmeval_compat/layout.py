"""lm-eval 0.4.13's output layout (``loggers/evaluation_tracker.py``), written from an evalflow run:

    <output_path>/<model_name_sanitized>/results_<date>.json
    <output_path>/<model_name_sanitized>/samples_<task>_<date>.jsonl     (with --log_samples)

with the samples rows as lm-eval's tracker writes them (:func:`as_tracker_writes`: answers and
targets as text), or, when ``output_path`` ends in ``.json``, ``<stem>_<date>.json`` beside it and the samples in its
folder (the names: :mod:`evalflow.output.run_paths`). The results file is results.json plus lm-eval's
``task_hashes`` (:func:`evalflow.output.results.with_task_hashes`; ``{}`` without samples), placed
where lm-eval's tracker puts it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from evalflow.output.results import as_command_gave, task_hash, with_task_hashes
from evalflow.output.run_info import model_name, sanitize_model_name
from evalflow.output.run_paths import lmeval_date_id, lmeval_output_files, lmeval_samples_name, samples_file
from evalflow.output.samples_json import row_json


def task_hashes(run_folder: Path, tasks: list[str]) -> dict[str, str]:
    """lm-eval's ``task_hashes``, from the run folder's samples files (only tasks that have one)."""
    out = {}
    for task in tasks:
        path = samples_file(run_folder, task)
        if path.is_file():
            out[task] = task_hash(
                [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            )
    return out


def write_layout(
    output_path: str | Path,
    results: Mapping[str, Any],
    run_folder: Path,
    lm_model: str,
    lm_model_args: Mapping[str, Any],
    now: datetime | None = None,
    chat_prompts: bool = False,
) -> list[Path]:
    """Write lm-eval's files for a finished run; returns their paths. The model folder is named
    from lm-eval's model args as lm-eval names it (``pretrained``, ``model``, ...); ``chat_prompts``:
    the prompts are a chat API's message lists (see :func:`as_tracker_writes`)."""
    date_id = lmeval_date_id(now or datetime.now())
    tasks = list(results.get("configs", {}))
    given = as_command_gave({k: v for k, v in results.items() if k != "samples"}, lm_model, lm_model_args)
    body = with_task_hashes(given, task_hashes(run_folder, tasks))
    name = sanitize_model_name(model_name({"type": lm_model, **dict(lm_model_args)}))
    results_file, folder = lmeval_output_files(Path(output_path), name, date_id)
    folder.mkdir(parents=True, exist_ok=True)
    results_file.write_text(json.dumps(body, indent=2, default=str, ensure_ascii=False), encoding="utf-8")
    written = [results_file]
    for task in tasks:
        source = samples_file(run_folder, task)
        if source.is_file():
            target = folder / lmeval_samples_name(task, date_id)
            lines = source.read_text(encoding="utf-8").splitlines()
            rows = (as_tracker_writes(json.loads(line), chat_prompts) for line in lines if line.strip())
            target.write_text("".join(row_json(row) + "\n" for row in rows), encoding="utf-8")
            written.append(target)
    return written


def sanitize_list(value: Any) -> Any:
    """lm-eval's ``sanitize_list``: lists (and tuples) kept, every leaf its ``str()`` ('True', '-2.5')."""
    return [sanitize_list(v) for v in value] if isinstance(value, (list, tuple)) else str(value)


def as_tracker_writes(row: Mapping[str, Any], chat_prompts: bool = False) -> dict[str, Any]:
    """A samples row as lm-eval's tracker writes it to its file (``save_results_samples``): ``resps``
    and ``filtered_resps`` through :func:`sanitize_list`, ``target`` as ``str(target)`` (the row
    evalflow's run folder keeps, and simple_evaluate returns, holds the values as they are). With
    ``chat_prompts`` each request's prompt is lm-eval's ``JsonChatStr``, a one-field tuple its JSON
    writes as a one-item list (``["[{\"role\": ...}]"]``): its API models' chat-templated prompt."""
    out = dict(row)
    out["resps"] = sanitize_list(row["resps"])
    out["filtered_resps"] = sanitize_list(row["filtered_resps"])
    out["target"] = str(row["target"])  # a JSON list is the Python list lm-eval held: the same str()
    if chat_prompts and isinstance(row.get("arguments"), Mapping):
        out["arguments"] = {
            name: {**args, "arg_0": [args["arg_0"]]} if "arg_0" in args else args
            for name, args in row["arguments"].items()
        }
    return out
