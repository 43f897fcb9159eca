"""``python -m evalflow show``: a task's first documents as the model would see them, no model loaded.

    python -m evalflow show task=arc_easy                     # the first 3 documents
    python -m evalflow show task=gsm8k n=2 num_fewshot=5 data_map=shared
    python -m evalflow show task=mmlu_anatomy n=1 apply_chat_template=true model=smollm2

lm-eval's ``--write_out``: for each document its rendered prompt (description, few-shot examples,
its own text), its target, and every request the model would receive. The settings are a run's
(``key=value``, the same names and meanings), and the documents go through the run's own stages
``load_docs → fewshot → instances`` with the run's cache: what ``show`` prints is what a run with
those settings sends, and a later run reuses what ``show`` computed. Without ``limit`` or
``samples``, ``limit`` is ``n`` (the first ``n`` documents' prompts do not depend on later ones).
``model`` defaults to ``dummy`` here; it matters only with ``apply_chat_template``. An image task's
prompt keeps its ``<image>`` placeholders, followed by one line naming each image's size, mode and
pixel hash (the key its requests are cached under).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, Mapping, Sequence, TextIO

from evalflow.errors import ConfigError
from evalflow.settings import RunSettings
from evalflow.taskspec.format.spec import TaskConfig

USAGE = "usage: python -m evalflow show task=NAME [n=3] [num_fewshot=K] [any run setting=value ...]"
PROMPT_STAGES = ("load_docs", "fewshot", "instances")


def preview_settings(
    argv: Sequence[str], command: str, default_n: int = 3, *, n_limits: bool = True
) -> tuple[RunSettings, int]:
    """The run settings given as ``key=value`` overrides, and ``n`` (documents to show); with
    ``n_limits`` and neither ``limit`` nor ``samples`` given, ``limit`` is ``n``."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from evalflow.config.compose import compose_config
    from evalflow.settings import settings_from_config

    n, overrides = default_n, []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep:
            raise ConfigError(f"{command}: unexpected argument '{arg}'; arguments are key=value run settings")
        if key.lstrip("+~").startswith(("hydra.", "hydra/")):
            raise ConfigError(
                f"{command}: {key}= does nothing here: {command} starts no Hydra job and writes no run folder "
                "(it takes the run's own settings, key=value, and n=)"
            )
        if key == "n":
            if not value.isdigit() or int(value) < 1:
                raise ConfigError(f"{command}: n={value} must be a whole number of documents, 1 or more")
            n = int(value)
        else:
            overrides.append(arg)
    if not any(a.split("=", 1)[0] == "task" for a in overrides):
        raise ConfigError(f"{command}: name the task, e.g. task=arc_easy (python -m evalflow {command} --help)")
    if not any(a.startswith(("model=", "+model=")) for a in overrides):
        overrides.insert(0, "model=dummy")
    try:
        settings = settings_from_config(compose_config(overrides))
    except (HydraException, OmegaConfBaseException) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{command}: {first}. The settings and their types are in evalflow/config/schema.py.") from None
    if n_limits and settings.limit is None and settings.samples is None:
        settings = dataclasses.replace(settings, limit=float(n))  # as the run config types it
    return settings, n


def prompt_outputs(
    task: TaskConfig, settings: RunSettings, store: Any, names: Sequence[str] = PROMPT_STAGES
) -> dict[str, Any]:
    """The outputs of the prompt-building stages for ``task``, from (and into) the run cache."""
    from evalflow.app import task_settings
    from evalflow.dag.pipeline import PIPELINE
    from evalflow.dag.runner import execute

    stages = tuple(node for node in PIPELINE if node.name in names)
    outputs, _ = execute(task, task_settings(task, settings, ""), store, {}, pipeline=stages)
    return outputs


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE + "\n\n" + (__doc__ or "").strip())
        return 0
    from evalflow.app import select_tasks
    from evalflow.cache.store import CacheStore

    settings, n = preview_settings(argv, "show")
    store = CacheStore(settings.cache_dir)
    try:
        for task in select_tasks(settings).tasks:
            write_task(task, prompt_outputs(task, settings, store), n, sys.stdout, settings.code_sandbox)
    finally:
        store.close()
    return 0


