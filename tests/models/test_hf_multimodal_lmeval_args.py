"""lm-eval 0.4.13 HFLM's arguments on evalflow's hf_multimodal, as HFMultimodalLM (an HFLM subclass)
takes them: the loading ones through hf's own loader (a real LoRA adapter and delta weights on the
tiny LLaVA; the quantizers with the library call patched), keyed into the answers' identity exactly
when they change an answer; placement ones and the ones its image passes never read accepted and
not keyed; refusals before any model call. Where lm-eval is importable, its HFMultimodalLM loads
the same folder with the same arguments and must generate the same text."""

from __future__ import annotations

import re
import shutil
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import transformers

from evalflow.core.records import Request
from evalflow.errors import ConfigError
from evalflow.models.hf import load
from evalflow.models.hf.vlm.vlm import HFMultimodalModel
from evalflow.models.registry import model_identity
from tests.support import images
from tests.support.generation import texts

GEN = {"until": ["\n"], "max_gen_toks": 6, "do_sample": False, "temperature": 0.0}
PROMPTS = ["<image>What colour is the shape? Answer:", "<image> and <image>: which is red?", "Name it: <image>"]


@pytest.fixture(scope="module")
def vlm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random LLaVA with its built-in byte-level tokenizer (nothing downloaded)."""
    pytest.importorskip("PIL")
    from evalflow.models.hf.vlm.tiny_vlm import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny_vlm"))


@pytest.fixture(scope="module")
def vlm_lora(vlm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LoRA adapter (rank 4, random weights so it changes answers) on the LLaVA's q/v projections."""
    import torch

    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    model = transformers.AutoModelForImageTextToText.from_pretrained(vlm_dir)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    folder = tmp_path_factory.mktemp("vlm_lora")
    peft.get_peft_model(model, config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def vlm_delta(vlm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Delta weights of the LLaVA's shape: small noise on every tensor."""
    import torch

    torch.manual_seed(1)
    model = transformers.AutoModelForImageTextToText.from_pretrained(vlm_dir)
    with torch.no_grad():
        for param in model.state_dict().values():
            param.copy_(torch.randn_like(param) * 0.05)
    folder = tmp_path_factory.mktemp("vlm_delta")
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def repo(vlm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The model at the top of a folder and again in its ``inner`` subfolder."""
    top = tmp_path_factory.mktemp("repo") / "repo"
    shutil.copytree(vlm_dir, top)
    shutil.copytree(vlm_dir, top / "inner")
    return top


def requests() -> list[tuple[str, list[Any]]]:
    pics = [r["image"] for r in images.rows(6, seed=3)]
    prompts = [PROMPTS[i % 3] for i in range(4)]
    return [(p, pics[i : i + p.count("<image>")]) for i, p in enumerate(prompts)]


def generations(model: HFMultimodalModel) -> list[str]:
    return texts(model.generate_until([Request("generate_until", (p, GEN, {"visual": v})) for p, v in requests()]))


def key(folder: Path, **config: Any) -> dict[str, Any]:
    return model_identity({"type": "hf_multimodal", "pretrained": str(folder), **config})


# -- keying -----------------------------------------------------------------------------------


ANSWER_CHANGING = [
    {"attn_implementation": "eager"},
    {"load_in_4bit": True},
    {"load_in_8bit": True},
    {"autogptq": True},
    {"gptqmodel": True},
    {"from_pretrained_kwargs": {"bnb_4bit_quant_type": "nf4"}},
    {"peft": "org/adapter"},
    {"delta": "org/delta"},
]
NOT_KEYED = [
    {"parallelize": True, "device_map": "auto", "max_memory_per_gpu": "20GiB", "max_cpu_memory": "60GiB"},
    {"offload_folder": "/tmp/elsewhere"},
    {"tp_plan": "auto"},
    {"from_pretrained_kwargs": {"low_cpu_mem_usage": True, "local_files_only": True}},
    {"add_bos_token": True, "prefix_token_id": 2},  # the requests' order only
    {"logits_cache": False},  # never read by image requests, as in lm-eval
    {"softmax_dtype": "float64"},
    {"mixed_precision_dtype": "bfloat16"},
    {"use_fast_tokenizer": False},
    {"backend": "seq2seq"},
]


@pytest.mark.parametrize("change", ANSWER_CHANGING, ids=lambda c: next(iter(c)))
def test_a_loading_argument_that_changes_answers_is_in_the_key(vlm_dir: Path, change: dict[str, Any]) -> None:
    assert key(vlm_dir, **change) != key(vlm_dir)


@pytest.mark.parametrize("change", NOT_KEYED, ids=lambda c: next(iter(c)))
def test_placement_and_inert_arguments_are_not(vlm_dir: Path, change: dict[str, Any]) -> None:
    assert key(vlm_dir, **change) == key(vlm_dir)


def test_the_processor_subfolder_gguf_and_adapter_are_keyed_by_their_files(
    vlm_dir: Path, repo: Path, vlm_lora: Path, tmp_path: Path
) -> None:
    assert key(repo, subfolder="inner") != key(repo) and key(repo, tokenizer=str(vlm_dir)) != key(repo)
    edited = shutil.copytree(vlm_dir, tmp_path / "processor")
    assert key(repo, tokenizer=str(edited)) == key(repo, tokenizer=str(vlm_dir))
    (edited / "tokenizer_config.json").write_text((edited / "tokenizer_config.json").read_text() + " ")
    assert key(repo, tokenizer=str(edited)) != key(repo, tokenizer=str(vlm_dir))
    (repo / "m.gguf").write_bytes(b"GGUF")
    assert key(repo, gguf_file="m.gguf") != key(repo)
    moved = shutil.copytree(vlm_lora, tmp_path / "lora")
    assert key(vlm_dir, peft=str(moved)) == key(vlm_dir, peft=str(vlm_lora)) != key(vlm_dir)


# -- refusals, before any model call ---------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"backend": "encoder"}, "is not one of default, causal, seq2seq"),
        ({"peft": "a", "delta": "b"}, "model.peft and model.delta are both set"),
        ({"autogptq": True, "gptqmodel": True}, "model.autogptq and model.gptqmodel are both set"),
        ({"tp_plan": "auto", "parallelize": True}, "model.tp_plan and model.parallelize are both set"),
        ({"softmax_dtype": "fp32"}, "model.softmax_dtype 'fp32' is not a torch dtype"),
        ({"from_pretrained_kwargs": "x"}, "model.from_pretrained_kwargs 'x' is not a mapping"),
    ],
)
def test_refused_before_loading_in_a_cached_run_too(
    vlm_dir: Path, monkeypatch: pytest.MonkeyPatch, config: dict[str, Any], words: str
) -> None:
    monkeypatch.setattr(load, "load_weights", lambda *a, **k: pytest.fail("loaded a model"))
    for build in (lambda: key(vlm_dir, **config), lambda: HFMultimodalModel(str(vlm_dir), **config)):
        with pytest.raises(ConfigError, match=re.escape(words)):
            build()


# -- mappings, with the library call patched -------------------------------------------------


class Recorder:
    """``from_pretrained`` (or a GPTQ ``from_quantized``) that records its call and loads the tiny
    VLM with only the arguments a CPU can honour."""

    FORWARDED = ("revision", "subfolder", "attn_implementation")

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.real = transformers.AutoModelForImageTextToText.from_pretrained

    def __call__(self, source: str, **kwargs: Any) -> Any:
        self.calls.append((source, kwargs))
        return self.real(source, **{k: v for k, v in kwargs.items() if k in self.FORWARDED})


@pytest.fixture
def from_pretrained(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder()
    monkeypatch.setattr(transformers.AutoModelForImageTextToText, "from_pretrained", recorder)
    return recorder


def test_bnb_quantization_tp_plan_and_placement_reach_from_pretrained(vlm_dir: Path, from_pretrained: Recorder) -> None:
    """``load_in_4bit`` with its ``bnb_4bit_*`` settings as one ``BitsAndBytesConfig`` and lm-eval's
    ``device_map={"": device}``; ``tp_plan`` in place of a device map; any other keyword as given."""
    extra = {"bnb_4bit_quant_type": "nf4", "low_cpu_mem_usage": True}
    HFMultimodalModel(str(vlm_dir), device="cpu", load_in_4bit=True, from_pretrained_kwargs=extra)
    HFMultimodalModel(str(vlm_dir), device="cpu", tp_plan="auto")
    (_, bnb), (_, tp) = from_pretrained.calls
    config = bnb["quantization_config"]
    assert isinstance(config, transformers.BitsAndBytesConfig) and config.load_in_4bit
    assert config.bnb_4bit_quant_type == "nf4" and bnb["low_cpu_mem_usage"] is True
    assert bnb["device_map"] == {"": "cpu"} and tp["tp_plan"] == "auto" and "device_map" not in tp


@pytest.mark.parametrize(
    ("setting", "value", "expected"),
    [
        ("autogptq", True, {"model_basename": None, "use_safetensors": True}),
        ("autogptq", "gptq_model-4bit.bin", {"model_basename": "gptq_model-4bit", "use_safetensors": False}),
        ("gptqmodel", True, {}),
    ],
)
def test_gptq_loaders_get_lm_eval_s_arguments(
    vlm_dir: Path, monkeypatch: pytest.MonkeyPatch, setting: str, value: Any, expected: dict[str, Any]
) -> None:
    recorder = Recorder()
    fake = types.SimpleNamespace(from_quantized=recorder)
    monkeypatch.setitem(sys.modules, "auto_gptq", types.SimpleNamespace(AutoGPTQForCausalLM=fake))
    monkeypatch.setitem(sys.modules, "gptqmodel", types.SimpleNamespace(GPTQModel=fake))
    model = HFMultimodalModel(
        str(vlm_dir), device="cpu", **{setting: value}, from_pretrained_kwargs={"use_triton": False}
    )
    [(source, kwargs)] = recorder.calls
    assert (source, kwargs) == (str(vlm_dir), {"trust_remote_code": False, **expected, "use_triton": False})
    assert len(generations(model)) == len(requests())


# -- real loads on the tiny VLM, against lm-eval's HFMultimodalLM where it is importable -------

# each variant's model args beyond pretrained ("{lora}", "{delta}", "{repo}" filled in)
VARIANTS: list[dict[str, Any]] = [
    {"peft": "{lora}"},
    {"delta": "{delta}"},
    {"pretrained": "{repo}", "subfolder": "inner"},
    {"attn_implementation": "eager"},
    {"add_bos_token": True, "prefix_token_id": 0},
    {"logits_cache": False, "softmax_dtype": "float64", "mixed_precision_dtype": "bfloat16"},
    {"use_fast_tokenizer": False, "backend": "seq2seq"},
]


@pytest.fixture(scope="module")
def plain(vlm_dir: Path) -> list[str]:
    out = generations(HFMultimodalModel(str(vlm_dir), dtype="float32", device="cpu", batch_size=2, threads=1))
    assert len(set(out)) > 1  # the images change the answers: a variant that lost them would show
    return out


@pytest.mark.parametrize("variant", range(len(VARIANTS)), ids=lambda i: "+".join(VARIANTS[i]))
def test_same_generations_as_lm_eval(
    vlm_dir: Path, vlm_lora: Path, vlm_delta: Path, repo: Path, plain: list[str], variant: int
) -> None:
    """evalflow on each variant generates what lm-eval's HFMultimodalLM does; the adapter and delta
    change the answers, the others (the same weights, placed or read differently) do not."""
    paths = {"lora": str(vlm_lora), "delta": str(vlm_delta), "repo": str(repo)}
    args = {"pretrained": str(vlm_dir)} | {
        k: v.format(**paths) if isinstance(v, str) else v for k, v in VARIANTS[variant].items()
    }
    ours = generations(HFMultimodalModel(**args, dtype="float32", device="cpu", batch_size=2, threads=1))
    assert (ours != plain) == ("peft" in args or "delta" in args)
    hf_vlms = pytest.importorskip("lm_eval.models.hf_vlms")
    from lm_eval.api.instance import Instance

    theirs = hf_vlms.HFMultimodalLM(**args, dtype="float32", device="cpu", batch_size=2)
    reqs = [Instance("generate_until", {}, (p, dict(GEN), {"visual": v}), i) for i, (p, v) in enumerate(requests())]
    assert ours == theirs.generate_until(reqs, disable_tqdm=True)


def test_a_separate_processor_loads_from_the_tokenizer_argument(
    vlm_dir: Path, repo: Path, plain: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tokenizer=``: the processor from that source (lm-eval 0.4.13's HFMultimodalLM means this
    but fails on it: its ``_create_tokenizer`` returns the processor instead of keeping it)."""
    real = transformers.AutoProcessor.from_pretrained
    sources: list[str] = []
    monkeypatch.setattr(transformers.AutoProcessor, "from_pretrained", lambda s, **k: sources.append(s) or real(s, **k))
    model = HFMultimodalModel(str(repo / "inner"), tokenizer=str(vlm_dir), dtype="float32", device="cpu", batch_size=2)
    assert sources == [str(vlm_dir)] and generations(model) == plain
