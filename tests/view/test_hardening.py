"""The server's guards against a hostile page or request: the Host header checked on every
address it listens on (DNS rebinding), numeric words bounded, whole-run computations kept off the
threads that answer the runs list, ``value=`` without ``metric=`` refused, and run ids holding a
comma compared through repeated ``ids=`` words."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import threading
from pathlib import Path
from urllib.parse import quote

import pytest
from aiohttp.test_utils import TestClient, TestServer

import evalflow.view.server as server
from evalflow.view.payloads import ROUTES
from evalflow.view.server import make_app
from tests.support.runs import Runner
from tests.support.toy_tasks import write_toy_library
from tests.support.view_server import ask, write_front_end


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs of toy_mc that differ, one under a name with a comma: ``a`` and ``b,c``."""
    tmp = tmp_path_factory.mktemp("hardening")
    runner = Runner(write_toy_library(tmp), tmp / "cache", tmp / "made")
    _, _, a = runner("toy_mc", model="dummy", limit=10)
    _, _, b = runner("toy_mc", model="dummy", limit=10, overrides=["model.salt=other"])
    out = tmp / "outputs"
    shutil.copytree(a, out / "a")
    shutil.copytree(b, out / "b,c")
    return out


@pytest.fixture(autouse=True)
def _front_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "STATIC_DIR", write_front_end(tmp_path / "static"))


def test_a_server_on_every_address_still_refuses_other_host_names(root: Path) -> None:
    def app():
        return make_app([root], host="0.0.0.0", allow_hosts=["evalflow.lab"])

    rebound = ask(app, ["/api/runs", "/"], headers={"Host": "evil.example:8765"})
    assert [a.status for a in rebound] == [421, 421]
    assert b"roots" not in rebound[0].body
    names = ["localhost:1", "127.0.0.1:1", "[::1]:1", f"{socket.gethostname()}:1", "evalflow.lab:1", "0.0.0.0:1"]
    answered = [ask(app, ["/api/runs"], headers={"Host": name})[0].status for name in names]
    assert answered == [200] * len(names), dict(zip(names, answered, strict=True))
    lan = ask(lambda: make_app([root], host="192.0.2.7"), ["/api/runs"], headers={"Host": "192.0.2.7:8765"})
    assert lan[0].status == 200
    # on a wildcard bind, any of the machine's addresses (its host name may resolve to 127.0.0.1 only)
    assert ask(app, ["/api/runs"], headers={"Host": "198.51.100.4:8765"})[0].status == 200
    assert ask(app, ["/api/runs"], headers={"Host": "198.51.100.4.evil.example"})[0].status == 421


def test_numeric_words_are_bounded(root: Path) -> None:
    answers = ask(
        lambda: make_app([root]),
        [
            f"/api/compare?ids=a&ids={quote('b,c')}&bootstrap_iters=100000000",
            f"/api/compare?ids=a&ids={quote('b,c')}&alpha=7",
            f"/api/compare?ids=a&ids={quote('b,c')}&max_drop=nan",
            "/api/samples?id=a&task=toy_mc&offset=99999999999999",
            "/api/sample?id=a&task=toy_mc&doc_id=99999999999999999999999",
            "/api/compare?ids=nope,also&seed=-1",
        ],
    )
    assert [a.status for a in answers] == [400] * len(answers), [(a.path, a.status, a.body) for a in answers]
    assert "bootstrap_iters=100000000: a whole number from 0 to 100000" in answers[0].json()["error"]


def test_value_without_metric_is_a_bad_request(root: Path) -> None:
    (answer,) = ask(lambda: make_app([root]), ["/api/samples?id=a&task=toy_mc&value=1"])
    assert answer.status == 400 and "value= needs metric=" in answer.json()["error"]


def test_an_id_with_a_comma_is_compared_through_repeated_ids(root: Path) -> None:
    repeated, joined = ask(
        lambda: make_app([root]),
        [f"/api/compare?ids=a&ids={quote('b,c', safe='')}&bootstrap_iters=100", "/api/compare?ids=a,b,c"],
    )
    assert repeated.status == 200, repeated.body
    assert [r["id"] for r in repeated.json()["runs"]] == ["a", "b,c"]
    assert joined.status == 404  # comma-separated: "b" and "c" are two ids, neither a run


