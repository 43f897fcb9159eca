"""lm-eval's parsed flags → one evalflow run: a model preset, tasks and Hydra overrides.

The overrides are exactly what ``python -m evalflow`` would be given, so :meth:`Translation.native`
is the equivalent native command, and :func:`evalflow.evaluate` runs the same config. A flag that
evalflow cannot honour is refused by name with the reason (all of them at once); none is dropped.
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evalflow.errors import ConfigError
from evalflow.lmeval_compat.args import batch_size_value, hydra_value, merge_kv
from evalflow.lmeval_compat.model_map import MODELS, REFUSED_MODELS, model_args, model_overrides
from evalflow.lmeval_compat.served_args import recorded_model_args
from evalflow.lmeval_compat.task_settings import matched_tasks, task_settings

# flags evalflow cannot honour, and why (docs/lm-eval-migration.md says the same): none today
REFUSED_FLAGS: dict[str, str] = {}
# the flags that log a run or push it elsewhere, given as lm-eval's key=value words or JSON: after the
# run they are handed to evalflow.tracking.lmeval_loggers (W&B, Trackio, the Hugging Face Hub)
LOGGER_FLAGS = {
    "wandb_args": "wandb.init's arguments (project, name, job_type, group, ..., step): the run is logged to W&B as "
    "lm-eval's WandbLogger logs it (results, tables, samples)",
    "wandb_config_args": "merged into the W&B run's config, as lm-eval's WandbLogger does",
    "trackio_args": "trackio.init's arguments (project, name, group, space_id, ..., step): the run is logged to "
    "Trackio as lm-eval's TrackioLogger logs it",
    "hf_hub_log_args": "lm-eval's EvaluationTracker arguments (hub_results_org, details_repo_name, "
    "push_results_to_hub, push_samples_to_hub, public_repo, gated, ...): results and samples pushed to the Hub "
    "as lm-eval pushes them (HF_TOKEN)",
}


@dataclass(frozen=True)
class Translation:
    """One lm-eval command as an evalflow run."""

    lm_model: str  # lm-eval's --model
    lm_model_args: dict[str, Any]  # as lm-eval parsed them (they name the model in its output layout)
    preset: str
    tasks: tuple[str, ...]
    overrides: tuple[str, ...]
    output_path: str | None = None
    show_config: bool = False
    write_out: bool = False
    check_integrity: bool = False  # each task validated before the run (lmeval_compat.before_run)
    verbosity: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)  # what a flag maps to, printed once
    # results.json config fields as lm-eval records the command (its four seeds, gen_kwargs)
    lm_config: dict[str, Any] = field(default_factory=dict)
    loggers: dict[str, dict[str, Any]] = field(default_factory=dict)  # LOGGER_FLAGS given: their key=values
    delete_requests: bool = False  # --cache_requests delete: the instances stage's entries deleted first
    # the secret model args (auth_token, header, a hub token) by the environment variable the model or
    # huggingface_hub reads them from: set by execute(), never in the overrides, the notes or a repr
    environment: dict[str, str] = field(default_factory=dict, repr=False)

    def native(self) -> str:
        """The equivalent ``python -m evalflow`` command."""
        task = self.tasks[0] if len(self.tasks) == 1 else "[" + ",".join(self.tasks) + "]"
        words = [f"model={self.preset}", f"task={task}", *self.overrides]
        return "python -m evalflow " + " ".join(shlex.quote(w) for w in words)


def translate(ns: argparse.Namespace) -> Translation:
    """The run lm-eval's flags describe; raises one :class:`ConfigError` naming every refused flag."""
    refused = [f"--{name}: {why}" for name, why in REFUSED_FLAGS.items() if getattr(ns, name) is not None]
    name = ns.model or "hf"  # lm-eval's default model
    if name in REFUSED_MODELS or name not in MODELS:
        refused.append(
            f"--model {name}: "
            + REFUSED_MODELS.get(
                name,
                f"evalflow maps lm-eval's models {', '.join(sorted(MODELS))}; a model of your own is "
                "model.type=pkg.module:Class on the native command line",
            )
        )
        raise ConfigError(_refusal(refused))
    mapped = MODELS[name]
    lm_args = {} if ns.model_args is None else model_args(ns.model_args)
    secrets: dict[str, str] = {}
    overrides, notes = model_overrides(mapped, lm_args, ns, refused, secrets)
    settings, more_notes = _settings(ns, refused)
    task_overrides, task_notes = task_settings(ns)  # lm-eval's task library, trusted folders, the sandbox
    if refused:
        raise ConfigError(_refusal(refused))
    if not ns.tasks:
        raise ConfigError(
            "--tasks is required (lm-eval's names, comma lists, groups, tags or YAML paths); "
            "`python -m evalflow ls` lists them"
        )
    tasks = matched_tasks([t for word in ns.tasks for t in word.split(",") if t], ns.include_path)
    given_metadata = merge_kv(ns.metadata, "--metadata") if ns.metadata is not None else {}
    metadata = {**recorded_model_args(lm_args), **given_metadata}  # secrets only in the environment
    if metadata:  # lm-eval's TaskManager(metadata=model_args | metadata): every task's metadata
        settings.append(f"metadata={hydra_value(metadata)}")
    return Translation(
        name,
        recorded_model_args(lm_args),  # secrets out of results.json
        mapped.preset,
        tasks,
        tuple(overrides + settings + task_overrides),
        ns.output_path,
        bool(ns.show_config),
        bool(ns.write_out),
        bool(ns.check_integrity),
        ns.verbosity,
        tuple(notes + more_notes + task_notes),
        recorded_config(ns),
        {flag: merge_kv(getattr(ns, flag), f"--{flag}") for flag in LOGGER_FLAGS if getattr(ns, flag) is not None},
        ns.cache_requests == "delete",
        secrets,
    )


