"""The client-side tokenizer of ``openai_completions``: what lm-eval's ``TemplateAPI`` does with it.

Log-likelihoods need it to know where the context ends in the echoed tokens (``ctxlen``) and to
truncate on the left to ``max_length``; token-id prompts need it to encode. The token rules are
HFLM's (``evalflow.models.lmeval_tokens``: the same pair split, prefix token and rolling windows); what differs for an
API is the window (``max_length - 1``, one position reserved for the generated token) and that a
text prompt is the *decoded* tokens (lm-eval's ``decode_batch``), so truncation applies to text too.

``tokenizer`` is a Hugging Face tokenizer name or folder, or a GGUF file. A GGUF file's tokenizer is
converted by transformers once (~15 s) and memoized (:mod:`evalflow.models.gguf_tokenizer`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalflow.errors import ModelError
from evalflow.models.gguf_tokenizer import gguf_tokenizer
from evalflow.models.lmeval_tokens import check_pair, encode_pair, rolling_windows, split_trailing_space

log = logging.getLogger(__name__)


def load_tokenizer(
    name: str, *, revision: str | None = None, use_fast: bool = True, trust_remote_code: bool = False
) -> Any:
    """A transformers tokenizer from a name, a folder or a GGUF file (converted once, then memoized);
    ``revision``, ``use_fast`` and ``trust_remote_code`` as lm-eval's ``TemplateAPI`` passes them."""
    from transformers import AutoTokenizer

    path = Path(os.path.expanduser(name))
    try:
        if path.is_file() and path.suffix == ".gguf":
            return gguf_tokenizer(path)
        return AutoTokenizer.from_pretrained(
            str(path) if path.is_dir() else name,
            use_fast=use_fast,
            revision=revision or "main",
            trust_remote_code=trust_remote_code,
        )
    except (OSError, ValueError) as exc:
        raise ModelError(
            f"model.tokenizer '{name}': cannot load a tokenizer from it ({str(exc).splitlines()[0]}). Give the "
            "served model's Hugging Face tokenizer folder or name, or its GGUF file (llama.cpp)."
        ) from None


_UNSET = object()


def rust_backend(tok: Any) -> Any:
    """The ``tokenizers.Tokenizer`` behind a transformers fast tokenizer, when calling it directly
    gives the same ids as calling ``tok``: after a first call through transformers (which switches
    the backend's truncation and padding off and sets ``encode_special_tokens``), transformers'
    ``_batch_encode_plus`` is ``encode_batch`` plus Python bookkeeping per text, about 3/4 of its
    time and all of it holding the GIL, which the served client's event loop needs to keep
    requests in flight. ``encode_batch_fast`` runs without the GIL. None (stay with transformers)
    for a slow tokenizer, one that truncates or pads, or an older ``tokenizers``."""
    backend = getattr(tok, "_tokenizer", None)
    if not getattr(tok, "is_fast", False) or backend is None or not hasattr(backend, "encode_batch_fast"):
        return None
    if getattr(backend, "truncation", None) is not None or getattr(backend, "padding", None) is not None:
        return None
    return backend


@dataclass(frozen=True)
class ScoreInput:
    """One prompt of an echo request: its tokens (truncated) and how many of them are context."""

    tokens: tuple[int, ...]
    ctxlen: int


