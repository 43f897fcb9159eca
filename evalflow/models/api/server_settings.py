"""The settings of a served model, validated once, and the identity its cached answers are keyed by.

Torch-free and HTTP-free on purpose: a fully cached run imports only this module (through the model
class's ``identity``) and never opens a connection.

Identity = API kind + ``model`` + the tokenizer's identity + ``revision`` (what the user says the
served checkpoint is) + the settings that change what is asked of the server (``tokenized_requests``,
``add_bos_token``, ``max_length``, ``max_gen_toks``, ``seed``). Not the URL, unless
``identity_includes_url`` is set: the same checkpoint moved to another host keeps its cache. Never
the speed settings (``num_concurrent``, ``batch_size``, ``max_retries``, ``timeout``,
``check_logprobs``, ``failover_only``, ``verify_certificate``, ``ca_cert_path``) nor ``headers`` or any
secret. ``base_url`` may list several servers of one model: with ``identity_includes_url`` their sorted
set is the URL identity. lm-eval's other ``TemplateAPI`` arguments (``tokenizer_backend``,
``eos_string``, ``custom_prefix_token_id``, ``use_fast_tokenizer``, ``tokenizer_revision``,
``think_end_token``, the chat ``dialect``) and the run's reasoning settings (``reasoning_effort``,
``thinking_budget``) join the identity only when they differ from their default, so answers cached
before they existed stay valid.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalflow.cache.fingerprint import file_fingerprint
from evalflow.errors import ConfigError

IDENTITY_VERSION = 1  # bump when the request or scoring rules change, so old answers are not reused
SEMANTICS = "lm-eval-0.4.13"


@dataclass(frozen=True)
class ApiSettings:
    """One served model's settings (``conf/model/openai_completions.yaml`` documents each)."""

    kind: str  # "completions" or "chat"
    model: str
    base_url: str | tuple[str, ...]  # one server, or several serving the same model (requests spread over them)
    tokenizer: str | None = None
    revision: str | None = None
    tokenized_requests: bool = True
    add_bos_token: bool = False
    max_length: int = 2048
    max_gen_toks: int = 256
    seed: int = 1234
    batch_size: int = 1
    num_concurrent: int = 1
    max_retries: int = 3
    timeout: float = 300.0
    retry_wait: float = 1.0  # first backoff in seconds; doubles per attempt, with jitter, up to 30 s
    api_key_env: str = "OPENAI_API_KEY"
    headers: Mapping[str, str] = field(default_factory=dict)
    identity_includes_url: bool = False
    check_logprobs: bool = True
    allow_unlisted: bool = False  # true: a model.model the server's /models does not list is still used
    max_images: int = 1  # chat: images sent per request (lm-eval's default for API models)
    failover_only: bool = False  # true: only the first live base_url takes requests, the next when it dies
    # lm-eval's TemplateAPI arguments (conf/model/openai_completions.yaml documents each)
    tokenizer_backend: str = "huggingface"  # huggingface, tiktoken, remote, auto, or none
    tokenizer_revision: str | None = None
    use_fast_tokenizer: bool = True
    trust_remote_code: bool = False
    custom_prefix_token_id: int | None = None
    eos_string: str | None = None
    think_end_token: str | None = None
    dialect: str = "openai"  # the request/response contract (evalflow.models.api.dialects)
    api_version: str | None = None  # azure: the api-version query parameter
    verify_certificate: bool = True
    ca_cert_path: str | None = None
    auth_token_env: str | None = None  # the remote tokenizer's bearer token is read from this variable
    headers_env: str | None = None  # a JSON object of headers (lm-eval's `header`) read from this variable
    # the run settings of these names (evalflow/config/schema.py), which the run merges into a chat
    # model's config (evalflow.run.reasoning); each dialect takes one of them (dialects.reasoning_key)
    reasoning_effort: str | None = None
    thinking_budget: int | None = None

    @property
    def root_urls(self) -> tuple[str, ...]:
        """Each base URL without a trailing slash or endpoint (users paste either form)."""
        return tuple(_root(url) for url in ((self.base_url,) if isinstance(self.base_url, str) else self.base_url))

    @property
    def root_url(self) -> str:
        """The first server's root URL (the one server's, usually)."""
        return self.root_urls[0]

    def api_key(self) -> str | None:
        """Read at request time from the environment; never stored on the object or written."""
        return os.environ.get(self.api_key_env) or None if self.api_key_env else None

    def secret_headers(self) -> dict[str, str]:
        """lm-eval's ``header`` (which replaces its ``Authorization``), read at request time from
        ``headers_env``: headers carry keys, so they never sit in the config or the run folder."""
        if not self.headers_env:
            return {}
        import json

        text = os.environ.get(self.headers_env) or "{}"
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise ConfigError(
                f"${self.headers_env} (model.headers_env) must hold a JSON object of header names to values."
            )
        return {str(k): str(v) for k, v in value.items()}

    def ssl(self) -> Any:
        """aiohttp's ``ssl`` argument: False (verify_certificate=false), a context trusting
        ``ca_cert_path``, or True (the system's certificates), as lm-eval's ``verify``."""
        if not self.verify_certificate:
            return False
        if self.ca_cert_path:
            import ssl

            return ssl.create_default_context(cafile=os.path.expanduser(self.ca_cert_path))
        return True


