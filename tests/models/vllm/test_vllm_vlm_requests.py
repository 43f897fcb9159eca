"""model=vllm_vlm without vLLM: the front door's ``--model vllm-vlm``, the requests it builds for
vLLM (text, images, sampling parameters: lm-eval 0.4.13's ``VLLM_VLM``), what it refuses before any
engine starts, and its cache key. The engine itself is replaced by a recorder of its calls; the
real engine's answers are checked in ``test_vllm_vlm_engine.py``."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from evalflow.core.records import Finish, Generation, Request
from evalflow.errors import ConfigError
from evalflow.lmeval_compat.parser import parse
from evalflow.lmeval_compat.translate import translate
from evalflow.models import modality
from evalflow.models.registry import model_class, model_identity
from evalflow.models.vllm import vllm_vlm
from evalflow.models.vllm.request_rules import Completion
from evalflow.models.vllm.vllm_vlm import VLLMVisionModel, image_limit, image_prompt, longest_text_first

PIL = pytest.importorskip("PIL.Image")


def ident(folder: Path, **config: Any) -> dict[str, Any]:
    return model_identity({"type": "vllm_vlm", "pretrained": str(folder), **config})


def test_lm_evals_vllm_vlm_maps_onto_the_vllm_vlm_preset_its_arguments_as_they_are():
    t = translate(
        parse(
            [
                "--model",
                "vllm-vlm",
                "--model_args",
                "pretrained=/m,max_images=2,interleave=False,image_max_side=64,max_model_len=512,kv_cache_dtype=fp8",
                "--tasks",
                "t",
                "--device",
                "cuda:0",
            ]
        )
    )
    assert t.preset == "vllm_vlm"
    assert any(n.startswith("--device: ignored by the vLLM backend") for n in t.notes)  # as lm-eval's VLLM
    for override in ("model.max_images=2", "model.interleave=false", "model.image_max_side=64"):
        assert override in t.overrides
    assert "+model.kv_cache_dtype=fp8" in t.overrides  # lm-eval hands unknown args to vllm.LLM; so does evalflow


def test_the_preset_is_vllms_plus_the_image_settings():
    import yaml

    from evalflow.config.packaged import conf_dir
    from evalflow.lmeval_compat.model_map import preset_keys

    own = yaml.safe_load((conf_dir() / "model" / "vllm_vlm.yaml").read_text())
    assert own["defaults"] == ["vllm", "_self_"] and own["type"] == "vllm_vlm"
    assert preset_keys("vllm") | set(vllm_vlm.IMAGE_SETTINGS) | {"defaults"} == preset_keys("vllm_vlm") | {"defaults"}
    assert model_class("vllm_vlm") is VLLMVisionModel


def test_the_key_holds_the_image_settings_and_vllms_keys(tiny_model_dir):
    base = ident(tiny_model_dir)
    assert base["backend"] == "vllm-vlm" and base["images"]["max_images"] == 999
    assert base["weights"] == model_identity({"type": "vllm", "pretrained": str(tiny_model_dir)})["weights"]
    for key, value in {
        "interleave": False,
        "max_images": 1,
        "image_width": 64,
        "image_height": 64,
        "image_max_side": 64,
        "dtype": "bfloat16",
    }.items():
        assert ident(tiny_model_dir, **{key: value}) != base, key
    for key, value in {"gpu_memory_utilization": 0.5, "limit_mm_per_prompt": {"image": 4}, "seed": 3}.items():
        assert ident(tiny_model_dir, **{key: value}) == base, key
    assert ident(tiny_model_dir, interleave=True, max_images=999) == base  # lm-eval's defaults spelled out


def test_the_key_follows_the_processors_chat_template_file(tiny_model_dir, tmp_path):
    import shutil

    copy = tmp_path / "vlm"
    shutil.copytree(tiny_model_dir, copy)
    (copy / "chat_template.jinja").write_text("{{ messages[0]['content'] }}")
    before = ident(copy)
    (copy / "chat_template.jinja").write_text("{{ messages[-1]['content'] }}")
    assert ident(copy) != before  # chat prompts are rendered with it: answers keyed by it


def test_an_ambiguous_resize_is_refused_before_any_engine(tiny_model_dir):
    with pytest.raises(ConfigError, match="image_max_side cannot be combined"):
        ident(tiny_model_dir, image_max_side=64, image_width=32)


def test_max_images_becomes_vllms_limit_mm_per_prompt_as_lm_eval_sets_it():
    assert image_limit(999, None) == {}
    assert image_limit(2, None) == {"limit_mm_per_prompt": {"image": 2}}
    assert image_limit(2, {"image": 5}) == {}  # given by name: kept as given


def test_images_are_cut_to_max_images_and_resized():
    big, small = PIL.new("RGB", (200, 100), "red"), PIL.new("RGB", (20, 10), "blue")
    text, images = image_prompt("<image><image>q", [big, small, big], max_images=2, size=(None, None, 50))
    assert text == "<image><image>q"
    assert [im.size for im in images] == [(50, 25), (20, 10)]  # aspect kept, never enlarged


def test_requests_go_longest_first_ties_by_text():
    assert longest_text_first([[1], [1, 2], [3]], ["b", "x", "a"]) == [1, 2, 0]


class FakeProcessor:
    """A processor whose chat template shows the parts it is given."""

    def apply_chat_template(self, history, add_generation_prompt, continue_final_message):
        parts = [
            f"{m['role']}:" + "".join("[IMG]" if p["type"] == "image" else p["text"] for p in m["content"])
            for m in history
        ]
        return "|".join(parts) + ("|assistant:" if add_generation_prompt else "")


class FakeTokenizer:
    bos_token_id, eos_token_id, eos_token = 0, 1, "</s>"

    def decode(self, ids):
        return "</s>" if ids == 1 or ids == [1] else "<s>"

    def __call__(self, text, return_attention_mask=False, **kwargs):
        return SimpleNamespace(input_ids=[ord(c) for c in text])


def built(**settings: Any) -> VLLMVisionModel:
    """The model with its engine calls recorded instead of made."""
    model = VLLMVisionModel.__new__(VLLMVisionModel)
    model.processor, model.tokenizer, model.lora, model.llm = FakeProcessor(), FakeTokenizer(), None, "engine"
    model.add_bos_token = model.custom_prefix_token_id = None
    model.max_gen_toks, model.max_length, model.truncation_side = 16, 512, "left"
    model.interleave, model.max_images = settings.get("interleave", True), settings.get("max_images", 999)
    model.resize = (None, None, None)
    return model


@pytest.fixture
def calls(monkeypatch):
    from evalflow.models.vllm import vllm_calls

    seen: dict[str, Any] = {}

    def with_images(llm, prompts, params, lora):
        seen["images"] = (prompts, params)
        return [Completion(f"out{i} STOP more", "stop", "STOP", 9, 3) for i in range(len(prompts))]

    def text_only(llm, prompts, params, lora):
        seen["text"] = (prompts, params)
        return [Completion("plain", "stop", None, len(p), 2) for p in prompts]

    monkeypatch.setattr(vllm_calls, "generate_with_images", with_images)
    monkeypatch.setattr(vllm_calls, "generate", text_only)
    return seen


def gen(context: str, images: list[Any] | None, **kwargs: Any) -> Request:
    args: tuple[Any, ...] = (context, {"until": ["STOP"], **kwargs})
    return Request("generate_until", args + (({"visual": images},) if images is not None else ()))


def test_plain_prompts_keep_max_images_placeholders_and_their_images(calls):
    red, blue = PIL.new("RGB", (8, 8), "red"), PIL.new("RGB", (8, 8), "blue")
    model = built(max_images=1)
    answers = model.generate_until(
        [gen("<image>a<image>b", [red, blue], max_gen_toks=5, do_sample=False), gen("plain text", None)]
    )
    assert answers == [  # cut at the stop, as lm-eval's (vLLM's stop) is
        Generation("out0 ", Finish("stop", 9, 3)),
        Generation("plain", Finish("eos", 10, 2)),
    ]
    (prompts, params) = calls["images"]
    assert prompts == [("<image>ab", [red])]
    assert params == [
        {
            "max_tokens": 5,
            "stop": ["STOP", "</s>"],
            "skip_special_tokens": False,
            "spaces_between_special_tokens": False,
            "temperature": 0.0,
        }
    ]
    assert calls["text"][0] == [[ord(c) for c in "plain text"]]  # text-only requests: model=vllm's path


@pytest.mark.parametrize(
    ("interleave", "expected"),
    [(True, "system:S|user:[IMG]what[IMG]now|assistant:"), (False, "system:S|user:[IMG][IMG]whatnow|assistant:")],
)
def test_chat_prompts_are_rendered_by_the_processor_with_image_parts(calls, interleave, expected):
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "<image>what<image>now"}]
    img = PIL.new("RGB", (8, 8), "red")
    built(interleave=interleave).generate_until([gen(json.dumps(messages), [img, img])])
    assert calls["images"][0] == [(expected, [img, img])]


def test_a_sampled_request_carries_its_own_seed(calls):
    img = PIL.new("RGB", (8, 8), "red")
    request = Request("generate_until", ("q", {"do_sample": True, "temperature": 0.7}, {"visual": [img]}), seed=5)
    built().generate_until([request])
    assert calls["images"][1][0]["seed"] == request.sample_seed()


def test_image_log_likelihood_tasks_are_refused_before_any_call_naming_vllm_vlm():
    class Task:
        task, source, output_type, doc_to_image, doc_to_audio = "mc", "mc.yaml", "multiple_choice", "img", None

    assert "vllm_vlm" in " ".join(modality.MULTIMODAL_BACKENDS)
    with pytest.raises(ConfigError, match="does not answer with images"):
        modality.refuse_unanswerable([Task()], VLLMVisionModel, "vllm_vlm")
