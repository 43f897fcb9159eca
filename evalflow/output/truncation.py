"""What a run says after its table about generations that did not finish.

Read from the manifest's ``generations`` (each task's figures, :mod:`evalflow.output.generations`)
and ``truncation_warning`` (the run's threshold), so a line never disagrees with the record and a
changed threshold re-runs nothing but these lines. A task above the threshold gets one paragraph:
how many generations were cut off and by what, the score on the ones that finished beside the
score on all, the longest finished generation, and the ``max_gen_toks`` to try next:

    >>> stats = {"generations": 6, "truncated": 2, "truncated_share": 2 / 6, "unclosed_by": {},
    ...          "stop_reasons": {"eos": 4, "length": 2}, "finished_docs": 4, "max_gen_toks": 32,
    ...          "finished_score": {"exact_match,none": 0.75}, "longest_finished_tokens": 20,
    ...          "suggested_max_gen_toks": 64, "docs": 6, "score": {"exact_match,none": 0.5}}
    >>> print(truncation_paragraph("gsm8k", stats, "gen_kwargs=max_gen_toks:{n}"))
    ... # doctest: +NORMALIZE_WHITESPACE
    TRUNCATED: gsm8k: 2 of 6 generations (33.3%) did not finish: 2 stopped at max_gen_toks=32. Its
    exact_match,none is 0.5000 over all 6 documents and 0.7500 over the 4 whose generations finished
    (the longest finished generation has 20 tokens): the score counts the cut-off answers as wrong.
    Run again with gen_kwargs=max_gen_toks:64.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def truncation_lines(manifest: Mapping[str, Any], raise_cap: str) -> list[str]:
    """One paragraph per task whose truncated share is above the run's ``truncation_warning``;
    ``raise_cap`` is how this command line sets max_gen_toks (``{n}`` stands for the number)."""
    threshold = manifest.get("truncation_warning", 0.05)
    return [
        truncation_paragraph(task, stats, raise_cap)
        for task, stats in (manifest.get("generations") or {}).items()
        if stats["truncated"] and stats["truncated_share"] > threshold
    ]


def truncation_paragraph(task: str, stats: Mapping[str, Any], raise_cap: str) -> str:
    """The paragraph for one task (see the module docstring)."""
    total, cut = stats["generations"], stats["truncated"]
    causes = _causes(stats)
    share = f"{100 * stats['truncated_share']:.1f}%"
    head = f"TRUNCATED: {task}: {cut} of {total} generations ({share}) did not finish: {causes}."
    finished, scores = stats.get("finished_score") or {}, stats.get("score") or {}
    metric = next((k for k in finished if scores.get(k) is not None), None)
    if metric is None:
        body = " No document's generations all finished, so the task's score says nothing about the model's answers."
    else:
        longest = stats.get("longest_finished_tokens")
        longest_note = f" (the longest finished generation has {longest} tokens)" if longest is not None else ""
        body = (
            f" Its {metric} is {_number(scores[metric])} over all {stats['docs']} documents and "
            f"{_number(finished[metric])} over the {stats['finished_docs']} whose generations finished{longest_note}: "
            "the score counts the cut-off answers as wrong."
        )
    return head + body + _advice(stats, raise_cap)


def _causes(stats: Mapping[str, Any]) -> str:
    """What cut the generations off: the cap, and thinking that never closed (by what ended it)."""
    reasons = stats.get("stop_reasons", {})
    unclosed = stats.get("unclosed_by") or {}
    cap = f"max_gen_toks={stats['max_gen_toks']}" if stats.get("max_gen_toks") else "max_gen_toks"
    parts = []
    if reasons.get("length"):
        parts.append(f"{reasons['length']} stopped at {cap}")
    if reasons.get("thinking_unclosed"):
        where = {"length": cap, "stop": "a stop sequence", "eos": "the end-of-sequence token"}
        how = ", ".join(f"{n} at {where.get(why, why)}" for why, n in sorted(unclosed.items()))
        parts.append(
            f"{reasons['thinking_unclosed']} ended inside their thinking, the end marker never written ({how})"
        )
    return "; ".join(parts)


def _advice(stats: Mapping[str, Any], raise_cap: str) -> str:
    """What to do: raise the cap when the cap cut them off; say so when a stop sequence did."""
    unclosed = stats.get("unclosed_by") or {}
    by_cap = stats.get("stop_reasons", {}).get("length", 0) + unclosed.get("length", 0)
    out = ""
    if by_cap and stats.get("suggested_max_gen_toks"):
        again = raise_cap.format(n=stats["suggested_max_gen_toks"])
        out += f" Run again with {again}."
    if unclosed.get("stop"):
        out += (
            " A stop sequence of the task occurs inside the thinking and ended those generations there (lm-eval's hf "
            "model stops at it while generating; its vllm model stops only at the end-of-sequence token when "
            "think_end_token is set): use vllm, or give the task stop sequences that cannot occur in the thinking."
        )
    return out


def _number(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)