def recorded_config(ns: Any) -> dict[str, Any]:
    """results.json's ``config`` fields as lm-eval's command line records them (its EvaluatorConfig's
    values, not evalflow's settings): ``gen_kwargs`` (``{}`` when not given), the four seeds
    (``0,1234,1234,1234`` when not given; ``None`` where a slot is left unseeded), ``batch_size`` the
    text given (else 1), ``limit`` a float, ``use_cache`` the path given (else None); and the
    top-level ``fewshot_as_multiturn`` (None unless given, True with a chat template). ``batch_size``
    and ``limit`` from a ``--config`` file keep its YAML types (``limit: 3`` is 3), as lm-eval's
    EvaluatorConfig keeps them."""
    from_file = getattr(ns, "from_file", {})  # run_file.with_run_file's: absent without --config
    seeds = lm_eval_seeds(ns.seed or "0,1234,1234,1234")
    gen = merge_kv(ns.gen_kwargs, "--gen_kwargs") if ns.gen_kwargs is not None else {}
    multiturn = ns.fewshot_as_multiturn
    return {
        "gen_kwargs": gen,
        **dict(zip(("random_seed", "numpy_seed", "torch_seed", "fewshot_seed"), seeds)),
        "batch_size": from_file.get("batch_size", ns.batch_size or 1),
        "batch_sizes": [],
        "limit": from_file.get("limit", None if ns.limit is None else float(ns.limit)),
        "use_cache": ns.use_cache,
        "fewshot_as_multiturn": (
            multiturn.lower() in ("true", "1", "yes")
            if multiturn is not None
            else True
            if ns.apply_chat_template
            else None
        ),
    }


def _refusal(refused: list[str]) -> str:
    return (
        "evalflow lm-eval cannot honour "
        + ("this flag" if len(refused) == 1 else f"{len(refused)} flags")
        + ": "
        + " | ".join(refused)
    )


