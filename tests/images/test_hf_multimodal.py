"""hf_multimodal against lm-eval's hf-multimodal, in-process, on the tiny random LLaVA: the same
processor inputs (token ids, pixel values) and the same greedy generations, with one to three
images per request, without and with a chat template. The full comparison through lm-eval's CLI
and its chartqa/mmmu YAML is ``benchmarks/vlm_parity.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalflow.core.records import Request
from tests.support import images
from tests.support.generation import texts

PROMPTS = [
    "<image>What colour is the shape? Answer:",
    "<image> and <image>: which is red?",
    "Compare <image>, <image> and <image>.\nAnswer:",
]


def _requests() -> list[tuple[str, list]]:
    pics = [r["image"] for r in images.rows(6, seed=3)]
    return [(PROMPTS[i % 3], pics[i : i + 1 + i % 3]) for i in range(4)]


@pytest.fixture(scope="module")
def ours(tiny_vlm_dir: Path):
    from evalflow.models.hf.vlm.vlm import HFMultimodalModel

    return HFMultimodalModel(str(tiny_vlm_dir), dtype="float32", batch_size=1, threads=1)


@pytest.fixture(scope="module")
def theirs(tiny_vlm_dir: Path):
    hf_vlms = pytest.importorskip("lm_eval.models.hf_vlms")
    return hf_vlms.HFMultimodalLM(pretrained=str(tiny_vlm_dir), dtype="float32", batch_size=1, device="cpu")


GEN = {"until": ["\n"], "max_gen_toks": 6, "do_sample": False, "temperature": 0.0}


def test_same_token_ids_pixels_and_generations(ours, theirs) -> None:
    from lm_eval.api.instance import Instance

    from evalflow.models.hf.vlm import vlm_passes

    reqs = _requests()
    for prompt, pics in reqs:
        mine = vlm_passes._encode(ours.parts, [ours.prompt(prompt)], [pics], ours.parts.max_length - 6, False)
        peer = theirs.tok_batch_multimodal_encode([prompt], [pics], left_truncate_len=theirs.max_length - 6)
        assert mine["input_ids"].tolist() == peer["input_ids"].tolist()
        assert ours.image_token in ours.prompt(prompt) and (mine["pixel_values"] == peer["pixel_values"]).all()
    got = texts(ours.generate_until([Request("generate_until", (p, GEN, {"visual": pics})) for p, pics in reqs]))
    want = theirs.generate_until(
        [Instance("generate_until", {}, (p, dict(GEN), {"visual": pics}), 0) for p, pics in reqs], disable_tqdm=True
    )
    assert got == want and len(set(got)) > 1  # the images change the answers


def test_chat_template_parts_as_lm_eval(ours, theirs) -> None:
    prompt = PROMPTS[1]
    messages = json.dumps([{"role": "user", "content": prompt}])
    peer = theirs.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True)
    assert ours.prompt(messages) == peer and "<image>" in peer


def test_log_likelihood_with_images_is_refused(ours) -> None:
    from evalflow.errors import ModelError

    with pytest.raises(ModelError, match="NotImplementedError"):
        ours.loglikelihood([Request("loglikelihood", ("<image>Q", " A", {"visual": []}))])
