"""Issue 9: eight ways a run gave a wrong, stale or lost result. One regression test per defect;
each failed on the code before the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from evalflow import evaluate
from evalflow.core.records import Request
from evalflow.errors import ModelError
from evalflow.models.dummy import DummyModel
from tests.support.models import UserModel
from tests.support.paths import ROOT

# --- 1. model objects without identity() must not share cache entries ------------------------


def test_models_without_identity_never_read_or_write_answer_dependent_entries(
    toy_library: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kw = dict(include_path=[str(toy_library)], cache_dir=str(tmp_path / "c"), limit=20, bootstrap_iters=0)
    alone = evaluate("toy_mc", UserModel("bad"), **dict(kw, cache_dir=str(tmp_path / "other")))["results"]["toy_mc"][
        "acc,none"
    ]
    good, bad = UserModel("good"), UserModel("bad")
    first = evaluate("toy_mc", good, **kw)["results"]["toy_mc"]["acc,none"]
    second = evaluate("toy_mc", bad, **kw)["results"]["toy_mc"]["acc,none"]
    assert alone != first, "the two salts must score differently for this test to mean anything"
    assert bad.calls == 20 * 4 and second == alone
    again = UserModel("good")
    evaluate("toy_mc", again, **kw)
    assert again.calls == 20 * 4  # computed again: nothing answer-dependent was read from the cache
    assert "never cached" in caplog.text and "inference, filters, metrics, aggregate" in caplog.text
    from evalflow.cache.store import CacheStore

    store = CacheStore(tmp_path / "c")
    tags = {tag for (tag,) in store.raw._sql("SELECT DISTINCT tag FROM Cache")}
    store.close()
    assert tags <= {"load_docs", "fewshot", "instances"}  # only the stages before the model


# --- 3. editing a user model class (model.type=module:Class) re-runs inference -----------------

_MODEL_SOURCE = """
from evalflow.models.dummy import DummyModel

class MyLM(DummyModel):
    def loglikelihood(self, requests):
        return [({value}, False) for _ in requests]
