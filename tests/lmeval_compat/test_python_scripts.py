"""lm-eval 0.4.13's Python surface at ``evalflow.simple_evaluate`` and ``evalflow.lm_eval``: what a
script hands lm-eval — a ``TaskManager`` (lm-eval's or evalflow's), config dicts and Task objects as
tasks, ``evaluate(lm, get_task_dict(...))``, a model registered with lm-eval's ``@register_model``,
a loaded model as ``pretrained``, an ``EvaluationTracker``, lm-eval's seeds — is run by evalflow.
On the toy library and tiny models; tests/lmeval_compat/test_python_scripts_peer.py runs the same
script through lm-eval itself."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from evalflow import simple_evaluate
from evalflow.errors import ConfigError
from evalflow.lm_eval.evaluator import evaluate
from evalflow.lm_eval.tasks import TaskManager, get_task_dict
from evalflow.lmeval_compat.evaluate import SIMPLE_DEFAULTS, lm_eval_argv, seed_globals
from evalflow.lmeval_compat.task_manager import manager_settings
from evalflow.output.run_paths import samples_file as samples_file_of

lm_eval_tasks = pytest.importorskip("lm_eval.tasks")

RUN = {"limit": 3, "bootstrap_iters": 0}


@pytest.fixture
def library(toy_library: Path) -> Path:
    """The toy library plus toy_fn: toy_mc over five documents picked by ``!function utils.process_docs``."""
    (toy_library / "utils.py").write_text("def process_docs(ds):\n    return ds.select(range(5))\n")
    (toy_library / "toy_fn.yaml").write_text(
        "include: toy_mc.yaml\ntask: toy_fn\nprocess_docs: !function utils.process_docs\n"
    )
    return toy_library


def prompts(results: dict[str, Any], task: str) -> list[str]:
    """Each document's prompt (its first request's context), as the samples record it."""
    return [s["arguments"][0][0] for s in results["samples"][task]]


def test_a_task_manager_takes_one_path_or_a_list_and_lm_evals_is_read_alike(library: Path) -> None:
    for given in (str(library), library, [str(library)]):
        assert {"toy_mc", "toy_fn", "toy_gen"} <= set(TaskManager(include_path=given).all_tasks)
    only = TaskManager(include_path=str(library), include_defaults=False)
    assert only.all_tasks == ["toy_fn", "toy_gen", "toy_mc"] and "arith_mc" in TaskManager().all_tasks
    theirs = lm_eval_tasks.TaskManager(include_path=str(library), include_defaults=False, metadata={"k": 1})
    assert manager_settings(theirs) == only.settings.__class__((str(library),), False, {"k": 1})
    assert manager_settings(lm_eval_tasks.TaskManager(include_path=str(library))).include_defaults


def test_include_defaults_false_knows_only_the_include_path_tasks_before_any_model_call(library: Path) -> None:
    from tests.support.models import StrictModel

    for manager in (
        TaskManager(include_path=str(library), include_defaults=False),
        lm_eval_tasks.TaskManager(include_path=str(library), include_defaults=False),
    ):
        with pytest.raises(ConfigError, match=r"include_defaults=False, so only the tasks of include_path") as err:
            simple_evaluate(StrictModel(), tasks=["toy_mc", "arith_mc"], task_manager=manager, **RUN)
        assert "'arith_mc'" in str(err.value)
    ran = simple_evaluate("dummy", tasks=["toy_fn"], task_manager=TaskManager(include_path=str(library)), **RUN)
    assert ran["n-samples"]["toy_fn"] == {"original": 5, "effective": 3}  # its utils.py ran: a named folder is trusted


def whole_task(library: Path, name: str, **keys: Any) -> dict[str, Any]:
    """toy_mc's config as a dict, under ``name``, with ``keys`` changed."""
    data = library.parent / "data"
    return {
        "task": name,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {s: str(data / f"{s}.jsonl") for s in ("train", "test")}},
        **{"training_split": "train", "test_split": "test", "output_type": "multiple_choice"},
        **{"doc_to_text": "Question: {{question}}\nAnswer:", "doc_to_target": "label", "doc_to_choice": "{{choices}}"},
        "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
        **keys,
    }


