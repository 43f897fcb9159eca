"""The task index: classification, groups and tags, overrides, trust, and the on-disk cache."""

from __future__ import annotations

import json
import logging
import os
import sys
import textwrap
from pathlib import Path

import pytest

from evalflow.errors import TaskError, UnsafeCodeError
from evalflow.taskspec.catalog import index_scan
from evalflow.taskspec.catalog.index import TaskIndex

TASK = """\
task: {name}
dataset_path: json
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{q}}}}"
doc_to_target: label
doc_to_choice: ["a", "b"]
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def task_file(folder: Path, name: str, extra: str = "") -> Path:
    return write(folder / f"{name}.yaml", TASK.format(name=name) + textwrap.dedent(extra))


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private cache and an empty built-in folder, so only the test's trees are indexed."""
    builtin = tmp_path / "builtin"
    builtin.mkdir()
    monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("EVALFLOW_TASKS_DIR", str(builtin))
    return builtin


@pytest.fixture
def lib(tmp_path: Path) -> Path:
    """A small library: tasks, a template, tags, nested groups with overrides, a python task."""
    root = tmp_path / "lib"
    write(root / "_template_yaml", TASK.format(name="unused") + "tag: templated\n")
    write(root / "arc/_base.yaml", "dataset_path: json\ntest_split: test\noutput_type: multiple_choice\n")
    write(root / "arc/arc_easy.yaml", "include: _base.yaml\ntask: arc_easy\ntag: [ai2_arc]\ndoc_to_text: q\n")
    write(root / "arc/arc_challenge.yaml", "include: _base.yaml\ntask: arc_challenge\ntag: ai2_arc\n")
    write(root / "arc/no_name_template.yaml", "include: _base.yaml\ndescription: only a template\n")
    for name in ("m_a", "m_b", "m_c"):
        task_file(root / "m", name, "num_fewshot: 1\ndescription: own\n")
    write(
        root / "m/_m_sub.yaml",
        """
        group: m_sub
        task: [m_b, m_c]
        num_fewshot: 2
        description: from sub
        aggregate_metric_list: {metric: acc}
    """,
    )
    write(
        root / "m/_m.yaml",
        """
        group: m_all
        group_alias: M
        task:
          - task: m_a
            num_fewshot: 7
          - m_sub
          - group: inline_sub
            task: [ai2_arc]
            aggregate_metric_list: [{metric: acc, weight_by_size: false, filter_list: none}]
          - task: fresh
            dataset_path: json
            test_split: test
        description: from group
        metadata: {version: 3}
    """,
    )
    write(root / "py/py_task.yaml", "task: py_task\nclass: !function task.PyTask\n")
    write(root / "py/task.py", "raise RuntimeError('python task module imported')\n")
    write(
        root / "multi/list.yaml",
        """
        dataset_path: json
        test_split: test
        tag: listed
        task_list:
          - task: list_one
            dataset_name: one
          - task: list_two
            tag: other_tag
    """,
    )
    return root


def test_classification_matches_lm_eval(lib: Path) -> None:
    index = TaskIndex.build([lib])
    assert index.task_names() == sorted(
        ["arc_easy", "arc_challenge", "m_a", "m_b", "m_c", "py_task", "list_one", "list_two"]
    )
    assert index.group_names() == ["m_all", "m_sub"]
    assert index.tag_names() == ["ai2_arc", "listed", "other_tag"]
    assert index.entry("ai2_arc").members == ("arc_challenge", "arc_easy")
    assert index.entry("py_task").python is True
    assert index.entry("list_two").item == 1
    assert index.problems == ()


def test_indexing_and_resolving_never_import_task_code(lib: Path, tmp_path: Path) -> None:
    write(lib / "coded/utils.py", "raise RuntimeError('utils imported')\n")
    write(lib / "coded/coded.yaml", TASK.format(name="coded") + "process_docs: !function utils.process\n")
    index = TaskIndex.build([lib])  # would raise if utils.py or task.py were imported
    selection = index.resolve("coded", trust_task_code=True)
    assert selection.tasks[0].process_docs.attr == "process"
    assert not any(getattr(m, "__file__", None) == str(lib / "coded/utils.py") for m in list(sys.modules.values()))