def test_a_slow_comparison_does_not_hold_the_runs_list(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """More comparisons at once than the default pool has threads, each held until released:
    the runs list still answers."""
    release = threading.Event()

    def held(catalog, params):
        release.wait()
        return {}

    monkeypatch.setitem(ROUTES, "/api/compare", held)
    app = make_app([root])

    async def go() -> int:
        async with TestClient(TestServer(app)) as client:
            slow = [asyncio.ensure_future(client.get("/api/compare?ids=a,b")) for _ in range(40)]
            try:
                runs = await asyncio.wait_for(client.get("/api/runs"), timeout=60)
                return runs.status
            finally:
                release.set()
                for response in await asyncio.gather(*slow):
                    response.release()

    assert asyncio.run(go()) == 200


def test_images_are_read_without_writing_to_the_cache(root: Path) -> None:
    """The run's manifest names its cache (text in a folder anyone may hand the viewer): serving
    an image from it, a damaged one and a missing one included, leaves every byte of it as it was."""
    from PIL import Image

    from evalflow.cache.image_store import ImageStore
    from evalflow.cache.store import CacheStore

    cache = Path(json.loads((root / "a" / "manifest.json").read_text())["cache_dir"])
    store = CacheStore(cache)
    try:
        ref = ImageStore(store).put(Image.new("RGB", (3, 2), (9, 8, 7)))
        store.raw.add("image:" + "ab" * 16, b"damaged entry", retry=True)
    finally:
        store.close()
    before = {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(cache.rglob("*")) if p.is_file()}
    found, damaged, missing = ask(
        lambda: make_app([root]),
        [
            f"/api/image?id=a&name={ref.digest}",
            f"/api/image?id=a&name={'ab' * 16}",
            f"/api/image?id=a&name={'ef' * 16}",
        ],
    )
    assert (found.status, damaged.status, missing.status) == (200, 404, 404)
    assert found.body.startswith(b"\x89PNG")
    after = {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(cache.rglob("*")) if p.is_file()}
    assert after == before


def test_links_out_of_a_run_folder_are_neither_served_nor_bundled(root: Path, tmp_path: Path) -> None:
    from evalflow.output.run_paths import manifest_file, samples_file, snapshot_config
    from evalflow.view.bundle import write_bundle

    (tmp_path / "secret.txt").write_text("model: SECRET-OUTSIDE\n")
    run = tmp_path / "real" / "r"
    shutil.copytree(root / "a", run)
    snapshot_config(run).parent.mkdir(exist_ok=True)
    for path in (snapshot_config(run), manifest_file(run), samples_file(run, "toy_mc")):
        path.unlink(missing_ok=True)
        path.symlink_to(tmp_path / "secret.txt")
    (tmp_path / "outputs").symlink_to(tmp_path / "real", target_is_directory=True)
    detail, samples, explained = ask(
        lambda: make_app([tmp_path / "outputs"]),
        ["/api/run?id=r", "/api/samples?id=r&task=toy_mc", "/api/explain?id=r"],
    )
    assert detail.status == 200 and b"SECRET" not in detail.body
    assert {o["file"] for o in detail.json()["left_out"]} == {
        ".hydra/config.yaml",
        "manifest.json",
        "samples_toy_mc.jsonl",
    }
    assert samples.status == 404 and b"SECRET" not in samples.body
    assert explained.status == 400 and "was not read" in explained.json()["error"]
    write_bundle([tmp_path / "outputs"], tmp_path / "bundle", docs=2)
    assert not any(b"SECRET" in p.read_bytes() for p in (tmp_path / "bundle").rglob("*") if p.is_file())


def test_a_bundle_replaces_links_in_its_folder_and_holds_no_absolute_path(root: Path, tmp_path: Path) -> None:
    from evalflow.output.run_paths import snapshot_config
    from evalflow.view.bundle import write_bundle

    bundled = tmp_path / "outputs"
    shutil.copytree(root / "a", bundled / "a")
    snapshot_config(bundled / "a").parent.mkdir()
    snapshot_config(bundled / "a").write_text("model:\n  type: dummy\ntask: toy_mc\n")
    out = tmp_path / "bundle"
    write_bundle([bundled], out, docs=1)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("kept")
    for name in ("static", "data"):
        shutil.rmtree(out / name)
        (out / name).symlink_to(elsewhere, target_is_directory=True)
    write_bundle([bundled], out, docs=1)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.txt"]
    assert not (out / "static").is_symlink() and (out / "static" / "app.js").is_file()
    text = "".join(p.read_text() for p in (out / "data").iterdir())
    assert str(bundled.resolve()) not in text and str(tmp_path) not in text
    assert '"roots":["outputs"]' in text and '"path":"outputs/a"' in text
    assert "--config-dir outputs/a/.hydra" in text


def test_the_single_file_page_holds_no_absolute_path(root: Path, tmp_path: Path) -> None:
    import base64
    import gzip
    import re

    from evalflow.view.single_file import write_single_file

    write_single_file([root], tmp_path / "page.html", docs=1)
    page = (tmp_path / "page.html").read_text()
    blocks = re.findall(r'<script type="application/gzip\+base64"[^>]*>\n(.*?)</script>', page, flags=re.S)
    text = "".join(gzip.decompress(base64.b64decode("".join(b.split()))).decode() for b in blocks)
    assert '"id":"a"' in text  # the payloads were read
    assert str(root.resolve()) not in text and str(root.resolve()) not in page
