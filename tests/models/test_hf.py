"""HFModel on a tiny random Llama loaded by path: every request type against direct computations.

The references here call transformers directly (one sequence at a time, no batching, no grouping),
so they check HFModel's encoding, truncation, batching and ordering, not just its consistency.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from evalflow.core.records import Request
from evalflow.errors import ConfigError, ModelError
from evalflow.models.hf import HFModel
from evalflow.models.hf.load import parse_batch_size
from tests.support.hf_direct import assert_close, direct_pair, direct_score

PAIRS = [
    ("The cat sat on", " the mat"),
    ("The cat sat on ", "the mat"),  # trailing space moves into the continuation
    ("Question: What is two plus two?\nAnswer:", " four"),
    ("Question: What is two plus two?\nAnswer:", " 4"),
    ("Question: What is two plus two?\nAnswer:", " five"),
    ("Paris is the capital of", " France."),
    ("Paris is the capital of", " Germany."),
    ("1 + 1 =", " 2"),
    ("1 + 1 =", " 3"),
    ("", "The dog sat"),  # empty context: conditioned on BOS/EOS
    ("<s>The cat", " sat"),  # BOS text already present: not added twice
    ("Once upon a time there was a small model that answered questions. " * 3, "The end"),
]


def ll_requests(pairs=PAIRS) -> list[Request]:
    return [Request("loglikelihood", (c, x)) for c, x in pairs]


@pytest.fixture(scope="module")
def raw(tiny_model_dir: Path):
    """The tiny model and tokenizer loaded straight from transformers, for references."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    return model, AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path) -> HFModel:
    return HFModel(str(tiny_model_dir), batch_size=4)


def test_loglikelihood_matches_one_sequence_at_a_time(model, raw):
    ref_model, tok = raw
    want = [direct_score(ref_model, *direct_pair(tok, c, x)) for c, x in PAIRS]
    assert_close(model.loglikelihood(ll_requests()), want)


def test_bos_is_added_once_and_empty_context_is_conditioned_on_bos(model, raw):
    _, tok = raw
    assert model.tok_encode("The cat")[0] == tok.bos_token_id
    assert model.tok_encode("<s>The cat") == model.tok_encode("The cat")
    assert model.tok_encode("The cat", add_special_tokens=False)[0] != tok.bos_token_id


@pytest.mark.parametrize("batch_size", [1, 3, 64, "auto"])
def test_results_do_not_depend_on_batch_size_or_request_order(tiny_model_dir, model, batch_size):
    reqs = ll_requests()
    want = model.loglikelihood(reqs)
    other = HFModel(str(tiny_model_dir), batch_size=batch_size)
    order = list(range(len(reqs)))
    random.Random(batch_size if isinstance(batch_size, int) else 0).shuffle(order)
    got = other.loglikelihood([reqs[i] for i in order])
    assert_close([got[order.index(i)] for i in range(len(reqs))], want)
    singles = [other.loglikelihood([r])[0] for r in reqs]
    assert_close(singles, want)


def test_multiple_choice_groups_match_separate_requests(model):
    ctx = "Question: What is two plus two?\nAnswer:"
    choices = [" 2", " 3", " 4", " 6", " four"]
    grouped = model.loglikelihood(ll_requests([(ctx, c) for c in choices]))
    assert_close(grouped, [model.loglikelihood(ll_requests([(ctx, c)]))[0] for c in choices])
    assert len({round(v, 6) for v, _ in grouped}) == len(choices)  # distinct answers, no aliasing


def test_left_truncation_at_max_length(tiny_model_dir, raw):
    ref_model, tok = raw
    short = HFModel(str(tiny_model_dir), max_length=8)
    pair = PAIRS[-1]
    ctx, cont = direct_pair(tok, *pair)
    assert len(ctx) + len(cont) > 9
    got = short.loglikelihood(ll_requests([pair]))
    assert_close(got, [direct_score(ref_model, ctx, cont, max_length=8)])
    full = direct_score(ref_model, ctx, cont)
    assert abs(got[0][0] - full[0]) > 1e-3  # truncation really changed what the model saw


def test_default_max_length_comes_from_the_config(model):
    assert model.max_length == 128


