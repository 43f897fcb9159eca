"""load_docset / data_fingerprint: local files, data maps, split choice, process_docs, errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalflow.config.data_map import read_data_map
from evalflow.errors import DataError, TaskError
from evalflow.taskspec.data.datamap import data_source
from evalflow.taskspec.data.docsets import data_fingerprint, load_docset
from evalflow.taskspec.format.spec import TaskConfig

ROOT = Path(__file__).resolve().parents[3]
SHARED_DATA = (ROOT / ".." / "shared" / "data").resolve()
SHARED_MAP = ROOT / "conf" / "data_maps" / "shared.yaml"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    write_jsonl(d / "train.jsonl", [{"q": f"t{i}", "n": i, "tags": ["a", "b"]} for i in range(4)])
    write_jsonl(d / "validation.jsonl", [{"q": f"v{i}", "n": i, "tags": ["v"]} for i in range(3)])
    write_jsonl(d / "test.jsonl", [{"q": f"x{i}", "n": i, "tags": ["c"]} for i in range(5)])
    return d


def local_task(data: Path, splits: tuple[str, ...] = ("train", "validation", "test"), **kw: object) -> TaskConfig:
    fields = dict(
        task="loc",
        source="<python>",
        dataset_path="json",
        dataset_kwargs={"data_files": {s: str(data / f"{s}.jsonl") for s in splits}},
        training_split="train",
        validation_split="validation",
        test_split="test",
        doc_to_text="{{q}}",
    )
    fields.update(kw)
    return TaskConfig(**fields)  # type: ignore[arg-type]


def test_local_json_eval_split_and_training_fewshot_pool(data: Path) -> None:
    ds = load_docset(local_task(data))
    assert ds.eval_split == "test" and [d["q"] for d in ds.docs] == [f"x{i}" for i in range(5)]
    assert ds.fewshot_split == "train" and len(ds.fewshot_docs or ()) == 4
    assert ds.docs[0] == {"q": "x0", "n": 0, "tags": ["c"]}  # plain JSON values
    assert ds.fingerprint == data_fingerprint(local_task(data))


def test_validation_is_evaluated_without_test_and_fewshot_split_wins(data: Path) -> None:
    ds = load_docset(local_task(data, test_split=None, fewshot_split="validation"))
    assert ds.eval_split == "validation" and ds.fewshot_split == "validation"
    assert ds.fewshot_docs == ds.docs


def test_missing_fallback_split_is_skipped_but_a_named_one_is_an_error(data: Path) -> None:
    ds = load_docset(local_task(data, splits=("validation", "test")))
    assert ds.fewshot_split == "validation" and len(ds.fewshot_docs or ()) == 3
    with pytest.raises(DataError, match="no split 'dev'"):
        load_docset(local_task(data, fewshot_split="dev"))
    with pytest.raises(DataError, match="no split 'test'"):
        load_docset(local_task(data, splits=("train",)))


def test_samples_are_the_fewshot_pool(data: Path) -> None:
    ds = load_docset(local_task(data, fewshot_config={"samples": [{"q": "s", "n": 9}]}))
    assert ds.fewshot_split is None and ds.fewshot_docs == ({"q": "s", "n": 9},)


def test_process_docs_runs_on_the_dataset(data: Path, tmp_path: Path) -> None:
    from evalflow.taskspec.format.loader import function_ref

    (tmp_path / "proc.py").write_text(
        "def process_docs(ds):\n    return ds.map(lambda d: {'q': d['q'].upper(), 'double': 2 * d['n']})\n"
    )
    ds = load_docset(local_task(data, process_docs=function_ref("proc.process_docs", str(tmp_path))))
    assert ds.docs[1] == {"q": "X1", "n": 1, "tags": ["c"], "double": 2}
    assert ds.fewshot_docs and ds.fewshot_docs[0]["q"] == "T0"


def test_fingerprint_is_content_not_path(data: Path, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    shutil.copytree(data, moved)
    assert data_fingerprint(local_task(data)) == data_fingerprint(local_task(moved))
    write_jsonl(moved / "test.jsonl", [{"q": "changed", "n": 0, "tags": []}])
    assert data_fingerprint(local_task(data)) != data_fingerprint(local_task(moved))


def test_fingerprint_of_local_files_does_not_import_datasets(data: Path) -> None:
    code = (
        "import sys, json\n"
        "from evalflow.taskspec.format.spec import TaskConfig\n"
        "from evalflow.taskspec.data.docsets import data_fingerprint\n"
        f"t = TaskConfig(task='t', dataset_path='json', test_split='test', "
        f"dataset_kwargs={{'data_files': {{'test': {str(data / 'test.jsonl')!r}}}}})\n"
        "print(data_fingerprint(t), 'datasets' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.split()[1] == "False"


def test_data_map_from_mapping_file_and_env(data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub = TaskConfig(
        task="hubby",
        dataset_path="org/set",
        dataset_name="cfg",
        test_split="test",
        training_split="train",
        doc_to_text="{{q}}",
    )
    entry = {"path": "json", "data_files": {"test": "test.jsonl", "train": "train.jsonl"}}
    inline = {"root": str(data), "org/set/cfg": entry}
    ds = load_docset(hub, inline)
    assert len(ds.docs) == 5 and len(ds.fewshot_docs or ()) == 4
    mapfile = tmp_path / "maps" / "m.yaml"
    mapfile.parent.mkdir()
    mapfile.write_text("root: ../data\norg/set:\n  path: json\n  data_files: {test: test.jsonl, train: train.jsonl}\n")
    assert read_data_map(mapfile)["org/set"]["data_files"]["test"] == str(data / "test.jsonl")
    assert data_source(hub, mapfile).mapped_from == "org/set"  # path-only key as fallback
    monkeypatch.setenv("EVALFLOW_DATA_MAP", str(mapfile))
    assert load_docset(hub).fingerprint == ds.fingerprint
    monkeypatch.setenv("EVALFLOW_DATA_MAP", str(tmp_path / "nope.yaml"))
    with pytest.raises(DataError, match="does not exist"):
        load_docset(hub)


def test_data_map_entries_are_checked(data: Path) -> None:
    with pytest.raises(DataError, match="'path'"):
        read_data_map({"org/set": {"data_files": "x"}})
    hub = TaskConfig(task="h", dataset_path="org/set", test_split="test", doc_to_text="q")
    with pytest.raises(DataError, match="does not exist"):
        data_fingerprint(hub, {"org/set": {"path": "json", "data_files": {"test": str(data / "gone.jsonl")}}})


def test_hub_dataset_offline_is_a_data_error_saying_how_to_map_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.delenv("EVALFLOW_DATA_MAP", raising=False)
    t = TaskConfig(
        task="gsm",
        dataset_path="openai/gsm8k",
        dataset_name="main",
        test_split="test",
        doc_to_text="q",
        source="/tasks/gsm.yaml",
    )
    with pytest.raises(DataError) as err:
        load_docset(t)
    msg = str(err.value)
    assert "'gsm'" in msg and "openai/gsm8k" in msg and "data_map" in msg and "EVALFLOW_DATA_MAP" in msg
    assert "openai/gsm8k/main" in msg


def test_relative_data_files_resolve_next_to_the_task_yaml(data: Path, tmp_path: Path) -> None:
    folder = tmp_path / "mytask"
    write_jsonl(folder / "rows.jsonl", [{"q": "here"}])
    (folder / "t.yaml").write_text("task: t\n")
    t = TaskConfig(
        task="t",
        source=str(folder / "t.yaml"),
        dataset_path="json",
        dataset_kwargs={"data_files": {"test": "rows.jsonl"}},
        test_split="test",
        doc_to_text="q",
    )
    assert load_docset(t).docs == ({"q": "here"},)


def test_custom_dataset_function(tmp_path: Path) -> None:
    from evalflow.taskspec.format.loader import function_ref

    (tmp_path / "made.py").write_text("def make(**kw):\n    return {'test': [{'q': kw.get('tag', '?')}]}\n")
    t = TaskConfig(
        task="c",
        custom_dataset=function_ref("made.make", str(tmp_path)),
        metadata={"tag": "m"},
        test_split="test",
        doc_to_text="q",
    )
    ds = load_docset(t)
    assert ds.docs == ({"q": "m"},) and ds.fingerprint == data_fingerprint(t)


def test_task_without_dataset_path_is_a_task_error() -> None:
    with pytest.raises(TaskError, match="dataset_path"):
        data_source(TaskConfig(task="t", test_split="test"))


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="shared benchmark data (../shared/data) is absent")
def test_shared_data_map_points_at_existing_files() -> None:
    entries = read_data_map(SHARED_MAP)
    assert len(entries) == 8 + 57 + 2  # the classic suite, mmlu's subjects, humaneval and mbpp
    for key, entry in entries.items():
        for path in entry["data_files"].values():
            assert os.path.isfile(path), (key, path)


def test_unreadable_local_file_is_a_data_error_about_the_files(tmp_path: Path) -> None:
    (tmp_path / "test.jsonl").write_text('{"q": 1}\n{not json\n')
    t = TaskConfig(
        task="bad",
        dataset_path="json",
        dataset_kwargs={"data_files": {"test": str(tmp_path / "test.jsonl")}},
        test_split="test",
        doc_to_text="q",
    )
    with pytest.raises(DataError, match="'bad'.*valid JSON Lines"):
        load_docset(t)


def test_data_map_from_hydra_config_with_file_lists(data: Path) -> None:
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"root": str(data), "org/set": {"path": "json", "data_files": {"test": ["test.jsonl"]}}})
    t = TaskConfig(task="h", dataset_path="org/set", test_split="test", doc_to_text="q")
    assert data_source(t, cfg).files == {"test": (str(data / "test.jsonl"),)}
    assert len(load_docset(t, cfg).docs) == 5


def test_data_map_file_interpolations_resolve(data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_DATA", str(data))
    mapfile = tmp_path / "m.yaml"
    mapfile.write_text("root: ${oc.env:MY_DATA}\norg/set:\n  path: json\n  data_files: {test: test.jsonl}\n")
    assert read_data_map(mapfile)["org/set"]["data_files"]["test"] == str(data / "test.jsonl")
    mapfile.write_text("root: ${nope:}\norg/set: {path: json, data_files: {test: t.jsonl}}\n")
    with pytest.raises(DataError, match="interpolation"):
        read_data_map(mapfile)


def test_the_shared_map_finds_its_data_from_any_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: data_map=shared read <checkout>/../shared/data only, so a worktree or a copy of
    the code elsewhere ran on a folder that did not exist. Now: $EVALFLOW_SHARED_DATA, then the
    folder beside the checkout, then ./shared/data; else one paragraph naming what it tried."""
    from evalflow.config import packaged

    checkout, run_from = tmp_path / "elsewhere" / "evalflow", tmp_path / "project"
    checkout.mkdir(parents=True)
    run_from.mkdir()
    monkeypatch.setattr(packaged, "source_checkout", lambda: checkout)
    monkeypatch.chdir(run_from)
    monkeypatch.delenv("EVALFLOW_SHARED_DATA", raising=False)
    beside, here, env = tmp_path / "elsewhere" / "shared" / "data", run_from / "shared" / "data", tmp_path / "mine"
    with pytest.raises(DataError) as caught:
        read_data_map(SHARED_MAP)
    message = str(caught.value)
    assert message.startswith("data_map=shared: no shared data folder found (tried ") and "\n" not in message
    for part in (str(beside), str(here), "Set $EVALFLOW_SHARED_DATA", "leave data_map out"):
        assert part in message, (part, message)
    here.mkdir(parents=True)
    assert read_data_map(SHARED_MAP).root == str(here.resolve())
    beside.mkdir(parents=True)
    assert read_data_map(SHARED_MAP).root == str(beside.resolve())  # the checkout's sibling before the working folder
    env.mkdir()
    monkeypatch.setenv("EVALFLOW_SHARED_DATA", str(env))
    map_ = read_data_map(SHARED_MAP)
    assert map_.root == str(env.resolve()) and map_["openai/gsm8k/main"]["data_files"]["test"] == str(
        env.resolve() / "gsm8k" / "test.jsonl"
    )


