"""A tiny randomly initialised Llama saved to disk, loaded by path exactly as a user's model would be.

The tokenizer is a byte-level BPE trained with the ``tokenizers`` library, so everything works
offline in a second. Its alphabet is only the corpus's characters, so whatever the random model
generates decodes to readable text that stop sequences can be tested on. Weights are drawn with a
large ``initializer_range`` so the next-token distribution is peaked: greedy decoding then has no
near-ties that float noise from different batch shapes could flip, and batching tests compare like
with like.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Question: What is two plus two?\nAnswer: four",
    "A cat sat on the mat, and the dog sat on the log.",
    "Paris is the capital of France. Berlin is the capital of Germany.",
    "1 + 1 = 2, 2 + 2 = 4, 3 + 3 = 6, 10 - 3 = 7",
    "Once upon a time there was a small model that answered questions.",
] * 4


def build_tiny_model(folder: Path, *, add_bos: bool, seed: int = 0, max_positions: int = 128) -> Path:
    """Train a small BPE tokenizer, build a 2-layer Llama and ``save_pretrained`` both into ``folder``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<s>", "</s>", "<pad>"],
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer=trainer)
    if add_bos:
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", tok.token_to_id("<s>"))]
        )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")
    config = LlamaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        initializer_range=0.3,
        bos_token_id=tok.token_to_id("<s>"),
        eos_token_id=tok.token_to_id("</s>"),
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def build_tiny_lora(base: Path, folder: Path, *, seed: int = 0) -> Path:
    """A LoRA adapter (rank 4, on the attention projections) for the tiny model at ``base``, its
    weights drawn at random (``init_lora_weights=False``) so that it changes every answer."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(folder)
    return folder


def build_tiny_delta(base: Path, folder: Path, *, seed: int = 0, scale: float = 0.05) -> Path:
    """Delta weights for the tiny model at ``base``: a model of its shape whose every tensor is
    small noise (lm-eval's ``delta`` adds each to the base's)."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base)
    with torch.no_grad():
        for param in model.state_dict().values():
            param.copy_(torch.randn_like(param) * scale)
    model.save_pretrained(folder)
    return folder


def always_eos(m: Any) -> int:
    """Bias an HF model's head so that it always says EOS; returns the EOS id."""
    import torch

    eos = m.tokenizer.eos_token_id
    bias = torch.zeros(m.model.lm_head.weight.shape[0])
    bias[eos] = 1e4
    m.model.lm_head.bias = torch.nn.Parameter(bias)
    return int(eos)
