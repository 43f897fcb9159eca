"""lm-eval 0.4.13's output layout (``loggers/evaluation_tracker.py``), written from an evalflow run:

    <output_path>/<model_name_sanitized>/results_<date>.json
    <output_path>/<model_name_sanitized>/samples_<task>_<date>.jsonl     (with --log_samples)

or, when ``output_path`` ends in ``.json``, ``<stem>_<date>.json`` beside it and the samples in its
folder. ``<date>`` is lm-eval's ``datetime.now().isoformat()`` with ``-`` for ``:``. The results file
is results.json plus lm-eval's ``task_hashes`` (per task, the hash of its samples' doc, prompt and
target hashes; ``{}`` without samples), placed where lm-eval's tracker puts it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from evalflow.output.run_info import hash_string, model_name, sanitize_model_name
from evalflow.output.run_paths import lmeval_date_id, lmeval_output_files, lmeval_samples_name, samples_file


def task_hashes(run_folder: Path, tasks: list[str]) -> dict[str, str]:
    """lm-eval's ``task_hashes``, from the run folder's samples files (only tasks that have one)."""
    out = {}
    for task in tasks:
        path = samples_file(run_folder, task)
        if path.is_file():
            rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            out[task] = hash_string("".join(r["doc_hash"] + r["prompt_hash"] + r["target_hash"] for r in rows))
    return out


def with_task_hashes(results: Mapping[str, Any], hashes: Mapping[str, str]) -> dict[str, Any]:
    """``results`` with ``task_hashes`` just before ``model_source`` (lm-eval's key order)."""
    out: dict[str, Any] = {}
    for key, value in results.items():
        if key == "model_source":
            out["task_hashes"] = dict(hashes)
        out[key] = value
    out.setdefault("task_hashes", dict(hashes))
    return out


def _with_model_args(metadata: Mapping[str, Any] | None, model_args: Mapping[str, Any]) -> dict[str, Any]:
    """lm-eval's ``task metadata | model args``, with ``config_source`` still last."""
    meta = dict(metadata or {})
    source = meta.pop("config_source", None)
    return {**meta, **model_args, **({} if source is None else {"config_source": source})}


def as_command_gave(
    results: Mapping[str, Any],
    lm_model: str,
    lm_model_args: Mapping[str, Any],
    recorded: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``config.model``, ``config.model_args`` and ``model_source`` as lm-eval writes them: its
    model name (``local-completions``, not the preset), the model args as given (evalflow's whole
    model config stays under ``evalflow.model``), and ``recorded``: the command's four seeds and
    gen_kwargs as lm-eval records them (translate.recorded_config)."""
    out = dict(results)
    if "configs" in out:  # lm-eval's TaskManager merges the model args into every task's metadata
        out["configs"] = {
            task: {**config, "metadata": _with_model_args(config.get("metadata"), lm_model_args)}
            for task, config in out["configs"].items()
        }
    if "config" in out:
        config = {**out["config"], "model": lm_model, "model_args": dict(lm_model_args)}
        out["config"] = {k: (recorded or {}).get(k, v) for k, v in config.items()}  # lm-eval's seeds, gen_kwargs
    if "model_source" in out:
        out["model_source"] = lm_model
    return out


def write_layout(
    output_path: str | Path,
    results: Mapping[str, Any],
    run_folder: Path,
    lm_model: str,
    lm_model_args: Mapping[str, Any],
    now: datetime | None = None,
) -> list[Path]:
    """Write lm-eval's files for a finished run; returns their paths. The model folder is named
    from lm-eval's model args as lm-eval names it (``pretrained``, ``model``, ...)."""
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
            written.append(Path(shutil.copyfile(source, folder / lmeval_samples_name(task, date_id))))
    return written
