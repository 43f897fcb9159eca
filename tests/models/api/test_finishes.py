"""Every served generation is a Generation: the text lm-eval scores, why it stopped (from the
server's ``finish_reason``), ``usage``'s token counts, and the reasoning a server split off
(``reasoning_content``), read from the answers of each kind of server and dialect."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from evalflow.core.records import Finish, Generation, Request
from evalflow.models.api import payloads
from evalflow.models.api.dialects import anthropic_answer, openai_chat_answer
from evalflow.models.registry import build_model
from tests.support.parity_harness import PEER_VENV
from tests.support.parity_harness import missing as peer_missing
from tests.support.reasoning_server import ReasoningServer, reasoning_answer

CHAT = [{"role": "user", "content": "Q: 2+2?"}]


@pytest.mark.parametrize(
    "choice, reason",
    [
        ({"finish_reason": "length"}, "length"),
        ({"finish_reason": "content_filter"}, "error"),
        ({"finish_reason": "stop", "stop_reason": "\n\n"}, "stop"),  # vLLM: the stop string it matched
        ({"finish_reason": "stop", "stop_reason": None}, "eos"),  # vLLM: the EOS token
        ({"finish_reason": "stop", "stop_reason": 151645}, "eos"),  # vLLM: a stop token id (<|im_end|>)
        ({"finish_reason": "stop", "stop_type": "eos"}, "eos"),  # llama.cpp's server
        ({"finish_reason": "stop", "stop_type": "word", "stopping_word": "Q:"}, "stop"),
        (
            {"finish_reason": "stop"},
            "stop",
        ),  # a server that cannot tell them apart (OpenAI's "natural stop or stop sequence")
        ({"finish_reason": "tool_calls"}, None),
        ({}, None),
    ],
)
def test_the_stop_reason_is_what_the_server_says(choice: dict[str, Any], reason: str | None) -> None:
    assert payloads.stop_reason(choice) == reason


def test_usage_is_a_choices_only_when_the_answer_holds_that_one_choice() -> None:
    usage = {"prompt_tokens": 5, "completion_tokens": 9, "completion_tokens_details": {"reasoning_tokens": 4}}
    one = {"choices": [{"index": 0, "text": "a", "finish_reason": "length"}], "usage": usage}
    assert payloads.finish(one, one["choices"][0]) == Finish("length", 5, 9, 4, None)
    two = {"choices": [{"index": i, "text": "a", "finish_reason": "stop"} for i in range(2)], "usage": usage}
    assert payloads.finish(two, two["choices"][1]) == Finish("stop")  # a batch's sum cannot be split
    bare = {"choices": [{"index": 0, "text": "a", "finish_reason": "stop"}], "usage": {"prompt_tokens": True}}
    assert payloads.finish(bare, bare["choices"][0]) == Finish("stop")  # no counts, or not numbers: unknown


def test_a_served_reasoning_is_kept_its_tokens_counted_and_the_content_scored() -> None:
    answer = reasoning_answer("m", "42", "two and two make four", "stop")
    assert openai_chat_answer(answer, "u", None) == Generation("42", Finish("eos", 7, 6, 5, "two and two make four"))
    answer["choices"][0]["message"] = {"content": "42", "reasoning": "so"}  # the field later vLLM names it by
    assert openai_chat_answer(answer, "u", None).finish.reasoning == "so"


def test_a_generation_cut_by_the_cap_while_thinking_is_length_with_its_reasoning_kept() -> None:
    answer = reasoning_answer("m", None, "first I add the units and then", "length")
    got = openai_chat_answer(answer, "u", "</think>")
    assert got == Generation("", Finish("length", 7, 7, 7, "first I add the units and then"))  # null content: ""


def test_anthropics_thinking_blocks_are_the_reasoning_and_its_stop_reasons_are_mapped() -> None:
    answer = {
        "content": [
            {"type": "thinking", "thinking": "add them", "signature": "s"},
            {"type": "text", "text": "4"},
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 12, "output_tokens": 30},
    }
    assert anthropic_answer(answer, "u", None) == Generation("4", Finish("eos", 12, 30, None, "add them"))
    for theirs, ours in (("stop_sequence", "stop"), ("max_tokens", "length"), ("refusal", "error")):
        assert anthropic_answer({**answer, "stop_reason": theirs}, "u", None).finish.stop_reason == ours
    assert anthropic_answer({"content": [{"type": "text", "text": "4"}]}, "u", None) == Generation("4", Finish())


def _chat_model(url: str, **extra: Any) -> Any:
    return build_model({"type": "openai_chat", "model": "m", "base_url": url, "retry_wait": 0.05, **extra})


def test_a_stop_string_inside_the_thinking_is_the_servers_to_apply_as_lm_eval_sends_it() -> None:
    """lm-eval 0.4.13's chat models send the task's stop sequences whatever the thinking (its
    ``_create_payload``) and cut nothing client-side (``parse_generations`` passes ``stop=None``):
    a server that matches "\\n\\n" inside the reasoning ends the generation there, with no content.
    evalflow sends the same body and reports what came back: ``stop``, the reasoning, an empty answer."""

    def script(body: dict[str, Any]) -> tuple[Any, ...]:
        return None, "Let me think.", "stop", "\n\n"  # vLLM names the stop string it matched

    with ReasoningServer(script) as srv:
        answer = srv_answer(srv, {"until": ["\n\n"], "max_gen_toks": 64})
        (body,) = srv.bodies
    assert body["stop"] == ["\n\n"] and "reasoning_effort" not in body
    assert answer == Generation("", Finish("stop", 7, 3, 3, "Let me think."))


def srv_answer(srv: ReasoningServer, gen_kwargs: dict[str, Any], **extra: Any) -> Any:
    (answer,) = _chat_model(srv.url, **extra).generate_until(
        [Request("generate_until", (json.dumps(CHAT), gen_kwargs))]
    )
    return answer


@pytest.mark.skipif(peer_missing() is not None, reason=f"no lm-eval peer: {peer_missing()}")
@pytest.mark.parametrize(
    "content",
    ["<think>a\n\nb</think>\n 42", "<think>never closed", "", None, "no marker 7", "<think>x</think>"],
)
def test_the_scored_text_is_lm_evals_for_the_same_answer(content: str | None) -> None:
    """lm-eval's ``LocalChatCompletion.parse_generations`` (think_end_token set) on the same answer
    gives the text evalflow scores (closed, unclosed, empty after the marker, null content)."""
    answer = reasoning_answer("m", content, "served part", "length")
    code = (
        "import json,sys; from lm_eval.models.openai_completions import LocalChatCompletion as C; "
        "o = object.__new__(C); o.think_end_token = '</think>'; "
        "print(json.dumps(o.parse_generations(json.loads(sys.stdin.read()))))"
    )
    out = subprocess.run(
        [str(PEER_VENV / "bin" / "python"), "-c", code], input=json.dumps(answer), capture_output=True, text=True
    )
    (theirs,) = json.loads(out.stdout)
    assert openai_chat_answer(answer, "u", "</think>").text == (theirs if theirs is not None else "")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("<think>a</think> 42", "eos"),
        ("<think>never closed", "thinking_unclosed"),
        ("no marker 7", "thinking_unclosed"),
    ],
)
def test_the_models_own_marker_says_whether_the_thinking_closed(content: str, reason: str) -> None:
    """model.think_end_token cuts the thinking off in the backend: the run reports an answer without
    the marker as thinking_unclosed though the run itself sets no think_end_token."""
    answer = {"choices": [{"index": 0, "message": {"content": content}, "finish_reason": "stop", "stop_reason": None}]}
    finish = openai_chat_answer(answer, "u", "</think>").finish
    assert finish.thinking_closed is (reason == "eos")
    assert finish.stop_with(openai_chat_answer(answer, "u", "</think>").text, None) == reason
