"""lm-eval's ``tokenizer_backend`` for served models: which tokenizer counts a prompt's tokens (a
log-likelihood's context length, ``max_length`` truncation, token-id prompts) and gives the EOS
stop text. Each backend is an object with the part of a transformers tokenizer that
:class:`evalflow.models.api.tokens.ApiTokens` uses, so the token rules stay in one place:

- ``huggingface``: ``model.tokenizer`` (else ``model.model``) through transformers, at
  ``tokenizer_revision``, with ``use_fast_tokenizer`` and ``trust_remote_code``;
- ``tiktoken``: ``tiktoken.encoding_for_model(model)``; no special tokens are added (lm-eval's
  ``encode``), the prefix and EOS token is ``eot_token``;
- ``remote``: the server's own ``/tokenize``, ``/detokenize`` and ``/tokenizer_info`` (vLLM's),
  as lm-eval's ``RemoteTokenizer``; ``add_bos_token`` is not applied (lm-eval's remote path);
- ``auto``: remote when the server answers ``/tokenizer_info``, else huggingface (lm-eval's
  ``local-completions`` default).
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.request
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from evalflow.errors import ModelError


def client_tokenizer(settings: Any) -> Any:
    """The tokenizer ``settings.tokenizer_backend`` names (not ``none``, which has none)."""
    backend = settings.tokenizer_backend
    if backend == "auto":
        backend = "remote" if RemoteTokenizer.answers(settings) else "huggingface"
    if backend == "remote":
        return RemoteTokenizer(settings)
    if backend == "tiktoken":
        return TiktokenTokenizer(settings.model)
    from evalflow.models.api.tokens import load_tokenizer

    return load_tokenizer(
        settings.tokenizer or settings.model,
        revision=settings.tokenizer_revision,
        use_fast=settings.use_fast_tokenizer,
        trust_remote_code=settings.trust_remote_code,
    )


class _Encoded(SimpleNamespace):
    input_ids: Any


class _NotTransformers:
    """What ApiTokens asks of a tokenizer, for one that is not transformers': encode each text
    (``add_special_tokens`` ignored, as lm-eval's non-HF ``tok_encode`` ignores it)."""

    is_fast = False

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def __call__(self, text: str | Sequence[str], **_: Any) -> _Encoded:
        if isinstance(text, str):
            return _Encoded(input_ids=self.encode(text))
        return _Encoded(input_ids=[self.encode(t) for t in text])


class TiktokenTokenizer(_NotTransformers):
    def __init__(self, model: str) -> None:
        try:
            import tiktoken  # type: ignore[import-not-found,unused-ignore]  # the optional api extra
        except ImportError:
            raise ModelError(
                "model.tokenizer_backend=tiktoken needs the tiktoken package: pip install tiktoken"
            ) from None
        self.enc = tiktoken.encoding_for_model(model)
        self.bos_token_id = None  # lm-eval's prefix token for tiktoken is eot_token
        self.eos_token_id = self.enc.eot_token
        self.eos_token = self.enc.decode([self.enc.eot_token])

    def encode(self, text: str) -> list[int]:
        return list(self.enc.encode(text))

    def decode(self, tokens: Sequence[int]) -> str:
        return str(self.enc.decode(list(tokens)))


class RemoteTokenizer(_NotTransformers):
    """The server's tokenizer, over HTTP (stdlib: tokenizing runs in the caller's thread, apart
    from the client's event loop); ``auth_token_env`` holds the bearer token, as lm-eval's
    ``auth_token`` does for these endpoints only."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        info = self._call("GET", "/tokenizer_info", None)
        self.eos_token = info.get("eos_token")
        bos = info.get("bos_token")
        # lm-eval: `bos_token_id or eos_token_id` (a BOS id of 0 falls back to EOS there too)
        self.bos_token_id = (self.encode(bos)[0] or None) if bos else None
        self.eos_token_id = self.encode(self.eos_token)[0] if self.eos_token else None

    @staticmethod
    def base(settings: Any) -> str:
        """The server's root: lm-eval strips ``/v1/completions``; evalflow's root ends in ``/v1``."""
        return settings.root_url.removesuffix("/v1")

    @classmethod
    def answers(cls, settings: Any) -> bool:
        """Whether the server has the tokenizer endpoints, as lm-eval's ``check_remote_tokenizer_support``
        decides it: ``/tokenizer_info`` answers a mapping with ``eos_token`` (else there is no EOS
        stop text) and ``/tokenize`` a token list."""
        base = cls.base(settings)
        try:
            info = _request(settings, "GET", base + "/tokenizer_info", None, timeout=5)
            if not isinstance(info, dict) or "eos_token" not in info:
                return False
            probe = {"prompt": "test", "add_special_tokens": False}
            answer = _request(settings, "POST", base + "/tokenize", probe, timeout=5)
        except (OSError, ValueError):
            return False
        return isinstance(answer, dict) and isinstance(answer.get("tokens"), list)

    def _call(self, method: str, path: str, body: Any) -> Any:
        url = self.base(self.settings) + path
        try:
            return _request(self.settings, method, url, body, timeout=self.settings.timeout)
        except (OSError, ValueError) as exc:
            raise ModelError(
                f"model.tokenizer_backend=remote: {method} {url} failed ({exc}). The server must have "
                "vLLM's /tokenizer_info, /tokenize and /detokenize; use tokenizer_backend=huggingface "
                "with model.tokenizer otherwise."
            ) from None

    def encode(self, text: str) -> list[int]:
        tokens = self._call("POST", "/tokenize", {"prompt": text, "add_special_tokens": False}).get("tokens")
        if not isinstance(tokens, list):
            raise ModelError("model.tokenizer_backend=remote: the server's /tokenize answer has no token list.")
        return tokens

    def decode(self, tokens: Sequence[int]) -> str:
        return str(self._call("POST", "/detokenize", {"tokens": list(tokens)}).get("prompt", ""))


def _request(settings: Any, method: str, url: str, body: Any, timeout: float) -> Any:
    headers = {"Content-Type": "application/json"}
    token = os.environ.get(settings.auth_token_env) if settings.auth_token_env else None
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    verify = settings.ssl()
    context = verify if isinstance(verify, ssl.SSLContext) else None
    if verify is False:
        context = ssl._create_unverified_context()
    with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
        return json.loads(response.read())
