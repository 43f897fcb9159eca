"""lm-eval's served model types: the ``TemplateAPI`` / ``LocalCompletionsAPI`` /
``LocalChatCompletion`` / ``GGUFLM`` arguments that are not a preset key of the same name
(renamed, kept out of the config as secrets, or ignored as lm-eval ignores them), and the model
types lm-eval registers whose engine evalflow does not wrap, each refused with why and what to use.

Secrets (``auth_token``, ``header``; a Hugging Face ``token`` for the hub) never reach the config, the
printed native command or the run folder: the translation carries them (``Translation.environment``,
out of its repr) and the run puts them in this process's environment (which Ray workers inherit),
where the model, or huggingface_hub (``HF_TOKEN``), reads them. The translation itself stays pure.
"""

from __future__ import annotations

import json
from typing import Any

SERVED_PRESETS = ("openai_completions", "openai_chat", "anthropic_chat", "azure_openai_chat", "gguf_server")
CHAT_PRESETS = ("openai_chat", "anthropic_chat", "azure_openai_chat")

# lm-eval's argument -> the preset key it is (lm-eval's `revision` is the tokenizer's hub revision)
RENAMED = {"pretrained": "model", "revision": "tokenizer_revision"}
# secret arguments -> (the preset key naming their variable, the variable)
SECRETS = {
    "auth_token": ("auth_token_env", "EVALFLOW_LMEVAL_AUTH_TOKEN"),
    "header": ("headers_env", "EVALFLOW_LMEVAL_HEADER"),
}
# HFLM's hub credentials (handed to from_pretrained) -> the variable huggingface_hub reads them from
HUB_SECRETS = {"token": "HF_TOKEN", "use_auth_token": "HF_TOKEN"}
# arguments that change nothing, in lm-eval as here, on these presets
NO_EFFECT = {
    "truncate": (SERVED_PRESETS, "lm-eval 0.4.13 stores it and never reads it"),
    "max_images": (("openai_completions",), "lm-eval's completions models send no images"),
    "batch_size": (CHAT_PRESETS, "lm-eval's chat models send one conversation per request"),
    "max_batch_size": (SERVED_PRESETS, "lm-eval's API models batch by batch_size only"),
}
_CHAT_UNTOKENIZED = ("tokenized_requests", "max_length", "add_bos_token", "custom_prefix_token_id")
GGUF_KEYS = ("base_url", "max_length")  # GGUFLM's own arguments; it drops every other one


def _secret(variable: str, value: Any, secrets: dict[str, str]) -> str:
    """Keep ``value`` in ``secrets`` under the variable the model reads it from; returns the variable."""
    secrets[variable] = value if isinstance(value, str) else json.dumps(value)
    return variable


def served_arg(preset: str, key: str, value: Any, notes: list[str], secrets: dict[str, str]) -> dict[str, Any] | None:
    """The model keys one lm-eval argument of a served model sets (``{}``: none, with a note
    saying why), or None when it is an ordinary preset key (or unknown: refused by the caller);
    a secret's value goes to ``secrets`` (variable -> value), for the run's environment."""
    if preset == "gguf_server" and key not in GGUF_KEYS:
        notes.append(
            f"--model_args {key}: ignored, as lm-eval's gguf model ignores every argument but base_url and max_length"
        )
        return {}
    if key in SECRETS:
        target, variable = SECRETS[key]
        return {target: _secret(variable, value, secrets)}
    if key in RENAMED:
        return {RENAMED[key]: value}
    if key in NO_EFFECT and preset in NO_EFFECT[key][0]:
        notes.append(f"--model_args {key}: ignored ({NO_EFFECT[key][1]})")
        return {}
    if key in _CHAT_UNTOKENIZED and preset in CHAT_PRESETS:
        notes.append(
            f"--model_args {key}: ignored (lm-eval's chat models send messages untokenized; the server decides)"
        )
        return {}
    return None


def unread_kwargs_note(keys: list[str], flags: list[str]) -> str:
    """The one line for the model args ``keys`` and the ``flags`` (``--device``) a model lm-eval
    builds without reading them (its API models' ``**kwargs``, its dummy model's arguments) is given."""
    words = ([f"--model_args {', '.join(keys)}"] if keys else []) + flags
    return f"{', '.join(words)}: ignored, as lm-eval's model takes them and never reads them"


def hub_secret(key: str, value: Any, notes: list[str], secrets: dict[str, str]) -> bool:
    """Keep an HFLM hub token (a string; ``use_auth_token=True`` is no secret) for ``HF_TOKEN``, where
    huggingface_hub reads it, rather than in the model's keys; True when ``key`` was one."""
    if key not in HUB_SECRETS or not isinstance(value, str):
        return False
    variable = _secret(HUB_SECRETS[key], value, secrets)
    notes.append(f"--model_args {key}: kept in ${variable} for the hub, never written")
    return True