_INT_KEYS = (
    "max_length",
    "max_gen_toks",
    "seed",
    "batch_size",
    "num_concurrent",
    "max_retries",
    "max_images",
    "thinking_budget",
)
BACKENDS = ("huggingface", "tiktoken", "remote", "auto", "none")
NO_MODEL_NAME = ("gguf",)  # dialects whose requests name no model (lm-eval's gguf client)
_KNOWN = {f for f in ApiSettings.__dataclass_fields__ if f != "kind"} | {"max_batch_size", "type"}


def _root(url: str) -> str:
    url = url.rstrip("/")
    for suffix in ("/completions", "/chat"):
        if url.endswith(suffix):
            url = url[: -len(suffix)]
    return url.rstrip("/")


def _base_urls(value: Any) -> str | tuple[str, ...]:
    """``model.base_url``: one URL, or a non-empty list of distinct http(s) URLs."""
    urls = [value] if isinstance(value, str) else list(value) if isinstance(value, Sequence) else [value]
    for url in urls:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(
                f"model.base_url '{url}' is not an http(s) URL; write e.g. http://127.0.0.1:8000/v1 "
                "(or a list of them, [http://HOST1:8000/v1,http://HOST2:8000/v1], for several servers)."
            )
    if not urls or len({_root(u) for u in urls}) != len(urls):
        raise ConfigError(f"model.base_url={urls}: give each server once (a list of distinct URLs, at least one).")
    return value if isinstance(value, str) else tuple(urls)


def parse_settings(kind: str, config: Mapping[str, Any]) -> ApiSettings:
    """``config`` (the ``model`` mapping of a run) as :class:`ApiSettings`, or a ConfigError naming
    the key. The config never holds the API key itself, only the name of its variable."""
    unknown = sorted(set(config) - _KNOWN)
    if unknown:
        raise ConfigError(
            f"model.{unknown[0]} is not a setting of the openai_{kind} model (known: "
            f"{', '.join(sorted(_KNOWN - {'type', 'max_batch_size'}))}). Fix the key name; the API key "
            "itself is read from the environment variable named by model.api_key_env."
        )
    from evalflow.models.api.dialects import check_dialect

    check_dialect(kind, config.get("dialect") or "openai")
    for key in ("model", "base_url"):
        if key == "model" and config.get("dialect") in NO_MODEL_NAME and config.get(key) is None:
            continue
        if not config.get(key) or (key == "model" and not isinstance(config.get(key), str)):
            raise ConfigError(
                f"model.{key} is not set: give the served model's name and the server's URL, e.g. "
                "model=openai_completions model.base_url=http://127.0.0.1:8000/v1 model.model=NAME."
            )
    values: dict[str, Any] = {
        k: v for k, v in config.items() if k in ApiSettings.__dataclass_fields__ and v is not None
    }
    for key in _INT_KEYS:
        if key in values:
            values[key] = _positive_int(key, values[key], minimum=0 if key in ("max_retries", "seed") else 1)
    for key in ("timeout", "retry_wait"):
        if key in values:
            values[key] = _positive_float(key, values[key])
    headers = values.get("headers") or {}
    if not isinstance(headers, Mapping):
        raise ConfigError(f"model.headers must be a mapping of header names to values, got {headers!r}.")
    values["headers"] = {str(k): str(v) for k, v in headers.items()}
    values["base_url"] = _base_urls(values["base_url"])
    _check_reasoning(kind, values)
    values["tokenizer_backend"] = _backend(kind, config)
    if values["tokenizer_backend"] == "none":  # lm-eval: no tokenizer, so nothing to send as token ids
        values["tokenized_requests"] = False
    values.setdefault("model", "")
    return ApiSettings(kind=kind, **values)


def _check_reasoning(kind: str, values: Mapping[str, Any]) -> None:
    """A reasoning setting the contract has no field for is refused: it would change nothing."""
    from evalflow.models.api.dialects import DIALECTS

    dialect = values.get("dialect") or "openai"
    takes = DIALECTS[dialect].reasoning_key if kind == "chat" else None
    for key in ("reasoning_effort", "thinking_budget"):
        if values.get(key) is not None and key != takes:
            raise ConfigError(
                f"{key}={values[key]!r}, but model openai_{kind} with model.dialect={dialect} takes "
                f"{takes or 'no reasoning setting'}, so it could change nothing: OpenAI-style chat servers "
                "(dialects openai, openai_hosted, azure) take reasoning_effort, Anthropic's Messages API "
                "(dialect anthropic) takes thinking_budget, a completions endpoint neither. Drop it, or set "
                "the one this model takes."
            )