def write_task(task: TaskConfig, outputs: Mapping[str, Any], n: int, out: TextIO, code_sandbox: str | None = None) -> None:
    """The task's documents, prompts and requests; with ``code_sandbox``, also what would run its
    code (the sandbox for model-written programs, a side environment for task code)."""
    from evalflow.output.code_execution import task_lines
    from evalflow.taskspec.prompts.templates import doc_to_choice, doc_to_target

    docs = outputs["load_docs"]
    contexts = outputs["fewshot"][:n]
    by_doc: dict[int, list[Any]] = {}
    for inst in outputs["instances"]:
        by_doc.setdefault(inst.doc_id, []).append(inst)
    out.write(f"=== {task.task} ({task.source or 'no file'}): split '{docs.eval_split}', "
              f"{len(outputs['fewshot'])} of {len(docs.docs)} documents evaluated, showing {len(contexts)}\n")
    if task.repeats > 1:
        out.write(_repeats_line(task))
    for line in task_lines(task, code_sandbox) if code_sandbox is not None else ():
        out.write(line + "\n")
    for ctx in contexts:
        doc = docs.docs[ctx.doc_id]
        target = doc_to_target(task, doc, doc_id=ctx.doc_id)
        if isinstance(target, int) and task.doc_to_choice is not None:
            choices = doc_to_choice(task, doc, doc_id=ctx.doc_id)
            if 0 <= target < len(choices):
                target = f"{target} ({choices[target]!r})"
        shots = f", few-shot examples {list(ctx.fewshot_ids)}" if ctx.fewshot_ids else ""
        out.write(f"\n--- document {ctx.doc_id}{shots}\n")
        prompts = ctx.prompt if isinstance(ctx.prompt, tuple) else (ctx.prompt,)
        for i, prompt in enumerate(prompts):
            label = f"prompt {i}" if len(prompts) > 1 else "prompt"
            out.write(f"[{label}]\n{prompt}\n[end of {label}]\n")
        instances = by_doc.get(ctx.doc_id, [])
        refs = _images(instances[0].request) if instances else None
        if refs is not None:
            out.write(_images_line(refs))
        out.write(f"target: {target}\n")
        out.write(f"requests ({len(instances)}):\n")
        for inst in instances:
            out.write(f"  {inst.idx}: {_request(inst.request)}\n")
            context = inst.request.args[0] if inst.request.type != "loglikelihood_rolling" else None
            if context is not None and context not in prompts:  # e.g. a gen_prefix after the prompt
                out.write(f"     [context]\n{context}\n     [end of context]\n")
    out.write("\n")


def _repeats_line(task: TaskConfig) -> str:
    """How the task's k samples per request are scored: lm-eval's first, or each metric's reductions."""
    from evalflow.scoring.metrics import task_metric_specs

    reduced = [f"{s.name} -> {', '.join(s.output_names)}" for s in task_metric_specs(task) if s.reductions]
    how = "; ".join(reduced) if reduced else (
        "as lm-eval 0.4.13, each filter pipeline's one answer (take_first: the first sample), "
        "as no metric has a 'reduction'")
    return f"repeats: {task.repeats} samples per request, every one listed below; scored: {how}\n"


def _request(request: Any) -> str:
    """One request as its kind and the part that differs between a document's requests."""
    if request.type == "loglikelihood":
        return f"loglikelihood of continuation {request.args[1]!r}"
    if request.type == "generate_until":
        options = ", ".join(f"{k}={v!r}" for k, v in sorted(dict(request.args[1]).items()))
        return f"generate_until ({options})" + (f", repeat {request.repeat}" if request.repeat else "")
    return "loglikelihood_rolling of the whole text"


def _images(request: Any) -> list[Any] | None:
    """A multimodal request's image references (lm-eval's ``{"visual": [...]}`` last argument)."""
    last = request.args[-1] if request.args else None
    return list(last["visual"]) if len(request.args) > 2 and isinstance(last, dict) and "visual" in last else None


def _images_line(refs: list[Any]) -> str:
    """Each image the prompt's ``<image>`` placeholders stand for, by size, mode and pixel hash."""
    shown = "; ".join(f"[{i + 1}] {r.width}x{r.height} {r.mode} xxh3:{r.digest}" for i, r in enumerate(refs))
    return f"images ({len(refs)}, in <image> order): {shown or 'none'}\n"
