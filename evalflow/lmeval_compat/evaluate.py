"""``evalflow.simple_evaluate``: lm-eval 0.4.13's ``simple_evaluate`` signature, run by evalflow,
returning lm-eval's results dict (with ``samples`` when logged), so a notebook changes one import.

    from evalflow import simple_evaluate
    r = simple_evaluate(model="hf", model_args="pretrained=org/model,dtype=float32", tasks=["arc_easy"], limit=10)

The arguments go through the same translation as ``python -m evalflow lm-eval`` (its refusals
too); a model object runs as ``evaluate(model=obj)`` does. ``evalflow.evaluate`` stays the native API.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalflow.errors import ConfigError
from evalflow.lmeval_compat.args import hydra_value
from evalflow.lmeval_compat.execute import execute
from evalflow.lmeval_compat.parser import parse
from evalflow.lmeval_compat.translate import translate
from evalflow.output.results import with_samples
from evalflow.output.run_paths import samples_file

# keyword arguments that are flags of lm-eval's command line: given, they become those flags, so
# translate.py's one table (its settings, LOGGER_FLAGS, REFUSED_FLAGS) decides for both front doors
_AS_FLAGS = {
    "metadata": lambda value: ["--metadata", json.dumps(dict(value))],
    "check_integrity": lambda value: ["--check_integrity"],
    "rewrite_requests_cache": lambda value: ["--cache_requests", "refresh"],
    "delete_requests_cache": lambda value: ["--cache_requests", "delete"],
}


def simple_evaluate(
    model: Any,
    model_args: str | Mapping[str, Any] | None = None,
    tasks: list[str] | str | None = None,
    num_fewshot: int | None = None,
    batch_size: int | str | None = None,
    max_batch_size: int | None = None,
    device: str | None = None,
    use_cache: str | None = None,
    cache_requests: bool = False,
    rewrite_requests_cache: bool = False,
    delete_requests_cache: bool = False,
    limit: int | float | None = None,
    samples: Mapping[str, list[int]] | None = None,
    bootstrap_iters: int = 100000,
    check_integrity: bool = False,
    write_out: bool = False,
    log_samples: bool = True,
    evaluation_tracker: Any = None,
    system_instruction: str | None = None,
    apply_chat_template: bool | str = False,
    fewshot_as_multiturn: bool = True,
    gen_kwargs: str | Mapping[str, Any] | None = None,
    task_manager: Any = None,
    verbosity: str | None = None,
    predict_only: bool = False,
    random_seed: int = 0,
    numpy_random_seed: int = 1234,
    torch_random_seed: int = 1234,
    fewshot_random_seed: int = 1234,
    confirm_run_unsafe_code: bool = False,
    metadata: Mapping[str, Any] | None = None,
    *,
    include_path: str | None = None,
    output_dir: str | None = None,
) -> dict[str, Any]:
    """lm-eval's ``simple_evaluate``; ``include_path`` (or a ``task_manager`` with one) adds task folders."""
    given = dict(locals())
    if not tasks:
        raise ConfigError("simple_evaluate: tasks is required (names, groups, tags or YAML paths)")
    paths = [include_path] if include_path else list(getattr(task_manager, "include_path", None) or [])
    argv = _argv(
        given,
        [tasks] if isinstance(tasks, str) else list(tasks),
        paths[:1],
        "dummy" if not isinstance(model, str) else model,
    )
    tr = translate(parse(argv))
    if len(paths) > 1:
        tr = dataclasses.replace(tr, overrides=(*tr.overrides, f"include_path={hydra_value(paths)}"))
    if not isinstance(model, str):  # an object: no preset's keys
        tr = dataclasses.replace(tr, overrides=tuple(o for o in tr.overrides if not o.startswith("model.")))
    with tempfile.TemporaryDirectory(prefix="evalflow-simple-") as scratch:
        folder = Path(output_dir) if output_dir else Path(scratch) / "run"
        results = execute(tr, folder, model=None if isinstance(model, str) else model)
        if log_samples or predict_only:  # lm-eval returns them: read back the run folder's samples files
            results = with_samples(results, lambda task: _rows(samples_file(folder, task)))
    if evaluation_tracker is not None:  # lm-eval's EvaluationTracker: the script saves or pushes with it later
        evaluation_tracker.general_config_tracker.log_experiment_args(
            model_source=model if isinstance(model, str) else "CUSTOM",
            model_args=model_args or "",
            system_instruction=system_instruction,
            chat_template=results.get("chat_template"),
            fewshot_as_multiturn=fewshot_as_multiturn,
        )
    return results


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _argv(given: Mapping[str, Any], tasks: list[str], include: list[str], model: str) -> list[str]:
    """The lm-eval command-line words of the keyword arguments (so both take one translation)."""
    argv = ["--model", model, "--tasks", ",".join(tasks)]
    model_args = given["model_args"]
    if model_args and isinstance(given["model"], str):
        argv += ["--model_args", model_args if isinstance(model_args, str) else json.dumps(dict(model_args))]
    gen = given["gen_kwargs"]
    if gen:
        argv += ["--gen_kwargs", gen if isinstance(gen, str) else json.dumps(dict(gen))]
    seeds = [given[k] for k in ("random_seed", "numpy_random_seed", "torch_random_seed", "fewshot_random_seed")]
    argv += ["--seed", ",".join("None" if s is None else str(s) for s in seeds)]
    for flag, value in (
        ("num_fewshot", given["num_fewshot"]),
        ("batch_size", given["batch_size"]),
        ("max_batch_size", given["max_batch_size"]),
        ("device", given["device"]),
        ("use_cache", given["use_cache"]),
        ("limit", given["limit"]),
        ("bootstrap_iters", given["bootstrap_iters"]),
        ("system_instruction", given["system_instruction"]),
        ("verbosity", given["verbosity"]),
        ("include_path", include[0] if include else None),
        ("samples", json.dumps(dict(given["samples"])) if given["samples"] else None),
    ):
        if value is not None:
            argv += [f"--{flag}", str(value)]
    if given["apply_chat_template"]:
        argv += ["--apply_chat_template"] + (
            [] if given["apply_chat_template"] is True else [given["apply_chat_template"]]
        )
        argv += ["--fewshot_as_multiturn", str(bool(given["fewshot_as_multiturn"]))]
    for flag in ("log_samples", "predict_only", "write_out", "confirm_run_unsafe_code"):
        if given[flag]:
            argv.append(f"--{flag}")
    if given["cache_requests"]:
        argv.append("--cache_requests")
    for name, words in _AS_FLAGS.items():
        if given[name]:
            argv += words(given[name])
    return argv