# lm-eval's flags that set a run setting, and the setting of evalflow/config/schema.py each sets (the
# run's one declaration, which types and checks the value as any run's override), in the order the
# native command writes them; tests/lmeval_compat/test_flag_settings.py checks each is declared there
SETTING_FLAGS = {
    "num_fewshot": "num_fewshot",
    "batch_size": "batch_size",
    "max_batch_size": "max_batch_size",
    "limit": "limit",
    "samples": "samples",
    "log_samples": "log_samples",
    "predict_only": "predict_only",
    "include_path": "include_path",
    "gen_kwargs": "gen_kwargs",
    "apply_chat_template": "apply_chat_template",
    "fewshot_as_multiturn": "fewshot_as_multiturn",
    "system_instruction": "system_instruction",
    "seed": "seed",
    "bootstrap_iters": "bootstrap_iters",
    "confirm_run_unsafe_code": "confirm_unsafe_code",
    "use_cache": "cache_dir",
}
# the flags that name the model (its preset and keys), and what the front door does with the others
MODEL_FLAGS = {
    "model": "the model preset (conf/model/) lm-eval's model maps to",
    "model_args": "model.KEY=VALUE for each key",
    "device": "model.device",
    "trust_remote_code": "model.trust_remote_code",
}
OTHER_FLAGS = {
    "config": "lm-eval's YAML run file: its keys give the flags not given on the command line (which win)",
    "metadata": "the run setting metadata, over the model args (lm-eval's TaskManager metadata: model_args | metadata)",
    "tasks": "task=[...], with task_library=[lm_eval] (lm-eval's own task names); glob patterns (mmlu_*) "
    "expanded over the index as lm-eval expands them; a folder or YAML named: "
    "trust_task_code=true, as lm-eval trusts it",
    "output_path": "lm-eval's output layout is written there, besides the run folder",
    "show_config": "the results, as JSON, are printed",
    "write_out": "each task's document 0 (its prompt, target and first request) logged to stderr before the run, "
    "as lm-eval logs it",
    "check_integrity": "each task validated before the run, as `python -m evalflow validate` validates it; the "
    "first that fails stops the run with its paragraph, before any model call",
    "verbosity": "the level of evalflow's log and of the lines it logs as lm-eval does (--write_out's)",
    "cache_requests": "true: prompts and requests are always cached, keyed by content; refresh: recompute=requests "
    "(recompute=all without --use_cache); delete: the cache's requests (instances stage) deleted before the run",
}

# how an accepted flag's effect differs from lm-eval's (docs/lm-eval-surface.md's *differs* rows)
FLAG_DIFFERENCES = {
    "batch_size": "`auto:N` is `auto` (evalflow sizes each request type anyway); not given, evalflow's "
    "`auto` (lm-eval's 1); answers do not depend on it. With `auto`, the results file's `config.batch_sizes` is "
    "`[]` and the table's header says `batch_size: auto` alone (lm-eval's HFLM lists the sizes it detected, "
    "e.g. `[64]`, which depend on the GPU's free memory, not on the run)",
    "device": "not given: `auto` (CUDA, else MPS, else the CPU; lm-eval's HFLM takes `cuda`); ignored for "
    "served models and vLLM, as lm-eval ignores it there",
    "seed": "a None slot keeps the setting's default (lm-eval leaves that generator unseeded: its draws differ "
    "from run to run; evalflow's stages are pure and cached)",
    "write_out": "a multimodal task's images show as evalflow's image references (lm-eval prints its PIL images)",
    "check_integrity": "lm-eval 0.4.13 runs pytest on tests/test_version_stable.py of an lm-eval source checkout "
    "(installed from PyPI it has none and stops with FileNotFoundError); evalflow has no suite of lm-eval's task "
    "versions, so it runs the nearest real check: `python -m evalflow validate` on each task",
}


def _limit(text: str) -> int | float:
    limit = float(text)
    return int(limit) if limit == int(limit) else limit


def _flag_value(flag: str, ns: argparse.Namespace, refused: list[str]) -> Any:
    """The run setting's value that ``flag`` gives, lm-eval's typing kept; None when it gives none."""
    word = getattr(ns, flag)
    if flag == "log_samples":  # lm-eval's default: no samples files
        return bool(ns.log_samples or ns.predict_only)
    if word is None or word is False:
        return None
    convert: dict[str, Callable[[Any], Any]] = {
        "num_fewshot": int,
        "batch_size": batch_size_value,
        "max_batch_size": int,
        "limit": _limit,
        "samples": lambda text: json.loads(text) if text.lstrip().startswith("{") else text,
        "include_path": lambda path: [path],
        "gen_kwargs": lambda words: merge_kv(words, "--gen_kwargs"),
        "apply_chat_template": lambda text: True if text == "true" else text,
        "fewshot_as_multiturn": lambda text: text.lower() in ("true", "1", "yes"),
        "bootstrap_iters": int,
    }
    return convert.get(flag, lambda value: value)(word)