def recorded_model_args(lm_args: dict[str, Any]) -> dict[str, Any]:
    """The model args as results.json records them, secrets replaced by where they were put."""
    where = {**{k: v for k, (_, v) in SECRETS.items()}, **HUB_SECRETS}
    return {
        k: f"<in ${where[k]}>" if k in SECRETS or (k in HUB_SECRETS and isinstance(v, str)) else v
        for k, v in lm_args.items()
    }


def _refusal(engine: str, instead: str) -> str:
    return f"{engine}; evalflow wraps no such engine. Instead: {instead}"


_SERVE_IT = (
    "serve the model behind an OpenAI-compatible endpoint and use --model local-completions "
    "(model=NAME,base_url=http://HOST:PORT/v1/completions,tokenizer=...) or local-chat-completions"
)
_HF_INSTEAD = "run the same Hugging Face checkpoint with --model hf (CPU or GPU)"

SERVED_REFUSALS: dict[str, str] = {
    "anthropic-completions": _refusal(
        "lm-eval's anthropic-completions calls Anthropic's legacy Text Completions API "
        "(client.completions.create with HUMAN_PROMPT/AI_PROMPT), which Anthropic has retired",
        "--model anthropic-chat-completions with --apply_chat_template (the Messages API)",
    ),
    "hf-audiolm-qwen": _refusal(
        "hf-audiolm-qwen runs Qwen2-Audio on audio inputs; evalflow's models take text and images only",
        "no audio backend exists here; text tasks of the same model run with --model hf",
    ),
    "hf-mistral3": _refusal(
        "hf-mistral3 loads Mistral3ForConditionalGeneration (a vision-language class) for text log-likelihoods; "
        "evalflow's hf loads AutoModelForCausalLM and its hf-multimodal generates only",
        "--model hf-multimodal for generation tasks, or a text-only causal-LM export of the checkpoint with --model hf",
    ),
    "ipex": _refusal("ipex runs Intel Extension for PyTorch (optimum-intel's IPEXModel)", _HF_INSTEAD),
    "openvino": _refusal("openvino runs OpenVINO IR models through optimum-intel", _HF_INSTEAD),
    "habana": _refusal("habana runs Intel Gaudi accelerators through optimum-habana", _HF_INSTEAD),
    "neuronx": _refusal("neuronx runs AWS Inferentia/Trainium through optimum-neuron", _HF_INSTEAD),
    "onnxruntime": _refusal("onnxruntime runs ONNX exports through ONNX Runtime", _HF_INSTEAD),
    "onnxruntime-genai": _refusal("onnxruntime-genai runs ONNX Runtime GenAI models", _HF_INSTEAD),
    "winml": _refusal("winml runs ONNX models through Windows ML", _HF_INSTEAD),
    "mamba_ssm": _refusal(
        "mamba_ssm runs the mamba_ssm package's CUDA kernels on its own checkpoints",
        "--model hf on the transformers-format checkpoint (e.g. state-spaces/mamba-130m-hf): transformers runs Mamba",
    ),
    "steered": _refusal(
        "steered adds steering vectors to a Hugging Face model's activations through hooks",
        "no activation steering exists here; bake the steering into the weights and use --model hf",
    ),
    "megatron_lm": _refusal(
        "megatron_lm runs Megatron-LM checkpoints with Megatron's parallel engine",
        "convert the checkpoint to Hugging Face format and use --model hf, or " + _SERVE_IT,
    ),
    "nemo_lm": _refusal(
        "nemo_lm runs NVIDIA NeMo checkpoints with NeMo's engine",
        "convert the checkpoint to Hugging Face format and use --model hf, or " + _SERVE_IT,
    ),
    "sglang": _refusal(
        "sglang runs SGLang's offline engine in the process", _SERVE_IT + " (python -m sglang.launch_server)"
    ),
    "sglang-generate": _refusal(
        "sglang-generate speaks SGLang's native /generate API",
        "--model local-completions against the same server's /v1/completions",
    ),
    "trtllm": _refusal("trtllm runs TensorRT-LLM engines in the process", _SERVE_IT + " (trtllm-serve)"),
    "textsynth": _refusal("textsynth calls the TextSynth API, whose request format evalflow does not speak", _SERVE_IT),
    "watsonx_llm": _refusal("watsonx_llm calls IBM watsonx.ai through the ibm-watsonx-ai SDK", _SERVE_IT),
    **{
        name: _refusal(
            f"{name} calls models through the LiteLLM library",
            "point --model local-chat-completions at a LiteLLM proxy (an OpenAI-compatible endpoint)",
        )
        for name in ("litellm", "litellm-chat", "litellm-chat-completions")
    },
}