"""


def test_editing_a_user_model_class_changes_its_identity(toy_library: Path, tmp_path: Path) -> None:
    pkg = tmp_path / "usercode"
    pkg.mkdir()
    module = pkg / "mymod_edit.py"
    env = {**os.environ, "PYTHONPATH": f"{pkg}{os.pathsep}{ROOT}"}
    args = [
        sys.executable,
        "-m",
        "evalflow",
        "model=dummy",
        "model.type=mymod_edit:MyLM",
        "task=toy_mc",
        f"include_path=[{toy_library}]",
        f"cache_dir={tmp_path / 'c'}",
        "limit=10",
        "bootstrap_iters=0",
    ]
    scores = []
    for i, value in enumerate(("-1.0", "-2.0")):
        module.write_text(_MODEL_SOURCE.replace("{value}", value))
        done = subprocess.run(
            args + [f"hydra.run.dir={tmp_path / str(i)}"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        manifest = json.loads((tmp_path / str(i) / "manifest.json").read_text())
        assert manifest["inference"]["computed"] == 40, "the edited class must be asked again"
        scores.append(json.loads((tmp_path / str(i) / "results.json").read_text()))
    from evalflow.models.registry import model_identity

    sys.path.insert(0, str(pkg))
    try:
        ident = model_identity({"type": "mymod_edit:MyLM"})
        module.write_text(_MODEL_SOURCE.replace("{value}", "-3.0"))
        assert model_identity({"type": "mymod_edit:MyLM"})["code"] != ident["code"]
    finally:
        sys.path.remove(str(pkg))


# --- 4. malformed answers are refused before they reach the cache ------------------------------


class _Malformed(DummyModel):
    """loglikelihood answers floats instead of (logprob, is_greedy) pairs, until fixed."""

    fixed = False

    def identity(self) -> dict[str, Any]:
        return {"name": "malformed-then-fixed"}

    def loglikelihood(self, requests: Sequence[Request]) -> list[Any]:
        answers = super().loglikelihood(requests)
        return answers if _Malformed.fixed else [lp for lp, _ in answers]


def test_malformed_answers_are_a_model_error_and_never_cached(toy_library: Path, tmp_path: Path) -> None:
    kw = dict(include_path=[str(toy_library)], cache_dir=str(tmp_path / "c"), limit=5, bootstrap_iters=0)
    _Malformed.fixed = False
    with pytest.raises(ModelError) as err:
        evaluate("toy_mc", _Malformed(), **kw)
    text = str(err.value)
    assert "_Malformed.loglikelihood" in text and "(logprob: float, is_greedy: bool)" in text
    assert "Question: What is 1 plus 2?" in text  # the request
    _Malformed.fixed = True
    fixed = evaluate("toy_mc", _Malformed(), **kw)  # same identity: must not crash from the cache
    assert 0 <= fixed["results"]["toy_mc"]["acc,none"] <= 1


@pytest.mark.parametrize(
    "rtype, bad",
    [
        ("loglikelihood", [(0.5, "yes")]),
        ("loglikelihood", [(-1.0,)]),
        ("loglikelihood_rolling", [(-1.0, True)]),
        ("generate_until", [None]),
    ],
)
def test_each_request_type_checks_its_answer_shape(tmp_path: Path, rtype: str, bad: list[Any]) -> None:
    from evalflow.cache.store import CacheStore
    from evalflow.scale.answer_cache import CachedModel

    class Bad:
        def __getattr__(self, name: str) -> Any:
            return lambda requests: bad

    store = CacheStore(tmp_path)
    edge = CachedModel(store, "bad-model", lambda: Bad(), on_chunk=None)
    args = (
        ("ctx", "cont")
        if rtype == "loglikelihood"
        else ("text",)
        if rtype != "generate_until"
        else ("ctx", {"until": []})
    )
    with pytest.raises(ModelError, match=rtype):
        getattr(edge, rtype)([Request(rtype, args)])
    assert not [k for k in store.raw.iterkeys() if str(k).startswith("request:")]
    store.close()


# --- 5. lm-eval-style gen_kwargs strings are typed as lm-eval types them -----------------------


def test_gen_kwargs_string_values_are_typed() -> None:
    from evalflow.config.setting_parsers import parse_kv

    parsed = parse_kv("do_sample=False,max_gen_toks=32,temperature=0.5,top_k=-1,stop=None,until=Q:")
    assert parsed == {
        "do_sample": False,
        "max_gen_toks": 32,
        "temperature": 0.5,
        "top_k": -1,
        "stop": None,
        "until": "Q:",
    }
    assert parsed["do_sample"] is False


def test_gen_kwargs_unquoted_on_the_command_line(toy_library: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "evalflow",
            "model=dummy",
            "task=toy_gen",
            f"include_path=[{toy_library}]",
            f"cache_dir={tmp_path / 'c'}",
            "limit=2",
            "bootstrap_iters=0",
            "gen_kwargs=do_sample=False,max_gen_toks=7",
            f"hydra.run.dir={tmp_path / 'r'}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    sample = json.loads((tmp_path / "r" / "samples_toy_gen.jsonl").read_text().splitlines()[0])
    gen_args = sample["arguments"]["gen_args_0"]["arg_1"]
    assert gen_args["do_sample"] is False and gen_args["max_gen_toks"] == 7


# --- 2. runs started in the same second keep their own complete folders -----------------------


def test_runs_started_in_the_same_second_keep_their_own_folders(toy_library: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    base = [
        sys.executable,
        "-m",
        "evalflow",
        "model=dummy",
        f"include_path=[{toy_library}]",
        "limit=3",
        f"cache_dir={tmp_path / 'c'}",
        "bootstrap_iters=0",
    ]
    procs = [
        subprocess.Popen(
            base + [f"task={t}"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for t in ("toy_mc", "toy_gen", "toy_mc")
    ]
    for proc in procs:
        assert proc.wait(timeout=300) == 0, proc.stderr.read() if proc.stderr else ""
    folders = sorted(p.parent for p in (tmp_path / "outputs").glob("*/*/results.json"))
    assert len(folders) == 3
    for folder in folders:
        results = json.loads((folder / "results.json").read_text())
        (task,) = results["results"]
        assert (folder / "manifest.json").exists() and (folder / f"samples_{task}.jsonl").exists()
        assert f"task: {task}" in (folder / ".hydra" / "config.yaml").read_text()
        assert [p.name for p in folder.glob("samples_*")] == [f"samples_{task}.jsonl"]


def test_a_folder_holding_a_run_is_refused(toy_library: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    folder = tmp_path / "run"
    args = [
        sys.executable,
        "-m",
        "evalflow",
        "model=dummy",
        f"include_path=[{toy_library}]",
        "limit=3",
        f"cache_dir={tmp_path / 'c'}",
        "bootstrap_iters=0",
        f"hydra.run.dir={folder}",
    ]
    first = subprocess.run(args + ["task=toy_mc"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    snapshot = (folder / ".hydra" / "config.yaml").read_text()
    second = subprocess.run(args + ["task=toy_gen"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 2 and "already holds a run" in second.stderr and "hydra.run.dir" in second.stderr
    assert (folder / ".hydra" / "config.yaml").read_text() == snapshot  # the first run's snapshot is intact
    assert not (folder / "samples_toy_gen.jsonl").exists()
    with pytest.raises(Exception, match="already holds a run"):
        evaluate("toy_mc", "dummy", output_dir=folder, include_path=[str(toy_library)], cache_dir=str(tmp_path / "c"))


# --- 6. a data map given by path or environment is reproducible from the snapshot --------------


def test_data_map_by_path_and_by_environment_reproduce_from_the_snapshot(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    rows = [
        {"question": f"q{i}", "choices": {"text": ["a", "b"], "label": ["A", "B"]}, "answerKey": "A", "id": str(i)}
        for i in range(4)
    ]
    (data / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "maps").mkdir()
    (tmp_path / "maps" / "mine.yaml").write_text(
        "root: ../data\nallenai/ai2_arc/ARC-Easy:\n  path: json\n  data_files: {test: test.jsonl}\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "EVALFLOW_DATA_MAP"}
    env["PYTHONPATH"] = str(ROOT)
    base = [
        sys.executable,
        "-m",
        "evalflow",
        "model=dummy",
        "task=arc_easy",
        f"cache_dir={tmp_path / 'c'}",
        "bootstrap_iters=0",
    ]
    by_path = subprocess.run(
        base + ["data_map=maps/mine.yaml", f"hydra.run.dir={tmp_path / 'p'}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert by_path.returncode == 0, by_path.stderr
    by_env = subprocess.run(
        base + [f"hydra.run.dir={tmp_path / 'e'}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**env, "EVALFLOW_DATA_MAP": str(tmp_path / "maps" / "mine.yaml")},
        timeout=300,
    )
    assert by_env.returncode == 0, by_env.stderr
    for run in ("p", "e"):
        manifest = json.loads((tmp_path / run / "manifest.json").read_text())
        assert manifest["data_map"]["file"] == str(tmp_path / "maps" / "mine.yaml")
        again = subprocess.run(
            [
                sys.executable,
                "-m",
                "evalflow",
                "--config-dir",
                str(tmp_path / run / ".hydra"),
                "--config-name",
                "config",
                f"hydra.run.dir={tmp_path / (run + '-again')}",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert again.returncode == 0, again.stderr
        first = json.loads((tmp_path / run / "results.json").read_text())
        second = json.loads((tmp_path / (run + "-again") / "results.json").read_text())
        assert second["results"] == first["results"] and first["n-samples"]["arc_easy"]["effective"] == 4
        assert json.loads((tmp_path / (run + "-again") / "manifest.json").read_text())["data"] == manifest["data"]


# --- 7. few-shot examples drawn from another split than the task names: warned and recorded ---


def test_fewshot_split_fallback_is_warned_and_recorded(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    data.mkdir()
    rows = [{"q": f"q{i}", "a": "yes"} for i in range(6)]
    (data / "validation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "nofewshot.yaml").write_text(
        "task: nofewshot\ndataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    validation: {data}/validation.jsonl\n"
        "training_split: train\nvalidation_split: validation\noutput_type: multiple_choice\n"
        "doc_to_text: '{{q}}'\ndoc_to_target: 0\ndoc_to_choice: ['yes', 'no']\nmetric_list:\n  - metric: acc\n"
    )
    out = tmp_path / "run"
    results = evaluate(
        "nofewshot",
        "dummy",
        output_dir=out,
        include_path=[str(lib)],
        cache_dir=str(tmp_path / "c"),
        num_fewshot=2,
        bootstrap_iters=0,
    )
    assert "fewshot_split" not in results["configs"]["nofewshot"]  # lm-eval's dump: the YAML sets none
    assert results["configs"]["nofewshot"]["fewshot_config"]["split"] is None
    assert json.loads((out / "manifest.json").read_text())["fewshot_split"] == {"nofewshot": "validation"}
    assert "num_fewshot > 0 but fewshot_split is None" in caplog.text
    assert (
        "from split 'train', which the data does not have" in caplog.text and "the split being evaluated" in caplog.text
    )