def test_config_dicts_are_whole_tasks_replacing_an_indexed_one_of_their_name(library: Path) -> None:
    manager = TaskManager(include_path=str(library))
    plain = simple_evaluate("dummy", tasks=["toy_mc"], task_manager=manager, **RUN)
    same = simple_evaluate("dummy", tasks=[whole_task(library, "toy_new")], task_manager=manager, **RUN)
    assert (
        prompts(same, "toy_new") == prompts(plain, "toy_mc")
        and same["results"]["toy_new"]["acc,none"] == (plain["results"]["toy_mc"]["acc,none"])
    )
    edited = whole_task(library, "toy_mc", num_fewshot=1, doc_to_text="Q: {{question}}\nA:")
    both = simple_evaluate("dummy", tasks=[edited, "toy_gen"], task_manager=manager, **RUN)
    assert both["n-shot"] == {"toy_mc": 1, "toy_gen": 0}
    assert prompts(both, "toy_mc")[0].endswith("\n\nQ: What is 1 plus 2?\nA:")  # one shot, then the document
    with pytest.raises(ConfigError, match="names no task"):
        simple_evaluate("dummy", tasks=[{"num_fewshot": 1}], task_manager=manager, **RUN)


def test_lm_evals_task_objects_run_by_their_configs_with_their_edits(library: Path) -> None:
    theirs = lm_eval_tasks.TaskManager(include_path=str(library), include_defaults=False)
    loaded = theirs.load(["toy_fn", "toy_mc"])["tasks"]
    loaded["toy_mc"].set_config("doc_to_text", "Q: {{question}}\nA:")
    ran = simple_evaluate("dummy", tasks=list(loaded.values()), **RUN)
    named = simple_evaluate("dummy", tasks=["toy_fn"], include_path=str(library), **RUN)
    assert prompts(ran, "toy_fn") == prompts(named, "toy_fn") and ran["n-samples"]["toy_fn"]["original"] == 5
    assert prompts(ran, "toy_mc")[0] == "Q: What is 1 plus 2?\nA:"


def test_a_function_no_file_defines_is_refused(library: Path) -> None:
    with pytest.raises(ConfigError, match=r"lambda or a nested function cannot be keyed"):
        simple_evaluate("dummy", tasks=[whole_task(library, "toy_x", process_docs=lambda ds: ds)])


def test_evaluate_runs_a_task_dict_of_either_tool_with_a_model_object(library: Path) -> None:
    from lm_eval.api.model import LM

    from tests.support.models import IdentitylessModel

    class MyLM(IdentitylessModel, LM):
        pass

    reference = simple_evaluate(MyLM(), tasks=["toy_fn", "toy_mc"], include_path=str(library), **RUN)
    theirs = lm_eval_tasks.TaskManager(include_path=str(library), include_defaults=False)
    dicts = (
        get_task_dict(["toy_fn", "toy_mc"], TaskManager(include_path=str(library))),
        lm_eval_tasks.get_task_dict(["toy_fn", "toy_mc"], theirs),
        theirs.load(["toy_fn", "toy_mc"]),
    )
    for task_dict in dicts:
        got = evaluate(MyLM(), task_dict, **RUN)
        assert got["results"] == reference["results"]
        assert prompts(got, "toy_fn") == prompts(reference, "toy_fn")


def test_a_model_registered_with_lm_eval_is_built_as_lm_eval_builds_it(library: Path) -> None:
    from lm_eval.api.model import LM
    from lm_eval.api.registry import register_model

    from tests.support.models import IdentitylessModel

    built: list[dict[str, Any]] = []

    @register_model("evalflow-test-registered")
    class Registered(IdentitylessModel, LM):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__()
            built.append(kwargs)

    ran = simple_evaluate(
        "evalflow-test-registered", model_args="size=3,name=x", tasks=["toy_mc"], include_path=str(library), **RUN
    )
    assert built == [{"size": 3, "name": "x"}]  # batch_size, device None: left out, as lm-eval leaves them
    assert (ran["config"]["model"], ran["config"]["model_args"]) == ("evalflow-test-registered", "size=3,name=x")
    simple_evaluate("evalflow-test-registered", {"size": 4}, ["toy_mc"], batch_size=2, include_path=str(library), **RUN)
    assert built[-1] == {"size": 4, "batch_size": 2}