def test_group_nesting_propagates_overrides(lib: Path) -> None:
    selection = TaskIndex.build([lib]).resolve("m_all", trust_task_code=True)
    tasks = {t.task: t for t in selection.tasks}
    assert list(tasks) == ["m_a", "m_b", "m_c", "arc_challenge", "arc_easy", "m_all::fresh"]
    assert tasks["m_a"].num_fewshot == 7  # a member's own keys win over the group's
    assert tasks["m_b"].num_fewshot == 2 and tasks["m_c"].num_fewshot == 2  # subgroup override
    assert all(t.description == "from group" for t in tasks.values())  # parent beats subgroup/own
    assert tasks["arc_easy"].doc_to_text == "q"
    groups = {g.name: g for g in selection.groups}
    assert list(groups) == ["m_all", "m_sub", "m_all::inline_sub"]
    assert groups["m_all"].members == ("m_a", "m_sub", "m_all::inline_sub", "m_all::fresh")
    assert groups["m_all"].group_alias == "M" and groups["m_all"].metadata == {"version": 3}
    assert groups["m_all"].aggregate_metric_list is None
    assert groups["m_sub"].aggregate_metric_list == (
        {"metric": "acc", "aggregation": "mean", "weight_by_size": True, "filter_list": None},
    )
    assert groups["m_all::inline_sub"].members == ("arc_challenge", "arc_easy")
    assert groups["m_all::inline_sub"].aggregate_metric_list[0]["filter_list"] == ["none"]


def test_tag_expands_to_its_tasks_sorted(lib: Path) -> None:
    selection = TaskIndex.build([lib]).resolve("ai2_arc")
    assert [t.task for t in selection.tasks] == ["arc_challenge", "arc_easy"]
    assert selection.groups == ()
    listed = TaskIndex.build([lib]).resolve(["listed"])
    assert [(t.task, t.dataset_name) for t in listed.tasks] == [("list_one", "one")]


def test_task_list_entries_share_the_file_keys(lib: Path) -> None:
    selection = TaskIndex.build([lib]).resolve("list_two")
    task = selection.tasks[0]
    assert (task.task, task.dataset_path, task.test_split, task.tag) == ("list_two", "json", "test", ("other_tag",))


def test_same_task_reached_twice_is_an_error(lib: Path) -> None:
    index = TaskIndex.build([lib])
    with pytest.raises(TaskError, match="'arc_easy' is selected twice"):
        index.resolve("arc_easy,ai2_arc")
    with pytest.raises(TaskError, match="'m_b' is selected twice"):
        index.resolve(["m_sub", "m_all"], trust_task_code=True)
    with pytest.raises(TaskError, match="selected twice"):
        index.resolve("m_a,m_a")


def test_unknown_name_suggests_close_ones(lib: Path) -> None:
    with pytest.raises(TaskError, match="arc_easy"):
        TaskIndex.build([lib]).resolve("arc_eazy")


def test_unknown_group_member_is_an_error(lib: Path) -> None:
    write(lib / "bad/_g.yaml", "group: bad_g\ntask: [m_a, arc_esay]\n")
    with pytest.raises(TaskError, match="arc_esay.*did you mean 'arc_easy'"):
        TaskIndex.build([lib]).resolve("bad_g")


def test_group_cycle_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / "c/_a.yaml", "group: ga\ntask: [gb]\n")
    write(tmp_path / "c/_b.yaml", "group: gb\ntask: [ga]\n")
    with pytest.raises(TaskError, match="group cycle ga -> gb -> ga"):
        TaskIndex.build([tmp_path / "c"]).resolve("ga")


