"""VLLMModel's request flow without vLLM: what it hands the engine (one call per request list, the
prompt tokens, SamplingParams kwargs with a per-request seed for sampled requests) and how it reads
what comes back. The engine calls are replaced by recorders; the real engine is test_vllm_engine.py's."""

from __future__ import annotations

from typing import Any

import pytest

from evalflow.core.records import Finish, Generation, Request
from evalflow.errors import ModelError
from evalflow.models.vllm import vllm_calls as engine
from evalflow.models.vllm.request_rules import Completion
from evalflow.models.vllm.vllm_model import VLLMModel


class WordTokenizer:
    """One token per character, BOS 1 added by default, EOS 2 ("</s>")."""

    bos_token_id, eos_token_id, eos_token = 1, 2, "</s>"

    def decode(self, ids: Any) -> str:
        ids = [ids] if isinstance(ids, int) else ids
        return "".join({1: "<s>", 2: "</s>"}.get(i, chr(i)) for i in ids)

    def __call__(self, text: str, add_special_tokens: bool = True, return_attention_mask: bool = False) -> Any:
        class Encoded:
            input_ids = ([1] if add_special_tokens else []) + [ord(c) for c in text]

        return Encoded()


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> tuple[VLLMModel, list[tuple[str, Any]]]:
    calls: list[tuple[str, Any]] = []

    def logprobs(llm, prompts, next_tokens, lora):
        calls.append(("logprobs", [list(p) for p in prompts], [None if t is None else list(t) for t in next_tokens]))
        # a whole prompt: every token -0.5 and the arg-max; next tokens: the first named is the arg-max
        return [
            [None] + [{t: -0.5, 0: -3.0} for t in p[1:]]
            if named is None
            else [{t: -0.25 * (k + 1) for k, t in enumerate(named)}]
            for p, named in zip(prompts, next_tokens)
        ]

    def generate(llm, prompts, params, lora):
        calls.append(("generate", (list(map(list, prompts)), list(params))))
        return [Completion("4\n\nQuestion: more", "stop", "\n\n", len(p), 5) for p in prompts]

    monkeypatch.setattr(engine, "logprobs", logprobs)
    monkeypatch.setattr(engine, "generate", generate)
    m = object.__new__(VLLMModel)
    m.llm, m.tokenizer, m.lora = None, WordTokenizer(), None
    m.add_bos_token, m.custom_prefix_token_id, m.max_gen_toks, m.max_length = None, None, 16, 32
    m.truncation_side, m.next_token_scoring, m.think_end_token = "left", True, None
    return m, calls


def test_loglikelihood_sends_one_call_and_scores_the_continuation(model) -> None:
    m, calls = model
    answers = m.loglikelihood([Request("loglikelihood", ("ab", "c")), Request("loglikelihood", ("", "xy"))])
    assert [c[0] for c in calls] == ["logprobs"]
    # "c" is one token: read after the context BOS + "ab"; "xy" scored in BOS (the empty context) + "xy"
    assert calls[0][1:] == ([[1, 97, 98], [1, 120, 121]], [[99], None])
    assert answers == [(-0.25, True), (-1.0, True)]


@pytest.mark.parametrize("next_token_scoring", [True, False])
def test_the_choices_of_one_context_share_one_prompt(model, next_token_scoring: bool) -> None:
    m, calls = model
    m.next_token_scoring = next_token_scoring  # False: a vLLM without SamplingParams.logprob_token_ids
    answers = m.loglikelihood([Request("loglikelihood", ("Q:", letter)) for letter in "ABCD"])
    ((_, prompts, named),) = calls
    if next_token_scoring:
        assert prompts == [[1, 81, 58]] and named == [[65, 66, 67, 68]]
        assert answers == [(-0.25, True), (-0.5, False), (-0.75, False), (-1.0, False)]
    else:
        assert prompts == [[1, 81, 58, c] for c in (65, 66, 67, 68)] and named == [None] * 4
        assert answers == [(-0.5, True)] * 4


def test_prompts_go_longest_first_as_lm_evals_collator_orders_them(model) -> None:
    m, calls = model
    one = m.loglikelihood([Request("loglikelihood", ("a", "b")), Request("loglikelihood", ("abc", "d"))])
    two = m.loglikelihood([Request("loglikelihood", ("a", "bc")), Request("loglikelihood", ("abc", "de"))])
    assert calls[0][1:] == ([[1, 97, 98, 99], [1, 97]], [[100], [98]])
    assert calls[1][1:] == ([[1, 97, 98, 99, 100, 101], [1, 97, 98, 99]], [None, None])
    assert one == [(-0.25, True)] * 2 and two == [(-1.0, True)] * 2  # each answer back at its request


def test_generation_kwargs_stops_and_per_request_seeds(model) -> None:
    m, calls = model
    greedy = {"until": ["\n\n"], "do_sample": False}
    sampled = {"until": ["\n\n"], "temperature": 0.8, "max_gen_toks": 4}
    requests = [
        Request("generate_until", ("2+2=", greedy)),
        Request("generate_until", ("2+2=", sampled), repeat=0, seed=7),
        Request("generate_until", ("2+2=", sampled), repeat=1, seed=7),
    ]
    answers = m.generate_until(requests)
    ((_name, (prompts, params)),) = calls
    assert [a.text for a in answers] == ["4", "4", "4"]  # cut at the first stop sequence again
    assert {a.finish for a in answers} == {Finish("stop", 5, 5)}
    assert prompts == [[1, 50, 43, 50, 61]] * 3
    assert params[0] == {
        "max_tokens": 16,
        "stop": ["\n\n", "</s>"],
        "temperature": 0.0,
        "skip_special_tokens": False,
        "spaces_between_special_tokens": False,
    }
    assert params[1]["seed"] == requests[1].sample_seed() != params[2]["seed"] == requests[2].sample_seed()
    assert params[1]["max_tokens"] == 4 and params[1]["temperature"] == 0.8


