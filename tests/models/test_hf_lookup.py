"""Draft tokens copied from a row's own text: checked in the decode step, kept only where they are
the model's own greedy choice, so answers equal one-token-a-step decoding's in fewer steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalflow.errors import ConfigError
from evalflow.models.hf import HFModel
from evalflow.models.hf.fast import decode
from evalflow.models.hf.fast.lookup import NgramIndex
from tests.support.generation import FEW_SHOT, gen

PROMPTS = [
    "the cat sat on the mat and the cat",
    "Question: Paris is the capital of",
    "a b a b a b a",
    "Once upon a time",
]


def test_the_longest_earlier_ngram_proposes_what_followed_it():
    index = NgramIndex([2, 3, 5, 9, 3, 6, 2, 3], max_ngram=3)
    assert index.propose(2) == [5, 9]  # "2 3" before, not the more recent "3" (which gives 6, 2)
    assert index.propose(10) == [5, 9, 3, 6, 2, 3]  # up to the row's end
    assert index.propose(0) == []
    index.append(7)  # "3 7" and "7" never seen
    assert index.propose(3) == []
    index.append(2)  # "2" last ended at 6 (the newest 2 is not its own match)
    assert index.propose(3) == [3, 7, 2]
    assert NgramIndex([4]).propose(3) == []


def test_draft_tokens_must_be_a_whole_number(tiny_model_dir: Path):
    with pytest.raises(ConfigError, match="model.draft_tokens"):
        HFModel(str(tiny_model_dir), draft_tokens=-1)


def test_steps_with_drafts_generate_the_same_tokens_in_fewer_steps(tiny_model_dir: Path, monkeypatch):
    requests = [gen(p, until=[], max_gen_toks=40) for p in PROMPTS]
    steps: list[int] = []
    real_step = decode._Loop.step

    def counting(self, *args):
        steps.append(self.draft)
        return real_step(self, *args)

    monkeypatch.setattr(decode._Loop, "step", counting)
    one_a_step = HFModel(str(tiny_model_dir), batch_size=2, draft_tokens=0).generate_until(requests)
    plain_steps = len(steps)
    steps.clear()
    assert HFModel(str(tiny_model_dir), batch_size=2).generate_until(requests) == one_a_step
    assert set(steps) == {4} and len(steps) < plain_steps


@pytest.mark.parametrize("until", [[], ["the", "\n"]])
def test_drafts_keep_stop_sequences_budgets_and_shared_prefixes(tiny_model_dir: Path, until: list[str]):
    """Stop rules are checked after every kept token, as one token a step would; rows behind one
    memoized few-shot prefix (split attention) take drafts too; budgets are never exceeded."""
    requests = [gen(FEW_SHOT + p, until=until, max_gen_toks=n) for p, n in zip(PROMPTS, (3, 17, 30, 1))]
    expected = HFModel(str(tiny_model_dir), batch_size=3, batching="lmeval").generate_until(requests)
    model = HFModel(str(tiny_model_dir), batch_size=3, draft_tokens=6)
    assert model.generate_until(requests) == expected
    assert model.model.config._attn_implementation == "sdpa"