def test_old_style_group_key_is_a_group_and_refused_with_the_fix(tmp_path: Path) -> None:
    write(tmp_path / "o/old.yaml", TASK.format(name="old_task") + "group: old_group\n")
    index = TaskIndex.build([tmp_path / "o"])
    assert index.group_names() == ["old_group"] and index.task_names() == []  # as lm-eval 0.4.13
    with pytest.raises(TaskError, match="tag: old_group"):
        index.resolve("old_group")


def test_python_task_class_is_listed_but_not_runnable(lib: Path) -> None:
    index = TaskIndex.build([lib])
    with pytest.raises(UnsafeCodeError):
        index.resolve("py_task")
    with pytest.raises(TaskError, match="Python task class"):
        index.resolve("py_task", trust_task_code=True)


def test_later_include_path_overrides_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    task_file(tmp_path / "first", "shared", "description: first\n")
    task_file(tmp_path / "first", "only_first", "tag: both\n")
    task_file(tmp_path / "second", "shared", "description: second\n")
    task_file(tmp_path / "second", "only_second", "tag: both\n")
    with caplog.at_level(logging.WARNING, logger="evalflow.taskspec.catalog.index"):
        index = TaskIndex.build([tmp_path / "first", tmp_path / "second"])
        assert index.resolve("shared").tasks[0].description == "second"
    assert "shared" in caplog.text and "overrides" in caplog.text
    assert index.entry("both").members == ("only_first", "only_second")  # tags merge
    reverse = TaskIndex.build([tmp_path / "second", tmp_path / "first"])
    assert reverse.resolve("shared").tasks[0].description == "first"


def test_builtin_folder_comes_first(tmp_path: Path, isolated: Path) -> None:
    task_file(isolated, "shared", "description: builtin\n")
    task_file(tmp_path / "user", "shared", "description: user\n")
    assert TaskIndex.build().resolve("shared").tasks[0].description == "builtin"
    assert TaskIndex.build([tmp_path / "user"]).resolve("shared").tasks[0].description == "user"
    assert TaskIndex.build([tmp_path / "user"], builtin=False).roots == (os.path.realpath(tmp_path / "user"),)


def test_untrusted_function_is_refused_unless_trusted(tmp_path: Path) -> None:
    folder = tmp_path / "user"
    write(folder / "utils.py", "def process(ds):\n    return ds\n")
    task_file(folder, "coded", "process_docs: !function utils.process\n")
    index = TaskIndex.build([folder])
    with pytest.raises(UnsafeCodeError, match="trust_task_code=true"):
        index.resolve("coded")
    assert index.resolve("coded", trust_task_code=True).tasks[0].process_docs.attr == "process"


def test_untrusted_function_in_a_group_override_is_refused(tmp_path: Path, isolated: Path) -> None:
    task_file(isolated, "safe")
    write(tmp_path / "user/utils.py", "def f(ds):\n    return ds\n")
    write(tmp_path / "user/_g.yaml", "group: g\ntask: [safe]\nprocess_docs: !function utils.f\n")
    with pytest.raises(UnsafeCodeError):
        TaskIndex.build([tmp_path / "user"]).resolve("g")


def test_builtin_task_code_is_trusted(isolated: Path) -> None:
    write(isolated / "utils.py", "def process(ds):\n    return ds\n")
    task_file(isolated, "builtin_coded", "process_docs: !function utils.process\n")
    assert TaskIndex.build().resolve("builtin_coded").tasks[0].task == "builtin_coded"


