"""``--model hf --model_args ...`` under the front door: the string read as lm-eval 0.4.13 reads it
(its own parsers run in the peer venv on the same strings), every HFLM argument reaching the hf
preset's key of that name, HFLM's other keyword arguments reaching ``from_pretrained``, and a batch
size given there becoming the run's."""

from __future__ import annotations

import json
import subprocess

import pytest

from evalflow.config.compose import compose_config
from evalflow.errors import ConfigError
from evalflow.lmeval_compat.args import cli_model_args, model_args_overrides, parse_model_args
from evalflow.lmeval_compat.parser import parse
from evalflow.lmeval_compat.translate import translate
from tests.support import peer_hflm

STRINGS = [
    "pretrained=org/m,max_memory_per_gpu=[4096,8192],dtype=float32",
    "pretrained=org/m,k={'a': 1, 'b': [2,3]},peft=/adapters/x",
    "pretrained=org/m,max_length=-1,x=1e-3,y=None,z='7',t=TRUE,n=none",
    'pretrained=a=b,chat_template_args={"enable_thinking": false}',
]
# lm-eval's two readers: its command line's (MergeDictAction -> key_val_to_dict) and simple_evaluate's
PEER_PARSE = """
import json, sys
from lm_eval._cli.utils import key_val_to_dict
from lm_eval.utils import simple_parse_args_string
strings = json.loads(sys.argv[1])
print(json.dumps({"cli": [key_val_to_dict(s) for s in strings], "api": [simple_parse_args_string(s) for s in strings]}))
"""


def test_the_list_value_stays_whole() -> None:
    assert cli_model_args([STRINGS[0]]) == {
        "pretrained": "org/m",
        "max_memory_per_gpu": [4096, 8192],
        "dtype": "float32",
    }
    assert model_args_overrides(STRINGS[0] + ",batch_size=8") == [
        "model.pretrained=org/m",
        "model.max_memory_per_gpu=[4096,8192]",
        "model.dtype=float32",
        "batch_size=8",
    ]


@pytest.mark.skipif(not peer_hflm.available(), reason=peer_hflm.SKIP_REASON)
def test_model_args_read_as_lm_eval_reads_them() -> None:
    done = subprocess.run(
        [str(peer_hflm.PEER_PYTHON), "-c", PEER_PARSE, json.dumps(STRINGS)], capture_output=True, text=True, check=True
    )
    theirs = json.loads(done.stdout)
    assert [cli_model_args([s]) for s in STRINGS] == theirs["cli"]
    for text, api in zip(STRINGS, theirs["api"], strict=True):
        if all("=" in part for part in text.split(",")):
            assert parse_model_args(text) == api
        else:  # lm-eval's split leaves a bare word (keyed to ""): refused, pointing at a dict
            assert any(value == "" for value in api.values())
            with pytest.raises(ConfigError, match="simple_evaluate splits a model_args string at every comma"):
                parse_model_args(text)


def hf_translation(model_args: str, *more: str) -> list[str]:
    return list(translate(parse(["--model", "hf", "--model_args", model_args, "--tasks", "arc_easy", *more])).overrides)


def test_every_hflm_argument_reaches_the_hf_preset() -> None:
    overrides = hf_translation(
        "pretrained=/m,backend=causal,subfolder=s,use_fast_tokenizer=False,logits_cache=False,softmax_dtype=float32,"
        "mixed_precision_dtype=bfloat16,prefix_token_id=2,tp_plan=auto,attn_implementation=eager,load_in_4bit=True,"
        "bnb_4bit_quant_type=nf4,bnb_4bit_compute_dtype=bfloat16,autogptq=model.safetensors,gptqmodel=False,peft=/a,"
        "revision=v2,parallelize=True,device_map=auto,max_memory_per_gpu=20GiB,max_cpu_memory=60GiB,offload_folder=/o,"
        "batch_size=8,max_batch_size=32"
    )
    assert "+model.from_pretrained_kwargs.bnb_4bit_quant_type=nf4" in overrides
    assert "model.peft=/a" in overrides and "model.prefix_token_id=2" in overrides
    assert "batch_size=8" in overrides and "max_batch_size=32" in overrides
    cfg = compose_config(["model=hf", *overrides])
    model = dict(cfg.model)
    assert {k: model[k] for k in ("backend", "subfolder", "use_fast_tokenizer", "logits_cache", "autogptq")} == {
        "backend": "causal",
        "subfolder": "s",
        "use_fast_tokenizer": False,
        "logits_cache": False,
        "autogptq": "model.safetensors",
    }
    assert dict(model["from_pretrained_kwargs"]) == {"bnb_4bit_quant_type": "nf4", "bnb_4bit_compute_dtype": "bfloat16"}
    assert (cfg.batch_size, cfg.max_batch_size, model["max_memory_per_gpu"]) == (8, 32, "20GiB")


def test_a_batch_size_given_twice_differently_is_refused() -> None:
    assert "batch_size=8" in hf_translation("pretrained=/m,batch_size=8", "--batch_size", "8")
    with pytest.raises(ConfigError, match="--model_args batch_size=8: --batch_size 4 gives the model another"):
        hf_translation("pretrained=/m,batch_size=8", "--batch_size", "4")


def test_thinking_arguments_are_not_handed_to_from_pretrained() -> None:
    """HFLM's named thinking arguments are the run's settings (tests/lmeval_compat/test_thinking_args.py)."""
    overrides = hf_translation("pretrained=/m,think_end_token=</think>,enable_thinking=False")
    assert not any("from_pretrained_kwargs" in o for o in overrides)
    assert "think_end_token='</think>'" in overrides and "chat_template_args={enable_thinking:false}" in overrides
