"""One damaged run folder takes down only itself: the runs list shows it as ``unreadable`` with
the reason, its pages answer 422 with that paragraph, the other runs are served, and a bundle
writes its error payloads, goes on, and names each skipped run. A results file holding NaN (what
Python's json writes for a metric that could not be computed) is read, not refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import evalflow.view.server as server
from evalflow.output.run_paths import results_file, snapshot_config
from evalflow.view.bundle import write_bundle
from evalflow.view.server import make_app
from tests.support.runs import Runner
from tests.support.toy_tasks import write_toy_library
from tests.support.view_server import ask, write_front_end


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("isolation")
    _, _, run = Runner(write_toy_library(tmp), tmp / "cache", tmp / "made")(["toy_mc"], model="dummy", limit=6)
    return run


@pytest.fixture(autouse=True)
def _front_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "STATIC_DIR", write_front_end(tmp_path / "static"))


def _edit_results(run: Path, change) -> None:
    data = json.loads(results_file(run).read_text())
    change(data)
    results_file(run).write_text(json.dumps(data))  # Python's json: NaN written as NaN


def _outputs(made: Path, root: Path) -> Path:
    """``good``, ``nan`` (a NaN metric), ``cut`` (results.json cut short), ``yaml`` (a snapshot
    that is not YAML) and ``date`` (a string date)."""
    for name in ("good", "nan", "cut", "yaml", "date"):
        shutil.copytree(made, root / name)
    _edit_results(root / "nan", lambda d: d["results"]["toy_mc"].__setitem__("acc,none", float("nan")))
    results_file(root / "cut").write_bytes(results_file(root / "cut").read_bytes()[:200])
    snapshot_config(root / "yaml").parent.mkdir(exist_ok=True)
    snapshot_config(root / "yaml").write_text("model: [unclosed\n")
    _edit_results(root / "date", lambda d: d.__setitem__("date", "yesterday"))
    return root


def test_a_damaged_run_is_listed_as_unreadable_and_the_others_are_served(made: Path, tmp_path: Path) -> None:
    root = _outputs(made, tmp_path / "outputs")
    app = lambda: make_app([root])  # noqa: E731
    listed, cut, yaml_run, nan, date_explain = ask(
        app, ["/api/runs", "/api/run?id=cut", "/api/run?id=yaml", "/api/run?id=nan", "/api/explain?id=date"]
    )
    assert listed.status == 200
    rows = {r["id"]: r for r in listed.json()["runs"]}
    assert sorted(rows) == ["cut", "date", "good", "nan", "yaml"]
    assert rows["cut"]["status"] == "unreadable" and "results.json: not valid JSON" in rows["cut"]["error"]
    assert {rows[i]["status"] for i in ("good", "nan", "yaml", "date")} == {"complete"}
    assert rows["nan"]["metrics"]["toy_mc"]["value"] is None  # NaN sent as null
    assert cut.status == 422 and "not valid JSON" in cut.json()["error"]
    assert yaml_run.status == 422 and "config.yaml: not valid YAML" in yaml_run.json()["error"]
    assert nan.status == 200
    assert date_explain.status in (200, 422), date_explain.body  # never a server error


def test_a_bundle_goes_on_past_damaged_runs_and_names_them(made: Path, tmp_path: Path) -> None:
    root = _outputs(made, tmp_path / "outputs")
    lines: list[str] = []
    write_bundle([root], tmp_path / "bundle", docs=1, skipped=lines.append)
    assert sorted(line.split()[3] for line in lines) == ["cut", "yaml"], lines
    assert all(line.startswith("view bundle: run ") for line in lines)
    text = "".join(p.read_text() for p in (tmp_path / "bundle" / "data").iterdir())
    assert '"status":"unreadable"' in text and '"id":"good"' in text