def test_yaml_path_as_requested_task(tmp_path: Path, lib: Path) -> None:
    path = task_file(tmp_path / "loose", "loose_task", "num_fewshot: 4\n")
    index = TaskIndex.build([lib])
    selection = index.resolve(str(path))
    assert [(t.task, t.num_fewshot, t.source) for t in selection.tasks] == [("loose_task", 4, os.path.realpath(path))]
    group = write(tmp_path / "loose/_g.yaml", "group: loose_g\ntask: [arc_easy, m_a]\n")
    assert [t.task for t in index.resolve([str(group)]).tasks] == ["arc_easy", "m_a"]
    with pytest.raises(TaskError, match="not found"):
        index.resolve(str(tmp_path / "missing.yaml"))
    # a folder that is no indexed name: each *.yaml directly in it, by name (lm-eval's --tasks DIR)
    assert [t.task for t in index.resolve(str(tmp_path / "loose") + "/").tasks] == ["arc_easy", "m_a", "loose_task"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(TaskError, match="include_path"):
        index.resolve(str(tmp_path / "empty"))
    with pytest.raises(TaskError, match="defines no task"):
        index.resolve(str(lib / "arc/_base.yaml"))


def test_invalid_files_are_skipped_and_reported(tmp_path: Path) -> None:
    task_file(tmp_path / "t", "good")
    write(tmp_path / "t/broken.yaml", "task: broken\n  bad: indent\n")
    write(tmp_path / "t/dangling.yaml", "include: nope.yaml\ntask: dangling\n")
    index = TaskIndex.build([tmp_path / "t"])
    assert index.task_names() == ["good"]
    reasons = dict(index.problems)
    assert "line 2" in reasons[os.path.realpath(tmp_path / "t/broken.yaml")]
    assert "nope.yaml" in reasons[os.path.realpath(tmp_path / "t/dangling.yaml")]


def test_include_path_must_be_a_folder(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="not a folder"):
        TaskIndex.build([tmp_path / "missing"])


# ----------------------------------------------------------------------------- the cache


def count_scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    scanned: list[str] = []
    real = index_scan._scan_file

    def counting(path: str, *args: object) -> list:
        scanned.append(os.path.basename(path))
        return real(path, *args)

    monkeypatch.setattr(index_scan, "_scan_file", counting)
    return scanned


def test_warm_index_reads_no_yaml(lib: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cold = TaskIndex.build([lib])
    scanned = count_scans(monkeypatch)
    warm = TaskIndex.build([lib])
    assert scanned == []
    assert (warm.task_names(), warm.group_names(), warm.tag_names()) == (
        cold.task_names(),
        cold.group_names(),
        cold.tag_names(),
    )
    assert warm.entry("list_two") == cold.entry("list_two")


def test_changed_file_is_rescanned_alone(lib: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    TaskIndex.build([lib])
    scanned = count_scans(monkeypatch)
    target = lib / "m/m_c.yaml"
    target.write_text(target.read_text().replace("task: m_c", "task: m_renamed"))
    index = TaskIndex.build([lib])
    assert scanned == ["m_c.yaml"]
    assert "m_renamed" in index.task_names() and "m_c" not in index.task_names()


def test_changed_include_rescans_its_includers(lib: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    TaskIndex.build([lib])
    scanned = count_scans(monkeypatch)
    write(lib / "arc/_base.yaml", "dataset_path: json\ntest_split: test\ntag: from_base\n")
    index = TaskIndex.build([lib])
    assert sorted(scanned) == ["_base.yaml", "arc_challenge.yaml", "arc_easy.yaml", "no_name_template.yaml"]
    assert index.entry("from_base") is None  # the including files' own tag wins
    write(lib / "arc/_base.yaml", "dataset_path: json\ngroup: now_a_group\ntask: [m_a]\n")
    assert "now_a_group" in TaskIndex.build([lib]).group_names()


def test_added_and_removed_files_are_noticed(lib: Path) -> None:
    TaskIndex.build([lib])
    task_file(lib / "new", "brand_new")
    (lib / "m/m_a.yaml").unlink()
    index = TaskIndex.build([lib])
    assert "brand_new" in index.task_names() and "m_a" not in index.task_names()


def test_fixed_include_is_noticed(tmp_path: Path) -> None:
    write(tmp_path / "t/dangling.yaml", "include: _later.yaml\ntask: dangling\n")
    assert TaskIndex.build([tmp_path / "t"]).task_names() == []
    write(tmp_path / "t/_later.yaml", "dataset_path: json\n")
    assert TaskIndex.build([tmp_path / "t"]).task_names() == ["dangling"]


def test_corrupt_cache_is_rebuilt(lib: Path, tmp_path: Path) -> None:
    TaskIndex.build([lib], builtin=False)
    cache_files = list((tmp_path / "cache" / "index").glob("*.json"))
    assert len(cache_files) == 2
    for f in cache_files:
        f.write_text("{not json")
    assert "arc_easy" in TaskIndex.build([lib], builtin=False).task_names()
    records = json.loads(next((tmp_path / "cache" / "index").glob("*.records.json")).read_text())
    assert records["root"] == os.path.realpath(lib)
    assert [f[0] for f in records["files"]] == sorted(str(p.relative_to(lib)) for p in lib.rglob("*.yaml"))


# ----------------------------------------------------------------------------- group edge cases


@pytest.mark.parametrize(
    ("aggregate", "match"),
    [
        ("{metric: acc, weight_by_sise: true}", "did you mean 'weight_by_size'"),
        ("{metric: acc, weight_by_size: truez}", "true or false"),
        ("{metric: acc, aggregation: median}", "only `mean`"),
        ("[{aggregation: mean}]", "metric: name"),
    ],
)
def test_invalid_aggregate_metric_list_is_refused(tmp_path: Path, aggregate: str, match: str) -> None:
    task_file(tmp_path / "g", "member")
    write(tmp_path / "g/_g.yaml", f"group: g\ntask: [member]\naggregate_metric_list: {aggregate}\n")
    with pytest.raises(TaskError, match=match):
        TaskIndex.build([tmp_path / "g"]).resolve("g")


def test_unknown_group_key_is_refused_naming_the_group_file(tmp_path: Path) -> None:
    task_file(tmp_path / "g", "member")
    group = write(tmp_path / "g/_g.yaml", "group: g\ntask: [member]\ngroup_alais: G\n")
    with pytest.raises(TaskError, match="group_alias") as err:
        TaskIndex.build([tmp_path / "g"]).resolve("g")
    assert str(os.path.realpath(group)) in str(err.value)


def test_name_listed_twice_in_one_group_is_used_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    task_file(tmp_path / "g", "member")
    write(tmp_path / "g/_g.yaml", "group: g\ntask: [member, member]\n")
    selection = TaskIndex.build([tmp_path / "g"]).resolve("g")
    assert [t.task for t in selection.tasks] == ["member"] and selection.groups[0].members == ("member",)
    assert "twice" in caplog.text


def test_inline_member_include_is_relative_to_the_group_file(tmp_path: Path) -> None:
    write(tmp_path / "g/_tpl.yaml", "dataset_path: json\ntest_split: test\ndescription: tpl\n")
    write(
        tmp_path / "g/_g.yaml",
        """
        group: g
        task:
          - group: sub
            task:
              - task: prompt_0
                include: _tpl.yaml
                doc_to_text: "{{q}}"
    """,
    )
    selection = TaskIndex.build([tmp_path / "g"]).resolve("g")
    (task,) = selection.tasks
    assert (task.task, task.dataset_path, task.description) == ("g::sub::prompt_0", "json", "tpl")
    assert [g.name for g in selection.groups] == ["g", "g::sub"]


def test_dict_member_naming_a_tag_keeps_task_names(tmp_path: Path) -> None:
    task_file(tmp_path / "g", "t1", "tag: tg\n")
    task_file(tmp_path / "g", "t2", "tag: tg\n")
    write(tmp_path / "g/_g.yaml", "group: g\ntask:\n  - task: tg\n    num_fewshot: 3\n")
    selection = TaskIndex.build([tmp_path / "g"]).resolve("g")
    assert [(t.task, t.num_fewshot) for t in selection.tasks] == [("t1", 3), ("t2", 3)]


def test_several_overrides_are_one_warning_with_the_count(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """lm-eval's task folder on include_path overrides 72 built-in names: one warning, not 72."""
    for name in ("t1", "t2", "t3"):
        task_file(tmp_path / "first", name)
        task_file(tmp_path / "second", name)
    with caplog.at_level(logging.DEBUG, logger="evalflow.taskspec.catalog.index"):
        TaskIndex.build([tmp_path / "first", tmp_path / "second"]).resolve("t1,t2,t3")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    second = os.path.realpath(tmp_path / "second")
    assert warnings[0].startswith(f"3 tasks and groups this run uses from {second} override")
    assert "(t1, t2, t3)" in warnings[0]
    details = [
        r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG and "overrides the" in r.getMessage()
    ]
    assert sorted(d.split("'")[1] for d in details) == ["t1", "t2", "t3"]


def test_overrides_a_run_does_not_use_are_not_warned(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Regression: `include_path=lm_eval` warned '77 tasks and groups ... override those of the same
    name' on every run, also one that ran none of them (and on `ls`, which runs nothing)."""
    for name in ("t1", "t2", "t3"):
        task_file(tmp_path / "first", name)
        task_file(tmp_path / "second", name)
    task_file(tmp_path / "second", "other")
    with caplog.at_level(logging.WARNING, logger="evalflow.taskspec.catalog.index"):
        index = TaskIndex.build([tmp_path / "first", tmp_path / "second"])
        assert sorted(index.overrides) == ["t1", "t2", "t3"]
        index.resolve("other")
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


def test_an_override_a_run_uses_is_warned_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A group that reaches an overridden task names it; resolving again does not repeat the warning."""
    for name in ("t1", "t2"):
        task_file(tmp_path / "first", name)
        task_file(tmp_path / "second", name)
    write(tmp_path / "second/_g.yaml", "group: g\ntask: [t2]\n")
    with caplog.at_level(logging.WARNING, logger="evalflow.taskspec.catalog.index"):
        index = TaskIndex.build([tmp_path / "first", tmp_path / "second"])
        index.resolve("g")
        index.resolve("g")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "task 't2'" in warnings[0] and "t1" not in warnings[0]


def _hydra_run_folder(folder: Path, task: str) -> None:
    """What Hydra writes into a run folder: a config snapshot whose `task:` key names a task."""
    write(folder / ".hydra/config.yaml", f"model:\n  type: dummy\ntask: {task}\nlimit: 10\n")
    write(folder / ".hydra/overrides.yaml", f"- task={task}\n")
    write(folder / "results.json", "{}")


def test_run_folders_and_environments_inside_a_task_folder_are_not_indexed(tmp_path: Path) -> None:
    """Regression: `hydra.run.dir=T/a` (and `include_path=[.]` with `outputs/`) made the index read
    the `.hydra/config.yaml` snapshots as tasks; every earlier run folder was an unreadable task."""
    lib = tmp_path / "T"
    task_file(lib, "mytask")
    _hydra_run_folder(lib / "a", "mytask")
    _hydra_run_folder(lib / "outputs/2026-01-01/10-00-00", "mytask")
    write(lib / "outputs/multirun/2026-01-01/10-00-00/multirun.yaml", "task: mytask\nhydra: {}\n")
    task_file(lib / "outputs/multirun/2026-01-01/10-00-00/0", "in_sweep")  # under the sweep folder
    task_file(lib / ".venv/lib/site-packages/pkg", "in_hidden_venv")
    write(lib / "env/pyvenv.cfg", "home = /usr/bin\n")
    task_file(lib / "env/lib/pkg", "in_venv")
    task_file(lib / ".git/hooks", "in_git")
    task_file(lib / "sub", "nested")  # an ordinary subfolder still counts
    index = TaskIndex.build([lib])
    assert index.task_names() == ["mytask", "nested"]
    assert index.problems == ()
    assert index.entry("mytask").path == os.path.realpath(lib / "mytask.yaml")


def test_a_task_folder_that_is_itself_the_run_folder_is_indexed(tmp_path: Path) -> None:
    """`hydra.run.dir=T` with include_path=[T]: T's own tasks stay; only its `.hydra` is skipped."""
    lib = tmp_path / "T"
    task_file(lib, "mytask")
    _hydra_run_folder(lib, "mytask")
    index = TaskIndex.build([lib])
    assert index.task_names() == ["mytask"] and index.problems == ()
