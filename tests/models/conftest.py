"""A tiny randomly initialised Llama saved to disk, loaded by path exactly as a user's model would be.

The tokenizer is a byte-level BPE trained in the fixture with the ``tokenizers`` library, so
everything works offline in a second. Its alphabet is only the corpus's characters, so whatever the
random model generates decodes to readable text that stop sequences can be tested on. Weights are
drawn with a large ``initializer_range`` so the next-token distribution is peaked: greedy decoding
then has no near-ties that float noise from different batch shapes could flip, and batching tests
compare like with like.
"""

from __future__ import annotations

from pathlib import Path

import pytest

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


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama whose tokenizer prepends BOS, like Llama's own."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny_bos"), add_bos=True)


@pytest.fixture(scope="session")
def tiny_nobos_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama whose tokenizer adds no special tokens, like SmolLM2's."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny_nobos"), add_bos=False, seed=1)


@pytest.fixture(autouse=True)
def one_torch_thread(monkeypatch: pytest.MonkeyPatch):
    """Tiny models run fastest on one thread; on a busy 2-core machine torch's thread pool spins.

    HFModel sets torch's threads when it loads (model.threads, default all cores), so its default
    is pinned to one here too. Restored after each test, so nothing leaks into other test folders.
    """
    import torch

    from evalflow.models.hf import load

    monkeypatch.setattr(load, "default_threads", lambda: 1)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def cpu_machine(monkeypatch: pytest.MonkeyPatch):
    """These tests prove the fast paths on the CPU, where they are proven (engine.PROVEN_DEVICES):
    ``model.device=auto`` resolves to the CPU here even on a machine with a GPU, whose torch would
    otherwise send the tiny models to CUDA and the reference engine. ``test_hf_device`` patches
    torch's own device queries instead, to test the resolution itself."""
    from evalflow.models.hf import device

    monkeypatch.setattr(device, "seen", lambda: device.Seen(cuda=0, mps=False))
