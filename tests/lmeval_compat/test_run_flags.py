"""lm-eval's run-config flags: ``--metadata`` (and ``simple_evaluate(metadata=)``) reaching a task's
``custom_dataset`` as lm-eval 0.4.13's TaskManager gives it (model args | metadata, checked against
lm-eval's own TaskManager on the same folder), ``--config`` YAML files read with lm-eval's precedence
(checked against lm-eval's ``EvaluatorConfig.from_cli``), ``--cache_requests refresh|delete`` and
``--check_integrity`` validating each task before the run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evalflow.cache.store import CacheStore
from evalflow.errors import ConfigError
from evalflow.lmeval_compat.args import hydra_value
from evalflow.lmeval_compat.execute import delete_requests
from evalflow.lmeval_compat.parser import parse
from evalflow.lmeval_compat.translate import translate
from tests.support.cli import cli

TASK_YAML = """\
task: meta_docs
custom_dataset: !function utils.make_docs
output_type: multiple_choice
test_split: test
doc_to_text: "{{question}}"
doc_to_target: label
doc_to_choice: ["yes", "no"]
metric_list:
  - metric: acc
metadata:
  version: 2.0
  n_docs: 2
"""

UTILS = '''\
import datasets


def make_docs(**kwargs):
    """RULER's way: the documents are made from the task's metadata (model args and --metadata merged)."""
    lengths = kwargs.get("max_seq_lengths", [0])
    rows = [
        {"question": f"{kwargs.get('pretrained', 'none')} q{i} at {lengths[i % len(lengths)]}?", "label": i % 2}
        for i in range(kwargs["n_docs"])
    ]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})
'''

METADATA = {"n_docs": 3, "max_seq_lengths": [4096, 8192]}


@pytest.fixture
def meta_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "meta_tasks"
    folder.mkdir()
    (folder / "meta_docs.yaml").write_text(TASK_YAML)
    (folder / "utils.py").write_text(UTILS)
    return folder


def test_metadata_is_model_args_then_metadata_as_lm_evals_task_manager_merges_it() -> None:
    tr = translate(
        parse(["--model", "dummy", "--model_args", "pretrained=org/m,salt=s", "--tasks", "t", "--metadata", "salt=x"])
    )
    assert "metadata={pretrained:org/m,salt:x}" in tr.overrides
    listed = translate(parse(["--model", "dummy", "--tasks", "t", "--metadata", "max_seq_lengths=[4096,8192]"]))
    assert "metadata={max_seq_lengths:[4096,8192]}" in listed.overrides  # the list kept whole
    assert not any(o.startswith("metadata=") for o in translate(parse(["--model", "dummy", "--tasks", "t"])).overrides)


def test_metadata_reaches_custom_dataset_as_in_lm_eval(meta_folder: Path, tmp_path: Path) -> None:
    """The native run with the front door's metadata setting: the documents custom_dataset made from
    it, and results.json's configs metadata, equal to lm-eval's TaskManager on the same folder."""
    metadata = {"pretrained": "org/m", **METADATA}
    done = cli(
        [
            "model=dummy",
            "task=meta_docs",
            f"include_path=[{meta_folder}]",
            "trust_task_code=true",
            f"metadata={hydra_value(metadata)}",
            f"cache_dir={tmp_path / 'cache'}",
            "bootstrap_iters=0",
            f"hydra.run.dir={tmp_path / 'run'}",
        ]
    )
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    ours = [json.loads(line)["doc"] for line in (tmp_path / "run" / "samples_meta_docs.jsonl").read_text().splitlines()]
    assert [d["question"] for d in ours] == ["org/m q0 at 4096?", "org/m q1 at 8192?", "org/m q2 at 4096?"]
    meta = results["configs"]["meta_docs"]["metadata"]
    assert meta == {"version": 2.0, "n_docs": 3, "pretrained": "org/m", "max_seq_lengths": [4096, 8192]} | _source(meta)

    tasks = pytest.importorskip("lm_eval.tasks", reason="lm-eval is not installed beside evalflow")
    manager = tasks.TaskManager(include_path=str(meta_folder), include_defaults=False, metadata=metadata)
    task = manager.load(["meta_docs"])["tasks"]["meta_docs"]
    assert [dict(d) for d in task.test_docs()] == ours
    theirs = dict(task.config.metadata)
    assert {k: v for k, v in theirs.items() if k != "config_source"} == {
        k: v for k, v in meta.items() if k != "config_source"
    }


def _source(meta: dict) -> dict:
    return {"config_source": meta["config_source"]}


def test_metadata_setting_refuses_a_non_mapping(tmp_path: Path) -> None:
    from evalflow.config.setting_parsers import metadata

    assert metadata('{"a": [1, 2]}', {}) == {"a": [1, 2]} and metadata(None, {}) is None
    with pytest.raises(ConfigError, match="metadata=.*not a mapping"):
        metadata([1, 2], {})


def test_config_file_fills_flags_not_given_as_lm_eval_reads_it(tmp_path: Path) -> None:
    run_file = tmp_path / "run.yaml"
    run_file.write_text(
        "model: dummy\nmodel_args: {salt: s1}\ntasks: [toy_mc, toy_gen]\nlimit: 4\nnum_fewshot: 2\n"
        "metadata: {max_seq_lengths: [4096]}\nlog_samples: true\noutput_path: out\n"
        "wandb_args: {project: p, mode: offline}\nseed: [0, 1234, 7, 7]\n"
    )
    argv = ["--config", str(run_file), "--limit", "3", "--tasks", "toy_mc"]
    tr = translate(parse(argv))
    assert tr.tasks == ("toy_mc",) and tr.lm_model == "dummy" and tr.output_path == "out"
    assert {"limit=3", "num_fewshot=2", "log_samples=true", "seed=7"} <= set(tr.overrides)
    assert "metadata={salt:s1,max_seq_lengths:[4096]}" in tr.overrides
    assert tr.loggers == {"wandb_args": {"project": "p", "mode": "offline"}}

    config = pytest.importorskip("lm_eval.config.evaluate_config", reason="lm-eval is not installed beside evalflow")
    harness = pytest.importorskip("lm_eval._cli.harness")
    ns = harness.HarnessCLI()._parser.parse_args(["run", *argv])
    theirs = config.EvaluatorConfig.from_cli(ns)
    assert (theirs.model, theirs.tasks, theirs.limit, theirs.num_fewshot) == ("dummy", ["toy_mc"], 3.0, 2)
    assert theirs.metadata == {"salt": "s1", "max_seq_lengths": [4096]} and theirs.seed == [0, 1234, 7, 7]
    assert theirs.wandb_args == tr.loggers["wandb_args"] and theirs.output_path == tr.output_path


@pytest.mark.parametrize("given", ["limit: 3\nbatch_size: 8\n", "limit: 0.5\nbatch_size: auto\n"])
def test_config_file_values_are_recorded_as_the_yaml_types_them(given: str, tmp_path: Path) -> None:
    """results.json's ``config.limit``/``batch_size`` and the header line from a ``--config`` file:
    the YAML's own types, as lm-eval's EvaluatorConfig keeps them (the command line's are typed by
    its argparse: ``--limit 3`` is 3.0, ``--batch_size 8`` the text)."""
    from evalflow.lmeval_compat.printed import header_line
    from evalflow.lmeval_compat.translate import recorded_config

    run_file = tmp_path / "run.yaml"
    run_file.write_text("model: dummy\ntasks: [toy_mc]\n" + given)
    ns = parse(["--config", str(run_file)])
    ours = recorded_config(ns)
    config = pytest.importorskip("lm_eval.config.evaluate_config", reason="lm-eval is not installed beside evalflow")
    harness = pytest.importorskip("lm_eval._cli.harness")
    theirs = config.EvaluatorConfig.from_cli(
        harness.HarnessCLI()._parser.parse_args(["run", "--config", str(run_file)])
    )
    assert (ours["limit"], ours["batch_size"]) == (theirs.limit, theirs.batch_size)
    assert type(ours["limit"]) is type(theirs.limit) and type(ours["batch_size"]) is type(theirs.batch_size)
    assert f"limit: {theirs.limit}, " in header_line(ns, {}, {}) and header_line(ns, {}, {}).endswith(
        f"batch_size: {theirs.batch_size}"
    )
    cli_given = recorded_config(parse(["--model", "dummy", "--tasks", "t", "--limit", "3", "--batch_size", "8"]))
    assert (cli_given["limit"], cli_given["batch_size"]) == (3.0, "8")  # lm-eval's argparse: a float, the text


def test_config_file_with_an_unknown_key_is_refused(tmp_path: Path) -> None:
    run_file = tmp_path / "run.yaml"
    run_file.write_text("model: dummy\ntask: [toy_mc]\n")
    with pytest.raises(ConfigError, match="'task' is not a run setting of lm-eval 0.4.13.*tasks"):
        parse(["--config", str(run_file)])


def test_cache_requests_refresh_recomputes_the_request_stages() -> None:
    base = ["--model", "dummy", "--tasks", "t"]
    cached = translate(parse([*base, "--use_cache", "c", "--cache_requests", "refresh"]))
    assert "recompute=requests" in cached.overrides
    assert "recompute=all" in translate(parse([*base, "--cache_requests", "refresh"])).overrides  # answers too
    assert translate(parse([*base, "--cache_requests", "delete"])).delete_requests


def test_cache_requests_delete_drops_only_the_cached_requests(toy_library: Path, tmp_path: Path) -> None:
    """After a run, ``delete`` removes every instances entry and nothing else; the next run with it
    rebuilds the requests and reads every answer from the cache (lm-eval: its requests cache files
    deleted, its response cache kept)."""
    cache = tmp_path / "c"
    argv = ["lm-eval", "--model", "dummy", "--tasks", "toy_mc", "--include_path", str(toy_library)]
    argv += ["--limit", "4", "--use_cache", str(cache), "--bootstrap_iters", "0"]
    assert cli(argv, cwd=tmp_path).returncode == 0
    before = _tags(cache)
    assert before["instances"] == 1
    again = cli([*argv, "--cache_requests", "delete"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "1 cached requests entries deleted" in again.stderr
    assert re.search(r"cache: (\d+) of \1 model answers read from the cache .*, 0 computed", again.stderr)
    assert _tags(cache) == before  # rebuilt: the same entries, others untouched
    tr = translate(parse([*argv[1:], "--cache_requests", "delete"]))
    assert delete_requests(tr) == 1 and _tags(cache) == {**before, "instances": 0}


def _tags(cache: Path) -> dict[str, int]:
    store = CacheStore(cache)
    try:
        rows = store.raw._sql("SELECT tag, COUNT(*) FROM Cache GROUP BY tag").fetchall()
    finally:
        store.close()
    counts = {tag: n for tag, n in rows if tag}
    return {**counts, "instances": counts.get("instances", 0)}


def test_check_integrity_validates_each_task_before_any_model_call(
    toy_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """lm-eval's suite cannot exist here (the test below): each task is validated as ``python -m
    evalflow validate`` validates it; one that fails stops the run with validate's paragraph, exit 2,
    before the run starts (no run folder)."""
    mc = (toy_library / "toy_mc.yaml").read_text()
    bad = mc.replace("task: toy_mc", "task: toy_bad").replace("metric: acc\n", "metric: no_such_metric\n")
    (toy_library / "toy_bad.yaml").write_text(bad)
    env = {"EVALFLOW_CACHE": str(tmp_path / "cache")}
    argv = ["lm-eval", "--model", "dummy", "--include_path", str(toy_library), "--limit", "2", "--check_integrity"]
    done = cli([*argv, "--tasks", "toy_mc,toy_bad"], cwd=tmp_path, env_extra=env)
    validated = cli(["validate", "task=toy_bad", f"include_path=[{toy_library}]"], cwd=tmp_path, env_extra=env)
    [paragraph] = [line for line in validated.stderr.splitlines() if line.startswith("evalflow: error: ")]
    assert done.returncode == validated.returncode == 2
    assert "--check_integrity: ok toy_mc: 2 document(s) render" in done.stderr
    assert f"evalflow: error: --check_integrity: {paragraph.removeprefix('evalflow: error: ')}" in done.stderr
    assert not (tmp_path / "outputs").exists()  # the run never started

    from evalflow import simple_evaluate

    monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path / "cache"))
    common = dict(model="dummy", include_path=str(toy_library), limit=2, bootstrap_iters=0, check_integrity=True)
    assert simple_evaluate(tasks=["toy_mc"], **common)["results"]["toy_mc"]["acc,none"] is not None
    assert "--check_integrity: ok toy_mc" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="--check_integrity: .*unknown metric 'no_such_metric'"):
        simple_evaluate(tasks=["toy_bad"], **common)


def test_simple_evaluate_takes_metadata_cache_and_tracker_arguments(
    toy_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``metadata=`` reaches every task's metadata; ``rewrite_requests_cache``/``delete_requests_cache``
    are ``--cache_requests refresh|delete``; lm-eval's EvaluationTracker records the experiment as
    lm-eval's simple_evaluate records it, and then saves the results with lm-eval's own code."""
    from evalflow import simple_evaluate

    monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path / "cache"))
    common = dict(model="dummy", tasks=["toy_mc"], include_path=str(toy_library), limit=2, bootstrap_iters=0)
    results = simple_evaluate(**common, metadata={"max_seq_lengths": [4096]}, rewrite_requests_cache=True)
    assert results["configs"]["toy_mc"]["metadata"]["max_seq_lengths"] == [4096]
    assert simple_evaluate(**common, delete_requests_cache=True)["results"] == results["results"]

    evaluation_tracker = pytest.importorskip("lm_eval.loggers.evaluation_tracker")
    tracker = evaluation_tracker.EvaluationTracker(output_path=str(tmp_path / "out"))
    results = simple_evaluate(**common, model_args="pretrained=org/m", evaluation_tracker=tracker)
    config = tracker.general_config_tracker
    assert (config.model_source, config.model_name, config.model_name_sanitized) == ("dummy", "org/m", "org__m")
    tracker.save_results_aggregated(results={k: v for k, v in results.items() if k != "samples"}, samples=None)
    [saved] = list((tmp_path / "out" / "org__m").glob("results_*.json"))
    assert json.loads(saved.read_text())["results"] == results["results"]


def test_lm_evals_check_integrity_has_no_suite_in_an_installed_lm_eval() -> None:
    """Why evalflow validates instead (docs/lm-eval-surface.md: *differs*): lm-eval 0.4.13's
    run_task_tests looks for tests/test_version_stable.py three folders up from its package,
    which a pip-installed lm-eval does not have."""
    utils = pytest.importorskip("lm_eval.evaluator_utils", reason="lm-eval is not installed beside evalflow")
    with pytest.raises(FileNotFoundError, match="Unable to find package root"):
        utils.find_test_root(Path(utils.__file__))
