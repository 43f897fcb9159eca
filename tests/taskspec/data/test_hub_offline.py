"""Offline fast path: a hub dataset that is not in the data map fails at once, with the data-map
advice, when HF_HUB_OFFLINE is set or the hub is unreachable: no request reaches the network, so
none of datasets' retries (~30 s) happen. Checked structurally, by counting network calls."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from evalflow.errors import DataError
from evalflow.taskspec.data import hub
from evalflow.taskspec.data.docsets import load_docset
from evalflow.taskspec.format.spec import TaskConfig

TASK = TaskConfig(task="hub_task", dataset_path="nobody-evalflow/no_such_dataset", test_split="test", source="t.yaml")


@pytest.fixture
def network(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Every TCP connection attempt (evalflow's probe, and datasets' HTTP client: 8 of them in its
    retry loop without the fast path) and every name lookup, recorded and refused."""
    calls: dict[str, list[Any]] = {"connections": [], "lookups": []}

    def connect(address: Any, *args: Any, **kwargs: Any) -> Any:
        calls["connections"].append(address)
        raise OSError("network unreachable (test)")

    def lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        calls["lookups"].append(host)
        raise socket.gaierror(socket.EAI_NONAME, "no network (test)")

    monkeypatch.setattr(socket, "create_connection", connect)
    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    for var in (
        "HF_HUB_OFFLINE",
        "HF_DATASETS_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
        "HF_ENDPOINT",
    ):
        monkeypatch.delenv(var, raising=False)
    hub._reachable.cache_clear()
    yield calls
    hub._reachable.cache_clear()


def test_unreachable_hub_fails_without_any_hub_request(network: dict[str, list[Any]]) -> None:
    with pytest.raises(DataError, match="is unreachable and the dataset is not in the local datasets cache") as err:
        load_docset(TASK)
    assert "data map" in str(err.value) and "nobody-evalflow/no_such_dataset" in str(err.value)
    assert network["connections"] == [("huggingface.co", 443)]  # the probe, and no hub request or retry
    assert network["lookups"] == []
    with pytest.raises(DataError):
        load_docset(TASK)
    assert len(network["connections"]) == 1  # decided once per process


def test_hf_hub_offline_needs_no_probe(network: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError, match="HF_HUB_OFFLINE is set"):
        load_docset(TASK)
    assert network == {"connections": [], "lookups": []}


def test_offline_switches_are_restored(network: dict[str, list[Any]]) -> None:
    import datasets.config
    import huggingface_hub.constants

    before = datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE
    with pytest.raises(DataError):
        load_docset(TASK)
    assert before == (datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE)


def test_a_reachable_hub_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe's other answer: a connection that succeeds means online (nothing is forced)."""

    class Conn:
        def close(self) -> None:
            pass

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: Conn())
    hub._reachable.cache_clear()
    try:
        assert hub.hub_offline() is False
    finally:
        hub._reachable.cache_clear()