class ApiTokens:
    """lm-eval ``TemplateAPI``'s token handling around one loaded tokenizer."""

    def __init__(
        self,
        tokenizer: Any,
        *,
        max_length: int,
        add_bos_token: bool,
        prefix_token_id: int | None = None,
        eos_string: str | None = None,
    ) -> None:
        self.tok = tokenizer
        self._lock = (
            threading.Lock()
        )  # a fast tokenizer's call mutates its settings: chunks tokenize in several threads
        self.window = max_length - 1  # lm-eval: "max_length - 1 as we always have 1 token for generation"
        self.add_bos_token = add_bos_token
        # BOS, else EOS: read once (a transformers attribute lookup costs microseconds, and it is
        # asked for every request)
        # lm-eval's custom_prefix_token_id, given, replaces it
        if prefix_token_id is None:
            prefix_token_id = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        self.prefix_token_id = prefix_token_id
        self._eos_string = eos_string
        self._backend: Any = _UNSET  # the Rust tokenizer once a call through transformers set it up (None: unusable)

    @property
    def eos_string(self) -> str | None:
        """lm-eval's ``eos_string`` model argument, else the tokenizer's EOS text."""
        return self._eos_string or self.tok.eos_token

    def encode(self, text: str, *, special: bool | None = None) -> list[int]:
        add = self.add_bos_token if special is None else special
        with self._lock:
            return list(self.tok(text, add_special_tokens=add, return_attention_mask=False).input_ids)

    def encode_many(self, texts: Sequence[str], *, special: bool | None = None) -> dict[str, list[int]]:
        """Each distinct text's tokens, in one tokenizer call: the same tokens as ``encode`` text
        by text, without its per-call overhead (a served model's client tokenizes every request
        of a chunk at once, and a context shared by several choices once)."""
        add = self.add_bos_token if special is None else special
        distinct = list(dict.fromkeys(texts))
        if not distinct:
            return {}
        with self._lock:
            backend = self._backend
            if backend is None or backend is _UNSET:  # through transformers (the first call also sets the backend up)
                ids = self.tok(distinct, add_special_tokens=add, return_attention_mask=False).input_ids
                self._backend = rust_backend(self.tok)
                return {text: list(tokens) for text, tokens in zip(distinct, ids)}
            encodings = backend.encode_batch_fast(distinct, add_special_tokens=add)  # runs without the GIL
        return {text: e.ids for text, e in zip(distinct, encodings)}

    def decode(self, tokens: Sequence[int]) -> str:
        with self._lock:
            return self.tok.decode(list(tokens))

    def score_input(self, context: str, continuation: str, request: Any) -> ScoreInput:
        """lm-eval's ``loglikelihood`` + ``batch_loglikelihood_requests`` for one pair."""
        ctx, cont = encode_pair(
            self.encode, lambda s: self.encode(s, special=False), self.prefix_token_id, context, continuation
        )
        check_pair(ctx, cont, self.window, request)
        return self._truncate(ctx, cont)

    def score_inputs(self, pairs: Sequence[tuple[str, str]], requests: Sequence[Any]) -> list[ScoreInput]:
        """``score_input`` of each (context, continuation) pair, the texts encoded in two batches."""
        special: list[str] = []
        plain: list[str] = []
        for context, continuation in pairs:
            if context == "":
                plain.append(continuation)
            else:
                context_text, continuation_text = split_trailing_space(context, continuation)
                special += [context_text + continuation_text, context_text]
        encoded, encoded_plain = self.encode_many(special), self.encode_many(plain, special=False)
        out = []
        for (context, continuation), request in zip(pairs, requests):
            ctx, cont = encode_pair(
                encoded.__getitem__, encoded_plain.__getitem__, self.prefix_token_id, context, continuation
            )
            check_pair(ctx, cont, self.window, request)
            out.append(self._truncate(ctx, cont))
        return out

    def rolling_inputs(self, text: str) -> list[ScoreInput]:
        """lm-eval's ``loglikelihood_rolling``: disjoint windows of ``window - 1`` tokens."""
        windows = rolling_windows(self.encode(text), self.prefix_token_id, self.window - 1)
        return [self._truncate(ctx, cont) for ctx, cont in windows]

    def _truncate(self, ctx: Sequence[int], cont: Sequence[int]) -> ScoreInput:
        whole = list(ctx) + list(cont)
        if len(whole) > self.window:
            log.warning(
                "context (%d) + continuation (%d) tokens > max_length (%d); left-truncating the context",
                len(ctx),
                len(cont),
                self.window,
            )
        ctxlen = len(ctx) - max(0, len(whole) - self.window)
        return ScoreInput(tuple(whole[-self.window :]), ctxlen)

    def generation_prompt(self, context: str, max_gen_toks: int) -> list[int]:
        """Token-id prompt of a generation: the context's last ``window - max_gen_toks`` tokens."""
        tokens = self.encode(context, special=self.add_bos_token)
        keep = self.window - max_gen_toks
        if len(tokens) > keep:
            log.warning(
                "a context exceeded max_length - max_gen_toks (%d - %d) and was left-truncated",
                self.window,
                max_gen_toks,
            )
        return tokens[-keep:]  # as lm-eval slices, whatever the sign
