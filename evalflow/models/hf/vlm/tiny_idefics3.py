"""A tiny randomly initialised Idefics3 (SmolVLM's architecture), saved with its processor.

:mod:`~evalflow.models.hf.vlm.tiny_vlm`'s LLaVA is what vLLM's CPU build cannot load without
torchvision (its ``llava`` module imports Pixtral's image processor, which needs it; the CPU venv
has none), so ``model=vllm_vlm`` is tried and checked on this one: a 2-layer SigLIP-style tower
(32x32 images, 16 patches, pixel-shuffled by 2 into 4 image tokens), a linear connector, a 2-layer
Llama, images never split. The text side has 64-wide attention heads: vLLM's CPU attention has no
kernel for narrower ones. Both transformers (``model=hf_multimodal``) and vLLM (``model=vllm_vlm``)
load the folder; random weights make its answers meaningless and their comparison exact.

    python -m evalflow make-tiny-vlm /tmp/tiny-idefics3 arch=idefics3 tokenizer=smollm2
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalflow.models.hf.vlm.tiny_vlm import CHAT_TEMPLATE, byte_tokenizer

IMAGE_SIDE = 32  # pixels; the processor resizes every image to it (no splitting)
SPECIALS = (
    "<fake_token_around_image>",
    "<image>",
    "<end_of_utterance>",
    "<global-img>",
    *(f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)),
)


def build_tiny_idefics3(folder: Path, seed: int = 0, tokenizer: Any = None) -> Path:
    """Build and save the model and its processor in ``folder`` (``tokenizer``: a tokenizer object,
    or None for the byte tokenizer); returns ``folder``."""
    import torch
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor, LlamaConfig

    tok = tokenizer if tokenizer is not None else byte_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": list(SPECIALS)})
    text = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=128,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.eos_token_id,
        tie_word_embeddings=False,
    )
    vision = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "image_size": IMAGE_SIDE,
        "patch_size": 8,
    }
    config = Idefics3Config(
        vision_config=vision,
        text_config=text.to_dict(),
        scale_factor=2,
        image_token_id=tok.convert_tokens_to_ids("<image>"),
        pad_token_id=tok.eos_token_id,  # type: ignore[call-arg]  # some transformers default it to 128002, out of vocabulary
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Idefics3ForConditionalGeneration(config).eval()
    with torch.no_grad():  # wide weights: greedy decoding without near-ties float noise could flip
        for weight in model.parameters():
            if weight.dim() > 1:
                weight.normal_(0.0, 0.3)
    processor = Idefics3Processor(image_processor=_image_processor(), tokenizer=tok, image_seq_len=4)
    processor.chat_template = CHAT_TEMPLATE
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def _image_processor() -> Any:
    """Idefics3's image processor at :data:`IMAGE_SIDE`, unsplit: transformers 5's Pillow one (its
    default class needs torchvision), 4.x's only one otherwise."""
    images: Any
    try:
        from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

        images = Idefics3ImageProcessorPil
    except ImportError:
        from transformers import Idefics3ImageProcessor

        images = Idefics3ImageProcessor
    side = {"longest_edge": IMAGE_SIDE}
    return images(size=side, max_image_size=side, do_image_splitting=False)
