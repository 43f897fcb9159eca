"""The typed schema of a run: the one place a run setting is declared. YAML under ``conf/`` holds
values; this file holds each setting's name, type, default and meaning.

Registered in Hydra's ConfigStore as ``base_config`` so ``conf/config.yaml`` composes on top of it
and a mistyped override (``num_fewshot=five``) is refused by OmegaConf before anything runs.
Everything else is derived from :class:`RunConfig`: ``settings.settings_from_config`` fills unset
settings from its defaults, ``app.task_settings`` hands its :func:`stage` settings to every task's
stages (so they are in the stages' cache keys), ``--help`` prints it, and an unknown setting's
did-you-mean lists its fields.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore

STAGE = "stage"  # field metadata: the setting is an input of the task's stages, as it is named here


RECOMPUTE = ("answers", "all")  # the values of ``recompute``, besides None

INERT = "inert"  # field metadata: the setting cannot change a run's results, so no cache key holds it


def stage(default: Any) -> Any:
    """A setting the task's stages read (hence in their cache keys) under its own name."""
    return field(default=default, metadata={STAGE: True})


def inert(default: Any) -> Any:
    """A setting of where, how fast or how verbosely a run runs, never of what it computes: in no
    cache key, and not a name for a run (the report labels runs by the settings that differ)."""
    return field(default=default, metadata={INERT: True})


@dataclass
class RunConfig:
    # The model: `type` (dummy, hf, or a registered name) plus that model's arguments (conf/model/).
    model: dict[str, Any] = field(default_factory=lambda: {"type": "dummy"})
    # A task, group or tag name, a list of them, or a path to a task YAML.
    task: Any = "arith_mc"
    # Overrides every task's num_fewshot when set (lm-eval's --num_fewshot).
    num_fewshot: int | None = None
    # The first N documents of each task, or a fraction (< 1.0) of them.
    limit: float | None = stage(None)
    # Instead of limit, the documents to evaluate per task (lm-eval's --samples): a mapping
    # {task: [doc indices]}, its JSON text, or the path of a JSON file holding it.
    samples: Any | None = None
    # Generate and log samples, skip the metrics (lm-eval's --predict_only; metric "bypass").
    predict_only: bool = False
    # Seeds the few-shot sampler (lm-eval's fewshot_random_seed) and sampled generation.
    seed: int = stage(1234)
    # Requests per model batch (an int, or "auto"); never part of any cache key.
    batch_size: Any = inert(1)
    max_batch_size: int = inert(64)
    # Overrides the generation_kwargs of generate_until tasks (lm-eval's --gen_kwargs).
    gen_kwargs: Any = stage(None)  # a mapping (or 'k=v,k2=v2'); typed Any so an override replaces it whole
    # Extra task folders, scanned after the built-in tasks/ (lm-eval's --include_path): a list, or
    # one path (include_path=/dir). Typed Any so that a single path is not refused as a non-list.
    include_path: Any = field(default_factory=list)
    # Maps hub datasets to local files: a map's name in conf/data_maps/ (shared), the path of a
    # YAML/JSON map file, or an in-line mapping; else $EVALFLOW_DATA_MAP.
    data_map: Any | None = stage(None)
    # Chat models (lm-eval's options): format prompts with the model's chat template, keep few-shot
    # examples as separate turns, and prepend a system instruction (plain prompts too).
    apply_chat_template: Any = stage(False)  # true, false, or the name of one of the tokenizer's templates
    fewshot_as_multiturn: bool | None = None  # None: true with a chat template (lm-eval 0.4.13)
    system_instruction: str | None = stage(None)
    # Reasoning models: the end-of-thinking marker; only the text after it is scored (lm-eval's
    # think_end_token). The raw generation, thinking included, stays cached and in the samples.
    think_end_token: str | None = stage(None)
    # Where cached stage outputs and model responses live; default $EVALFLOW_CACHE or ~/.cache/evalflow.
    cache_dir: str | None = inert(None)
    # Compute anew instead of reading the cache: `answers` (every model answer, and every stage
    # computed from them) or `all` (every stage, the documents and prompts too). What is computed
    # is written to cache_dir over the entries not read, so later runs read it; nothing else there
    # is touched (docs/caching.md). None: read whatever the cache holds.
    recompute: str | None = inert(None)
    bootstrap_iters: int = stage(100000)
    # Python modules imported before the tasks are loaded: the ones that register your metrics,
    # aggregations, filters or models (imports=[my_metrics] or a .py file's path). Trusted code, as
    # the command line is; in no cache key (what they register is keyed by its own code).
    imports: Any = field(default_factory=list)
    # Write samples_<task>.jsonl (lm-eval's --log_samples).
    log_samples: bool = inert(True)
    # Run !function code from task folders outside the built-in tasks/.
    trust_task_code: bool = False
    # Run tasks marked unsafe_code: true (their metrics execute model-written code).
    confirm_unsafe_code: bool = False
    # Where those tasks' programs run (docs/security.md): bwrap (bubblewrap: read-only root,
    # private /tmp, no network, own PID namespace) or subprocess, the opt-out for machines without
    # bubblewrap (the same CPU, memory, process and wall-clock limits, no isolation).
    code_sandbox: str = stage("bwrap")
    # The most requests the inference edge sends to a model replica at once and persists together;
    # a chunk also closes at 2^18 tokens of estimated work (evalflow/scale/chunks.py), so long
    # prompts and generations travel in smaller chunks. A killed run loses at most one chunk.
    # None: 512, or 64 for a served model (evalflow/scale/chunks.py).
    chunk_size: int | None = inert(None)
    # The judge model of every judge metric (metric_list entries with a `judge:` block), replacing
    # the one each names: a preset (judge_model=smollm2) or a model config mapping
    # (judge_model='{type: hf, pretrained: PATH}'). None: each judge block's own model. Keys the
    # judge calls by the judge's identity, as `model` keys the scored model's (docs/judges.md).
    judge_model: Any = None
    # Print, at the end of the run, why each computed stage re-ran (`python -m evalflow explain`).
    explain: bool = inert(False)
    # Scale-out (docs/scaling.md; never part of any cache key): model replicas answering one
    # run's cache misses as Ray actors (1: in this process, Ray never imported), the Ray resources
    # each replica reserves (e.g. {num_gpus: 1, num_cpus: 4}), and the Ray cluster to join (None:
    # start a local one; "auto" or an address: an existing cluster).
    workers: int = inert(1)
    worker_resources: Any = inert(None)  # a mapping; typed Any so an override ('{num_gpus: 1}') replaces it whole
    ray_address: str | None = inert(None)


def defaults() -> dict[str, Any]:
    """Every setting's default, as plain values."""
    return dataclasses.asdict(RunConfig())


def stage_settings() -> tuple[str, ...]:
    """The settings :func:`stage` marks: the run-level inputs of every task's stages."""
    return tuple(f.name for f in dataclasses.fields(RunConfig) if f.metadata.get(STAGE))


def inert_settings() -> tuple[str, ...]:
    """The settings :func:`inert` marks: none can change a run's results."""
    return tuple(f.name for f in dataclasses.fields(RunConfig) if f.metadata.get(INERT))


def register_configs() -> None:
    ConfigStore.instance().store(name="base_config", node=RunConfig)