def _mapped_hub_task(name: str = "hubby") -> TaskConfig:
    return TaskConfig(
        task=name,
        source="/tasks/hubby.yaml",
        dataset_path="org/set",
        dataset_name="cfg",
        test_split="test",
        doc_to_text="{{q}}",
    )


def test_a_missing_file_of_a_map_names_the_map_its_root_the_entry_and_the_fix(data: Path, tmp_path: Path) -> None:
    mapfile = tmp_path / "maps" / "m.yaml"
    mapfile.parent.mkdir()
    mapfile.write_text("root: ../data\norg/set/cfg:\n  path: json\n  data_files: {test: tset.jsonl}\n")
    with pytest.raises(DataError) as caught:
        data_fingerprint(_mapped_hub_task(), mapfile)
    message = str(caught.value)
    for part in (
        "task 'hubby' (/tasks/hubby.yaml)",
        f"data file {str(data / 'tset.jsonl')!r} (data_files 'test') does not exist",
        f"entry 'org/set/cfg' of the data map {mapfile}",
        f"whose root is {data}",
        "Fix that entry's data_files (or the map's root)",
        "unset data_map to load 'org/set' from the hub",
    ):
        assert part in message, (part, message)
    mapfile.write_text("org/set:\n  path: json\n  data_files: {test: 'gone/*.jsonl'}\n")  # no root: the file's folder
    with pytest.raises(
        DataError,
        match=rf"matches no file.*entry 'org/set' of the data map {mapfile}, which has no "
        rf"`root:` \(its relative paths resolve against {mapfile.parent}\)",
    ):
        data_source(_mapped_hub_task(), mapfile)