def test_a_context_too_long_is_cut_on_the_truncation_side(model) -> None:
    m, calls = model
    m.truncation_side = "right"
    m.generate_until([Request("generate_until", ("x" * 40, {"until": [], "max_gen_toks": 30, "do_sample": False}))])
    assert calls[0][1][0] == [[1, 120]]  # 32 - 30 = 2 tokens, kept from the start


def test_requests_with_nothing_to_score_or_continue_are_refused(model) -> None:
    m, _ = model
    with pytest.raises(ModelError, match="encodes to no tokens"):
        m.loglikelihood([Request("loglikelihood", ("ab", ""))])
    with pytest.raises(ModelError, match="nothing to continue"):
        m.generate_until([Request("generate_until", ("", {"until": []}))])


def test_a_lora_run_reads_every_continuation_token_as_a_next_token(model) -> None:
    m, calls = model
    m.lora = object()  # vLLM's prompt log-probabilities are wrong or crash with an adapter
    answers = m.loglikelihood([Request("loglikelihood", ("a", "bc"))])
    assert calls[0][1:] == ([[1, 97, 98], [1, 97]], [[99], [98]])  # "b" after BOS a, "c" after BOS a b
    assert answers == [(-0.5, True)]


@pytest.mark.parametrize(
    ("finish_reason", "stop_reason", "expected"),
    [
        ("length", None, "length"),
        ("stop", None, "eos"),  # the EOS token
        ("stop", "\n\n", "stop"),  # a stop sequence
        ("stop", "</s>", "eos"),  # the EOS text lm-eval adds to the stops, spelled by ordinary tokens
        ("stop", 2, "eos"),  # an EOS id
        ("stop", 7, "eos"),  # an id vLLM stops at unasked: the model's generation config's other EOS
        ("stop", 9, "stop"),  # an id the request's stop_token_ids asked for
        ("abort", None, "error"),
    ],
)
def test_vllms_finish_and_stop_reason_become_the_answers_stop_reason(
    model, monkeypatch: pytest.MonkeyPatch, finish_reason: str, stop_reason: Any, expected: str
) -> None:
    m, _ = model
    done = Completion("4\n\nQuestion: more", finish_reason, stop_reason, 5, 7)
    monkeypatch.setattr(engine, "generate", lambda llm, prompts, params, lora: [done for _ in prompts])
    kwargs = {"until": ["\n\n"], "do_sample": False, "stop_token_ids": [9]}
    (answer,) = m.generate_until([Request("generate_until", ("2+2=", kwargs))])
    assert answer == Generation("4", Finish(expected, 5, 7))


def test_a_thinking_marker_sends_only_eos_to_vllm_and_keeps_the_raw_generation(model) -> None:
    """lm-eval 0.4.13's VLLM with think_end_token: the task's stops never reach vLLM (they often
    occur inside the thinking), and they are cut after the thinking part (the filters stage here)."""
    from evalflow.stages.filters import without_thinking

    m, calls = model
    m.think_end_token = "</think>"
    until = ["\n\n", "Question:"]
    (answer,) = m.generate_until([Request("generate_until", ("2+2=", {"until": until, "do_sample": False}))])
    ((_name, (_prompts, params)),) = calls
    assert params[0]["stop"] == ["</s>"]
    assert answer.text == "4\n\nQuestion: more"  # raw: the thinking part, were there one, is still in it
    assert without_thinking(answer.text, "</think>", until) == "4"


def test_think_end_token_joins_the_identity_only_when_set(tmp_path) -> None:
    from evalflow.models.registry import model_identity

    (tmp_path / "config.json").write_text("{}")
    config = {"type": "vllm", "pretrained": str(tmp_path)}
    plain = model_identity(config)
    assert model_identity(config, {"think_end_token": None, "batch_size": 8}) == plain
    thinking = model_identity(config, {"think_end_token": "</think>"})
    assert thinking != plain and thinking["think_end_token"] == "</think>"
    hf = {"type": "hf", "pretrained": str(tmp_path)}
    assert model_identity(hf, {"think_end_token": "</think>"}) == model_identity(hf)  # HF's answers do not change


def test_the_runs_think_end_token_reaches_the_scored_vllm_model_and_no_judge(tmp_path) -> None:
    """The scored model's answers are cut at the marker, so vLLM stops at EOS only for them and
    their key says so; a vllm judge's answers are read whole: it stops at its stops, keyed as before."""
    from evalflow.cache.store import CacheStore
    from evalflow.config.compose import compose_config
    from evalflow.config.settings import settings_from_config
    from evalflow.run.parts import config_arguments, config_edge

    (tmp_path / "config.json").write_text("{}")
    words = ["model=vllm", f"model.pretrained={tmp_path}", "think_end_token='</think>'"]
    settings = settings_from_config(compose_config(words))
    store = CacheStore(tmp_path / "cache")
    try:
        scored, judge = (
            config_edge(settings.model, settings, store),
            config_edge(settings.model, settings, store, judge=True),
        )
    finally:
        store.close()
    assert scored.identity_data["think_end_token"] == "</think>" and "think_end_token" not in judge.identity_data
    assert config_arguments(settings.model, settings)["think_end_token"] == "</think>"
    assert config_arguments(settings.model, settings, judge=True)["think_end_token"] is None
