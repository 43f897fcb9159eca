"""HFModel against lm-eval 0.4.13's HFLM itself, on the tiny models, for every request type.

Both run the same weights with the same torch and transformers versions (the peer venv pins them
like this machine), so log-likelihoods must agree to float noise and generations exactly. Skips
when the peer venv is absent.
"""

from __future__ import annotations

import pytest

from evalflow.core.records import Request
from evalflow.models.hf import HFModel
from tests.support import peer_hflm
from tests.support.generation import texts

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not peer_hflm.available(), reason=peer_hflm.SKIP_REASON)]

PAIRS = [
    ["The cat sat on", " the mat"],
    ["The cat sat on ", "the mat"],
    ["Question: What is two plus two?\nAnswer:", " four"],
    ["Question: What is two plus two?\nAnswer:", " 4"],
    ["Question: What is two plus two?\nAnswer:", " 4 "],
    ["Paris is the capital of", " France."],
    ["Paris is the capital of", " Germany."],
    ["1 + 1 =", " 2"],
    ["1 + 1 = ", "2"],
    ["", "The dog sat"],
    ["", "<s>The dog sat"],
    ["<s>The cat", " sat"],
    ["Once upon a time there was a small model that answered questions. " * 3, "The end"],
    ["A cat", " sat on the mat, and the dog sat on the log."],
]
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Paris is the capital of France. Berlin is the capital of Germany. 1 + 1 = 2, 3 + 3 = 6",
    "A",
]
GENS = [
    ["The cat", {"until": ["\n"], "max_gen_toks": 16}],
    ["Paris is the capital of France. Berlin", {"until": [".", "ma"], "max_gen_toks": 20, "do_sample": False}],
    ["Question: What is", {"until": "an", "max_gen_toks": 12, "temperature": 0.0}],
    ["1 + 1 =", {"until": [" "], "max_gen_toks": 12}],
    ["Once upon a time there was a small model", {"until": ["\n\n"], "max_new_tokens": 10}],
    ["<s>A", {"until": ["The"], "max_gen_toks": 8}],
]
VARIANTS = [  # (fixture name, HFModel/HFLM kwargs): bos and no-bos tokenizers, truncation, batching
    ("tiny_model_dir", {"batch_size": 4}),
    ("tiny_model_dir", {"batch_size": 3, "max_length": 8}),
    ("tiny_model_dir", {"batch_size": 2, "add_bos_token": False}),
    ("tiny_nobos_dir", {"batch_size": 5}),
    ("tiny_nobos_dir", {"batch_size": 1, "max_length": 24}),
]


@pytest.fixture(scope="module")
def both(request):
    """For each variant, (lm-eval's answers, evalflow's answers); lm-eval runs while we compute."""
    dirs = {name: str(request.getfixturevalue(name)) for name, _ in VARIANTS}
    greedy = {  # each model's own greedy continuation, so is_greedy=True is compared too
        name: texts(
            HFModel(d).generate_until([Request("generate_until", ("The cat", {"until": [], "max_gen_toks": 3}))])
        )[0]
        for name, d in dirs.items()
    }
    runs = []
    for name, kwargs in VARIANTS:
        short = kwargs.get("max_length") == 8  # generation needs room for max_gen_toks
        gens, pairs = ([], PAIRS[:-1]) if short else (GENS, PAIRS)  # the last pair is > 8 tokens
        pairs = pairs + [["The cat", greedy[name]]]
        runs.append(
            {
                "model_args": {"pretrained": dirs[name], **kwargs},
                "loglikelihood": pairs,
                "loglikelihood_rolling": TEXTS,
                "generate_until": gens,
            }
        )
    proc = peer_hflm.start(runs)
    ours = []
    for run in runs:
        args = dict(run["model_args"])
        m = HFModel(args.pop("pretrained"), **args)
        ours.append(
            {
                "loglikelihood": m.loglikelihood([Request("loglikelihood", tuple(p)) for p in run["loglikelihood"]]),
                "loglikelihood_rolling": m.loglikelihood_rolling(
                    [Request("loglikelihood_rolling", (t,)) for t in TEXTS]
                ),
                "generate_until": texts(
                    m.generate_until([Request("generate_until", tuple(g)) for g in run["generate_until"]])
                ),
            }
        )
    return peer_hflm.finish(proc), ours


@pytest.mark.parametrize("variant", range(len(VARIANTS)))
def test_same_answers_as_lm_eval(both, variant):
    theirs, ours = both[0][variant], both[1][variant]
    for (lp, greedy), (ref_lp, ref_greedy) in zip(ours["loglikelihood"], theirs["loglikelihood"], strict=True):
        assert lp == pytest.approx(ref_lp, abs=1e-5) and greedy == ref_greedy
    assert ours["loglikelihood_rolling"] == pytest.approx(theirs["loglikelihood_rolling"], abs=1e-4)
    assert ours["generate_until"] == theirs["generate_until"]
    if variant == 0:
        assert ours["loglikelihood"][-1][1] is True  # the greedy continuation really is greedy
