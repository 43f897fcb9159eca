"""A fixed sample of lm-eval's own library loads the way a run loads it (benchmarks/library_coverage.py
measures the whole library; this keeps a diverse slice of it from regressing in seconds).

Each name is resolved through the task index over the installed lm_eval package's tasks folder
(``include_path=lm_eval``, no ``trust_task_code``) and the group expansion, then passes the run's
load-time checks (every ``!function`` module imported), with no data and no model. Skips without
lm_eval (the dev extra installs it).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalflow.errors import TaskError
from evalflow.run.load_checks import check_selection
from evalflow.taskspec.catalog.index import TaskIndex

pytest.importorskip("lm_eval")

# One or two of each family and shape: loglikelihood, multiple_choice, rolling, generation with
# filters, `!function` prompts and metrics, task_list files, tags, groups with aggregates,
# `hf_evaluate: true` on multiple_choice f1 (afrimmlu, kobest), nested includes, ifeval's checks.
SAMPLE = (
    "arc_easy",
    "hellaswag",
    "piqa",
    "winogrande",
    "boolq",
    "lambada_openai",
    "wikitext",
    "gsm8k",
    "gsm8k_cot",
    "mmlu_abstract_algebra",
    "truthfulqa_mc1",
    "truthfulqa_mc2",
    "truthfulqa_gen",
    "ifeval",
    "leaderboard_ifeval",
    "leaderboard_bbh_boolean_expressions",
    "bbh_cot_fewshot_date_understanding",
    "hendrycks_math_algebra",
    "minerva_math_algebra",
    "afrimmlu_direct_amh_prompt_1",
    "kobest_boolq",
    "xnli_en",
    "belebele_eng_Latn",
    "copa",
    "anli_r1",
    "race",
    "sciq",
    "mgsm_direct_en",
    "drop",
    "triviaqa",
    "blimp_adjunct_island",
    "wmt16-de-en",
    "logiqa",
)
GROUPS = ("mmlu", "leaderboard_bbh", "ai2_arc")
# ifeval's module downloads NLTK's punkt_tab when imported: offline it loads only with the data at hand
NLTK_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "nltk_data"
NEEDS_PUNKT = ("ifeval", "leaderboard_ifeval")


def _library() -> Path:
    spec = importlib.util.find_spec("lm_eval")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "tasks"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TaskIndex]:
    mp = pytest.MonkeyPatch()
    mp.setenv("EVALFLOW_CACHE", str(tmp_path_factory.mktemp("cache")))
    if NLTK_DATA.is_dir():
        mp.setenv("NLTK_DATA", str(NLTK_DATA))
        nltk = sys.modules.get("nltk")
        if hasattr(getattr(nltk, "data", None), "path"):  # nltk reads NLTK_DATA once, when imported
            mp.setattr(nltk.data, "path", [str(NLTK_DATA), *nltk.data.path])  # type: ignore[union-attr]
    try:
        yield TaskIndex.build(["lm_eval"], builtin=False)  # include_path=lm_eval
    finally:
        mp.undo()


@pytest.mark.parametrize("name", SAMPLE + GROUPS)
def test_library_task_loads_as_a_run_loads_it(index: TaskIndex, name: str) -> None:
    if name in NEEDS_PUNKT and not (NLTK_DATA.is_dir() or os.environ.get("NLTK_DATA")):
        pytest.skip(f"{name} needs NLTK's punkt_tab: neither {NLTK_DATA} nor NLTK_DATA is there")
    selection = index.resolve([name])  # installed task code needs no trust_task_code
    check_selection(selection, num_fewshot=None)  # raises TaskError naming the task and the cause
    assert selection.tasks and all(
        t.source.startswith(str(_library().resolve())) or "::" in t.task for t in selection.tasks
    )


def test_python_class_tasks_are_refused_with_the_reason(index: TaskIndex) -> None:
    with pytest.raises(TaskError, match="Python task class") as err:
        index.resolve(["squadv2"])
    assert "'squadv2'" in str(err.value)
