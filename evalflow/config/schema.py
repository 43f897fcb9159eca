"""The run's settings, declared once: :class:`RunSettings` names each setting with its type, its
default, its meaning, how its value is read (:mod:`evalflow.config.setting_parsers`) and whether the
task's stages see it. YAML under ``conf/`` holds values only.

Derived from this declaration: :data:`SETTINGS` (each setting as ``conf/`` and the command line give
it: name, OmegaConf type, default, help), Hydra's structured config :data:`RunConfig` (registered as
``base_config``, so ``conf/config.yaml`` composes on top of it and a mistyped override
``num_fewshot=five`` is refused by OmegaConf before anything runs), ``settings.settings_from_config``
(unset settings take these defaults; each field is parsed by its own parser), ``run.phases.task_settings``
(the stage settings, handed to every task's stages, hence in their cache keys), the report's names
for runs (not the inert settings), and an unknown setting's did-you-mean.
"""

from __future__ import annotations

import copy
import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore

from evalflow.config import setting_parsers as parse
from evalflow.config.prices import Prices
from evalflow.config.setting_parsers import RECOMPUTE, Parse

STAGE = "stage"  # role: an input of every task's stages, under its own name (so in their cache keys)
INERT = "inert"  # role: where, how fast or how verbosely a run runs, never what it computes: in no cache key,
# and not a name for a run (the report labels runs by the settings that differ)
_DECLARED = "evalflow.setting"  # the metadata key of a RunSettings field: its _Declared
_ANNOTATION = object()  # a setting's OmegaConf type is its field's annotation


@dataclass(frozen=True)
class Setting:
    """One run setting as ``conf/``, the command line (``key=value``) and ``evaluate(**settings)``
    give it: its key, its OmegaConf type (which refuses a mistyped value), default and meaning."""

    name: str
    type: Any
    default: Any
    help: str
    role: str | None = None  # STAGE, INERT, or None


@dataclass(frozen=True)
class _Declared:
    """A field of :class:`RunSettings`: the setting it reads (``key``) and its parser; ``setting``
    is None for a value derived from another setting (``chat_template_name`` from ``apply_chat_template``)."""

    key: str | None
    parse: Parse
    setting: Setting | None


def setting(
    default: Any, parser: Parse, help: str, *, role: str | None = None, conf: Any = _ANNOTATION, key: str = ""
) -> Any:
    """A run setting: its default, its parser and its meaning; ``conf``: its OmegaConf type, when not
    the field's annotation; ``key``: its name in ``conf/`` when not the field's name."""
    declared = Setting(key, conf, default, help, role)
    return field(metadata={_DECLARED: _Declared(key or None, parser, declared)})


def derived(key: str, parser: Parse) -> Any:
    """A value of :class:`RunSettings` parsed from the setting ``key``, not a setting of its own."""
    return field(metadata={_DECLARED: _Declared(key, parser, None)})


