"""lm-eval 0.4.13 HFLM's loading arguments on evalflow's hf model: each loads as lm-eval loads it
(real tiny models where the library is here; the library call patched where it needs a GPU or a
package this machine lacks), each refusal is one paragraph before any model call, and each is keyed
into the answers' identity exactly when it can change an answer."""

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
from evalflow.errors import ConfigError, ModelError
from evalflow.models.hf import HFModel, load
from evalflow.models.hf.engine import REFERENCE
from evalflow.models.registry import model_identity
from tests.support.tiny_models import build_tiny_delta, build_tiny_lora

REQUESTS = [Request("loglikelihood", ("The cat", " sat")), Request("loglikelihood", ("The cat", " ran"))]


@pytest.fixture(scope="module")
def tiny_lora(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("peft")
    return build_tiny_lora(tiny_model_dir, tmp_path_factory.mktemp("lora"))


@pytest.fixture(scope="module")
def tiny_delta(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_delta(tiny_model_dir, tmp_path_factory.mktemp("delta"))


def logprobs(model: HFModel) -> list[float]:
    return [lp for lp, _ in model.loglikelihood(REQUESTS)]


def key(folder: Path, **config: Any) -> dict[str, Any]:
    return model_identity({"type": "hf", "pretrained": str(folder), **config})


# -- keying -----------------------------------------------------------------------------------


ANSWER_CHANGING = [
    {"attn_implementation": "eager"},
    {"softmax_dtype": "float64"},
    {"mixed_precision_dtype": "bfloat16"},
    {"prefix_token_id": 2},
    {"use_fast_tokenizer": False},
    {"load_in_4bit": True},
    {"load_in_8bit": True},
    {"autogptq": True},
    {"gptqmodel": True},
    {"from_pretrained_kwargs": {"bnb_4bit_quant_type": "nf4"}},
    {"from_pretrained_kwargs": {"rope_scaling": {"type": "linear", "factor": 2.0}}},
]
PLACEMENT_ONLY = [
    {"parallelize": True, "device_map": "auto", "max_memory_per_gpu": "20GiB", "max_cpu_memory": "60GiB"},
    {"offload_folder": "/tmp/elsewhere"},
    {"tp_plan": "auto"},
    {"logits_cache": False},
    {"backend": "causal"},
    {"from_pretrained_kwargs": {"low_cpu_mem_usage": True, "local_files_only": True}},
]


@pytest.mark.parametrize("change", ANSWER_CHANGING, ids=lambda c: next(iter(c)))
def test_an_argument_that_changes_answers_is_in_the_key(tiny_model_dir: Path, change: dict[str, Any]) -> None:
    assert key(tiny_model_dir, **change) != key(tiny_model_dir)


@pytest.mark.parametrize("change", PLACEMENT_ONLY, ids=lambda c: next(iter(c)))
def test_an_argument_that_only_places_or_speeds_the_model_is_not(tiny_model_dir: Path, change: dict[str, Any]) -> None:
    assert key(tiny_model_dir, **change) == key(tiny_model_dir)


def test_the_adapter_and_delta_are_keyed_by_their_files(
    tiny_model_dir: Path, tiny_lora: Path, tiny_delta: Path, tmp_path: Path
) -> None:
    """A moved adapter keeps its key; an edited one gets another; the same for delta weights."""
    for setting, folder, file in (
        ("peft", tiny_lora, "adapter_model.safetensors"),
        ("delta", tiny_delta, "model.safetensors"),
    ):
        moved = shutil.copytree(folder, tmp_path / setting / "moved")
        base = key(tiny_model_dir, **{setting: str(folder)})
        assert base != key(tiny_model_dir) and key(tiny_model_dir, **{setting: str(moved)}) == base
        weights = moved / file
        weights.write_bytes(weights.read_bytes() + b"\0")
        assert key(tiny_model_dir, **{setting: str(moved)}) != base
    assert key(tiny_model_dir, peft="org/adapter") != key(tiny_model_dir, peft="org/adapter", revision="v2")


def test_the_subfolder_is_keyed_by_its_files(tiny_model_dir: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(tiny_model_dir, repo / "a")
    shutil.copytree(tiny_model_dir, repo / "b")
    (repo / "README.md").write_text("the top level holds no model")
    assert key(repo, subfolder="a") == key(repo, subfolder="b")  # the same files
    (repo / "b" / "config.json").write_text((repo / "b" / "config.json").read_text() + " ")
    assert key(repo, subfolder="a") != key(repo, subfolder="b")
    with pytest.raises(ModelError, match="model.subfolder 'c' is not a folder"):
        key(repo, subfolder="c")
    hub = model_identity({"type": "hf", "pretrained": "org/m"})
    assert model_identity({"type": "hf", "pretrained": "org/m", "subfolder": "a"}) != hub


# -- refusals, before any model call ---------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"backend": "seq2seq"}, "runs decoder-only (causal) models only"),
        ({"backend": "encoder"}, "is not one of default, causal, seq2seq"),
        ({"peft": "a", "delta": "b"}, "model.peft and model.delta are both set"),
        ({"autogptq": True, "gptqmodel": True}, "model.autogptq and model.gptqmodel are both set"),
        ({"tp_plan": "auto", "parallelize": True}, "model.tp_plan and model.parallelize are both set"),
        ({"softmax_dtype": "fp32"}, "model.softmax_dtype 'fp32' is not a torch dtype"),
        ({"prefix_token_id": "bos"}, "model.prefix_token_id 'bos' is not a token id"),
        ({"from_pretrained_kwargs": "x"}, "model.from_pretrained_kwargs 'x' is not a mapping"),
    ],
)
def test_refused_before_loading_in_a_cached_run_too(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, config: dict[str, Any], words: str
) -> None:
    monkeypatch.setattr(load, "load", lambda *a, **k: pytest.fail("loaded a model"))
    for build in (lambda: key(tiny_model_dir, **config), lambda: HFModel(str(tiny_model_dir), **config)):
        with pytest.raises(ConfigError, match=re.escape(words)):
            build()


@pytest.mark.parametrize(("setting", "module"), [("autogptq", "auto_gptq"), ("gptqmodel", "gptqmodel")])
def test_a_missing_gptq_library_is_one_paragraph(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, setting: str, module: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import fails: not installed
    with pytest.raises(ModelError, match=f"model.{setting} needs the '{module}' library, which is not installed"):
        HFModel(str(tiny_model_dir), **{setting: True})


# -- mappings, with the library call patched -------------------------------------------------


class Recorder:
    """``from_pretrained`` (or a GPTQ ``from_quantized``) that records its call and loads the tiny
    model with the arguments a CPU can honour (:data:`FORWARDED`)."""

    FORWARDED = ("revision", "subfolder", "attn_implementation")

    def __init__(self, real: Any) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.real = real

    def __call__(self, source: str, **kwargs: Any) -> Any:
        self.calls.append((source, kwargs))
        return self.real(source, **{k: v for k, v in kwargs.items() if k in self.FORWARDED})


@pytest.fixture
def from_pretrained(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder(transformers.AutoModelForCausalLM.from_pretrained)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", recorder)
    return recorder


def test_load_in_4bit_and_its_bnb_settings_reach_from_pretrained_as_lm_eval_passes_them(
    tiny_model_dir: Path, from_pretrained: Recorder
) -> None:
    """lm-eval hands ``load_in_4bit`` and ``bnb_4bit_*`` to from_pretrained (``bnb_4bit_compute_dtype``
    made a torch dtype), with ``device_map={"": device}``; transformers 5 takes them as one
    ``BitsAndBytesConfig``, as transformers 4 built it from them."""
    import torch

    extra = {"bnb_4bit_compute_dtype": "bfloat16", "bnb_4bit_quant_type": "nf4", "low_cpu_mem_usage": True}
    HFModel(str(tiny_model_dir), load_in_4bit=True, from_pretrained_kwargs=extra, engine="reference")
    (_, kwargs), *_ = from_pretrained.calls
    config = kwargs["quantization_config"]
    assert isinstance(config, transformers.BitsAndBytesConfig) and config.load_in_4bit and not config.load_in_8bit
    assert config.bnb_4bit_compute_dtype == torch.bfloat16 and config.bnb_4bit_quant_type == "nf4"
    assert kwargs["device_map"] == {"": "cpu"} and kwargs["low_cpu_mem_usage"] is True
    assert not any(k.startswith(("bnb_", "load_in")) for k in kwargs)


def test_tp_plan_goes_to_from_pretrained_in_place_of_a_device_map(
    tiny_model_dir: Path, from_pretrained: Recorder
) -> None:
    HFModel(str(tiny_model_dir), tp_plan="auto", engine="reference")
    (_, kwargs), *_ = from_pretrained.calls
    assert kwargs["tp_plan"] == "auto" and "device_map" not in kwargs


@pytest.mark.parametrize(
    ("setting", "value", "expected"),
    [
        ("autogptq", True, {"model_basename": None, "use_safetensors": True}),
        ("autogptq", "model.safetensors", {"model_basename": "model", "use_safetensors": True}),
        ("autogptq", "gptq_model-4bit.bin", {"model_basename": "gptq_model-4bit", "use_safetensors": False}),
        ("gptqmodel", True, {}),
    ],
)
def test_gptq_loaders_get_lm_eval_s_arguments(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, setting: str, value: Any, expected: dict[str, Any]
) -> None:
    recorder = Recorder(transformers.AutoModelForCausalLM.from_pretrained)
    fake = types.SimpleNamespace(from_quantized=recorder)
    monkeypatch.setitem(sys.modules, "auto_gptq", types.SimpleNamespace(AutoGPTQForCausalLM=fake))
    monkeypatch.setitem(sys.modules, "gptqmodel", types.SimpleNamespace(GPTQModel=fake))
    extra = {"use_triton": False}
    model = HFModel(str(tiny_model_dir), **{setting: value}, from_pretrained_kwargs=extra, engine="reference")
    [(source, kwargs)] = recorder.calls
    assert source == str(tiny_model_dir)
    assert kwargs == {"trust_remote_code": False, **expected, "use_triton": False}
    assert model.loglikelihood(REQUESTS)[0][0] < 0


# -- real loads on tiny models ----------------------------------------------------------------


def test_subfolder_use_fast_tokenizer_and_attn_implementation_load_as_lm_eval_loads_them(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, from_pretrained: Recorder
) -> None:
    """lm-eval reads the tokenizer, config and weights from ``subfolder``, asks for the slow
    tokenizer with ``use_fast_tokenizer=False`` and hands ``attn_implementation`` to from_pretrained."""
    real_tokenizer = transformers.AutoTokenizer.from_pretrained
    tokenizers: list[dict[str, Any]] = []
    monkeypatch.setattr(
        transformers.AutoTokenizer, "from_pretrained", lambda s, **k: tokenizers.append(k) or real_tokenizer(s, **k)
    )
    repo = tmp_path / "repo"
    shutil.copytree(tiny_model_dir, repo / "inner")
    plain = logprobs(HFModel(str(tiny_model_dir), engine="reference"))
    inner = HFModel(
        str(repo), subfolder="inner", use_fast_tokenizer=False, attn_implementation="eager", engine="reference"
    )
    assert tokenizers[-1]["subfolder"] == "inner" and tokenizers[-1]["use_fast"] is False
    source, kwargs = from_pretrained.calls[-1]
    assert (source, kwargs["subfolder"], kwargs["attn_implementation"]) == (str(repo), "inner", "eager")
    assert logprobs(inner) == pytest.approx(plain, abs=1e-5)


def test_attn_implementation_loads_that_attention(tiny_model_dir: Path) -> None:
    eager = HFModel(str(tiny_model_dir), attn_implementation="eager", engine="reference")
    assert eager.model.config._attn_implementation == "eager"


def test_softmax_and_mixed_precision_dtypes_run_the_reference_engine_with_them(tiny_model_dir: Path) -> None:
    import torch

    model = HFModel(str(tiny_model_dir), softmax_dtype="float64", mixed_precision_dtype="bfloat16")
    assert model.paths == REFERENCE and model.fast is None
    with torch.autocast("cpu", enabled=False):
        logits = model.model(torch.tensor([[1, 5, 7]])).logits
    assert logits.dtype == torch.bfloat16  # the forward pass runs under autocast
    plain = logprobs(HFModel(str(tiny_model_dir), engine="reference"))
    assert logprobs(model) != plain and logprobs(model) == pytest.approx(plain, abs=0.5)


def test_prefix_token_id_conditions_empty_contexts(tiny_model_dir: Path) -> None:
    rolling = [Request("loglikelihood_rolling", ("Paris is the capital",))]
    plain = HFModel(str(tiny_model_dir), engine="reference")
    custom = HFModel(str(tiny_model_dir), prefix_token_id=2, engine="reference")
    assert custom.prefix_token_id == 2 != plain.prefix_token_id
    assert custom.loglikelihood_rolling(rolling) != plain.loglikelihood_rolling(rolling)


def test_without_the_logits_cache_each_request_has_its_own_row(tiny_model_dir: Path) -> None:
    from evalflow.models.hf.batching import plan_loglikelihood

    pairs = [([1, 2], [3]), ([1, 2], [4])]
    assert [len(g.members) for g in plan_loglikelihood(pairs)] == [2]
    assert [len(g.members) for g in plan_loglikelihood(pairs, group_contexts=False)] == [1, 1]
    plain = HFModel(str(tiny_model_dir), engine="reference").loglikelihood(REQUESTS)
    assert HFModel(str(tiny_model_dir), logits_cache=False, engine="reference").loglikelihood(REQUESTS) == plain


def test_peft_and_delta_change_the_answers_and_both_engines_agree(
    tiny_model_dir: Path, tiny_lora: Path, tiny_delta: Path
) -> None:
    plain = HFModel(str(tiny_model_dir), engine="reference").loglikelihood(REQUESTS)
    for setting, source in (("peft", tiny_lora), ("delta", tiny_delta)):
        reference = HFModel(str(tiny_model_dir), engine="reference", **{setting: str(source)})
        fast = HFModel(str(tiny_model_dir), **{setting: str(source)})
        assert reference.loglikelihood(REQUESTS) != plain
        assert logprobs(fast) == pytest.approx(logprobs(reference), abs=1e-5)