def test_a_missing_file_of_the_shared_map_or_the_env_map_says_which(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalflow.config.compose import compose_settings

    shared = tmp_path / "shared_data"  # not the real ../shared/data, which may be absent
    shared.mkdir()
    monkeypatch.setenv("EVALFLOW_SHARED_DATA", str(shared))
    settings = compose_settings(task="toy", preset="dummy", overrides=[], values={"data_map": "shared"})
    gsm8k = TaskConfig(
        task="gsm8k_like",
        source="/t.yaml",
        dataset_path="openai/gsm8k",
        dataset_name="main",
        test_split="test",
        doc_to_text="q",
    )
    monkeypatch.setitem(settings.data_map["openai/gsm8k/main"]["data_files"], "test", str(tmp_path / "moved.jsonl"))
    with pytest.raises(
        DataError,
        match=rf"entry 'openai/gsm8k/main' of the data map {SHARED_MAP}, whose root is "
        rf"{shared.resolve()}",
    ):
        data_source(gsm8k, settings.data_map)  # the run settings hold the map as read, with where it came from
    mapfile = tmp_path / "env.yaml"
    mapfile.write_text(f"root: {tmp_path}\nopenai/gsm8k/main: {{path: json, data_files: {{test: none.jsonl}}}}\n")
    monkeypatch.setenv("EVALFLOW_DATA_MAP", str(mapfile))
    with pytest.raises(
        DataError, match=rf"of the data map {mapfile} \(from \$EVALFLOW_DATA_MAP\), whose root is {tmp_path}"
    ):
        data_source(gsm8k)


def test_a_missing_mapped_file_is_refused_before_any_model_call(runner: Any, toy_library: Path, tmp_path: Path) -> None:
    from tests.support.models import CountingModel

    (toy_library / "toy_mapped.yaml").write_text(
        "task: toy_mapped\ndataset_path: org/set\ntest_split: test\n"
        "output_type: generate_until\ndoc_to_text: '{{question}}'\n"
        "doc_to_target: answer\nmetric_list: [{metric: exact_match}]\n"
    )
    mapfile = tmp_path / "m.yaml"
    mapfile.write_text(f"root: {tmp_path}\norg/set: {{path: json, data_files: {{test: missing.jsonl}}}}\n")
    with pytest.raises(DataError, match=rf"task 'toy_mapped' .*entry 'org/set' of the data map {mapfile}"):
        runner(task=["toy_mc", "toy_mapped"], data_map=str(mapfile))
    assert CountingModel.calls_total == 0  # toy_mc, first in the run, was not answered either
