"""Bad input, end to end through ``python -m evalflow``: each mistake exits non-zero with one
paragraph naming the file / key / document and the fix, no traceback, and no results.json.

The cases run from one module-scoped fixture, each a ``python -m evalflow`` process forked from a
pre-imported :mod:`tests.support.zygote`, two at a time (two dozen interpreter start-ups would dominate the
test's time); each test then checks one case's outcome, and one test re-runs a few cases as
genuine ``python -m evalflow`` subprocesses to check that they print the same. Unit-level checks
of the same messages live in tests/taskspec; these cover the command-line path (Hydra, logging,
exit codes, the run folder).
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.reliability import Zygote, cli, request_keys
from tests.support.runs import COUNTING
from tests.support.toy_tasks import GEN_YAML, MC_YAML, write_toy_data

TASK_BASE = """\
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}/test.jsonl
test_split: test
output_type: multiple_choice
doc_to_target: label
doc_to_choice: "{{choices}}"
"""


@dataclass(frozen=True)
class Case:
    files: dict[str, str]  # path in the case's task folder -> text ({data}: the data folder)
    args: list[str]  # besides include_path, cache_dir and the run dir
    expect: list[str]  # substrings of the error paragraph
    env: dict[str, str] = field(default_factory=dict)
    cache_files: dict[str, str] = field(default_factory=dict)  # written in cache_dir first ("": cache_dir itself)


def task(name: str, *lines: str, text: str = '"{{question}}"') -> str:
    return f"task: {name}\n" + TASK_BASE + f"doc_to_text: {text}\n" + "".join(line + "\n" for line in lines)


CASES: dict[str, Case] = {
    "malformed_yaml": Case(
        {"bad.yaml": "task: badyaml\ndataset_path: json\n  metric_list: [\n"},
        ["task=badyaml"],
        ["bad.yaml", "line 3", "malformed YAML"],
    ),
    "malformed_yaml_by_path": Case(
        {"bad.yaml": "task: badyaml\nmetric_list:\n  - metric: acc\n   aggregation: mean\n"},
        ["task={lib}/bad.yaml"],
        ["bad.yaml", "line 4", "malformed YAML"],
    ),
    "unknown_task_key": Case(
        {"t.yaml": task("t_key", "metrc_list:\n  - metric: acc")},
        ["task=t_key"],
        ["t.yaml", "metrc_list", "did you mean 'metric_list'"],
    ),
    "include_cycle": Case(
        {"a.yaml": task("t_cycle", "include: b.yaml"), "b.yaml": "include: a.yaml\n"},
        ["task=t_cycle"],
        ["include cycle", "a.yaml -> ", "b.yaml"],
    ),
    "missing_include": Case(
        {"a.yaml": task("t_inc", "include: nope.yaml")},
        ["task=t_inc"],
        ["a.yaml", "included file 'nope.yaml' not found"],
    ),
    "template_missing_field": Case(
        {"t.yaml": task("t_field", text='"Q: {{questoin}}"')},
        ["task=t_field"],
        ["task 't_field'", "t.yaml", "document 0", "questoin"],
    ),
    "function_missing_attr": Case(
        {
            "t.yaml": task("t_fn", text="!function utils.nope"),
            "utils.py": "def doc_to_text(doc):\n    return doc['question']\n",
        },
        ["task=t_fn", "trust_task_code=true"],
        ["utils.py", "'nope'", "doc_to_text"],
    ),
    "function_raises": Case(
        {
            "t.yaml": task("t_raise", text="!function utils.doc_to_text"),
            "utils.py": "def doc_to_text(doc):\n    return doc['questoin']\n",
        },
        ["task=t_raise", "trust_task_code=true"],
        [
            "task 't_raise'",
            "doc_to_text, document 0",
            "doc_to_text (",
            "utils.py",
            "KeyError: 'questoin'",
            "'question': 'What is 1 plus 2?'",
        ],
    ),
    "metric_function_raises": Case(
        {
            "t.yaml": "task: t_metric_fn\ndataset_path: json\n"
            "dataset_kwargs:\n  data_files:\n    test: {data}/test.jsonl\n"
            "test_split: test\noutput_type: generate_until\ndoc_to_text: question\ndoc_to_target: answer\n"
            "metric_list:\n  - metric: !function utils.score\n    aggregation: mean\n",
            "utils.py": "def score(items):\n    raise ValueError('cannot score ' + repr(items[1])[:10])\n",
        },
        ["task=t_metric_fn", "trust_task_code=true"],
        [
            "task 't_metric_fn'",
            "metric_list",
            "score (",
            "utils.py",
            "ValueError: cannot score",
            "'question': 'What is 1 plus 2?'",
        ],
    ),
    "yaml_alias_bomb": Case(
        {
            "bomb.yaml": "task: t_bomb\na: &a [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8))
        },
        ["task=t_bomb"],
        ["bomb.yaml", "YAML aliases", "100,000"],
    ),
    "lm_eval_output_path": Case({}, ["task=toy_mc", "output_path=results/"], ["output_path", "hydra.run.dir=DIR"]),
    "lm_eval_device": Case({}, ["task=toy_mc", "device=cpu"], ["'device'", "model.device=cpu"]),
    "model_key_misspelled": Case({}, ["task=toy_mc", "model.sallt=x"], ["model.sallt", "did you mean 'salt'"]),
    "function_missing_module": Case(
        {"t.yaml": task("t_mod", text="!function helpers.doc_to_text")},
        ["task=t_mod", "trust_task_code=true"],
        ["helpers.py", "does not exist"],
    ),
    "dataset_offline": Case(
        {
            "t.yaml": "task: t_hub\ndataset_path: someorg/no_such_dataset\ntest_split: test\n"
            "output_type: multiple_choice\ndoc_to_text: q\ndoc_to_target: 0\n"
            "doc_to_choice: [a, b]\n"
        },
        ["task=t_hub"],
        ["someorg/no_such_dataset", "data map", "data_files"],
    ),
    "unknown_task": Case({}, ["task=toy_mx"], ["toy_mx", "did you mean 'toy_mc'"]),
    "unknown_model_preset": Case({}, ["task=toy_mc", "model=dumy"], ["model=dumy", "did you mean 'dummy'"]),
    "unknown_model_type": Case({}, ["task=toy_mc", "model.type=dumy"], ["model.type", "'dumy'", "dummy"]),
    "unknown_metric": Case(
        {"t.yaml": task("t_metric", "metric_list:\n  - metric: acuracy")},
        ["task=t_metric"],
        ["t.yaml", "acuracy", "did you mean 'acc'"],
    ),
    "unknown_filter": Case(
        {"t.yaml": task("t_filter", "filter_list:\n  - name: x\n    filter:\n      - function: take_frist")},
        ["task=t_filter"],
        ["t.yaml", "take_frist", "did you mean 'take_first'"],
    ),
    "override_wrong_type": Case({}, ["task=toy_mc", "num_fewshot=five"], ["num_fewshot", "'five'", "Integer"]),
    "override_unknown_key": Case({}, ["task=toy_mc", "num_fewshots=2"], ["num_fewshots", "did you mean 'num_fewshot'"]),
    "override_unparsable": Case({}, ["task=toy_mc", "include_path=[a,b"], ["include_path=[a,b", "quote"]),
    # the shell ate the quotes of think_end_token='</think>': the paragraph gives the word that keeps them
    "override_marker_unquoted": Case(
        {}, ["task=toy_mc", "think_end_token=</think>"], ["think_end_token=</think>", "\"think_end_token='</think>'\""]
    ),
    "unresolved_interpolation": Case({}, ["task=toy_mc", "limit=${nope}"], ["limit", "nope"]),
    "limit_zero": Case({}, ["task=toy_mc", "limit=0"], ["limit=0", "out of range"]),
    "limit_fractional_count": Case({}, ["task=toy_mc", "limit=1.5"], ["limit=1.5", "whole number"]),
    "limit_negative": Case({}, ["task=toy_mc", "limit=-3"], ["limit=-3", "out of range"]),
    "cache_index_damaged": Case(
        {},
        ["task=toy_mc"],
        ["cache.db", "file is not a database", "move the folder away"],
        cache_files={"cache.db": "this is not SQLite\n" * 300},
    ),
    "cache_dir_is_a_file": Case(
        {}, ["task=toy_mc"], ["cannot be used", "FileExistsError", "cache_dir="], cache_files={"": "a file\n"}
    ),
    "model_too_few_responses": Case(
        {},
        ["task=toy_mc", "model.type=tests.support.models:WrongCountModel", "chunk_size=64"],
        ["WrongCountModel.loglikelihood", "returned 63 responses for 64 requests"],
    ),
    "model_too_many_responses": Case(
        {},
        ["task=toy_gen", "model.type=tests.support.faulty:WrongGenerateCountModel", "chunk_size=8"],
        ["generate_until", "returned 9 responses for 8 requests"],
    ),
}


@dataclass(frozen=True)
class Outcome:
    done: subprocess.CompletedProcess
    args: list[str]
    run_dir: Path
    cache: Path


@pytest.fixture(scope="module")
def zygotes():
    pair = [Zygote(), Zygote()]  # the cases run two at a time
    yield pair
    for z in pair:
        z.close()


@pytest.fixture(scope="module")
def zygote(zygotes: list[Zygote]) -> Zygote:
    return zygotes[0]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory, zygotes: list[Zygote]) -> dict[str, Outcome]:
    root = tmp_path_factory.mktemp("bad-input")
    data = write_toy_data(root)

    def play(name: str, zygote: Zygote) -> Outcome:
        case, lib, cache, run_dir = CASES[name], root / name / "tasks", root / name / "cache", root / name / "run"
        lib.mkdir(parents=True)
        (lib / "toy_mc.yaml").write_text(MC_YAML.format(data=data))
        (lib / "toy_gen.yaml").write_text(GEN_YAML.format(data=data))
        for rel, text in case.files.items():
            (lib / rel).write_text(text.replace("{data}", str(data)))
        for rel, text in case.cache_files.items():
            (cache / rel if rel else cache).parent.mkdir(parents=True, exist_ok=True)
            (cache / rel if rel else cache).write_text(text)
        args = [
            "model=dummy",
            f"model.type={COUNTING}",
            f"include_path=[{lib}]",
            f"cache_dir={cache}",
            "bootstrap_iters=0",
            f"hydra.run.dir={run_dir}",
            *(a.replace("{lib}", str(lib)) for a in case.args),
        ]
        return Outcome(zygote.cli(args, root / name / "streams", case.env), args, run_dir, cache)

    names = list(CASES)
    with ThreadPoolExecutor(max_workers=2) as pool:
        halves = pool.map(lambda half: [(n, play(n, zygotes[half])) for n in names[half::2]], (0, 1))
        return {name: outcome for half in halves for name, outcome in half}


def error_paragraph(stderr: str) -> str:
    """The one line that is not a log record ("[time][logger][LEVEL] - ...") on stderr."""
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("[")]
    assert len(lines) == 1 and lines[0].startswith("evalflow: error: "), stderr
    return lines[0]


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_paragraph_and_nothing_is_written(name: str, outcomes: dict[str, Outcome]) -> None:
    outcome, case = outcomes[name], CASES[name]
    stderr = outcome.done.stderr
    assert outcome.done.returncode != 0, (outcome.done.stdout, stderr)
    assert "Traceback" not in stderr and "HYDRA_FULL_ERROR" not in stderr, stderr
    paragraph = error_paragraph(stderr)
    for needle in case.expect:
        assert needle in paragraph, (needle, paragraph)
    assert not (outcome.run_dir / "results.json").exists()


@pytest.mark.parametrize("name", ["model_too_few_responses", "model_too_many_responses"])
def test_a_wrong_model_answer_persists_nothing(name: str, outcomes: dict[str, Outcome]) -> None:
    """The failed chunk is not stored, and its leases are released for the next run."""
    from evalflow.cache.store import CacheStore

    cache = outcomes[name].cache
    assert request_keys(cache) == set()
    store = CacheStore(cache)
    try:
        assert not [k for k in store.raw.iterkeys() if str(k).startswith(("lease:", "inference:"))]
    finally:
        store.close()


@pytest.mark.parametrize("name", ["override_wrong_type", "unknown_model_preset", "include_cycle", "unknown_filter"])
def test_python_dash_m_prints_the_same(name: str, outcomes: dict[str, Outcome]) -> None:
    """The zygote's forked runs behave as ``python -m evalflow`` started afresh."""
    outcome = outcomes[name]
    done = cli(outcome.args)
    assert done.returncode == outcome.done.returncode
    assert error_paragraph(done.stderr) == error_paragraph(outcome.done.stderr)


def test_debug_shows_the_traceback(outcomes: dict[str, Outcome], zygote: Zygote, tmp_path: Path) -> None:
    args = outcomes["unknown_task"].args
    assert "Traceback" in zygote.cli(args, tmp_path / "debug", {"EVALFLOW_DEBUG": "1"}).stderr
    assert "Traceback" in zygote.cli(args + ["hydra.verbose=true"], tmp_path / "verbose").stderr
    hydra_error = outcomes["override_wrong_type"].args
    assert "Traceback" in zygote.cli(hydra_error, tmp_path / "debug-hydra", {"EVALFLOW_DEBUG": "1"}).stderr
