"""lm-eval 0.4.13 HFLM's loading arguments against lm-eval's HFLM itself, on the tiny model: a
real LoRA adapter (``peft``), delta weights (``delta``), the softmax and autocast dtypes, a prefix
token, no logits cache, eager attention and a subfolder, each given to both as the same
``model_args``. Log-likelihoods agree within 1e-5, generations exactly. Skips when the peer venv,
or peft in either venv, is absent."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from evalflow.core.records import Request
from evalflow.models.hf import HFModel
from tests.support import peer_hflm
from tests.support.generation import texts
from tests.support.tiny_models import build_tiny_delta, build_tiny_lora

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not peer_hflm.available(), reason=peer_hflm.SKIP_REASON),
    pytest.mark.skipif(not peer_hflm.has_package("peft"), reason="peft is not installed in lm-eval's peer venv"),
]

PAIRS = [
    ["The cat sat on", " the mat"],
    ["Question: What is two plus two?\nAnswer:", " four"],
    ["Question: What is two plus two?\nAnswer:", " 4"],
    ["Paris is the capital of", " France."],
    ["", "The dog sat"],
    ["A cat", " sat on the mat, and the dog sat on the log."],
]
TEXTS = ["The quick brown fox jumps over the lazy dog.", "A"]
GENS = [["The cat", {"until": ["\n"], "max_gen_toks": 12}], ["1 + 1 =", {"until": [" "], "max_gen_toks": 8}]]
# each variant's model_args beyond pretrained and batch_size ("{lora}", "{delta}", "{inner}" filled in)
VARIANTS: list[dict[str, Any]] = [
    {"peft": "{lora}"},
    {"delta": "{delta}"},
    {"softmax_dtype": "float64"},
    {"mixed_precision_dtype": "bfloat16"},
    {"prefix_token_id": 2},
    {"logits_cache": False},
    {"attn_implementation": "eager"},
    {"subfolder": "inner", "use_fast_tokenizer": False},
]


@pytest.fixture(scope="module")
def both(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], list[dict]]:
    """Per variant, (lm-eval's answers, evalflow's); lm-eval runs while evalflow computes."""
    pytest.importorskip("peft")
    work = tmp_path_factory.mktemp("lmeval_args")
    repo = work / "repo"
    shutil.copytree(tiny_model_dir, repo / "inner")
    paths = {
        "lora": str(build_tiny_lora(tiny_model_dir, work / "lora")),
        "delta": str(build_tiny_delta(tiny_model_dir, work / "delta")),
    }
    runs = []
    for variant in VARIANTS:
        args = {k: v.format(**paths) if isinstance(v, str) else v for k, v in variant.items()}
        pretrained = str(repo) if "subfolder" in args else str(tiny_model_dir)
        runs.append(
            {
                "model_args": {"pretrained": pretrained, "batch_size": 4, **args},
                "loglikelihood": PAIRS,
                "loglikelihood_rolling": TEXTS,
                "generate_until": GENS,
            }
        )
    proc = peer_hflm.start(runs)
    ours = []
    for run in runs:
        args = dict(run["model_args"])
        m = HFModel(args.pop("pretrained"), **args)
        ours.append(
            {
                "loglikelihood": m.loglikelihood([Request("loglikelihood", tuple(p)) for p in PAIRS]),
                "loglikelihood_rolling": m.loglikelihood_rolling(
                    [Request("loglikelihood_rolling", (t,)) for t in TEXTS]
                ),
                "generate_until": texts(m.generate_until([Request("generate_until", tuple(g)) for g in GENS])),
            }
        )
    return peer_hflm.finish(proc), ours


@pytest.mark.parametrize("variant", range(len(VARIANTS)), ids=lambda i: "+".join(VARIANTS[i]))
def test_same_answers_as_lm_eval(both: tuple[list[dict], list[dict]], variant: int) -> None:
    theirs, ours = both[0][variant], both[1][variant]
    for (lp, greedy), (ref_lp, ref_greedy) in zip(ours["loglikelihood"], theirs["loglikelihood"], strict=True):
        assert lp == pytest.approx(ref_lp, abs=1e-5) and greedy == ref_greedy
    assert ours["loglikelihood_rolling"] == pytest.approx(theirs["loglikelihood_rolling"], abs=1e-5)
    assert ours["generate_until"] == theirs["generate_until"]
