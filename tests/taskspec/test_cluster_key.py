"""``cluster_key``: read and checked with the task, rendered per document, kept out of lm-eval's
configs dump; a key that renders no id is one paragraph naming the task file, the key and the document."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from evalflow.errors import TaskError
from evalflow.taskspec.format.loader import task_from_dict
from evalflow.taskspec.format.spec import EVALFLOW_TASK_FIELDS, TASK_FIELDS
from evalflow.taskspec.prompts.clusters import MAX_ID_CHARS, cluster_ids
from tests.support.builtin_tasks import all_yaml_tasks
from tests.support.paths import SHARED_DATA, SHARED_MAP

BASE = {"task": "t", "test_split": "test", "doc_to_text": "x", "doc_to_target": "y"}


def test_parsed_and_left_out_of_lmevals_dump() -> None:
    task = task_from_dict({**BASE, "cluster_key": "passage"}, "/tasks/t.yaml")
    assert task.cluster_key == "passage" and "cluster_key" in TASK_FIELDS
    assert "cluster_key" in EVALFLOW_TASK_FIELDS and "cluster_key" not in task.to_dict()
    assert task.to_dict() == task_from_dict(BASE, "/tasks/t.yaml").to_dict()


@pytest.mark.parametrize("bad", [3, "", "  ", ["passage"]])
def test_refuses_a_key_that_is_no_field_or_template(bad: object) -> None:
    with pytest.raises(TaskError, match=r"/tasks/t.yaml: `cluster_key:` must be a document field's name"):
        task_from_dict({**BASE, "cluster_key": bad}, "/tasks/t.yaml")


def test_field_and_template_render_per_document() -> None:
    docs = [{"passage": "p1", "source": {"id": 7}}, {"passage": "p1", "source": {"id": 8}}]
    by_field = task_from_dict({**BASE, "cluster_key": "passage"}, "/tasks/t.yaml")
    by_template = task_from_dict({**BASE, "cluster_key": "src-{{source.id}}"}, "/tasks/t.yaml")
    assert cluster_ids(by_field, docs) == ("p1", "p1")
    assert cluster_ids(by_template, docs) == ("src-7", "src-8")
    assert cluster_ids(task_from_dict(BASE, "/tasks/t.yaml"), docs) is None


def test_long_ids_are_hashed_alike() -> None:
    task = task_from_dict({**BASE, "cluster_key": "passage"}, "/tasks/t.yaml")
    long = "w" * (MAX_ID_CHARS + 1)
    first, second, other = cluster_ids(task, [{"passage": long}, {"passage": long}, {"passage": long + "x"}]) or ()
    assert first == second != other and first.startswith("sha256:") and len(first) == len("sha256:") + 16


@pytest.mark.parametrize(
    "key,doc,says",
    [
        ("pasage", {"passage": "p"}, "names no field of document 1"),
        ("{{pasage}}", {"passage": "p"}, "cluster_key, document 1"),
        ("passage", {"passage": ""}, "gives document 1 an empty cluster id"),
        ("{{passage}}", {"passage": " "}, "gives document 1 an empty cluster id"),
    ],
)
def test_a_key_that_renders_no_id_names_file_key_and_document(key: str, doc: dict, says: str) -> None:
    task = task_from_dict({**BASE, "cluster_key": key}, "/tasks/t.yaml")
    with pytest.raises(TaskError) as err:
        cluster_ids(task, [{"passage": "fine", "pasage": "fine"}, doc])
    assert says in str(err.value) and "/tasks/t.yaml" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="shared benchmark data (../shared/data) is absent")
def test_builtin_boolq_clusters_its_questions_by_passage() -> None:
    from evalflow.taskspec.data.docsets import load_docset

    boolq = all_yaml_tasks()["boolq"]
    ids = cluster_ids(boolq, load_docset(boolq, SHARED_MAP).docs) or ()
    rows = [json.loads(line) for line in (SHARED_DATA / "boolq" / "validation.jsonl").read_text().splitlines()]
    passages = Counter(r["passage"] for r in rows)
    assert len(ids) == len(rows) and len(set(ids)) == len(passages) < len(rows)  # docs/correlated-documents.md
    assert sorted(Counter(ids).values()) == sorted(passages.values())
    assert "cluster_key" not in boolq.to_dict()
