"""build_contexts: description, few-shot examples, gen_prefix, multiple input, the sampler stream."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from evalflow.core.records import DocSet
from evalflow.errors import ConfigError, TaskError
from evalflow.taskspec.format.spec import TaskConfig
from evalflow.taskspec.prompts.fewshot_context import (
    Turn,
    build_contexts,
    effective_num_fewshot,
    maybe_delimit,
    qa_turn,
    render_plain,
)

ROWS = tuple({"q": f"{i}+1", "a": str(i + 1), "label": i % 2} for i in range(12))
TRAIN = tuple({"q": f"{i}*2", "a": str(2 * i), "label": 0} for i in range(6))


def qa_task(**kw: object) -> TaskConfig:
    fields = dict(
        task="qa",
        training_split="train",
        test_split="test",
        doc_to_text="Q: {{q}}\nA:",
        doc_to_target="{{a}}",
        output_type="generate_until",
    )
    fields.update(kw)
    return TaskConfig(**fields)  # type: ignore[arg-type]


def docset(fewshot: Sequence[dict] | None = TRAIN, split: str | None = "train") -> DocSet:
    return DocSet("test", ROWS, split, tuple(fewshot) if fewshot is not None else None)


def test_zero_shot_is_description_plus_question() -> None:
    ctx = build_contexts(qa_task(description="Math.\n\n"), docset(), 0, 1234, [0, 3])
    assert [c.prompt for c in ctx] == ["Math.\n\nQ: 0+1\nA:", "Math.\n\nQ: 3+1\nA:"]
    assert ctx[0].fewshot_ids == () and ctx[1].doc_id == 3


def test_few_shot_examples_use_target_and_fewshot_delimiters() -> None:
    ctx = build_contexts(qa_task(), docset(), 2, 1234, [0])[0]
    ids = random.Random(1234).sample(range(len(TRAIN)), 2)
    shots = "".join(f"Q: {TRAIN[i]['q']}\nA: {TRAIN[i]['a']}\n\n" for i in ids)
    assert ctx.prompt == shots + "Q: 0+1\nA:"
    assert ctx.fewshot_ids == tuple(ids)


def test_fewshot_config_formats_examples_differently() -> None:
    t = qa_task(
        fewshot_config={
            "sampler": "first_n",
            "doc_to_target": "{{a}} (twice {{q}})",
            "target_delimiter": "=",
            "fewshot_delimiter": "\n--\n",
        }
    )
    ctx = build_contexts(t, docset(), 2, None, [5])[0]
    assert ctx.prompt == "Q: 0*2\nA:=0 (twice 0*2)\n--\nQ: 1*2\nA:=2 (twice 1*2)\n--\nQ: 5+1\nA:"


def test_description_is_a_template_rendered_with_the_evaluated_doc() -> None:
    ctx = build_contexts(qa_task(description="About {{q}}: "), docset(), 0, 1, [2])[0]
    assert ctx.prompt == "About 2+1: Q: 2+1\nA:"


def test_multiple_choice_examples_answer_with_the_choice_text() -> None:
    t = qa_task(
        output_type="multiple_choice",
        doc_to_target="label",
        doc_to_choice=["odd?", "even?"],
        fewshot_config={"sampler": "first_n"},
    )
    ctx = build_contexts(t, docset(), 1, None, [1])[0]
    assert ctx.prompt == "Q: 0*2\nA: odd?\n\nQ: 1+1\nA:"


def test_gen_prefix_is_appended_with_a_delimiter_only_when_needed() -> None:
    t = qa_task(doc_to_text="Q: {{q}}", gen_prefix="Answer:", fewshot_config={"sampler": "first_n"})
    ctx = build_contexts(t, docset(), 1, None, [0])[0]
    # example: "Q: 0*2" + " " + "Answer: 0" + "\n\n"; question: "Q: 0+1" + " " + "Answer:"
    assert ctx.prompt == "Q: 0*2 Answer: 0\n\nQ: 0+1 Answer:"
    t2 = qa_task(doc_to_text="Q: {{q}}\n", gen_prefix="Answer:")
    assert build_contexts(t2, docset(), 0, None, [0])[0].prompt == "Q: 0+1\nAnswer:"


def test_qa_turn_rules() -> None:
    assert qa_turn("Q", None, None, None, " ", "\n\n") == [Turn("user", "Q", "")]
    assert qa_turn("Q", ["x", "y"], 1, None, " ", "\n\n") == [Turn("user", "Q", " "), Turn("assistant", "y", "\n\n")]
    assert qa_turn("Q", None, ["first", "second"], None, " ", "|")[1].content == "first"
    assert qa_turn("Q", None, "", None, " ", "|") == [Turn("user", "Q", "")]  # empty answer: no turn
    assert maybe_delimit("A:", " x") == "A: x" and maybe_delimit("A:", "x") == "A: x"
    with pytest.raises(TaskError, match="needs doc_to_choice"):
        qa_turn("Q", None, 3, None, " ", "|")
    with pytest.raises(TaskError, match="int"):
        qa_turn(5, None, None, None, " ", "")


WINO = tuple(
    {"sentence": s, "option1": o1, "option2": o2, "answer": a}
    for s, o1, o2, a in [
        ("The cup fell off the table because _ was wobbly.", "the cup", "the table", "2"),
        ("Ann thanked Beth because _ had helped.", "Ann", "Beth", "2"),
        ("The trophy did not fit in the case since _ was big.", "the trophy", "the case", "1"),
    ]
)


def wino_task(**kw: object) -> TaskConfig:
    fields = dict(
        task="wino",
        validation_split="validation",
        output_type="multiple_choice",
        doc_to_text=lambda d: {"1": 0, "2": 1}[d["answer"]],
        doc_to_target=lambda d: d["sentence"][d["sentence"].index("_") + 1 :].strip(),
        doc_to_choice=lambda d: [d["sentence"][: d["sentence"].index("_")] + o for o in (d["option1"], d["option2"])],
    )
    fields.update(kw)
    return TaskConfig(**fields)  # type: ignore[arg-type]


def test_multiple_input_gives_one_context_per_choice() -> None:
    docs = DocSet("validation", WINO, "validation", WINO)
    ctx = build_contexts(wino_task(), docs, 0, 1234, [0])[0]
    assert ctx.prompt == ("The cup fell off the table because the cup", "The cup fell off the table because the table")


def test_multiple_input_examples_show_the_filled_sentence_and_exclude_the_doc() -> None:
    docs = DocSet("validation", WINO, "validation", WINO)
    ctx = build_contexts(wino_task(), docs, 1, 1234, [1])[0]
    (i,) = ctx.fewshot_ids
    assert i != 1  # winogrande has no test split: fewshot split None == test split None -> excluded
    shot = {
        0: "The cup fell off the table because the table was wobbly.",
        2: "The trophy did not fit in the case since the trophy was big.",
    }[i]
    assert ctx.prompt == (shot + "\n\nAnn thanked Beth because Ann", shot + "\n\nAnn thanked Beth because Beth")


def test_the_stream_is_consumed_once_per_evaluated_doc_in_order() -> None:
    t, docs = qa_task(), docset()
    all_ids = [c.fewshot_ids for c in build_contexts(t, docs, 3, 7, list(range(12)))]
    rnd = random.Random(7)
    assert all_ids == [tuple(rnd.sample(range(6), 3)) for _ in range(12)]
    limited = build_contexts(t, docs, 3, 7, [0, 1, 2])
    assert [c.fewshot_ids for c in limited] == all_ids[:3]
    picked = build_contexts(t, docs, 3, 7, [4, 9])
    assert [c.fewshot_ids for c in picked] == all_ids[:2]  # draws follow the evaluated docs only


def test_doc_ids_must_be_ascending_and_in_range() -> None:
    with pytest.raises(ConfigError, match="ascending"):
        build_contexts(qa_task(), docset(), 0, 1, [3, 1])
    with pytest.raises(ConfigError, match="0..11"):
        build_contexts(qa_task(), docset(), 0, 1, [12])
    with pytest.raises(ConfigError, match="num_fewshot"):
        build_contexts(qa_task(), docset(), -1, 1, [0])


def test_few_shot_without_a_pool_is_a_task_error() -> None:
    with pytest.raises(TaskError, match="no few-shot documents"):
        build_contexts(qa_task(), docset(None, None), 1, 1, [0])


def test_render_is_the_seam_for_chat_formatting() -> None:
    seen: list[list[str]] = []

    def render(turns: Sequence[Turn]) -> str:
        seen.append([t.role for t in turns])
        return render_plain(turns).upper()

    t = qa_task(description="D. ", fewshot_config={"sampler": "first_n"})
    ctx = build_contexts(t, docset(), 1, None, [0], render=render)[0]
    assert seen == [["system", "user", "assistant", "user"]]
    assert ctx.prompt == "D. Q: 0*2\nA: 0\n\nQ: 0+1\nA:".upper()


def test_effective_num_fewshot_follows_lm_eval() -> None:
    assert effective_num_fewshot(qa_task(num_fewshot=5), None) == 5
    assert effective_num_fewshot(qa_task(num_fewshot=5), 2) == 2
    assert effective_num_fewshot(qa_task(num_fewshot=0), 3) == 0  # pinned to zero shots
    assert effective_num_fewshot(qa_task(), None) == 0


def test_example_answer_index_outside_the_choices_is_a_data_error() -> None:
    from evalflow.errors import DataError

    with pytest.raises(DataError, match="outside its 2 choices"):
        qa_turn("Q", ["a", "b"], 2, None, " ", "\n\n")
