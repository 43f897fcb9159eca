"""The YAML loader: include chains and errors, !function laziness, TaskConfig normalization."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from evalflow.errors import TaskError
from evalflow.taskspec.format.loader import (
    function_refs,
    load_yaml,
    read_header,
    resolve_function,
    task_from_dict,
    with_includes,
)
from evalflow.taskspec.format.spec import FunctionRef, TaskConfig

RAISING_MODULE = "raise RuntimeError('task code ran during loading')\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


# ----------------------------------------------------------------------------- include


def test_include_chain_merges_shallowly_and_including_file_wins(tmp_path: Path) -> None:
    write(
        tmp_path / "base.yaml",
        """
        output_type: multiple_choice
        description: base
        metadata: {version: 1}
        task_list: [{task: never_inherited}]
    """,
    )
    write(
        tmp_path / "sub/mid.yaml",
        """
        include: ../base.yaml
        description: mid
        num_fewshot: 3
        metadata: {note: mid}
    """,
    )
    leaf = write(
        tmp_path / "sub/deeper/leaf.yaml",
        """
        include: ../mid.yaml
        task: leaf
        num_fewshot: 5
    """,
    )
    cfg = load_yaml(leaf)
    assert cfg == {
        "output_type": "multiple_choice",
        "description": "mid",
        "metadata": {"note": "mid"},  # shallow: the whole mapping is replaced
        "num_fewshot": 5,
        "task": "leaf",
    }


def test_include_list_later_wins_and_absolute_paths_work(tmp_path: Path) -> None:
    first = write(tmp_path / "a.yaml", "description: a\nnum_fewshot: 1\n")
    write(tmp_path / "b.yaml", "description: b\n")
    leaf = write(tmp_path / "leaf.yaml", f"include: [{first}, b.yaml]\ntask: t\n")
    assert load_yaml(leaf) == {"description": "b", "num_fewshot": 1, "task": "t"}


def test_diamond_include_is_not_a_cycle(tmp_path: Path) -> None:
    write(tmp_path / "root.yaml", "description: root\n")
    write(tmp_path / "left.yaml", "include: root.yaml\nnum_fewshot: 1\n")
    write(tmp_path / "right.yaml", "include: root.yaml\nrepeats: 2\n")
    leaf = write(tmp_path / "leaf.yaml", "include: [left.yaml, right.yaml]\ntask: t\n")
    assert load_yaml(leaf) == {"description": "root", "num_fewshot": 1, "repeats": 2, "task": "t"}


def test_include_cycle_names_the_chain(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", "include: b.yaml\ntask: a\n")
    write(tmp_path / "b.yaml", "include: c.yaml\n")
    write(tmp_path / "c.yaml", "include: a.yaml\n")
    with pytest.raises(TaskError, match="include cycle") as err:
        load_yaml(tmp_path / "a.yaml")
    chain = str(err.value)
    assert chain.index("a.yaml") < chain.index("b.yaml") < chain.index("c.yaml")
    assert chain.count("a.yaml") == 2


def test_missing_include_names_both_files(tmp_path: Path) -> None:
    leaf = write(tmp_path / "leaf.yaml", "include: nowhere/_template.yaml\ntask: t\n")
    with pytest.raises(TaskError) as err:
        load_yaml(leaf)
    message = str(err.value)
    assert str(leaf) in message
    assert str(tmp_path / "nowhere" / "_template.yaml") in message


def test_malformed_yaml_reports_file_and_line(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.yaml", "task: t\ndoc_to_text: ok\nmetric_list: [a, b\noutput_type: x\n")
    with pytest.raises(TaskError, match=r"bad\.yaml, line [34]"):
        load_yaml(bad)


def test_malformed_included_file_reports_the_included_file(tmp_path: Path) -> None:
    write(tmp_path / "_tpl.yaml", "a: 1\n  b: 2\n")
    leaf = write(tmp_path / "leaf.yaml", "include: _tpl.yaml\ntask: t\n")
    with pytest.raises(TaskError, match=r"_tpl\.yaml, line 2"):
        load_yaml(leaf)


def test_non_mapping_yaml_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="mapping"):
        load_yaml(write(tmp_path / "list.yaml", "- a\n- b\n"))
    with pytest.raises(TaskError, match="empty"):
        load_yaml(write(tmp_path / "empty.yaml", ""))


def test_with_includes_resolves_relative_to_the_defining_file(tmp_path: Path) -> None:
    write(tmp_path / "_tpl.yaml", "dataset_path: d\ndescription: tpl\n")
    group_file = str(tmp_path / "group.yaml")
    merged = with_includes({"include": "_tpl.yaml", "task": "x", "description": "own"}, group_file)
    assert merged == {"dataset_path": "d", "description": "own", "task": "x"}


def test_read_header_constructs_only_classifying_keys(tmp_path: Path) -> None:
    write(tmp_path / "utils.py", RAISING_MODULE)
    write(tmp_path / "_tpl.yaml", "tag: [t1]\ndoc_to_text: !function utils.nothing\n")
    leaf = write(tmp_path / "leaf.yaml", "include: _tpl.yaml\ntask: leaf\nprocess_docs: !function utils.x\n")
    header, files = read_header(os.path.realpath(leaf), {})
    assert header == {"tag": ["t1"], "task": "leaf"}
    assert files == {os.path.realpath(leaf), os.path.realpath(tmp_path / "_tpl.yaml")}


# ----------------------------------------------------------------------------- !function


def test_function_tag_becomes_a_lazy_ref(tmp_path: Path) -> None:
    write(tmp_path / "utils.py", RAISING_MODULE)
    leaf = write(tmp_path / "t.yaml", "task: t\nprocess_docs: !function utils.process_docs\n")
    cfg = load_yaml(leaf)  # must not import utils.py, which would raise
    ref = cfg["process_docs"]
    assert isinstance(ref, FunctionRef)
    assert ref.module_path == os.path.realpath(tmp_path / "utils.py")
    assert ref.attr == "process_docs"
    assert len(ref.source_hash) == 32
    assert not any(getattr(m, "__file__", None) == ref.module_path for m in list(sys.modules.values()))


def test_resolve_function_imports_on_first_use(tmp_path: Path) -> None:
    write(tmp_path / "utils.py", "CALLS = []\ndef double(x):\n    CALLS.append(x)\n    return 2 * x\n")
    ref = load_yaml(write(tmp_path / "t.yaml", "task: t\nprocess_results: !function utils.double\n"))["process_results"]
    fn = resolve_function(ref)
    assert fn(21) == 42
    assert resolve_function(ref) is fn  # imported once per source version


def test_same_named_modules_of_two_tasks_do_not_clash(tmp_path: Path) -> None:
    write(tmp_path / "a/utils.py", "def f():\n    return 'a'\n")
    write(tmp_path / "b/utils.py", "def f():\n    return 'b'\n")
    ref_a = load_yaml(write(tmp_path / "a/t.yaml", "task: a\nprocess_docs: !function utils.f\n"))["process_docs"]
    ref_b = load_yaml(write(tmp_path / "b/t.yaml", "task: b\nprocess_docs: !function utils.f\n"))["process_docs"]
    assert resolve_function(ref_a)() == "a"
    assert resolve_function(ref_b)() == "b"


def test_resolve_function_errors_name_file_and_attribute(tmp_path: Path) -> None:
    write(tmp_path / "utils.py", "def process_docs(ds):\n    return ds\n")
    cfg = load_yaml(write(tmp_path / "t.yaml", "task: t\na: !function utils.proces_docs\nb: !function nomod.f\n"))
    with pytest.raises(TaskError, match="proces_docs") as err:
        resolve_function(cfg["a"])
    assert "utils.py" in str(err.value) and "process_docs" in str(err.value)  # did you mean
    with pytest.raises(TaskError, match=r"nomod\.py"):
        resolve_function(cfg["b"])


def test_resolve_function_wraps_import_errors(tmp_path: Path) -> None:
    write(tmp_path / "utils.py", RAISING_MODULE)
    ref = load_yaml(write(tmp_path / "t.yaml", "task: t\np: !function utils.f\n"))["p"]
    with pytest.raises(TaskError, match="task code ran during loading"):
        resolve_function(ref)


def test_a_module_calling_sys_exit_is_a_task_error(tmp_path: Path) -> None:
    """lm-eval's slr_bench module calls sys.exit() at import when a program is missing: that must
    fail the task with the module's message, not end the run (or `validate`) silently."""
    write(tmp_path / "utils.py", "import sys\nsys.exit('Error: swipl is not installed')\n")
    ref = load_yaml(write(tmp_path / "t.yaml", "task: t\np: !function utils.f\n"))["p"]
    with pytest.raises(TaskError, match="SystemExit: Error: swipl is not installed"):
        resolve_function(ref)


