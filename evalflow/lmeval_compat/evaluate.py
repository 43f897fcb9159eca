"""``evalflow.simple_evaluate`` and lm-eval's ``evaluate(lm, task_dict)``: lm-eval 0.4.13's
signatures, run by evalflow, returning lm-eval's results dict (with ``samples`` when logged, in the
form lm-eval returns them), so a notebook changes one import.

    from evalflow import simple_evaluate
    r = simple_evaluate(model="hf", model_args="pretrained=org/model,dtype=float32", tasks=["arc_easy"], limit=10)

The arguments go through the same translation as ``python -m evalflow lm-eval`` (its refusals
too): each becomes the lm-eval flag that sets it (:func:`lm_eval_argv`). Tasks given as config
dicts or lm-eval objects are written as task YAML in a scratch folder (task_specs.py); a model
object runs as ``evaluate(model=obj)`` does. ``evalflow.evaluate`` stays the native API.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import random
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalflow.config.override_words import split_word
from evalflow.errors import ConfigError
from evalflow.lmeval_compat.args import hydra_value, parse_model_args
from evalflow.lmeval_compat.execute import execute
from evalflow.lmeval_compat.lm_models import build_lm_eval_model, needs_lm_eval
from evalflow.lmeval_compat.parser import parse
from evalflow.lmeval_compat.served_args import recorded_model_args
from evalflow.lmeval_compat.task_manager import ManagerSettings, include_paths, manager_settings, task_items
from evalflow.lmeval_compat.task_specs import task_docs, write_task_docs
from evalflow.lmeval_compat.translate import translate
from evalflow.output.results import with_samples
from evalflow.output.run_paths import samples_file


def simple_evaluate(
    model: Any,
    model_args: str | Mapping[str, Any] | None = None,
    tasks: list[Any] | str | None = None,
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
    random_seed: int | None = 0,
    numpy_random_seed: int | None = 1234,
    torch_random_seed: int | None = 1234,
    fewshot_random_seed: int | None = 1234,
    confirm_run_unsafe_code: bool = False,
    metadata: Mapping[str, Any] | None = None,
    *,
    include_path: str | list[str] | None = None,
    output_dir: str | None = None,
) -> dict[str, Any]:
    """lm-eval's ``simple_evaluate``. ``tasks``: names, config dicts, lm-eval Task objects;
    ``task_manager``: lm-eval's or evalflow's (its folders, ``include_defaults`` and metadata);
    ``include_path`` (evalflow's) adds task folders; ``output_dir``: keep the run folder there."""
    given = dict(locals())
    if not tasks:
        raise ConfigError("simple_evaluate: tasks is required (names, groups, tags, YAML paths or config dicts)")
    if limit is not None and samples is not None:
        raise ConfigError("simple_evaluate: give limit or samples, not both (lm-eval refuses both too)")
    seed_globals(random_seed, numpy_random_seed, torch_random_seed)
    manager = manager_settings(task_manager)
    manager = dataclasses.replace(manager, include_path=(*manager.include_path, *include_paths(include_path)))
    # lm-eval reads metadata= only when it builds the TaskManager itself; a given one brings its own
    given["metadata"] = manager.metadata if task_manager is not None else metadata
    lm = model
    if isinstance(model, str) and needs_lm_eval(model, model_args):
        lm = build_lm_eval_model(
            model, model_args, {"batch_size": batch_size, "max_batch_size": max_batch_size, "device": device}
        )
    results = _run(given, [tasks] if isinstance(tasks, str) else list(tasks), manager, lm, output_dir)
    if isinstance(model, str):  # lm-eval's record of a model it builds by name: its model_args as passed
        results["config"] = {
            **results.get("config", {}),
            "model": model,
            "model_args": model_args_as_passed(model_args),
        }
    if evaluation_tracker is not None:  # what lm-eval's simple_evaluate tells the tracker; the caller saves
        evaluation_tracker.general_config_tracker.log_experiment_args(
            model_source=model if isinstance(model, str) else "CUSTOM",
            model_args=model_args_as_passed(model_args) if model_args else "",
            system_instruction=system_instruction,
            chat_template=results.get("chat_template") if apply_chat_template else None,
            fewshot_as_multiturn=fewshot_as_multiturn,
        )
    return results


def evaluate(
    lm: Any,
    task_dict: Mapping[Any, Any],
    limit: int | float | None = None,
    samples: Mapping[str, list[int]] | None = None,
    cache_requests: bool = False,
    rewrite_requests_cache: bool = False,
    bootstrap_iters: int | None = 100000,
    write_out: bool = False,
    log_samples: bool = True,
    system_instruction: str | None = None,
    apply_chat_template: bool | str = False,
    fewshot_as_multiturn: bool = False,
    verbosity: str = "INFO",
    confirm_run_unsafe_code: bool = False,
    *,
    output_dir: str | None = None,
) -> dict[str, Any]:
    """lm-eval's ``evaluator.evaluate(lm, task_dict)``: the tasks of ``TaskManager.load`` or
    ``get_task_dict`` (lm-eval's or evalflow's) run by their configs through evalflow's stages, with
    the model object ``lm``; returns lm-eval's results dict."""
    if limit is not None and samples is not None:
        raise ConfigError("evaluate: give limit or samples, not both (lm-eval refuses both too)")
    items, manager = task_items(task_dict)
    if not items:
        raise ConfigError("evaluate: the task dict holds no task")
    args = dict(locals())
    given = {**SIMPLE_DEFAULTS, **{k: v for k, v in args.items() if k in SIMPLE_DEFAULTS}}
    given.update(bootstrap_iters=bootstrap_iters or 0, metadata=manager.metadata)  # lm-eval's Task objects carry theirs
    return _run(given, items, manager, lm, output_dir)


def model_args_as_passed(model_args: str | Mapping[str, Any] | None) -> str | dict[str, Any]:
    """``model_args`` as lm-eval's simple_evaluate records it in results.json's ``config``: the string
    as given (``""`` for None), a mapping as a dict; but a secret's value (served_args: SECRETS,
    HUB_SECRETS) replaced by where it was put, in its place, since results.json is shared."""
    if model_args is None:
        return ""
    given = parse_model_args(model_args)
    shown = recorded_model_args(given)
    if not isinstance(model_args, str):
        return shown
    if shown == given:
        return model_args
    if model_args.strip().startswith("{"):
        return json.dumps(shown)
    hidden = {key for key in given if shown[key] != given[key]}
    words = [split_word(part) for part in model_args.split(",")]  # where simple_parse_args_string splits it
    return ",".join(f"{key}={shown[key.strip()]}" if key.strip() in hidden else f"{key}={rest}" for key, rest in words)


def seed_globals(python: int | None, numpy: int | None, torch: int | None) -> None:
    """Seed the process's global generators as lm-eval's ``simple_evaluate`` does (a seed of None:
    left as it is), for the caller's code that draws from them after the call; evalflow's stages
    draw from none of them (their one seed is the run's ``seed``, passed as ``--seed``)."""
    if python is not None:
        random.seed(python)
    if numpy is not None:
        import numpy as np

        np.random.seed(numpy)
    if torch is not None and "torch" in sys.modules:  # lm-eval imports torch; nothing here needs it
        sys.modules["torch"].manual_seed(torch)


def _run(given: dict[str, Any], items: list[Any], manager: ManagerSettings, model: Any, output_dir: str | None) -> Any:
    """Run lm-eval's task specs with ``given`` (simple_evaluate's arguments) through one translation;
    ``model``: a name, or an object run in place of the translation's preset."""
    with tempfile.TemporaryDirectory(prefix="evalflow-simple-") as scratch:
        docs = task_docs(items)
        paths = list(manager.include_path)
        if docs.docs:
            paths.append(str(write_task_docs(docs, Path(scratch) / "specs")))
        by_name = isinstance(model, str)
        tr = translate(parse(lm_eval_argv(given, list(docs.names), paths[:1], model if by_name else None)))
        manager.check_names([item for item in items if isinstance(item, str)])  # after the refusals of flags
        overrides = [o for o in tr.overrides if by_name or not o.startswith("model.")]
        if len(paths) > 1:
            overrides.append(f"include_path={hydra_value(paths)}")
        if (paths or docs.links) and not any(o.startswith("trust_task_code=") for o in overrides):
            overrides.append("trust_task_code=true")  # folders the caller named, functions it imported: lm-eval's trust
        if given["task_manager"] is not None:  # lm-eval: a given TaskManager's metadata alone, no model args
            overrides = [o for o in overrides if not o.startswith("metadata=")]
            overrides += [f"metadata={hydra_value(dict(manager.metadata))}"] if manager.metadata else []
        # lm-eval's simple_evaluate records these as passed (its command line: as its flags typed them)
        given_config = {"batch_size": given["batch_size"], "limit": given["limit"], "use_cache": given["use_cache"]}
        tr = dataclasses.replace(tr, overrides=tuple(overrides), lm_config={**tr.lm_config, **given_config})
        folder = Path(output_dir) if output_dir else Path(scratch) / "run"
        results = execute(tr, folder, model=None if by_name else model)
        if given["log_samples"] or given["predict_only"]:  # lm-eval returns them: read back the samples files
            results = with_samples(results, lambda task: _rows(samples_file(folder, task)))
    return results


def _rows(path: Path) -> list[dict[str, Any]]:
    return [_in_memory(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _in_memory(row: dict[str, Any]) -> dict[str, Any]:
    """A samples-file record as lm-eval's ``evaluate`` returns it, before its tracker writes it:
    ``arguments`` a list of argument tuples (the file's ``{"gen_args_0": {"arg_0": ...}}``), each
    response a tuple where the file has a list (``(loglikelihood, is_greedy)``). So lm-eval's
    ``EvaluationTracker.save_results_samples`` writes the file from it as it writes its own."""
    arguments = [tuple(args[f"arg_{j}"] for j in range(len(args))) for args in row["arguments"].values()]

    def tuples(value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value

    resps = [[tuples(r) for r in rs] for rs in row["resps"]]
    return {**row, "arguments": arguments, "resps": resps, "filtered_resps": [tuples(r) for r in row["filtered_resps"]]}


# simple_evaluate's arguments whose lm-eval flag has another name (lm_eval_argv writes them so); the
# others are their flag's namesakes (docs/lm-eval-surface.md marks each as its flag is marked)
ARGUMENT_FLAGS = {
    "rewrite_requests_cache": "cache_requests",
    "delete_requests_cache": "cache_requests",
    **dict.fromkeys(("random_seed", "numpy_random_seed", "torch_random_seed", "fewshot_random_seed"), "seed"),
}


def lm_eval_argv(given: Mapping[str, Any], tasks: list[str], include: list[str], model: str | None) -> list[str]:
    """The lm-eval command-line words of the keyword arguments (so both take one translation);
    ``model`` None: a model object runs (``dummy`` holds the preset's place, no model_args)."""
    argv = ["--model", model or "dummy", "--tasks", ",".join(tasks)]
    model_args = given["model_args"]
    if model_args and model is not None:
        # a string as simple_evaluate reads it (simple_parse_args_string), not as the command line does
        argv += ["--model_args", json.dumps(parse_model_args(model_args))]
    gen = given["gen_kwargs"]
    if gen:
        argv += ["--gen_kwargs", gen if isinstance(gen, str) else json.dumps(dict(gen))]
    if given["metadata"]:  # the run-level metadata setting, as lm-eval's --metadata sets it
        argv += ["--metadata", json.dumps(dict(given["metadata"]))]
    seeds = [given[k] for k in ("random_seed", "numpy_random_seed", "torch_random_seed", "fewshot_random_seed")]
    argv += ["--seed", ",".join("None" if s is None else str(s) for s in seeds)]
    for flag, value in (
        ("num_fewshot", given["num_fewshot"]),
        ("batch_size", given["batch_size"]),
        ("max_batch_size", given["max_batch_size"]),
        ("device", given["device"] if model is not None else None),  # an object's device is its own
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
    if given["check_integrity"]:
        argv.append("--check_integrity")
    for flag, word in (("delete_requests_cache", "delete"), ("rewrite_requests_cache", "refresh")):
        if given[flag]:  # lm-eval's command line sets these two arguments with --cache_requests WORD
            argv += ["--cache_requests", word]
            break
    else:
        if given["cache_requests"]:
            argv.append("--cache_requests")
    return argv


# simple_evaluate's defaults: lm-eval's evaluate() takes a subset of its arguments
SIMPLE_DEFAULTS = {
    name: p.default for name, p in inspect.signature(simple_evaluate).parameters.items() if p.default is not p.empty
}