def _backend(kind: str, config: Mapping[str, Any]) -> str:
    """lm-eval's ``tokenizer_backend``: None/"None"/"none" all mean no tokenizer, the chat
    model's default (``LocalChatCompletion``), huggingface the completions model's."""
    value = config.get("tokenizer_backend", "none" if kind == "chat" else "huggingface")
    name = "none" if value is None else str(value).lower()
    if name not in BACKENDS:
        raise ConfigError(
            f"model.tokenizer_backend={value!r} is not one of lm-eval's tokenizer backends "
            f"({', '.join(BACKENDS)}); huggingface loads model.tokenizer, tiktoken OpenAI's encoding "
            "of model.model, remote asks the server's /tokenize, none sends text and scores nothing."
        )
    return name


def _positive_int(key: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"model.{key}={value!r} must be an integer >= {minimum}.")
    return value


def _positive_float(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigError(f"model.{key}={value!r} must be a number of seconds > 0.")
    return float(value)


def _url_identity(settings: ApiSettings) -> Any:
    """The one root URL, or the sorted set of several (their order only spreads the load)."""
    urls = settings.root_urls
    return urls[0] if len(urls) == 1 else sorted(urls)


def replica_configs(config: Mapping[str, Any], workers: int) -> list[dict[str, Any]]:
    """Each Ray replica's model config when ``base_url`` lists servers: replica i sends to server
    ``i mod N`` only (``failover_only``), the others taking over if it dies. ``workers`` below the
    number of servers would leave some idle, so it is refused."""
    urls = config.get("base_url")
    if isinstance(urls, str) or not isinstance(urls, Sequence) or len(urls) < 2:
        return [dict(config) for _ in range(workers)]
    urls = list(urls)
    if workers < len(urls):
        raise ConfigError(
            f"workers={workers} with {len(urls)} servers in model.base_url would leave "
            f"{len(urls) - workers} of them idle: run one replica per server (workers={len(urls)}), or "
            "workers=1 (one process spreads the requests over every server)."
        )
    out = []
    for i in range(workers):
        k = i % len(urls)
        out.append({**config, "base_url": urls[k:] + urls[:k], "failover_only": True})
    return out


def tokenizer_identity(settings: ApiSettings) -> Any:
    """A GGUF file or a folder by content; a hub name by name and, if cached locally, commit;
    tiktoken's encoding by the model it is looked up for; the server's own tokenizer (remote) by
    the model's name and revision, which the identity holds already; none: no tokenizer.

    Without ``tokenizer`` lm-eval loads the tokenizer of ``model`` from the hub; so do we.
    """
    backend = settings.tokenizer_backend
    if backend in ("none", "remote"):
        return backend
    if backend == "tiktoken":
        return {"tiktoken": settings.model}
    from evalflow.models.hf.identity import tokenizer_identity as hf_tokenizer_identity

    name = settings.tokenizer or settings.model
    path = Path(os.path.expanduser(name))
    if path.is_file():
        return {"file": file_fingerprint(path)}
    return hf_tokenizer_identity(name, settings.tokenizer_revision)


# answer-changing settings added after the first identity: keyed only when not at their default
_LATER = (
    "tokenizer_backend",
    "tokenizer_revision",
    "use_fast_tokenizer",
    "custom_prefix_token_id",
    "eos_string",
    "think_end_token",
    "dialect",
    "api_version",
    "max_images",
    "reasoning_effort",
    "thinking_budget",
)


def _changed(settings: ApiSettings) -> dict[str, Any]:
    defaults = ApiSettings(
        kind=settings.kind, model="", base_url="http://x", tokenizer_backend=_backend(settings.kind, {})
    )
    return {k: getattr(settings, k) for k in _LATER if getattr(settings, k) != getattr(defaults, k)}


def identity(settings: ApiSettings) -> dict[str, Any]:
    """What every cached answer of this served model is keyed by (see the module docstring)."""
    common: dict[str, Any] = {
        "backend": f"openai-{settings.kind}",
        "semantics": SEMANTICS,
        "identity_version": IDENTITY_VERSION,
        "model": settings.model,
        "revision": settings.revision,
        "max_gen_toks": settings.max_gen_toks,
        "seed": settings.seed,
        "url": _url_identity(settings) if settings.identity_includes_url else None,
        **_changed(settings),
    }
    if settings.kind == "chat":  # no client-side tokenizer, unless it only gives the EOS stop text
        if settings.tokenizer_backend == "none" or settings.eos_string:
            return common
        return {**common, "tokenizer": tokenizer_identity(settings)}
    return {
        **common,
        "tokenizer": tokenizer_identity(settings),
        "tokenized_requests": settings.tokenized_requests,
        "add_bos_token": settings.add_bos_token,
        "max_length": settings.max_length,
    }