@dataclass(frozen=True)
class RunSettings:
    """A run's settings, validated and parsed (``settings.settings_from_config`` builds it); the
    comment above each is for readers of this file, ``help`` for the command line."""

    model: Mapping[str, Any] = setting(
        {"type": "dummy"},
        parse.model,
        "The model: `type` (dummy, hf, or a registered name) plus that model's arguments (conf/model/).",
        conf=dict[str, Any],
    )
    tasks: tuple[str, ...] = setting(
        "arith_mc",
        parse.tasks,
        "A task, group or tag name, a list of them, or a path to a task YAML.",
        conf=Any,
        key="task",
    )
    num_fewshot: int | None = setting(
        None, parse.num_fewshot, "Overrides every task's num_fewshot when set (lm-eval's --num_fewshot)."
    )
    limit: float | None = setting(
        None, parse.limit, "The first N documents of each task, or a fraction (< 1.0) of them.", role=STAGE
    )
    # task -> document indices
    samples: Mapping[str, tuple[int, ...]] | None = setting(
        None,
        parse.samples,
        "Instead of limit, the documents to evaluate per task (lm-eval's --samples): a mapping "
        "{task: [doc indices]}, its JSON text, or the path of a JSON file holding it.",
        conf=Any,
    )
    # task -> document indices: a partial run (the gate's rounds, stop_at_stderr's)
    subset: Mapping[str, tuple[int, ...]] | None = setting(
        None,
        parse.subset,
        "Of the documents limit/samples select, evaluate only these per task ({task: [doc indices]}): "
        "each keeps the prompt and few-shot examples the whole run gives it, so a later whole run "
        "reuses every answer; the results mark the run partial. The gate sets it for its rounds.",
        conf=Any,
    )
    # a precision target: stop each task once its metric's anytime-valid interval is this narrow
    stop_at_stderr: float | None = setting(
        None,
        parse.stop_at_stderr,
        "Evaluate each task in rounds over a seeded random order of its documents and stop it once its "
        "first 0/1 metric's anytime-valid 95% interval has half-width <= 1.96 x this (a standard error); "
        "the results mark a task stopped early as partial (n of N). A later whole run reuses every answer.",
    )
    predict_only: bool = setting(
        False, parse.boolean, "Generate and log samples, skip the metrics (lm-eval's --predict_only; metric bypass)."
    )
    # lm-eval's four seeds (--seed python,numpy,torch,fewshot): each keyed into the stages it reaches
    seed: int = setting(
        1234,
        parse.integer,
        "Seeds the few-shot sampler (lm-eval's fewshot_random_seed), and sampled generation unless torch_seed is set.",
        role=STAGE,
    )
    torch_seed: int | None = setting(
        None,
        parse.integer_or_none,
        "Seeds sampled generation and torch's global generator where task code runs (lm-eval's "
        "torch_random_seed); null: seed's value.",
        role=STAGE,
    )
    random_seed: int = setting(
        0,
        parse.integer,
        "Seeds Python's global random where task code runs: process_docs, process_results (lm-eval's random_seed).",
        role=STAGE,
    )
    numpy_seed: int = setting(
        1234,
        parse.integer,
        "Seeds NumPy's global generator where task code runs: process_docs, process_results (lm-eval's "
        "numpy_random_seed).",
        role=STAGE,
    )
    batch_size: int | str = setting(
        1,
        parse.batch_size,
        "Requests per model batch: an int, or auto (lm-eval's auto:N reads as auto).",
        role=INERT,
        conf=Any,
    )
    max_batch_size: int = setting(64, parse.integer, "The largest batch batch_size=auto tries.", role=INERT)
    # typed Any in conf/ so that an override replaces the mapping whole
    gen_kwargs: Mapping[str, Any] | None = setting(
        None,
        parse.gen_kwargs,
        "Overrides the generation_kwargs of generate_until tasks (lm-eval's --gen_kwargs): a mapping, or 'k=v,k2=v2'.",
        role=STAGE,
        conf=Any,
    )
    # Merged into every selected task's (and group's) metadata at selection, as lm-eval's TaskManager
    # does: custom_dataset functions receive it, and load_docs keys their output, so it is in no
    # other stage's key (a task that does not read it keeps its cache). typed Any: a mapping whole.
    metadata: Mapping[str, Any] | None = setting(
        None,
        parse.metadata,
        "Merged into every task's metadata (lm-eval's --metadata; RULER's max_seq_lengths): a mapping, or its "
        "JSON text; custom_dataset functions receive it as keyword arguments.",
        conf=Any,
    )
    # typed Any in conf/ so that a single path is not refused as a non-list
    include_path: tuple[str, ...] = setting(
        [],
        parse.paths,
        "Extra task folders, scanned after the built-in tasks/ (lm-eval's --include_path): a list, or one "
        "path (include_path=/dir).",
        conf=Any,
    )
    # typed Any in conf/ so that a single name is not refused as a non-list
    task_library: tuple[str, ...] = setting(
        [],
        parse.paths,
        "Installed task libraries (lm_eval: lm-eval's tasks) indexed beneath the built-in tasks/: their names "
        "are known where installed, and a name both define is the built-in copy (`evalflow lm-eval` sets lm_eval).",
        conf=Any,
    )
    data_map: Mapping[str, Any] | None = setting(
        None,
        parse.data_map,
        "Maps hub datasets to local files: a map's name in conf/data_maps/ (shared), the path of a YAML/JSON "
        "map file, or an in-line mapping; else $EVALFLOW_DATA_MAP.",
        role=STAGE,
        conf=Any,
    )
    data_map_file: str | None = derived("data_map", parse.data_map_file)  # recorded in the manifest and snapshot
    apply_chat_template: bool = setting(
        False,
        parse.boolean,
        "Format prompts with the model's chat template (lm-eval's option): true, false, or the name of "
        "one of the tokenizer's templates.",
        role=STAGE,
        conf=Any,
    )
    chat_template_name: str | None = derived("apply_chat_template", parse.template_name)
    fewshot_as_multiturn: bool = setting(
        None,
        parse.multiturn,
        "Keep few-shot examples as separate chat turns; unset: true with a chat template (lm-eval 0.4.13).",
        conf=bool | None,
    )
    # Reaches the prompts through the chat format (run.phases.chat_format), so it keys the few-shot
    # stage only when prompts are chat-formatted; typed Any: a mapping whole.
    chat_template_args: Mapping[str, Any] | None = setting(
        None,
        parse.template_args,
        "Keyword arguments the chat template is rendered with (lm-eval's chat_template_args; enable_thinking: "
        "false for Qwen3-style templates): a mapping, or its JSON text.",
        conf=Any,
    )
    system_instruction: str | None = setting(
        None, parse.or_none, "A system instruction prepended to every prompt (plain prompts too).", role=STAGE
    )
    # The raw generation, thinking included, stays cached and in the samples.
    think_end_token: str | None = setting(
        None,
        parse.or_none,
        "Reasoning models: the end-of-thinking marker; only the text after it is scored (lm-eval's think_end_token).",
        role=STAGE,
    )
    # Read only by the report: changing it re-runs nothing (output/generations.py is keyed without it).
    truncation_warning: float = setting(
        0.05,
        parse.truncation_warning,
        "Above this share of a task's generations cut off at max_gen_toks or inside unclosed thinking, "
        "a paragraph after the run names the task and the max_gen_toks to try.",
        role=INERT,
    )
    # Reaches the model where it changes the request, so it keys exactly those answers: a served chat
    # model's config (the body's reasoning_effort), else the chat template's arguments (hf, vllm); a
    # run where it could change nothing is refused (evalflow.run.reasoning).
    reasoning_effort: str | None = setting(
        None,
        parse.reasoning_effort,
        "Reasoning models: how hard to think (none, minimal, low, medium, high, xhigh): a served chat model's "
        "reasoning_effort field, or the chat template's reasoning_effort argument (hf, vllm); unset: the model's own.",
    )
    # Anthropic's extended thinking (dialect anthropic), the one backend here that takes a budget.
    thinking_budget: int | None = setting(
        None,
        parse.thinking_budget,
        "Reasoning models: the most tokens a served Anthropic model may think in (its thinking.budget_tokens); "
        "unset: no extended thinking.",
    )
    # Read only by the report (output/cost.py): changing prices re-runs nothing; typed Any: a path or a mapping.
    prices: Prices | None = setting(  # noqa: RUF009 (setting() is a dataclasses.field)
        None,
        parse.prices,
        "Turns the run's token counts into a cost line: a YAML file (or mapping) of dollars per million tokens, "
        "{input: 0.15, output: 0.60, reasoning: 0.60}, flat or keyed by model name.",
        role=INERT,
        conf=Any,
    )
    cache_dir: Path = setting(  # noqa: RUF009 (setting() is a dataclasses.field)
        None,
        parse.cache_dir,
        "Where cached stage outputs and model responses live; default $EVALFLOW_CACHE or ~/.cache/evalflow.",
        role=INERT,
        conf=str | None,
    )
    # What is computed is written to cache_dir over the entries not read, so later runs read it;
    # nothing else there is touched (docs/caching.md).
    recompute: str | None = setting(
        None,
        parse.recompute,
        f"Compute anew instead of reading the cache: {RECOMPUTE[0]} (every model answer, and every stage "
        f"computed from them), {RECOMPUTE[2]} (the documents, few-shot contexts and requests: lm-eval's "
        f"request cache) or {RECOMPUTE[1]} (every stage, the documents and prompts too); unset: read "
        "whatever the cache holds.",
        role=INERT,
    )
    bootstrap_iters: int = setting(
        100000, parse.integer, "Bootstrap draws for each metric's standard error.", role=STAGE
    )
    # Trusted code, as the command line is; what they register is keyed by its own code.
    imports: tuple[str, ...] = setting(
        [],
        parse.imports,
        "Python modules imported before the tasks are loaded, the ones that register your metrics, "
        "aggregations, filters or models (imports=[my_metrics] or a .py file's path); in no cache key.",
        conf=Any,
    )
    log_samples: bool = setting(
        True,
        parse.log_samples,
        "Write each task's samples file, every document's prompt, answers and scores (lm-eval's --log_samples).",
        role=INERT,
    )
    trust_task_code: bool = setting(
        False, parse.boolean, "Run !function code from task folders outside the built-in tasks/."
    )
    confirm_unsafe_code: bool = setting(
        False, parse.boolean, "Run tasks marked unsafe_code: true (their metrics execute model-written code)."
    )
    # bwrap: bubblewrap, read-only root, private /tmp, no network, own PID namespace; subprocess:
    # the same CPU, memory, process and wall-clock limits, no isolation (docs/security.md).
    code_sandbox: str = setting(
        "bwrap",
        parse.text,
        "Where unsafe_code tasks run the model's programs: bwrap, or subprocess (the opt-out for machines "
        "without bubblewrap).",
        role=STAGE,
    )
    # A chunk also closes at 2^18 tokens of estimated work (evalflow/scale/chunks.py), so long
    # prompts and generations travel in smaller chunks. A killed run loses at most one chunk.
    chunk_size: int | None = setting(
        None,
        parse.chunk_size,
        "The most requests sent to a model replica at once and persisted together; unset: 512, or 64 "
        "for a served model.",
        role=INERT,
    )
    # Keys the judge calls by the judge's identity, as `model` keys the scored model's (docs/judges.md).
    judge_model: Any = setting(  # noqa: RUF009 (setting() is a dataclasses.field)
        None,
        parse.judge_model,
        "The judge model of every judge metric, replacing the one each names: a preset (judge_model=smollm2) "
        "or a model config mapping; unset: each judge block's own model.",
    )
    explain: bool = setting(
        False, parse.boolean, "Print, at the end of the run, why each computed stage re-ran.", role=INERT
    )
    # Scale-out (docs/scaling.md): Ray is imported only for workers > 1.
    workers: int = setting(
        1,
        parse.workers,
        "Model replicas answering the run's cache misses as Ray actors (1: in this process).",
        role=INERT,
    )
    # typed Any in conf/ so that an override ('{num_gpus: 1}') replaces the mapping whole
    worker_resources: Mapping[str, Any] = setting(
        None,
        parse.worker_resources,
        "The Ray resources each replica reserves, e.g. {num_gpus: 1, num_cpus: 4}.",
        role=INERT,
        conf=Any,
    )
    ray_address: str | None = setting(
        None,
        parse.text_or_none,
        "The Ray cluster to join: auto or an address; unset: start a local one.",
        role=INERT,
    )


