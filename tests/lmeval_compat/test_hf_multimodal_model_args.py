"""``--model hf-multimodal --model_args ...`` under the front door: every HFLM argument lm-eval's
HFMultimodalLM inherits reaches the hf_multimodal preset's key of that name, its other keyword
arguments reach ``from_pretrained`` (as HFLM hands them on), a batch size given there becomes the
run's, and the thinking arguments (issue 52's) stay refused by name."""

from __future__ import annotations

from evalflow.config.compose import compose_config
from evalflow.lmeval_compat.parser import parse
from evalflow.lmeval_compat.translate import translate

ARGS = (
    "pretrained=/m,backend=seq2seq,subfolder=s,tokenizer=/p,gguf_file=m.gguf,use_fast_tokenizer=False,"
    "logits_cache=False,softmax_dtype=float32,mixed_precision_dtype=bfloat16,add_bos_token=True,prefix_token_id=2,"
    "tp_plan=auto,attn_implementation=eager,load_in_4bit=True,bnb_4bit_quant_type=nf4,autogptq=model.safetensors,"
    "gptqmodel=False,peft=/a,delta=/d,parallelize=True,device_map=auto,max_memory_per_gpu=20GiB,"
    "max_cpu_memory=60GiB,offload_folder=/o,batch_size=2,max_batch_size=8,image_max_side=64"
)


def vlm_translation(model_args: str) -> list[str]:
    argv = ["--model", "hf-multimodal", "--model_args", model_args, "--tasks", "arc_easy"]
    return list(translate(parse(argv)).overrides)


def test_every_inherited_hflm_argument_reaches_the_hf_multimodal_preset() -> None:
    overrides = vlm_translation(ARGS)
    assert "+model.from_pretrained_kwargs.bnb_4bit_quant_type=nf4" in overrides
    assert "batch_size=2" in overrides and "max_batch_size=8" in overrides
    model = dict(compose_config(["model=hf_multimodal", *overrides]).model)
    named = {word.split("=", 1)[0] for word in ARGS.split(",")} - {
        "bnb_4bit_quant_type",
        "batch_size",
        "max_batch_size",
    }
    assert named <= set(model)
    assert {k: str(model[k]) for k in ("backend", "subfolder", "tokenizer", "peft", "delta", "tp_plan")} == {
        "backend": "seq2seq",
        "subfolder": "s",
        "tokenizer": "/p",
        "peft": "/a",
        "delta": "/d",
        "tp_plan": "auto",
    }
    assert (model["use_fast_tokenizer"], model["logits_cache"], model["parallelize"]) == (False, False, True)
    assert (model["prefix_token_id"], model["max_memory_per_gpu"], model["autogptq"]) == (
        2,
        "20GiB",
        "model.safetensors",
    )
    assert dict(model["from_pretrained_kwargs"]) == {"bnb_4bit_quant_type": "nf4"}


def test_thinking_arguments_are_ignored_as_hfmultimodallm_ignores_them() -> None:
    """Accepted and never read (tests/lmeval_compat/test_thinking_args.py), never handed to from_pretrained."""
    overrides = vlm_translation("pretrained=/m,think_end_token=</think>,enable_thinking=False")
    assert not any("think" in o for o in overrides if "model." in o)
