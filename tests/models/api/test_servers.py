"""Requests pooled across tasks and spread over several servers, against loopback latency servers
(``tests.support.latency_server``): what the servers report (requests held waiting for a full
window, answers per server, a death after the N-th answer) are events, never timings."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.latency_server import LatencyServer, build_tokenizer

pytest.importorskip("aiohttp")

WINDOW = 4  # num_concurrent


@pytest.fixture
def library(toy_library: Path) -> Path:
    """toy_mc and toy_mc2 (the same documents, another prompt): two log-likelihood tasks."""
    text = (toy_library / "toy_mc.yaml").read_text()
    (toy_library / "toy_mc2.yaml").write_text(
        text.replace("task: toy_mc", "task: toy_mc2").replace('"Question: ', '"Q2: ')
    )
    return toy_library


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tokenizer(tmp_path_factory.mktemp("tok"))


@pytest.fixture
def servers() -> Iterator[list[LatencyServer]]:
    started: list[LatencyServer] = []
    yield started
    for server in started:
        server.stop()


def model(urls: Any, tokenizer: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "openai_completions",
        "model": "loopback",
        "base_url": urls,
        "tokenizer": tokenizer,
        "revision": "loopback-1",
        "check_logprobs": False,
        "num_concurrent": WINDOW,
        "retry_wait": 0.05,
        "max_retries": 1,
        **extra,
    }


def run(
    library: Path, tmp_path: Path, name: str, config: dict[str, Any], tasks: Any, **values: Any
) -> tuple[dict, dict]:
    from evalflow import evaluate

    folder = tmp_path / name
    results = evaluate(
        tasks,
        config,
        output_dir=folder,
        include_path=[str(library)],
        cache_dir=str(tmp_path / f"cache-{name}"),
        bootstrap_iters=0,
        **values,
    )
    return results, json.loads((folder / "manifest.json").read_text())


def accuracies(results: dict) -> dict[str, float]:
    return {task: r["acc,none"] for task, r in results["results"].items()}


def test_the_window_stays_full_across_chunks_and_tasks(library, tokenizer, servers, tmp_path):
    """The server answers a request only once WINDOW are in flight: a client that drained at a
    chunk or task boundary (chunk_size=8 < 2 x WINDOW; two tasks) would leave it waiting there,
    and each request it then answers short of a full window counts as starved. Only the run's
    last WINDOW - 1 requests may be."""
    servers.append(LatencyServer(latency=0.0, hold_until=WINDOW, starve_seconds=1.0).start())
    results, manifest = run(
        library, tmp_path, "pooled", model(servers[0].url, tokenizer), ["toy_mc", "toy_mc2"], chunk_size=8, limit=20
    )
    total = manifest["inference"]["computed"]
    assert total == servers[0].answered > 8 * 4  # many chunks, all of both tasks
    assert servers[0].max_in_flight == WINDOW
    assert servers[0].starved <= WINDOW - 1
    alone = {}
    for task in ("toy_mc", "toy_mc2"):  # each task alone, in its own cache: the same numbers
        servers.append(LatencyServer(latency=0.0).start())
        alone.update(accuracies(run(library, tmp_path, task, model(servers[-1].url, tokenizer), task, limit=20)[0]))
    assert accuracies(results) == alone


def test_two_servers_share_a_run_and_the_manifest_counts_each(library, tokenizer, servers, tmp_path):
    servers.extend(LatencyServer(latency=0.0).start() for _ in range(2))
    urls = [s.url for s in servers]
    _results, manifest = run(library, tmp_path, "two", model(urls, tokenizer), ["toy_mc", "toy_mc2"])
    counts = manifest["inference"]["servers"]
    assert counts == {s.url: s.answered for s in servers}
    assert all(n > 0 for n in counts.values()) and sum(counts.values()) == manifest["inference"]["computed"]
    assert [d["url"] for d in manifest["inference"]["model"]["server"]] == urls


def test_a_server_dying_mid_run_hands_its_requests_to_the_other(library, tokenizer, servers, tmp_path):
    """The first server dies after its 10th answer, with requests in flight: they and the rest go
    to the second server; the run completes with the answers one server alone gives."""
    servers.append(LatencyServer(latency=0.0, die_after=10).start())
    servers.append(LatencyServer(latency=0.0).start())
    results, manifest = run(
        library, tmp_path, "failover", model([s.url for s in servers], tokenizer), ["toy_mc", "toy_mc2"]
    )
    assert servers[0].died.is_set()
    total = manifest["inference"]["computed"]
    assert manifest["inference"]["servers"] == {servers[0].url: 10, servers[1].url: total - 10}
    servers.append(LatencyServer(latency=0.0).start())
    reference, _ = run(library, tmp_path, "reference", model(servers[-1].url, tokenizer), ["toy_mc", "toy_mc2"])
    assert accuracies(results) == accuracies(reference)
    assert json.dumps(results["results"], sort_keys=True) == json.dumps(reference["results"], sort_keys=True)


def test_a_list_of_urls_is_checked(tokenizer):
    from evalflow.errors import ConfigError
    from evalflow.models.api.server_settings import parse_settings, replica_configs

    with pytest.raises(ConfigError, match="each server once"):
        parse_settings("completions", model(["http://a:1/v1", "http://a:1/v1/"], tokenizer))
    with pytest.raises(ConfigError, match="not an http"):
        parse_settings("completions", model(["http://a:1/v1", "a:2"], tokenizer))
    assert parse_settings("completions", model(["http://a:1/v1/", "http://b:1/v1"], tokenizer)).root_urls == (
        "http://a:1/v1",
        "http://b:1/v1",
    )
    replicas = replica_configs(model(["http://a/v1", "http://b/v1"], tokenizer), 2)
    assert [r["base_url"] for r in replicas] == [["http://a/v1", "http://b/v1"], ["http://b/v1", "http://a/v1"]]
    assert all(r["failover_only"] for r in replicas)
    with pytest.raises(ConfigError, match="idle"):
        replica_configs(model(["http://a/v1", "http://b/v1", "http://c/v1"], tokenizer), 2)