def test_resolve_function_refuses_a_module_changed_since_loading(tmp_path: Path) -> None:
    module = write(tmp_path / "utils.py", "def f():\n    return 1\n")
    ref = load_yaml(write(tmp_path / "t.yaml", "task: t\np: !function utils.f\n"))["p"]
    module.write_text("def f():\n    return 2  # changed\n")
    with pytest.raises(TaskError, match="changed after"):
        resolve_function(ref)


def test_function_tag_found_from_a_package_root(tmp_path: Path) -> None:
    write(tmp_path / "pkg/tasks/x/utils.py", "def f():\n    return 'x'\n")
    leaf = write(tmp_path / "pkg/tasks/x/t.yaml", "task: t\np: !function pkg.tasks.x.utils.f\n")
    ref = load_yaml(leaf)["p"]
    assert ref.module_path == os.path.realpath(tmp_path / "pkg/tasks/x/utils.py")
    assert resolve_function(ref)() == "x"


def test_function_tag_without_module_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="module.attribute"):
        load_yaml(write(tmp_path / "t.yaml", "task: t\np: !function process_docs\n"))


def test_function_refs_finds_refs_anywhere(tmp_path: Path) -> None:
    write(tmp_path / "utils.py", "")
    cfg = load_yaml(
        write(
            tmp_path / "t.yaml",
            """
        task: t
        process_docs: !function utils.a
        metric_list:
          - metric: !function utils.b
        filter_list:
          - name: f
            filter: [{function: custom, filter_fn: !function utils.c}]
    """,
        )
    )
    task = task_from_dict(cfg, "t.yaml")
    assert [r.attr for r in function_refs(task)] == ["a", "b", "c"]
    assert [r.attr for r in function_refs(cfg)] == ["a", "b", "c"]


