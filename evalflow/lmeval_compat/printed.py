"""What lm-eval 0.4.13's command line prints on stdout after a run (``_cli/run.py``): one header
line naming the model, its arguments and the run's limits, then ``make_table``'s markdown table of
the results (and one of the groups, when any group aggregates).

    hf ({'pretrained': 'org/m'}), gen_kwargs: ({}), limit: 3.0, num_fewshot: None, batch_size: 1
    | Tasks  |Version|Filter|n-shot| Metric |   |Value |   |Stderr|
    |--------|------:|------|-----:|--------|---|-----:|---|-----:|
    |arc_easy|      1|none  |     0|acc     |↑  |0.6667|±  |0.3333|

The rows are lm-eval's ``make_table`` rows (ported: the same order, indentation and formatting);
the text is pytablewriter's ``MarkdownTableWriter``, the writer lm-eval uses, so that column typing
(numbers right-aligned, a column of integral values printed as integers) is the same text.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from evalflow.lmeval_compat.translate import recorded_config

HEADERS = ("Version", "Filter", "n-shot", "Metric", "", "Value", "", "Stderr")
_ARROWS = {True: "↑", False: "↓"}


def header_line(ns: argparse.Namespace, model_args: Mapping[str, Any], results: Mapping[str, Any]) -> str:
    """lm-eval's line before the table: its flags as its EvaluatorConfig holds them (``--limit`` a
    float, ``--batch_size`` the text given, else 1, both as a ``--config`` file types them; and
    ``trust_remote_code`` dropped from the args)."""
    args = {k: v for k, v in model_args.items() if k != "trust_remote_code"}
    gen = results.get("config", {}).get("gen_kwargs") or {}
    recorded = recorded_config(ns)
    limit = recorded["limit"]
    shots = None if ns.num_fewshot is None else int(ns.num_fewshot)
    sizes = ",".join(map(str, results.get("config", {}).get("batch_sizes") or []))
    return (
        f"{ns.model or 'hf'} ({args}), gen_kwargs: ({gen}), limit: {limit}, num_fewshot: {shots}, "
        f"batch_size: {recorded['batch_size']}{f' ({sizes})' if sizes else ''}"
    )


def make_table(results: Mapping[str, Any], column: str = "results") -> str:
    """lm-eval's ``make_table(result_dict, column)``: its markdown text, byte for byte."""
    from pytablewriter import MarkdownTableWriter

    writer = MarkdownTableWriter()
    writer.headers = ["Groups" if column == "groups" else "Tasks", *HEADERS]
    writer.value_matrix = table_rows(results, column)
    return str(writer.dumps())


def table_rows(results: Mapping[str, Any], column: str = "results") -> list[list[Any]]:
    """``make_table``'s rows: tasks in lm-eval's tree order, a row per metric (sorted), the name
    and version on a task's first row only, floats to four places, stderr beside its metric."""
    rows: list[list[Any]] = []
    subtasks = results.get("group_subtasks", {})
    depth, ordered = _hierarchy(subtasks, set(results[column]))
    for key in ordered:
        entry = {k: v for k, v in results[column][key].items() if k not in ("name", "sample_len", "sample_count")}
        name = entry.pop("alias", key)
        name = " " * depth.get(key, 0) + "- " + name if depth.get(key, 0) > 0 else name
        version: Any = results["versions"].get(key, "    N/A")
        shots = str(results.get("n-shot", {}).get(key, " "))
        hib = results.get("higher_is_better", {}).get(key, {})
        for metric_filter, value in sorted(entry.items()):
            metric, _, filt = metric_filter.partition(",")
            if metric.endswith("_stderr"):
                continue
            shown = f"{value:.4f}" if isinstance(value, float) else value
            arrow = _ARROWS.get(hib.get(metric), "")
            se = entry.get(f"{metric}_stderr,{filt}")
            if f"{metric}_stderr,{filt}" in entry:
                rows.append([name, version, filt, shots, metric, arrow, shown, "±", _stderr(se)])
            else:
                rows.append([name, version, filt, shots, metric, arrow, shown, "", ""])
            name, version = "", ""
    return rows


def _stderr(se: Any) -> str:
    return "   N/A" if se == "N/A" else f"{se:.4f}"


def _hierarchy(subtasks: Mapping[str, list[str]], available: set[str]) -> tuple[dict[str, int], list[str]]:
    """lm-eval's ``_build_hierarchy_info``: each name's depth, and the keys in display order (top
    groups sorted, their members sorted beneath them, then the rest sorted)."""
    depth: dict[str, int] = {}
    ordered: list[str] = []

    def visit(name: str, level: int) -> None:
        depth[name] = level
        if name in available:
            ordered.append(name)
        for child in sorted(subtasks.get(name, [])):
            visit(child, level + 1)

    children = {c for members in subtasks.values() for c in members}
    for name in sorted(subtasks):
        if name not in children:
            visit(name, 0)
    ordered.extend(key for key in sorted(available) if key not in depth)
    return depth, ordered


def printed_results(ns: argparse.Namespace, model_args: Mapping[str, Any], results: Mapping[str, Any]) -> str:
    """Everything lm-eval prints on stdout after its run (without ``--show_config``)."""
    text = header_line(ns, model_args, results) + "\n" + make_table(results) + "\n"
    if "groups" in results:
        text += make_table(results, "groups") + "\n"
    return text
