"""build_instances: lm-eval's requests per output type, gen_kwargs merging, repeats and seeds."""

from __future__ import annotations

import pytest

from evalflow.core.records import Context
from evalflow.errors import ConfigError, TaskError
from evalflow.taskspec.format.spec import TaskConfig
from evalflow.taskspec.prompts.requests import build_instances, generation_kwargs, is_sampling

DOC = {"q": "2+2?", "choices": ["3", "4", "5"], "label": 1, "text": "the cat sat"}


def mc_task(**kw: object) -> TaskConfig:
    fields = dict(
        task="mc", output_type="multiple_choice", doc_to_text="{{q}}", doc_to_target="label", doc_to_choice="choices"
    )
    fields.update(kw)
    return TaskConfig(**fields)  # type: ignore[arg-type]


def args(instances: tuple) -> list[tuple]:
    return [i.request.args for i in instances]


def test_multiple_choice_one_loglikelihood_request_per_choice() -> None:
    inst = build_instances(mc_task(), 7, DOC, Context(7, "Q: 2+2?"))
    assert args(inst) == [("Q: 2+2?", " 3"), ("Q: 2+2?", " 4"), ("Q: 2+2?", " 5")]
    assert [(i.doc_id, i.idx, i.request.type) for i in inst] == [(7, k, "loglikelihood") for k in range(3)]
    assert args(build_instances(mc_task(target_delimiter=""), 7, DOC, Context(7, "Q")))[0] == ("Q", "3")


def test_acc_mutual_info_adds_unconditional_requests() -> None:
    t = mc_task(metric_list=({"metric": "acc"}, {"metric": "acc_mutual_info"}))
    inst = build_instances(t, 0, DOC, Context(0, "Q"))
    assert args(inst)[3:] == [("", " 3"), ("", " 4"), ("", " 5")]
    assert [i.idx for i in inst] == list(range(6))


def test_multiple_input_scores_the_target_after_each_context() -> None:
    t = mc_task(doc_to_target="{{text}}")
    inst = build_instances(t, 0, DOC, Context(0, ("A put", "B put")))
    assert args(inst) == [("A put", " the cat sat"), ("B put", " the cat sat")]


def test_loglikelihood_and_rolling() -> None:
    t = TaskConfig(
        task="lam",
        output_type="loglikelihood",
        doc_to_text="{{text.split(' ')[:-1]|join(' ')}}",
        doc_to_target="{{' '+text.split(' ')[-1]}}",
    )
    assert args(build_instances(t, 0, DOC, Context(0, "the cat"))) == [("the cat", " sat")]
    r = TaskConfig(task="wiki", output_type="loglikelihood_rolling", doc_to_text="", doc_to_target="text")
    assert args(build_instances(r, 0, DOC, Context(0, ""))) == [("the cat sat",)]
    with pytest.raises(TaskError, match="text continuation"):
        build_instances(
            TaskConfig(task="x", output_type="loglikelihood", doc_to_target="label"), 0, DOC, Context(0, "c")
        )


def test_generation_defaults_follow_lm_eval() -> None:
    bare = TaskConfig(task="g", fewshot_delimiter="\n\n")
    assert generation_kwargs(bare) == {"temperature": 0.0, "do_sample": False, "max_gen_toks": 256, "until": ["\n\n"]}
    no_until = TaskConfig(task="g", fewshot_delimiter="\n", generation_kwargs={"temperature": 0, "max_gen_toks": 32})
    got = generation_kwargs(no_until)
    assert got == {"temperature": 0.0, "max_gen_toks": 32, "until": ["\n"]} and isinstance(got["temperature"], float)


def test_run_overrides_merge_over_the_task_settings() -> None:
    t = TaskConfig(task="g", generation_kwargs={"until": ["Q:"], "do_sample": False, "temperature": 0.0})
    got = generation_kwargs(t, {"temperature": 1, "top_p": 0.9, "do_sample": True})
    assert got == {"until": ["Q:"], "do_sample": True, "temperature": 1.0, "top_p": 0.9}
    assert generation_kwargs(t, {"until": "\n"})["until"] == ["\n"]
    assert t.generation_kwargs == {"until": ["Q:"], "do_sample": False, "temperature": 0.0}  # not mutated


def test_gen_kwargs_must_be_json_data() -> None:
    t = TaskConfig(task="g", generation_kwargs={"until": ["Q:"]})
    with pytest.raises(ConfigError, match="JSON data"):
        generation_kwargs(t, {"stopper": object()})
    with pytest.raises(ConfigError, match="until"):
        generation_kwargs(t, {"until": [1, 2]})
    with pytest.raises(TaskError, match="finite"):
        generation_kwargs(TaskConfig(task="g", generation_kwargs={"top_p": float("nan")}))


def test_generate_until_request_carries_the_merged_settings() -> None:
    t = TaskConfig(task="g", generation_kwargs={"until": ["Q:"], "do_sample": False})
    (inst,) = build_instances(t, 3, DOC, Context(3, "Q: 2+2?\nA:"), gen_kwargs={"max_gen_toks": 5}, seed=9)
    assert inst.request.args == ("Q: 2+2?\nA:", {"until": ["Q:"], "do_sample": False, "max_gen_toks": 5})
    assert inst.request.seed is None  # greedy: the seed cannot matter, so it is not part of the request


def test_repeats_give_one_instance_per_repeat_with_the_same_idx() -> None:
    t = TaskConfig(task="g", repeats=3, generation_kwargs={"until": ["Q:"], "do_sample": True, "temperature": 0.7})
    inst = build_instances(t, 0, DOC, Context(0, "Q"), seed=42)
    assert [(i.idx, i.request.repeat, i.request.seed) for i in inst] == [(0, 0, 42), (0, 1, 42), (0, 2, 42)]
    mc = build_instances(mc_task(repeats=2), 0, DOC, Context(0, "Q"), seed=42)
    assert [(i.idx, i.request.repeat, i.request.seed) for i in mc] == [
        (0, 0, None),
        (0, 1, None),
        (1, 0, None),
        (1, 1, None),
        (2, 0, None),
        (2, 1, None),
    ]


def test_is_sampling() -> None:
    assert is_sampling({"do_sample": True}) and is_sampling({"temperature": 0.2})
    assert not is_sampling({"do_sample": False, "temperature": 0.0}) and not is_sampling({})


def test_multiple_input_needs_multiple_choice() -> None:
    t = TaskConfig(task="g", output_type="loglikelihood", doc_to_target="{{text}}")
    with pytest.raises(TaskError, match="multiple"):
        build_instances(t, 0, DOC, Context(0, ("a", "b")))