def test_an_evaluation_tracker_is_told_what_lm_eval_tells_it(library: Path, tmp_path: Path) -> None:
    from lm_eval.loggers import EvaluationTracker

    tracker = EvaluationTracker(output_path=str(tmp_path / "out"))
    run_folder = tmp_path / "run"
    ran = simple_evaluate(
        "dummy",
        "pretrained=org/name",
        ["toy_mc"],
        include_path=str(library),
        evaluation_tracker=tracker,
        output_dir=str(run_folder),
        **RUN,
    )
    samples = ran.pop("samples")  # as lm-eval's command line saves a run (lm_eval/_cli/run.py)
    tracker.save_results_aggregated(results=ran, samples=samples)
    tracker.save_results_samples(task_name="toy_mc", samples=samples["toy_mc"])
    folder = tmp_path / "out" / "org__name"
    (results_file,) = folder.glob("results_*.json")
    assert json.loads(results_file.read_text())["results"] == ran["results"]
    (samples_file,) = folder.glob("samples_toy_mc_*.jsonl")
    written = [json.loads(line) for line in samples_file.read_text().splitlines()]  # from the in-memory samples
    ours = [json.loads(line) for line in samples_file_of(run_folder, "toy_mc").read_text().splitlines()]
    assert [(r["doc_id"], r["arguments"]) for r in written] == [(r["doc_id"], r["arguments"]) for r in ours]
    assert written[0]["arguments"]["gen_args_3"] == {"arg_0": "Question: What is 1 plus 2?\nAnswer:", "arg_1": " 23"}


def test_lm_evals_seeds_seed_the_callers_generators_and_the_flags_reach_one_translation() -> None:
    seed_globals(5, 7, None)
    import numpy as np

    assert (random.random(), np.random.rand()) == (random.Random(5).random(), np.random.RandomState(7).rand())
    given = {**SIMPLE_DEFAULTS, "random_seed": 1, "torch_random_seed": None, "metadata": {"max_seq_lengths": [64]}}
    given.update(check_integrity=True, rewrite_requests_cache=True)
    argv = lm_eval_argv(given, ["t"], [], "hf")
    assert argv[argv.index("--seed") + 1] == "1,1234,None,1234"
    assert argv[argv.index("--metadata") + 1] == '{"max_seq_lengths": [64]}'
    assert "--check_integrity" in argv and argv[argv.index("--cache_requests") + 1] == "refresh"
    deleted = lm_eval_argv({**given, "delete_requests_cache": True}, ["t"], [], "hf")
    assert deleted[deleted.index("--cache_requests") + 1] == "delete"


@pytest.fixture(scope="module")
def tiny_hf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("lm_eval.models.huggingface")
    from tests.support.tiny_models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_loaded"), add_bos=True)


def test_a_loaded_model_as_pretrained_runs_as_lm_evals_hflm_keyed_by_its_weights(
    tiny_hf: Path, library: Path, tmp_path: Path
) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    def run(pretrained: Any, name: str) -> tuple[dict[str, Any], tuple[int, int]]:
        ran = simple_evaluate(
            "hf",
            {"pretrained": pretrained, "dtype": "float32"},
            ["toy_mc"],
            device="cpu",
            use_cache=str(tmp_path / "cache"),
            include_path=str(library),
            output_dir=str(tmp_path / name),
            **RUN,
        )
        inference = json.loads((tmp_path / name / "manifest.json").read_text())["inference"]
        return ran, (inference["cached"], inference["computed"])

    def load() -> Any:
        return AutoModelForCausalLM.from_pretrained(tiny_hf, torch_dtype=torch.float32)

    first, counts = run(load(), "r1")
    assert counts == (0, 12) and first["config"]["model"] == "hf"
    by_path, _ = run(str(tiny_hf), "r0")  # lm-eval's HFLM on the same weights from their folder
    assert first["results"] == by_path["results"]
    again, counts = run(load(), "r2")  # another object holding the same weights: its answers are cached
    assert counts == (12, 0) and again["results"] == first["results"]
    edited = load()
    with torch.no_grad():
        next(edited.parameters()).add_(0.5)
    _, counts = run(edited, "r3")  # weights edited in memory: another identity, computed anew
    assert counts == (0, 12)


def test_lm_evals_group_objects_run_as_the_group_of_their_members(library: Path) -> None:
    (library / "toy_group.yaml").write_text(
        "group: toy_group\ntask: [toy_mc, toy_fn]\naggregate_metric_list:\n  - metric: acc\n    weight_by_size: true\n"
    )
    by_name = simple_evaluate("dummy", tasks=["toy_group"], include_path=str(library), **RUN)
    loaded = lm_eval_tasks.TaskManager(include_path=str(library), include_defaults=False).load(["toy_group"])
    from tests.support.models import IdentitylessModel

    got = evaluate(IdentitylessModel(), loaded, **RUN)
    as_object = simple_evaluate("dummy", tasks=list(loaded["groups"].values()), **RUN)
    for ran in (got, as_object):
        assert ran["groups"] == by_name["groups"] and ran["results"] == by_name["results"]
        assert ran["group_subtasks"] == by_name["group_subtasks"] == {"toy_group": ["toy_mc", "toy_fn"]}