def _settings(ns: argparse.Namespace, refused: list[str]) -> tuple[list[str], list[str]]:
    """The run settings of the other flags, as overrides, and notes on what they map to."""
    out = {SETTING_FLAGS[flag]: _flag_value(flag, ns, refused) for flag in SETTING_FLAGS}
    out = {setting: value for setting, value in out.items() if value is not None}
    notes: list[str] = []
    if ns.seed is not None:  # one flag, four settings
        out.pop("seed")
        out.update(_seed_settings(ns.seed, notes))
    if ns.use_cache is not None:  # lm-eval's response cache: answers read and written there
        notes.append(
            f"--use_cache {ns.use_cache}: model answers are read from and written to this folder, as lm-eval's "
            "response cache; evalflow keeps its prompts and scores there too (cache_dir)"
        )
    else:  # lm-eval reads no cached answer without it: computed anew (and written to the default cache)
        out["recompute"] = "answers"
    if ns.cache_requests is not None:
        _cache_requests(ns.cache_requests, refused, notes, out)
    return [f"{k}={hydra_value(v)}" for k, v in out.items()], notes


# lm-eval's --seed slots (python,numpy,torch,fewshot), its defaults, and the setting each sets
SEED_SLOTS = (
    ("python", 0, "random_seed"),
    ("numpy", 1234, "numpy_seed"),
    ("torch", 1234, "torch_seed"),
    ("fewshot", 1234, "seed"),
)


def lm_eval_seeds(text: str) -> list[int | None]:
    """lm-eval's ``--seed`` parsed as it parses it (``_int_or_none_list_arg_type(3, 4, ...)``): one
    value for all four, three (the fewshot seed's default added) or four; ``None`` leaves one unseeded."""
    try:
        items = [None if v.strip().lower() == "none" else int(v) for v in text.split(",")]
    except ValueError:
        raise ConfigError(
            f"--seed {text}: each value must be an integer or None (python,numpy,torch,fewshot)"
        ) from None
    if len(items) == 1:
        return items * 4
    if len(items) not in (3, 4):
        raise ConfigError(f"--seed {text}: give one value, or 3 or 4 (python,numpy,torch[,fewshot]), integers or None")
    return items + [slot[1] for slot in SEED_SLOTS[len(items) :]]


def _seed_settings(text: str, notes: list[str]) -> dict[str, int]:
    """The run settings ``--seed`` sets: each slot's setting (schema.py) keyed into the stages it
    reaches. A ``None`` slot keeps the setting's default: lm-eval leaves that generator unseeded (a
    different draw each run), while evalflow's stages are pure and cached."""
    out: dict[str, int] = {}
    for (slot, _, setting), value in zip(SEED_SLOTS, lm_eval_seeds(text)):
        if value is None:
            notes.append(
                f"--seed {text}: lm-eval leaves the {slot} seed unseeded (its draws differ from run to run); "
                f"evalflow's stages are pure and cached, so {setting} keeps its default"
                + (" (seed's value)" if setting == "torch_seed" else "")
            )
        else:
            out[setting] = value
    return out


def _cache_requests(value: str, refused: list[str], notes: list[str], out: dict[str, Any]) -> None:
    """lm-eval's request cache is evalflow's documents, few-shot contexts and requests (load_docs,
    fewshot, instances): always cached, keyed by content. ``refresh`` rebuilds and rewrites them
    (with the answers, already recomputed without --use_cache); ``delete`` removes the instances
    entries of the whole cache before the run (lmeval_compat.execute), as lm-eval deletes its files."""
    if value == "true":
        notes.append(
            "--cache_requests: evalflow caches prompts and requests (the instances stage) always, "
            "keyed by the task's content, so they are never stale"
        )
    elif value == "refresh":
        out["recompute"] = "all" if out.get("recompute") == "answers" else "requests"
    elif value == "delete":
        notes.append("--cache_requests delete: the cache's requests (instances stage entries) are deleted first")
    else:
        refused.append(f"--cache_requests {value}: choose from true, refresh, delete")


def flag_meaning(flag: str) -> str:
    """What the front door does with lm-eval's ``--flag`` (its name without dashes): the run
    setting it sets, the model key, or why it is refused; argparse's help and the lm-eval
    reference page say this."""
    if flag in SETTING_FLAGS:
        return f"the run setting {SETTING_FLAGS[flag]}"
    if flag in REFUSED_FLAGS:
        return f"refused: {REFUSED_FLAGS[flag]}"
    if flag in LOGGER_FLAGS:
        return LOGGER_FLAGS[flag]
    return MODEL_FLAGS.get(flag) or OTHER_FLAGS[flag]