# ----------------------------------------------------------------------------- task_from_dict


def test_task_from_dict_normalizes_like_lm_eval() -> None:
    task = task_from_dict(
        {
            "task": "t",
            "group": "old_style_group",  # lm-eval drops it
            "tag": "one_tag",
            "output_type": "multiple_choice",
            "metric_list": [{"metric": "acc", "aggregation": "mean"}],
            "filter_list": [{"name": "none", "filter": [{"function": "take_first"}]}],
            "metadata": 1.0,
        },
        "src.yaml",
    )
    assert isinstance(task, TaskConfig)
    assert task.tag == ("one_tag",)
    assert task.metric_list == ({"metric": "acc", "aggregation": "mean"},)
    assert isinstance(task.filter_list, tuple)
    assert task.metadata == {"_metadata": 1.0}
    assert task.generation_kwargs is None  # not a generate_until task
    assert task.target_delimiter == " " and task.fewshot_delimiter == "\n\n" and task.repeats == 1
    assert task.source == "src.yaml"


def test_generation_kwargs_get_lm_eval_defaults() -> None:
    default = task_from_dict({"task": "g", "fewshot_delimiter": "\n"}, "s")
    assert default.generation_kwargs == {"temperature": 0.0, "do_sample": False, "max_gen_toks": 256, "until": ["\n"]}
    given = task_from_dict({"task": "g", "generation_kwargs": {"temperature": 0, "until": ["Q:"]}}, "s")
    assert given.generation_kwargs == {"temperature": 0.0, "until": ["Q:"]}
    assert isinstance(given.generation_kwargs["temperature"], float)
    no_until = task_from_dict({"task": "g", "generation_kwargs": {"max_gen_toks": 5}}, "s")
    assert no_until.generation_kwargs == {"max_gen_toks": 5, "until": ["\n\n"]}


def test_unknown_key_suggests_the_nearest() -> None:
    with pytest.raises(TaskError, match="doc_to_target") as err:
        task_from_dict({"task": "t", "doc_to_targt": "label"}, "my/task.yaml")
    assert "my/task.yaml" in str(err.value) and "doc_to_targt" in str(err.value)


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        ({"task": ["a"]}, "name"),
        ({"dataset_path": "x"}, "name"),
        ({"task": "t", "output_type": "loglikelihod"}, "loglikelihood"),
        ({"task": "t", "metric_list": [{"aggregation": "mean"}]}, "metric"),
        ({"task": "t", "metric_list": {"metric": "acc"}}, "list"),
        ({"task": "t", "num_fewshot": "5"}, "num_fewshot"),
        ({"task": "t", "repeats": 0}, "repeats"),
        ({"task": "t", "process_docs": "utils.f"}, "!function"),
        ({"task": "t", "tag": [1]}, "tag"),
        ({"task": "t", "class": "x"}, "Python task class"),
    ],
)
def test_invalid_task_values_are_refused(raw: dict, match: str) -> None:
    with pytest.raises(TaskError, match=match):
        task_from_dict(raw, "src.yaml")
