"""Served models: OpenAI-compatible API backends with lm-eval 0.4.13's ``local-completions`` and
``local-chat-completions`` semantics.

- ``settings``: the config, validated, and the cache identity (torch- and HTTP-free);
- ``payloads``: request bodies and response parsing, pure;
- ``tokens``: the client-side tokenizer (context length, truncation, rolling windows);
- ``client``: aiohttp + tenacity: concurrency, retries, answers handed over as they arrive;
- ``alignment``: the check that refuses servers whose echoed log-probabilities are misplaced;
- ``served`` (shared), ``completions``, ``chat``: the two model classes.
"""
