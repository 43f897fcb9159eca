"""A served chat model whose server splits the reasoning off (issue 52): the session's ``vllm serve``
runs a reasoning parser (tests/support/vllm_think_parser.py) that splits on ``<think>``…``</think>``,
and each request's ``structured_outputs`` regex (a task's generation kwarg, which evalflow passes
into the body as lm-eval does) forces SmolLM2 into that shape. The server then answers with a
``reasoning`` field beside ``content``, its ``finish_reason`` and ``usage.completion_tokens_details
.reasoning_tokens``; evalflow must score the content, keep the reasoning in the samples, count its
tokens, and count a generation cut off inside its thinking as ``length``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support import vllm_side
from tests.support.toy_tasks import GEN_YAML, write_toy_data
from tests.support.vllm_runs import samples

pytest.importorskip("aiohttp")
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm")]

THINKING, ANSWER = "[a-z]{2,12}( [a-z]{2,12}){0,2}", "#### [0-9]{1,3}"
SHAPE = f"<think>{THINKING}</think>{ANSWER}"
SHORT = 6  # max_gen_toks of toy_think_short: ends inside the thinking ("<think>" alone is several tokens)


def thinking_tasks(root: Path) -> Path:
    """toy_gen as toy_think (the thinking shape forced) and toy_think_short (the same, cut at
    :data:`SHORT` tokens)."""
    data, lib = write_toy_data(root), root / "tasks"
    lib.mkdir()
    forced = f"  structured_outputs:\n    regex: {json.dumps(SHAPE)}\n"
    for name, extra in (("toy_think", ""), ("toy_think_short", f"  max_gen_toks: {SHORT}\n")):
        text = GEN_YAML.format(data=data).replace("task: toy_gen", f"task: {name}")
        (lib / f"{name}.yaml").write_text(text.replace("  do_sample: false\n", f"  do_sample: false\n{forced}{extra}"))
    return lib


def test_a_served_reasoning_is_kept_apart_counted_and_the_content_scored(vllm_server, tmp_path):
    from evalflow import evaluate

    model = {
        "type": "openai_chat",
        "model": vllm_side.SERVED_NAME,
        "base_url": vllm_server.url,
        "revision": "smollm2-fp32",
        "max_gen_toks": 48,
        "retry_wait": 0.05,
    }
    tasks, out = ["toy_think", "toy_think_short"], tmp_path / "out"
    results = evaluate(
        tasks,
        model,
        output_dir=out,
        include_path=[str(thinking_tasks(tmp_path))],
        cache_dir=str(tmp_path / "cache"),
        limit=4,
        num_fewshot=0,
        bootstrap_iters=0,
        apply_chat_template=True,
    )
    got = samples(out, tasks)

    for s in got["toy_think"]:  # the content is the answer; the thinking only in finish
        (answer,), (finish,) = s["resps"][0], s["finish"][0]
        assert re.fullmatch(ANSWER, answer) and re.fullmatch(THINKING, finish["reasoning"]), s
        assert re.fullmatch(SHAPE, f"<think>{finish['reasoning']}</think>{answer}")
        assert s["filtered_resps"] == [answer.removeprefix("#### ")]
        assert s["exact_match"] == float(answer.removeprefix("#### ") == s["target"])
        assert finish["stop_reason"] == "eos" and 0 < finish["reasoning_tokens"] < finish["completion_tokens"]
    for s in got["toy_think_short"]:  # cut inside the thinking: no content, all tokens the reasoning's
        (answer,), (finish,) = s["resps"][0], s["finish"][0]
        assert answer == "" and s["exact_match"] == 0.0 and re.fullmatch("[a-z ]*", finish["reasoning"]), s
        assert finish["stop_reason"] == "length" and finish["reasoning_tokens"] == finish["completion_tokens"] == SHORT

    counted = {task: results["generations"][task] for task in tasks}
    think, short = counted["toy_think"], counted["toy_think_short"]
    assert think["stop_reasons"] == {"eos": 4} and think["truncated"] == 0
    assert think["tokens"]["reasoning"] == sum(s["finish"][0][0]["reasoning_tokens"] for s in got["toy_think"])
    assert short["stop_reasons"] == {"length": 4} and short["truncated_share"] == 1.0
    assert short["tokens"]["reasoning"] == short["tokens"]["completion"] == 4 * SHORT
