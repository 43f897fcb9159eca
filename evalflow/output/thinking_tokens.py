"""Counting a local model's thinking tokens with its tokenizer.

A served model reports its reasoning tokens in ``usage``; a local model (``hf``, ``vllm`` and their
multimodal kinds) reports only how many tokens it generated, thinking included, because which part
is thinking depends on the run's ``think_end_token``, not on the model. So the ``generations``
output node counts the thinking part of each generation (the text up to the last marker) with the
model's own tokenizer, loaded alone (no weights) and only when some generation has a marker; the
node's key holds the model's identity (through the inference stage's), which names the tokenizer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

CountTokens = Callable[[Sequence[str]], list[int]]

LOCAL_TYPES = frozenset({"hf", "hf_multimodal", "vllm", "vllm_vlm"})


def token_counter(model: Mapping[str, Any] | None) -> CountTokens | None:
    """A function counting the tokens of texts with ``model``'s tokenizer (loaded on first use), or
    None for a model whose tokenizer evalflow does not load (served, your own, an object)."""
    if model is None or str(model.get("type")) not in LOCAL_TYPES or not model.get("pretrained"):
        return None
    source = str(model["pretrained"])
    tokenizer = str(model["tokenizer"]) if model.get("tokenizer") else None
    gguf = str(model["gguf_file"]) if model.get("gguf_file") and not tokenizer else None

    def count(texts: Sequence[str]) -> list[int]:
        tok = _tokenizer(source, tokenizer, gguf)
        return [len(ids) for ids in tok(list(texts), add_special_tokens=False)["input_ids"]]

    return count


@functools.lru_cache(maxsize=4)
def _tokenizer(source: str, tokenizer: str | None, gguf: str | None) -> Any:
    if gguf is not None:
        from evalflow.models.gguf_tokenizer import gguf_tokenizer

        return gguf_tokenizer(Path(source).expanduser() / gguf)
    import transformers

    return transformers.AutoTokenizer.from_pretrained(tokenizer or source)
