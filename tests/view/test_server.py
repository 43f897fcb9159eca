"""The server through aiohttp's test client: each route's shape, 404 for unknown ids, the security
headers on every response (errors and files too), the comparison equal to ``compare``'s, image
names kept inside their run folder, and the run folders left exactly as they were."""

from __future__ import annotations

import asyncio
import io
import json
import shutil
from pathlib import Path
from urllib.parse import quote

import pytest

import evalflow.view.server as server
from evalflow.insight.comparison import compare
from evalflow.output.run_folder import load_run
from evalflow.view.server import SECURITY_HEADERS, make_app, start
from tests.support.runs import Runner
from tests.support.toy_tasks import write_toy_library
from tests.support.view_server import FRONT_END, Answer, ask, write_front_end
from tests.support.view_server_runs import listing, make_view_runs

SUMMARY_KEYS = {
    "id",
    "layout",
    "path",
    "model",
    "tasks",
    "date",
    "status",
    "metrics",
    "overrides",
    "sweep",
    "partial",
    "left_out",
}
DETAIL_KEYS = SUMMARY_KEYS | {"results", "config_yaml", "command", "manifest", "trackers", "samples", "progress"}
ROW_KEYS = {"doc_id", "filter", "target", "answer", "metrics", "correct", "verdict", "has_image"}
COMPARE_ROW_KEYS = {
    "name",
    "metric",
    "filter",
    "a",
    "b",
    "difference",
    "low",
    "high",
    "p_value",
    "verdict",
    "significant",
}
FLIP_KEYS = {"task", "doc_id", "filter", "metric", "a", "b", "answer_a", "answer_b", "target"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The runs (a, b, hostile, peer) under one root, the secret beside the root, and run ids."""
    tmp = tmp_path_factory.mktemp("view")
    lib = write_toy_library(tmp)
    root = tmp / "outputs"
    runs = make_view_runs(Runner(lib, tmp / "cache", root), root)
    (tmp / "secret.txt").write_text("SECRET-OUTSIDE")
    (runs["hostile"] / "cat.png").write_bytes(b"\x89PNG\r\n\x1a\nCAT")
    return {"root": root, "runs": runs, "tmp": tmp}


@pytest.fixture
def app(site: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(server, "STATIC_DIR", write_front_end(tmp_path / "static"))
    return lambda: make_app([site["root"]])


def _ids(app, site: dict) -> dict[str, str]:
    (runs,) = ask(app, ["/api/runs"])
    by_path = {Path(r["path"]).resolve(): r["id"] for r in runs.json()["runs"]}
    out = {}
    for name, folder in site["runs"].items():
        matches = [i for p, i in by_path.items() if p == folder.resolve() or p.is_relative_to(folder.resolve())]
        assert matches, f"run {name} ({folder}) not listed: {sorted(map(str, by_path))}"
        out[name] = matches[0]
    return out


def _q(text: str) -> str:
    return quote(text, safe="")


def _headers_ok(answers: list[Answer]) -> None:
    for a in answers:
        for name, value in SECURITY_HEADERS.items():
            assert a.headers.get(name) == value, f"{a.path} ({a.status}) lacks {name}"


def test_runs_and_each_run(app, site: dict) -> None:
    ids = _ids(app, site)
    answers = ask(app, ["/api/runs", *(f"/api/run?id={_q(i)}" for i in ids.values())])
    _headers_ok(answers)
    listed = answers[0].json()
    assert listed["roots"] == [str(site["root"])]
    assert {r["id"] for r in listed["runs"]} >= set(ids.values())
    for r in listed["runs"]:
        assert set(r) >= SUMMARY_KEYS, r
    for answer in answers[1:]:
        assert answer.status == 200
        assert set(answer.json()) >= DETAIL_KEYS
    detail = answers[1 + list(ids).index("a")].json()
    assert {r["name"] for r in detail["results"]} >= {"toy_mc", "toy_gen"}
    assert {s["task"]: s["count"] for s in detail["samples"]} == {"toy_mc": 20, "toy_gen": 20}


def test_samples_pages_and_one_sample(app, site: dict) -> None:
    a = _q(_ids(app, site)["a"])
    answers = ask(
        app,
        [
            f"/api/samples?id={a}&task=toy_mc&limit=5",
            f"/api/samples?id={a}&task=toy_mc&limit=5&offset=18",
            f"/api/samples?id={a}&task=toy_mc&correct=true&limit=100",
            f"/api/samples?id={a}&task=toy_mc&correct=false&limit=100",
            f"/api/samples?id={a}&task=toy_mc&text=plus%205",
            f"/api/samples?id={a}&task=toy_gen&stop_reason=eos&limit=100",
            f"/api/samples?id={a}&task=toy_gen&stop_reason=length&limit=100",
            f"/api/sample?id={a}&task=toy_mc&doc_id=3&filter=none",
        ],
    )
    _headers_ok(answers)
    first, last, right, wrong, found, ended, cut, one = (x.json() for x in answers)
    assert (first["total"], len(first["rows"]), len(last["rows"])) == (20, 5, 2)
    assert all(set(r) >= ROW_KEYS for r in first["rows"])
    assert right["total"] + wrong["total"] == 20 and all(r["correct"] for r in right["rows"])
    assert found["total"] >= 1
    assert (ended["total"], cut["total"]) == (20, 0)  # the dummy model's generations all end themselves
    rows = [json.loads(line) for line in (site["runs"]["a"] / "samples_toy_mc.jsonl").read_text().splitlines()]
    assert right["total"] == sum(r["acc"] == 1 for r in rows)
    assert one["doc_id"] == 3 and one["task"] == "toy_mc"
    assert one["raw"] == next(r for r in rows if r["doc_id"] == 3)


def test_compare_is_compare_with_flips(app, site: dict) -> None:
    ids = _ids(app, site)
    pair = _q(f"{ids['a']},{ids['b']}")
    plain, gated = (x.json() for x in ask(app, [f"/api/compare?ids={pair}", f"/api/compare?ids={pair}&max_drop=0"]))
    rows = compare(load_run(site["runs"]["a"]), load_run(site["runs"]["b"]))
    assert [(r["name"], r["metric"], r["filter"]) for r in plain["rows"]] == [
        (r.task, r.metric, r.filter) for r in rows
    ]
    assert [(r["difference"], r["p_value"], r["low"]) for r in plain["rows"]] == [
        (r.diff, r.p_value, r.low) for r in rows
    ]
    assert all(set(r) >= COMPARE_ROW_KEYS for r in plain["rows"])
    assert plain["gate"] is None and gated["gate"][-1].startswith("gate: ")
    assert [r["id"] for r in plain["runs"]] == [ids["a"], ids["b"]]

    # the flips, counted here from the samples files: acc under filter none
    def acc(run: str) -> dict[int, float]:
        lines = (site["runs"][run] / "samples_toy_mc.jsonl").read_text().splitlines()
        return {r["doc_id"]: r["acc"] for r in map(json.loads, lines)}

    va, vb = acc("a"), acc("b")
    flipped = sorted(d for d in va if va[d] != vb[d])
    assert flipped, "the two salts should disagree on some documents"
    mc = [f for f in plain["flips"]["rows"] if f["task"] == "toy_mc"]
    assert [f["doc_id"] for f in mc] == flipped
    assert all(set(f) >= FLIP_KEYS and f["answer_a"] != f["answer_b"] for f in mc)


def test_explain_wrong_reasoning_live(app, site: dict) -> None:
    ids = _ids(app, site)
    pair = _q(f"{ids['a']},{ids['b']}")
    answers = ask(
        app,
        [
            f"/api/explain?id={_q(ids['b'])}&against={_q(ids['a'])}",
            f"/api/explain?id={_q(ids['a'])}",
            f"/api/wrong?ids={pair}",
            f"/api/reasoning?ids={pair}",
            f"/api/live?id={_q(ids['a'])}",
        ],
    )
    _headers_ok(answers)
    assert [a.status for a in answers] == [200] * 5, [a.body[:200] for a in answers]
    against, alone, wrong, _, _ = (a.json() for a in answers)
    assert against["id"] == ids["b"] and against["against"] == ids["a"] and against["lines"]
    assert {"task", "stage", "cached"} <= set(against["stages"][0])
    assert alone["against"] is None
    assert "tasks" in wrong


def test_unknown_ids_bad_words_and_unknown_paths(app, site: dict) -> None:
    a = _q(_ids(app, site)["a"])
    answers = ask(
        app,
        [
            "/api/run?id=nope",
            "/api/run",
            "/api/samples?id=nope&task=toy_mc",
            f"/api/samples?id={a}&task=nope",
            f"/api/samples?id={a}&task=..%2F..%2Fsecret",
            f"/api/samples?id={a}&task=toy_mc&limit=many",
            f"/api/sample?id={a}&task=toy_mc&doc_id=999&filter=none",
            "/api/compare?ids=nope,also",
            "/api/explain?id=nope",
            "/api/live?id=nope",
            "/api/wrong?ids=nope",
            "/api/image?id=nope&name=x.png",
            "/api/nothing",
            "/nothing",
            "/static/nothing.js",
            "/static/secret.py",
            "/static/..%2Fsecret.py",
        ],
    )
    _headers_ok(answers)
    statuses = [a.status for a in answers]
    assert statuses == [404, 400, 404, 404, 404, 400, 404, 404, 404, 404, 404, 404, 404, 404, 404, 404, 404], statuses
    assert all("error" in a.json() for a in answers)
    assert not any(b"SECRET" in a.body or b"not served" in a.body for a in answers)


def test_front_end_files_and_their_headers(app) -> None:
    index, js, css = ask(app, ["/", "/static/app.js", "/static/app.css"])
    _headers_ok([index, js, css])
    assert index.body.decode() == FRONT_END["index.html"] and index.headers["Content-Type"].startswith("text/html")
    assert js.body.decode() == FRONT_END["app.js"] and js.headers["Content-Type"].startswith("text/javascript")
    assert css.headers["Content-Type"].startswith("text/css")


TRAVERSALS = [
    "../../secret.txt",
    "..%2F..%2Fsecret.txt",
    "%2e%2e%2f%2e%2e%2fsecret.txt",
    "%252e%252e%252f%252e%252e%252fsecret.txt",
    "%2Fetc%2Fpasswd",
    "..%5C..%5Csecret.txt",
    "cat.png%00.txt",
    "results.json",
]


def test_images_only_from_inside_the_run_folder(app, site: dict) -> None:
    hostile = _q(_ids(app, site)["hostile"])
    outside = site["tmp"] / "secret.txt"
    link = site["runs"]["hostile"] / "link.png"
    if not link.exists():
        link.symlink_to(outside)
    paths = [f"/api/image?id={hostile}&name={name}" for name in [*TRAVERSALS, _q(str(outside)), "link.png"]]
    answers = ask(app, [f"/api/image?id={hostile}&name=cat.png", *paths])
    _headers_ok(answers)
    image, *refused = answers
    assert image.status == 200 and image.body.endswith(b"CAT") and image.headers["Content-Type"] == "image/png"
    assert [a.status for a in refused] == [403] * len(refused), [(a.path, a.status) for a in refused]
    assert not any(b"SECRET" in a.body for a in refused)


def test_the_server_writes_nothing_into_run_folders(app, site: dict) -> None:
    before = listing(site["root"])
    ids = _ids(app, site)
    paths = ["/api/runs"]
    for i in ids.values():
        paths += [f"/api/run?id={_q(i)}", f"/api/explain?id={_q(i)}", f"/api/live?id={_q(i)}"]
    a = _q(ids["a"])
    paths += [f"/api/samples?id={a}&task=toy_gen&text=1", f"/api/sample?id={a}&task=toy_gen&doc_id=0&filter=get-answer"]
    paths += [f"/api/compare?ids={_q(ids['a'] + ',' + ids['b'])}"]
    ask(app, paths)
    assert listing(site["root"]) == before


def test_images_by_digest_come_from_the_runs_cache(app, site: dict) -> None:
    from PIL import Image

    from evalflow.cache.image_store import ImageStore
    from evalflow.cache.store import CacheStore

    cache_dir = json.loads((site["runs"]["a"] / "manifest.json").read_text())["cache_dir"]
    store = CacheStore(cache_dir)
    try:
        ref = ImageStore(store).put(Image.new("RGB", (3, 2), (200, 10, 10)))
    finally:
        store.close()
    a = _q(_ids(app, site)["a"])
    found, gone = ask(app, [f"/api/image?id={a}&name={ref.digest}", f"/api/image?id={a}&name={'ab' * 16}"])
    _headers_ok([found, gone])
    assert found.status == 200 and found.headers["Content-Type"] == "image/png"
    with Image.open(io.BytesIO(found.body)) as image:
        assert (image.size, image.getpixel((0, 0))) == ((3, 2), (200, 10, 10))
    assert gone.status == 404


def test_the_catalog_is_built_at_start_and_found_again_on_the_runs_list(site: dict, tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(site["runs"]["a"], root / "first")
    app = make_app([root])  # the catalog is built here, before "second" exists
    shutil.copytree(site["runs"]["b"], root / "second")
    before, listed, after = ask(lambda: app, ["/api/run?id=second", "/api/runs", "/api/run?id=second"])
    assert before.status == 404
    assert sorted(r["id"] for r in listed.json()["runs"]) == ["first", "second"]
    assert after.status == 200 and after.json()["id"] == "second"


def test_a_loopback_server_answers_only_requests_that_name_this_machine(app, site: dict) -> None:
    rebound = ask(app, ["/api/runs", "/", "/static/app.js"], headers={"Host": "evil.example:8765"})
    _headers_ok(rebound)
    assert [a.status for a in rebound] == [421, 421, 421]
    assert not any(b"runs" in a.body and b"roots" in a.body for a in rebound)
    named = ask(app, ["/api/runs"], headers={"Host": "localhost:8765"}) + ask(
        app, ["/api/runs"], headers={"Host": "[::1]:1"}
    )
    assert [a.status for a in named] == [200, 200]
    open_to_all = ask(lambda: make_app([site["root"]], host="0.0.0.0"), ["/api/runs"], headers={"Host": "box.lan:8765"})
    assert open_to_all[0].status == 421  # on every address too (tests/view/test_hardening.py)


@pytest.mark.parametrize(
    "raw",
    [
        b"GARBAGE\r\n\r\n",
        b"GET /" + b"a" * 10000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/html\r\n\r\n",
        b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + b"b" * 20000 + b"\r\n\r\n",
    ],
)
def test_requests_aiohttp_cannot_parse_get_the_headers_too(site: dict, raw: bytes) -> None:
    async def go() -> bytes:
        runner, port = await start(make_app([site["root"]]), "127.0.0.1", 0)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(raw)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            writer.close()
            return head
        finally:
            await runner.cleanup()

    head = asyncio.run(go()).decode("latin-1")
    status = head.split("\r\n")[0].split()
    assert status[0].startswith("HTTP/1.") and status[1] in ("400", "431"), status
    for name, value in SECURITY_HEADERS.items():
        assert f"{name}: {value}" in head, head