def _declared(f: dataclasses.Field[Any]) -> _Declared:
    return typing.cast(_Declared, f.metadata[_DECLARED])


def _settings() -> tuple[Setting, ...]:
    """Each declared setting, its name and OmegaConf type filled in from its field."""
    hints = typing.get_type_hints(RunSettings)
    out = []
    for f in dataclasses.fields(RunSettings):
        s = _declared(f).setting
        if s is not None:
            out.append(
                dataclasses.replace(s, name=s.name or f.name, type=hints[f.name] if s.type is _ANNOTATION else s.type)
            )
    return tuple(out)


SETTINGS: tuple[Setting, ...] = _settings()

# What each field of RunSettings is parsed from: (field, setting key, parser), in declaration order.
PARSERS: tuple[tuple[str, str, Parse], ...] = tuple(
    (f.name, _declared(f).key or f.name, _declared(f).parse) for f in dataclasses.fields(RunSettings)
)


def _hydra_field(s: Setting) -> tuple[str, Any, Any]:
    default = s.default
    if isinstance(default, (dict, list)):
        return s.name, s.type, field(default_factory=lambda: copy.deepcopy(default))
    return s.name, s.type, field(default=default)


# Hydra's structured config: every setting with its OmegaConf type and default.
RunConfig = dataclasses.make_dataclass(
    "RunConfig", [_hydra_field(s) for s in SETTINGS], namespace={"__module__": __name__}
)


def defaults() -> dict[str, Any]:
    """Every setting's default, as plain values."""
    return {s.name: copy.deepcopy(s.default) for s in SETTINGS}


def stage_settings() -> tuple[str, ...]:
    """The settings with role STAGE: the run-level inputs of every task's stages."""
    return tuple(s.name for s in SETTINGS if s.role == STAGE)


def inert_settings() -> tuple[str, ...]:
    """The settings with role INERT: none can change a run's results."""
    return tuple(s.name for s in SETTINGS if s.role == INERT)


def register_configs() -> None:
    ConfigStore.instance().store(name="base_config", node=RunConfig)
