"""Filters that task code registers in lm-eval's own registry (``lm_eval.api.registry.register_filter``)
run in evalflow's pipelines with lm-eval's Filter API, keyed by their module's code: acpbench's
``ACP_grammar_filter`` as lm-eval applies it, and a loose folder's own filter class."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

from evalflow.config.settings import settings_from_config
from evalflow.dag.runner import plan
from evalflow.errors import TaskError
from evalflow.run.load_checks import check_selection
from evalflow.run.phases import task_settings
from evalflow.scoring import task_pipelines
from evalflow.scoring.filter_functions import task_code_filters
from evalflow.taskspec.catalog.index import TaskIndex
from evalflow.taskspec.format.spec import TaskConfig

pytest.importorskip("lm_eval")

FILTER_MODULE = """\
from lm_eval.api.filter import Filter
from lm_eval.api.registry import register_filter


@register_filter("test_bridge_suffix")
class Suffix(Filter):
    def __init__(self, suffix):
        self.suffix = suffix

    def apply(self, resps, docs):
        return [[r + self.suffix for r in inst] for inst in resps]


def process_results(doc, results):
    return {"exact_match": float(results[0] == doc["answer"])}
"""

TASK = """\
include: toy_gen.yaml
task: toy_bridge
process_results: !function bridge_utils.process_results
filter_list:
  - name: suffixed
    filter:
      - function: {name}
        suffix: "?"
      - function: take_first
"""
STAGES = ["load_docs", "fewshot", "instances", "inference", "filters", "metrics", "aggregate"]


def _load(library: Path, name: str) -> TaskConfig:
    selection = TaskIndex.build([str(library)], builtin=False).resolve(name, trust_task_code=True)
    check_selection(selection, None)
    return selection.tasks[0]


def _keys(task: TaskConfig) -> dict[str, str]:
    settings = task_settings(task, settings_from_config({"task": task.task, "bootstrap_iters": 0, "data_map": {}}), "m")
    return {p.node.name: p.key for p in plan(task, settings)}


def test_a_loose_folder_filter_runs_and_its_source_is_in_the_filter_key(toy_library: Path) -> None:
    module = toy_library / "bridge_utils.py"
    module.write_text(FILTER_MODULE)
    (toy_library / "toy_bridge.yaml").write_text(TASK.format(name="test_bridge_suffix"))
    task = _load(toy_library, "toy_bridge")
    assert task_pipelines(task)[0].apply([["a", "b"], ["c"]], [{}, {}]) == ("a?", "c?")
    before = _keys(task)

    module.write_text(FILTER_MODULE.replace("r + self.suffix", "self.suffix + r"))
    edited = _load(toy_library, "toy_bridge")
    assert task_pipelines(edited)[0].apply([["a"]], [{}]) == ("?a",)
    after = _keys(edited)
    assert [s for s in STAGES if before[s] != after[s]] == STAGES[4:]


def test_a_name_in_neither_registry_keeps_the_unknown_filter_error(toy_library: Path) -> None:
    (toy_library / "bridge_utils.py").write_text(FILTER_MODULE)
    (toy_library / "toy_bridge.yaml").write_text(TASK.format(name="test_bridge_sufix"))
    with pytest.raises(TaskError, match=r"toy_bridge.*unknown filter 'test_bridge_sufix'"):
        _load(toy_library, "toy_bridge")


ACP_PACKAGES = ("lark", "tarski", "pddl", "kstar_planner")  # lm-eval's acpbench extra
RESPONSES = (
    ["[(move f3-2f f3-1f), (move f3-2f f2-2f)] and then some text"],
    ["I do not know."],
    ["**Final Answer**: (pickup f1-3f key0-1)\n(move f1-3f f1-2f)"],
)


def _lmeval_filtered(filter_list: Any, docs: list[dict]) -> list[Any]:
    """lm-eval's own pipeline (its filter registry and FilterEnsemble) on the same responses."""
    from lm_eval.api.instance import Instance
    from lm_eval.filters import build_filter_ensemble

    entry = filter_list[0]
    steps = [(s["function"], {k: v for k, v in s.items() if k != "function"} or None) for s in entry["filter"]]
    ensemble = build_filter_ensemble(entry["name"], steps)
    instances = [Instance("generate_until", doc, ("", {}), 0) for doc in docs]
    for inst, resps in zip(instances, RESPONSES):
        inst.resps = list(resps)
    ensemble.apply(instances)
    return [inst.filtered_resps[entry["name"]] for inst in instances]


@pytest.mark.skipif(
    any(importlib.util.find_spec(p) is None for p in ACP_PACKAGES),
    reason="acpbench's task code needs lark, tarski, pddl and kstar-planner (lm-eval[acpbench])",
)
def test_acpbench_tasks_of_both_copies_load_and_filter_as_lm_eval() -> None:
    import lm_eval

    library = Path(os.path.dirname(lm_eval.__file__)) / "tasks" / "acpbench"
    selection = TaskIndex.build([str(library)], builtin=False).resolve(
        ["acp_app_gen", "acp_app_gen_with_pddl", "acp_nexta_gen"]
    )
    check_selection(selection, None)  # two modules register ACP_grammar_filter: each task gets its own
    docs = [{} for _ in RESPONSES]
    for task in selection.tasks:
        ours = list(task_pipelines(task)[0].apply([list(r) for r in RESPONSES], docs))
        assert ours == _lmeval_filtered(task.filter_list, docs)
        folder = Path(task.source).parent.name
        assert task_code_filters(task)["ACP_grammar_filter"].__module__.endswith(f"{folder}.acp_utils")
    app, app_pddl = (list(task_pipelines(t)[0].apply([list(r) for r in RESPONSES], docs)) for t in selection.tasks[:2])
    assert app == app_pddl and app[0] == ["(move f3-2f f3-1f)", "(move f3-2f f2-2f)"] and app[1] == []
