"""The task YAMLs shipped in tasks/: they load, index, and format documents as lm-eval does."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from evalflow.core.records import DocSet
from evalflow.taskspec.data.docsets import load_docset
from evalflow.taskspec.format.loader import resolve_function
from evalflow.taskspec.prompts.fewshot_context import build_contexts, effective_num_fewshot
from evalflow.taskspec.prompts.requests import build_instances
from tests.support.builtin_tasks import TASKS, all_yaml_tasks
from tests.support.paths import SHARED_DATA, SHARED_MAP

BUILTIN = [
    "gsm8k",
    "gsm8k_cot",
    "gsm8k_maj8",
    "arc_easy",
    "arc_challenge",
    "hellaswag",
    "piqa",
    "winogrande",
    "boolq",
    "lambada_openai",
    "wikitext",
    "arith_mc",
    "humaneval",
    "humaneval_instruct",
    "humaneval_64",
    "mbpp",
    "mbpp_instruct",
    "shapes_vqa",
]


def module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_t_{path.parent.name}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_yaml_is_a_valid_task_or_group() -> None:
    tasks = all_yaml_tasks()
    assert set(BUILTIN) <= set(tasks)
    assert len([n for n in tasks if n.startswith("mmlu_")]) == 57
    assert len(tasks) == len(BUILTIN) + 57


def test_index_sees_groups_and_tags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalflow.taskspec.catalog.index import TaskIndex

    monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path))
    monkeypatch.delenv("EVALFLOW_TASKS_DIR", raising=False)
    index = TaskIndex.build()
    mmlu = index.resolve("mmlu")
    assert len(mmlu.tasks) == 57
    groups = {g.name: g for g in mmlu.groups}
    assert list(groups["mmlu"].members) == ["mmlu_stem", "mmlu_other", "mmlu_social_sciences", "mmlu_humanities"]
    assert sum(len(groups[g].members) for g in groups if g != "mmlu") == 57
    for g in groups.values():
        assert g.aggregate_metric_list and g.aggregate_metric_list[0]["weight_by_size"] is True
    assert [t.task for t in index.resolve("ai2_arc").tasks] == ["arc_challenge", "arc_easy"]


def test_mmlu_files_are_what_the_generator_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gen = module(TASKS / "mmlu" / "_generate.py")
    monkeypatch.setattr(gen, "HERE", tmp_path)
    gen.main()
    written = sorted(p.name for p in tmp_path.iterdir())
    assert len(written) == 57 + 5
    for name in written:
        assert (tmp_path / name).read_text() == (TASKS / "mmlu" / name).read_text(), name


def test_mmlu_subject_prompt() -> None:
    t = all_yaml_tasks()["mmlu_college_physics"]
    doc = {"question": " Why?  ", "choices": ["a", "b", "c", "d"], "answer": 2, "subject": "college_physics"}
    dev = tuple({**doc, "question": f"dev {i}", "answer": i % 4} for i in range(5))
    ctx = build_contexts(t, DocSet("test", (doc,), "dev", dev), 1, 1234, [0])[0]
    assert ctx.prompt == (
        "The following are multiple choice questions (with answers) about college physics.\n\n"
        "dev 0\nA. a\nB. b\nC. c\nD. d\nAnswer: A\n\n"
        "Why?\nA. a\nB. b\nC. c\nD. d\nAnswer:"
    )
    assert [i.request.args[1] for i in build_instances(t, 0, doc, ctx)] == [" A", " B", " C", " D"]


def test_hellaswag_preprocessing_on_hand_written_rows() -> None:
    t = all_yaml_tasks()["hellaswag"]
    process = resolve_function(t.process_docs)  # type: ignore[arg-type]
    rows = [
        {
            "activity_label": "Removing ice from car",
            "ctx_a": "Then, the man writes over the snow.",
            "ctx_b": "then",
            "endings": [" the man continues [step] removing.", "x  y [title] Z"],
            "label": "1",
        },
        {
            "activity_label": "Baking cookies",
            "ctx_a": "[header] How to bake [title] Preheat the oven.",
            "ctx_b": "a woman",
            "endings": ["[substeps] mixes flour.  ", "leaves."],
            "label": "0",
        },
    ]
    docs = process(rows)
    assert docs[0]["query"] == "Removing ice from car: Then, the man writes over the snow. Then"
    assert docs[0]["choices"] == ["the man continues removing.", "x y. Z"]
    assert docs[0]["gold"] == 1 and docs[1]["gold"] == 0
    assert docs[1]["query"] == "Baking cookies: How to bake. Preheat the oven. A woman"
    assert docs[1]["choices"] == [" mixes flour.", "leaves."]
    import datasets

    mapped = process(datasets.Dataset.from_list(rows))
    assert [dict(r) for r in mapped] == docs  # the same on a datasets.Dataset, as the loader passes it
    ctx = build_contexts(t, DocSet("validation", tuple(docs)), 0, 1234, [1])[0]
    args = [i.request.args for i in build_instances(t, 1, docs[1], ctx)]
    assert args == [(docs[1]["query"], "  mixes flour."), (docs[1]["query"], " leaves.")]


def test_winogrande_is_multiple_input() -> None:
    t = all_yaml_tasks()["winogrande"]
    rows = tuple(
        {"sentence": s, "option1": a, "option2": b, "answer": ans}
        for s, a, b, ans in [
            ("Sarah was a much better surgeon than Maria so _ always got the harder cases.", "Sarah", "Maria", "1"),
            ("The ball broke the window because _ was fragile.", "the ball", "the window", "2"),
        ]
    )
    docs = DocSet("validation", rows, "validation", rows)
    ctx = build_contexts(t, docs, 1, 1234, [0, 1])
    assert ctx[0].fewshot_ids == (1,) and ctx[1].fewshot_ids == (0,)  # the doc itself is excluded
    shot = "The ball broke the window because the window was fragile.\n\n"
    assert ctx[0].prompt == (
        shot + "Sarah was a much better surgeon than Maria so Sarah",
        shot + "Sarah was a much better surgeon than Maria so Maria",
    )
    args = [i.request.args for i in build_instances(t, 0, rows[0], ctx[0])]
    assert args == [(p, " always got the harder cases.") for p in ctx[0].prompt]


def test_wikitext_detokenizer_and_counts() -> None:
    t = all_yaml_tasks()["wikitext"]
    page = ' = Robert = \n He said , " it \'s 1 @,@ 000 @-@ strong " . \n'
    text = resolve_function(t.doc_to_target)({"page": page})  # type: ignore[arg-type]
    assert text == ' = Robert =\nHe said, "it\'s 1,000-strong".\n'
    counts = resolve_function(t.process_results)({"page": page}, (-5.0,))  # type: ignore[arg-type]
    # 16 tokens plus the empty strings re.split leaves for the leading and trailing whitespace
    assert counts["word_perplexity"] == (-5.0, 18) and counts["bits_per_byte"] == (-5.0, len(page))


def test_demo_task_runs_from_its_shipped_data() -> None:
    t = all_yaml_tasks()["arith_mc"]
    docs = load_docset(t)
    assert len(docs.docs) == 60 and docs.fewshot_split == "train" and len(docs.fewshot_docs or ()) == 8
    ctx = build_contexts(t, docs, 0, 1234, [0])[0]
    doc = docs.docs[0]
    assert ctx.prompt == f"Question: {doc['question']}\nAnswer:"
    inst = build_instances(t, 0, doc, ctx)
    assert [i.request.args[1] for i in inst] == [" " + c for c in doc["choices"]]
    for d in docs.docs:  # every question is well formed: one correct sum among 4 distinct choices
        a, op, b = d["question"][len("What is ") : -1].split()
        assert d["choices"][d["answer"]] == str(int(a) + int(b) if op == "+" else int(a) - int(b))
        assert len(set(d["choices"])) == 4


def test_demo_data_is_what_its_script_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gen = module(TASKS / "demo" / "_make_data.py")
    monkeypatch.setattr(gen, "HERE", tmp_path)
    gen.main()
    for name in ("arith_mc_test.jsonl", "arith_mc_train.jsonl"):
        assert (tmp_path / name).read_bytes() == (TASKS / "demo" / name).read_bytes()
    test_q = {json.loads(x)["question"] for x in (TASKS / "demo" / "arith_mc_test.jsonl").read_text().splitlines()}
    train_q = {json.loads(x)["question"] for x in (TASKS / "demo" / "arith_mc_train.jsonl").read_text().splitlines()}
    assert not test_q & train_q


def test_shapes_vqa_data_is_what_its_script_writes() -> None:
    gen = module(TASKS / "vision" / "_make_data.py")
    written = "".join(json.dumps(r) + "\n" for r in gen.rows())
    assert written == (TASKS / "vision" / "shapes_vqa.jsonl").read_text()
    assert {r["question"] for r in gen.rows()} == {q for q, _ in gen.QUESTIONS}


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="shared benchmark data (../shared/data) is absent")
@pytest.mark.parametrize(
    "name", [n for n in BUILTIN if n not in ("hellaswag", "arith_mc", "shapes_vqa")] + ["mmlu_anatomy"]
)
def test_builtin_task_runs_on_shared_data(name: str) -> None:
    t = all_yaml_tasks()[name]
    docs = load_docset(t, SHARED_MAP)
    shots = effective_num_fewshot(t, None if name != "wikitext" else 0)
    ctx = build_contexts(t, docs, shots, 1234, [0, 1, 2])
    for c in ctx:
        inst = build_instances(t, c.doc_id, docs.docs[c.doc_id], c)
        assert inst and all(isinstance(a, (str, dict)) for i in inst for a in i.request.args)
