"""A local model's thinking tokens are counted with its own tokenizer: the part of each generation
up to the run's last think_end_token, counted once per task in results.json's ``generations``."""

from __future__ import annotations

import json
from pathlib import Path

from transformers import AutoTokenizer

from evalflow import evaluate
from evalflow.output.thinking_tokens import token_counter

MARKER = "e"  # a marker the tiny random model writes in most generations


def test_the_counter_is_the_models_tokenizer_and_none_for_a_served_model(tiny_nobos_dir: Path) -> None:
    count = token_counter({"type": "hf", "pretrained": str(tiny_nobos_dir)})
    assert count is not None
    tok = AutoTokenizer.from_pretrained(tiny_nobos_dir)
    texts = ["The quick brown fox", "", "Paris is the capital"]
    assert count(texts) == [len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]
    assert token_counter({"type": "openai_chat", "model": "m"}) is None
    assert token_counter(None) is None


def test_a_runs_reasoning_tokens_are_its_thinking_parts_tokens(
    tiny_nobos_dir: Path, toy_library: Path, tmp_path: Path
) -> None:
    model = {"type": "hf", "pretrained": str(tiny_nobos_dir), "device": "cpu"}
    results = evaluate(
        "toy_gen",
        model,
        include_path=[str(toy_library)],
        cache_dir=str(tmp_path / "cache"),
        limit=6,
        bootstrap_iters=0,
        think_end_token=MARKER,
        gen_kwargs={"max_gen_toks": 12},
        log_samples=True,
        output_dir=tmp_path / "run",
    )
    tok = AutoTokenizer.from_pretrained(tiny_nobos_dir)
    expected = 0
    thought = 0
    for line in (tmp_path / "run" / "samples_toy_gen.jsonl").read_text().splitlines():
        (raw,) = json.loads(line)["resps"][0]
        if MARKER in raw:
            thought += 1
            expected += len(tok(raw[: raw.rindex(MARKER) + 1], add_special_tokens=False)["input_ids"])
    assert thought, "the tiny model wrote no marker: pick another one"
    assert results["generations"]["toy_gen"]["tokens"]["reasoning"] == expected
