"""What ``show`` prints: a task's first documents as the model would see them, no model loaded.

:func:`prompt_outputs` runs the run's own stages ``load_docs → fewshot → instances`` with the run's
cache, so what is shown is what a run with those settings sends, and a later run reuses what was
computed; :func:`write_task` writes each document's prompt, target and requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from evalflow.config.schema import RunSettings
from evalflow.taskspec.format.spec import TaskConfig

PROMPT_STAGES = ("load_docs", "fewshot", "instances")


def prompt_outputs(
    task: TaskConfig, settings: RunSettings, store: Any, names: Sequence[str] = PROMPT_STAGES
) -> Mapping[str, Any]:
    """The outputs of the prompt-building stages for ``task``, from (and into) the run cache."""
    from evalflow.dag.pipeline import PIPELINE
    from evalflow.dag.runner import execute
    from evalflow.run.phases import task_settings

    stages = tuple(node for node in PIPELINE if node.name in names)
    outputs, _ = execute(task, task_settings(task, settings, ""), store, {}, pipeline=stages)
    return outputs


def write_task(
    task: TaskConfig, outputs: Mapping[str, Any], n: int, out: TextIO, code_sandbox: str | None = None
) -> None:
    """The task's documents, prompts and requests; with ``code_sandbox``, also what would run its
    code (the sandbox for model-written programs, a side environment for task code)."""
    from evalflow.output.code_execution import task_lines
    from evalflow.taskspec.prompts.templates import doc_to_choice, doc_to_target

    docs = outputs["load_docs"]
    contexts = outputs["fewshot"][:n]
    by_doc: dict[int, list[Any]] = {}
    for inst in outputs["instances"]:
        by_doc.setdefault(inst.doc_id, []).append(inst)
    out.write(
        f"=== {task.task} ({task.source or 'no file'}): split '{docs.eval_split}', "
        f"{len(outputs['fewshot'])} of {len(docs.docs)} documents evaluated, showing {len(contexts)}\n"
    )
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
    from evalflow.scoring.metric_functions import task_metric_specs

    reduced = [f"{s.name} -> {', '.join(s.output_names)}" for s in task_metric_specs(task) if s.reductions]
    how = (
        "; ".join(reduced)
        if reduced
        else (
            "as lm-eval 0.4.13, each filter pipeline's one answer (take_first: the first sample), "
            "as no metric has a 'reduction'"
        )
    )
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
