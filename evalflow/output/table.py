"""The results table printed at the end of a run (lm-eval's columns), via rich."""

from __future__ import annotations

from typing import Any, Mapping

from rich.console import Console
from rich.table import Table


def results_table(results: Mapping[str, Any]) -> Table:
    table = Table(title="evalflow results")
    for col in ("Task", "Version", "Filter", "n-shot", "Metric", "", "Value", "", "Stderr"):
        table.add_column(col, justify="right" if col in ("Value", "Stderr", "n-shot") else "left")
    for name, metrics in results["results"].items():
        hib = results.get("higher_is_better", {}).get(name, {})
        for key, value in metrics.items():
            if key == "alias" or "_stderr," in key or "," not in key:
                continue
            metric, filt = key.split(",", 1)
            stderr = metrics.get(f"{metric}_stderr,{filt}", "")
            arrow = "↑" if hib.get(metric, True) else "↓"
            table.add_row(
                metrics.get("alias", name), str(results.get("versions", {}).get(name, "")), filt,
                str(results.get("n-shot", {}).get(name, "")), metric, arrow, _fmt(value), "±", _fmt(stderr),
            )
    return table


def print_results(results: Mapping[str, Any]) -> None:
    Console().print(results_table(results))


def _fmt(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)
