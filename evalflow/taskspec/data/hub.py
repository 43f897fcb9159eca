"""Is the Hugging Face hub reachable? Decided once per process, so offline runs fail fast.

Without network access, ``datasets.load_dataset`` retries the hub for ~30 s before it gives up.
When ``HF_HUB_OFFLINE=1`` (or ``HF_DATASETS_OFFLINE`` / ``TRANSFORMERS_OFFLINE``) is set, or one
TCP connection to the hub's endpoint fails within :data:`PROBE_TIMEOUT` seconds, hub datasets are
loaded in the libraries' own offline mode instead: from their local cache if there, else an
immediate error (which :mod:`evalflow.taskspec.data.docsets` turns into its data-map advice).

    with offline_mode(hub_offline()):
        datasets.load_dataset("allenai/ai2_arc", "ARC-Easy")

Behind a proxy (``HTTPS_PROXY``/``ALL_PROXY`` set) a direct connection says nothing about the hub,
so no probe is made and only the environment variables decide.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
from collections.abc import Iterator
from urllib.parse import urlparse

log = logging.getLogger(__name__)

PROBE_TIMEOUT = 2.0
_OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def offline_by_env() -> bool:
    """One of the Hugging Face libraries' offline variables is set to a true value."""
    return any(os.environ.get(v, "").strip().upper() in ("1", "ON", "YES", "TRUE") for v in _OFFLINE_VARS)


def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def hub_offline() -> bool:
    """True when the hub must not be asked: offline by environment, or unreachable right now."""
    if offline_by_env():
        return True
    if any(os.environ.get(v) for v in _PROXY_VARS):
        return False
    return not _reachable(hub_endpoint())


@functools.cache
def _reachable(endpoint: str) -> bool:
    url = urlparse(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "", port), timeout=PROBE_TIMEOUT).close()
    except OSError as exc:
        log.info(
            "the Hugging Face hub (%s) is unreachable (%s); hub datasets load from the local cache only", endpoint, exc
        )
        return False
    return True


@contextlib.contextmanager
def offline_mode(enabled: bool) -> Iterator[None]:
    """The ``datasets`` and ``huggingface_hub`` offline switches, on for the duration (both read
    them at call time; the environment variables are read only once, at import)."""
    if not enabled:
        yield
        return
    import datasets.config
    import huggingface_hub.constants

    saved = datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = huggingface_hub.constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE = saved
