"""``view bundle``: the files it writes, each data script keyed as app.js looks it up and holding
the payload the server sends for the same request, hostile task text escaped in every file, and
nothing written into the run folders."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

import pytest

import evalflow.view.bundle as bundle
import evalflow.view.server as server
from evalflow.errors import ConfigError
from evalflow.view.bundle import MODE_META, api_key, data_name, relative_paths, roots_named, write_bundle
from evalflow.view.server import make_app
from tests.support.runs import Runner
from tests.support.toy_tasks import write_toy_library
from tests.support.view_server import ask, write_front_end
from tests.support.view_server_runs import HOSTILE, listing, make_view_runs

PUT = re.compile(r'^window\.EVALFLOW_BUNDLE\.put\(("(?:[^"\\]|\\.)*"), (.*)\);$')


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("bundle")
    lib = write_toy_library(tmp)
    root = tmp / "outputs"
    runs = make_view_runs(Runner(lib, tmp / "cache", root), root)
    static = write_front_end(tmp / "static")
    patch = pytest.MonkeyPatch()
    patch.setattr(bundle, "STATIC_DIR", static)
    patch.setattr(server, "STATIC_DIR", static)
    before = listing(root)
    out = tmp / "site"
    count = write_bundle([root], out, docs=3)
    data = {}
    for path in sorted((out / "data").iterdir()):
        for line in path.read_text(encoding="utf-8").splitlines():
            match = PUT.match(line)
            assert match, f"{path.name}: not a put() line: {line[:120]}"
            key = json.loads(match.group(1))
            assert data_name(key) == path.name
            data[key] = json.loads(match.group(2))
    yield {"root": root, "runs": runs, "out": out, "count": count, "data": data, "before": before}
    patch.undo()


def test_files_and_index(built: dict) -> None:
    out = built["out"]
    assert sorted(p.name for p in (out / "static").iterdir()) == ["app.css", "app.js"]
    assert MODE_META in (out / "index.html").read_text()
    assert len(built["data"]) == built["count"]
    assert listing(built["root"]) == built["before"], "the bundle wrote into a run folder"


def test_payloads_are_the_servers(built: dict) -> None:
    data = built["data"]
    runs = data["/api/runs"]["runs"]
    # a bundle names paths relative to the bundled folders (the root's name, not this machine's path)
    by_path = {(built["root"].parent / r["path"]).resolve(): r["id"] for r in runs}
    a = next(i for p, i in by_path.items() if p == built["runs"]["a"].resolve())
    b = next(i for p, i in by_path.items() if p == built["runs"]["b"].resolve())
    wanted = [
        ("/api/run", {"id": a}),
        ("/api/samples", {"id": a, "task": "toy_mc", "all": "1"}),
        ("/api/sample", {"id": a, "task": "toy_mc", "doc_id": "2", "filter": "none"}),
        ("/api/compare", {"ids": f"{a},{b}"}),
        ("/api/compare", {"ids": f"{b},{a}"}),
        ("/api/explain", {"id": a}),
        ("/api/wrong", {"ids": f"{a},{b}"}),
        ("/api/wrong", {"ids": f"{b},{a}"}),
        ("/api/reasoning", {"ids": a}),
    ]

    def app():
        return make_app([built["root"]])

    paths = [api_key(p, q) for p, q in wanted]
    for path, answer in zip(paths, ask(app, paths), strict=True):
        assert path in data, path
        served = answer.json()
        if path.startswith("/api/samples"):
            served = {**served, "bundle_docs": 3}
        if path.startswith("/api/explain"):  # the runs the bundle holds explain of a against
            evalflow_runs = {r["id"] for r in runs if r["layout"] == "evalflow"}
            assert set(data[path].pop("bundle_against")) == evalflow_runs - {a}
        assert data[path] == relative_paths(served, roots_named([built["root"]])), path
    # every choice the explain page offers is held: explain of a against each other evalflow run
    for other in data[api_key("/api/explain", {"id": b})]["bundle_against"]:
        held = data[api_key("/api/explain", {"id": b, "against": other})]
        assert held["against"] == other and held["lines"], other
    samples = data[api_key("/api/samples", {"id": a, "task": "toy_mc", "all": "1"})]
    assert samples["total"] == len(samples["rows"]) == 20
    docs = {k for k in data if k.startswith("/api/sample?") and f"id={quote(a, safe='')}&" in k and "toy_mc" in k}
    assert len(docs) == 3, "the first docs= documents of each task, no more"


def test_hostile_text_is_escaped_everywhere(built: dict) -> None:
    texts = [p.read_text(encoding="utf-8") for p in (built["out"] / "data").iterdir()]
    for text in texts:
        assert "<" not in text and ">" not in text and "\u2028" not in text
    everything = json.dumps(built["data"], ensure_ascii=False)
    for hostile in HOSTILE:
        assert json.dumps(hostile, ensure_ascii=False)[1:-1] in everything, "the text comes back intact"


def test_out_inside_a_run_folder_or_foreign_is_refused(built: dict, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="inside the run folder"):
        write_bundle([built["root"]], built["runs"]["a"] / "view")
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not an earlier bundle"):
        write_bundle([built["root"]], tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"