def test_is_greedy_true_exactly_for_the_argmax_continuation(model, raw):
    ref_model, tok = raw
    ctx = tok.encode("The cat sat on")
    greedy = ref_model.generate(torch.tensor([ctx]), max_new_tokens=4, do_sample=False)[0, len(ctx) :].tolist()
    other = greedy[:-1] + [(greedy[-1] + 1) % len(tok)]
    (lp_greedy, is_greedy), (lp_other, is_other) = model.score_pairs([(ctx, greedy), (ctx, other)])
    assert is_greedy and not is_other
    assert lp_greedy > lp_other


def test_rolling_equals_the_direct_sum_when_the_text_fits(model, raw):
    ref_model, tok = raw
    text = "The quick brown fox jumps over the lazy dog. A cat sat on the mat."
    tokens = tok.encode(text)  # with BOS, as lm-eval's tok_encode
    seq = [tok.bos_token_id] + tokens
    with torch.no_grad():
        lp = torch.log_softmax(ref_model(torch.tensor([seq[:-1]])).logits[0], -1)
    want = float(lp.gather(1, torch.tensor(seq[1:])[:, None]).double().sum())
    got = model.loglikelihood_rolling([Request("loglikelihood_rolling", (text,))])
    assert got[0] == pytest.approx(want, abs=1e-4)


def test_rolling_windows_over_max_length_sum_their_window_scores(tiny_model_dir, model, raw):
    ref_model, tok = raw
    text = "Paris is the capital of France. Berlin is the capital of Germany. 1 + 1 = 2, 3 + 3 = 6"
    tokens = tok.encode(text)
    windowed = HFModel(str(tiny_model_dir), max_length=8, batch_size=3)
    assert len(tokens) > 3 * 8
    want, start = 0.0, 0
    seq = [tok.bos_token_id] + tokens  # lm-eval's rolling text starts with BOS and is prefixed by BOS
    while start < len(tokens):  # windows of 8 predicted tokens, each seeing the 8 tokens before its end
        end = min(start + 8, len(tokens))
        lo = max(0, end - 8)
        with torch.no_grad():
            lp = torch.log_softmax(ref_model(torch.tensor([seq[lo:end]])).logits[0], -1)
        targets = seq[start + 1 : end + 1]
        want += float(lp[-len(targets) :].gather(1, torch.tensor(targets)[:, None]).double().sum())
        start = end
    got = windowed.loglikelihood_rolling([Request("loglikelihood_rolling", (text,))] * 2)
    assert got[0] == pytest.approx(want, abs=1e-4) and got[1] == got[0]
    assert model.loglikelihood_rolling([Request("loglikelihood_rolling", (text,))])[0] != pytest.approx(want, abs=1e-2)


def test_empty_continuation_is_refused(model):
    with pytest.raises(ModelError, match="no tokens"):
        model.loglikelihood(ll_requests([("The cat", "")]))


def test_batch_size_values():
    assert parse_batch_size(8) == 8 and parse_batch_size("8") == 8
    assert parse_batch_size("auto") is None and parse_batch_size("auto:4") is None
    for bad in (0, -1, "eight", None, True):
        with pytest.raises(ConfigError, match="batch_size"):
            parse_batch_size(bad)


def test_unloadable_model_raises_a_model_error(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelError, match="cannot load"):
        HFModel(str(tmp_path))
    with pytest.raises(ModelError, match="not a folder"):
        HFModel(str(tmp_path / "missing"))


def test_bad_dtype_and_device_are_refused_before_loading(tiny_model_dir):
    with pytest.raises(ConfigError, match="did you mean 'float32'"):
        HFModel(str(tiny_model_dir), dtype="floatt32")
    with pytest.raises(ConfigError, match="model.device"):
        HFModel(str(tiny_model_dir), device="gpu0")  # a device not here falls back instead: test_hf_device


def test_dtype_is_applied(tiny_model_dir, model):
    half = HFModel(str(tiny_model_dir), dtype="bfloat16")
    assert half.model.dtype == torch.bfloat16
    lp_half = half.loglikelihood(ll_requests(PAIRS[:1]))[0][0]
    lp_full = model.loglikelihood(ll_requests(PAIRS[:1]))[0][0]
    assert lp_half == pytest.approx(lp_full, rel=0.05) and lp_half != lp_full
