"""The report's results side by side (``/api/results``, drawn by the viewer's front end in the
server, the bundle and ``evalflow report``'s one file): one table per group with its subtasks
folded, compare's paired columns for two runs, the runs named by every setting that varies between
them (:mod:`evalflow.insight.run_names`), and what the tables leave out. The page itself is tested
in a real browser in tests/view/test_report.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalflow.commands.report import main
from evalflow.insight.run_names import expand, run_labels, shortest_tails, varying_settings
from evalflow.view.payloads import Catalog, results_payload
from tests.support.runs import Runner


def results_of(*folders: Path) -> dict[str, Any]:
    """The results payload of these runs, in this order (the first is compare's A)."""
    catalog = Catalog(list(folders))
    ids = sorted(catalog.entries) if len(folders) > 1 else list(catalog.entries)
    return results_payload(catalog, {"ids": ",".join(ids)})


def test_lm_eval_and_evalflow_runs_together(tmp_path: Path) -> None:
    from evalflow.run.rescoring import rescore

    lm_eval = Path(__file__).parent / "fixtures" / "lm_eval_arc_easy"
    (samples,) = lm_eval.rglob("samples_arc_easy_*.jsonl")
    rescore([samples], ["task=arc_easy", f"cache_dir={tmp_path / 'cache'}"], tmp_path / "rescored")
    runs = expand([lm_eval, tmp_path / "rescored"])
    assert [r.kind for r in runs] == ["lm-eval", "evalflow"] and varying_settings(runs) == {}
    shown = results_of(lm_eval, tmp_path / "rescored")
    assert [r["kind"] for r in shown["runs"]] == ["lm-eval", "evalflow"] and shown["varying"] == {}
    (section,) = shown["sections"]  # one table (arc_easy is in no group), A and B side by side
    assert section["title"] == "" and all(len(line["values"]) == 2 for line in section["head"])
    assert shown["paired_columns"][:3] == ["B − A", "95% CI", "p"] and shown["compare_error"] is None


@pytest.fixture
def group_pair(runner: Runner, toy_library: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A toy_group run (toy_mc + toy_gen, 10 documents each) and a copy of it in which every toy_mc
    document is answered right: its toy_mc and group acc differ from A's with a tiny p."""
    (toy_library / "toy_group.yaml").write_text(
        "group: toy_group\ntask:\n  - toy_mc\n  - toy_gen\naggregate_metric_list:\n  - metric: acc\n"
        "metadata:\n  version: 1\n"
    )
    _, _, a = runner("toy_group", limit=10)
    b = tmp_path / "all_right"
    shutil.copytree(a, b)
    samples = b / "samples_toy_mc.jsonl"
    rows = [{**json.loads(line), "acc": 1.0} for line in samples.read_text().splitlines()]
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    results = json.loads((b / "results.json").read_text())
    for name in ("toy_mc", "toy_group"):
        results["results"][name]["acc,none"] = 1.0
    (b / "results.json").write_text(json.dumps(results))
    return a, b


def test_grouped_comparison_table(group_pair: tuple[Path, Path]) -> None:
    a, b = group_pair
    shown = results_of(a, b)
    assert [r["label"] for r in shown["runs"]] == [a.name, b.name]
    assert shown["paired_columns"] == ["B − A", "95% CI", "p", "Test", "Docs", "Detectable"]
    sections = [
        (s["title"], [ln["task"] for ln in s["head"]], [ln["task"] for ln in s["folded"]]) for s in shown["sections"]
    ]
    assert sections == [("toy_group", ["toy_group"], ["toy_mc", "toy_gen"])]
    (section,) = shown["sections"]
    lines = {(ln["task"], ln["metric"]): ln for ln in section["head"] + section["folded"]}
    mc = lines[("toy_mc", "acc,none")]
    a_acc = float(mc["values"][0].split(" ± ")[0])
    assert mc["arrow"] == "↑" and mc["values"][1].startswith("1.0000") and mc["paired"][0] == f"{1 - a_acc:+.4f}"
    assert mc["paired"][1].startswith("[+") and float(mc["paired"][2]) < 0.05 and mc["paired"][3] == "mcnemar"
    assert mc["significant"] and mc["direction"] == "better" and 0 < float(mc["paired"][5]) < 1
    gen = lines[("toy_gen", "exact_match,get-answer")]  # the same answers in both runs
    assert not gen["significant"] and gen["paired"][0] == "+0.0000" and gen["paired"][2] == "1"
    group = lines[("toy_group", "acc,none")]
    assert group["name"] == "toy_group (group)" and group["significant"] and group["paired"][4] == "10"


def sweep_cli(tmp_path: Path, toy_library: Path, *overrides: str) -> Path:
    """A sweep as a user starts it: ``python -m evalflow -m ...`` over the toy tasks, dummy model."""
    folder = tmp_path / "sweep"
    command = [
        sys.executable,
        "-m",
        "evalflow",
        "-m",
        "model=dummy",
        "limit=5",
        "bootstrap_iters=0",
        f"include_path=[{toy_library}]",
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.sweep.dir={folder}",
        *overrides,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


def test_sweep_runs_named_by_every_setting_one_line_each(tmp_path: Path, toy_library: Path) -> None:
    folder = sweep_cli(tmp_path, toy_library, "task=toy_mc", "model.salt=a,b", "num_fewshot=0,1")
    runs = expand([folder])
    varying = varying_settings(runs)
    assert varying == {"model.salt": ["a", "a", "b", "b"], "num_fewshot": [0, 1, 0, 1]}
    labels = [
        "model.salt=a num_fewshot=0",
        "model.salt=a num_fewshot=1",
        "model.salt=b num_fewshot=0",
        "model.salt=b num_fewshot=1",
    ]
    assert run_labels(runs, varying) == labels
    catalog = Catalog([folder])
    shown = results_payload(catalog, {"ids": ",".join(sorted(catalog.entries))})  # jobs 0..3
    assert [r["label"] for r in shown["runs"]] == labels and shown["paired_columns"] == []


def test_task_by_shot_sweep_says_what_it_leaves_out(tmp_path: Path, toy_library: Path) -> None:
    folder = sweep_cli(tmp_path, toy_library, "task=toy_mc,toy_gen", "num_fewshot=0,1")
    catalog = Catalog([folder])
    shown = results_payload(catalog, {"ids": ",".join(sorted(catalog.entries))})
    mc, gen = (
        "task=toy_mc num_fewshot=0, task=toy_mc num_fewshot=1",
        "task=toy_gen num_fewshot=0, task=toy_gen num_fewshot=1",
    )
    assert shown["notes"] == [f"toy_mc is only in {mc}", f"toy_gen is only in {gen}"]
    values = {tuple(ln["values"]) for s in shown["sections"] for ln in s["head"] if ln["task"] == "toy_gen"}
    assert values and all(v[0] == v[1] == "—" and v[2] != "—" for v in values)  # toy_gen only in runs 3, 4


def test_docs_option_is_checked(tmp_path: Path) -> None:
    from evalflow.errors import ConfigError

    with pytest.raises(ConfigError, match=r"docs=some: docs takes a whole number of documents embedded per task"):
        main([str(tmp_path), "docs=some"])
    with pytest.raises(
        ConfigError,
        match=r"unknown option 'limit='\. usage: python -m evalflow report RUN\.\.\. "
        r"\[out=\.\.\.\] \[docs=\.\.\.\]",
    ):
        main([str(tmp_path), "limit=3"])


def _with_overrides(runner: Runner, tmp_path: Path, name: str, overrides: list[str], config: str = "") -> Path:
    """A run folder as the command line leaves it: its overrides (and, given, its composed config)."""
    _, _, run = runner(limit=5)
    folder = tmp_path / name
    shutil.copytree(run, folder)
    (folder / ".hydra").mkdir()
    (folder / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    if config:
        (folder / ".hydra" / "config.yaml").write_text(config)
    return folder


def test_runs_are_not_named_by_settings_that_cannot_change_results(runner: Runner, tmp_path: Path) -> None:
    """explain, batch_size, workers... (the schema's inert settings) and Hydra's own keys differ
    between these runs, and nothing else: the runs are named by their folders."""
    a = _with_overrides(runner, tmp_path, "a", ["task=toy_mc"])
    b = _with_overrides(
        runner,
        tmp_path,
        "b",
        [
            "task=toy_mc",
            "explain=true",
            "batch_size=8",
            "workers=2",
            "chunk_size=3",
            "hydra/callbacks=wandb",
            "hydra.job.chdir=true",
        ],
    )
    runs = expand([a, b])
    assert varying_settings(runs) == {}
    assert run_labels(runs, {}) == ["a", "b"]


def test_a_setting_one_run_left_unset_reads_as_its_value(runner: Runner, tmp_path: Path) -> None:
    """Unset on a command line: as B's composed config has it (model.salt), else the schema's default
    (seed) or, for a key the schema does not declare either, "unset" (C: no config.yaml)."""
    a = _with_overrides(runner, tmp_path, "a", ["seed=7", "model.salt=x"])
    b = _with_overrides(runner, tmp_path, "b", [], config="model:\n  type: dummy\n  salt: y\nseed: 1234\n")
    c = _with_overrides(runner, tmp_path, "c", [])
    varying = varying_settings(expand([a, b, c]))
    assert varying == {"seed": [7, 1234, 1234], "model.salt": ["x", "y", "unset"]}
    assert run_labels(expand([a, b]), varying_settings(expand([a, b]))) == [
        "seed=7 model.salt=x",
        "seed=1234 model.salt=y",
    ]


def test_runs_differing_by_a_path_are_named_by_its_shortest_distinguishing_tail(runner: Runner, tmp_path: Path) -> None:
    """Regression: runs were labelled `model.pretrained=/tmp/…/tiny-vlm`, the whole path; now by the
    fewest trailing components that tell them apart, the full path beside the run's folder."""
    a = _with_overrides(runner, tmp_path, "a", ["model.pretrained=/tmp/pytest-1/x/tiny-vlm"])
    b = _with_overrides(runner, tmp_path, "b", ["model.pretrained=/tmp/pytest-1/y/tiny-vlm"])
    c = _with_overrides(runner, tmp_path, "c", ["model.pretrained=/tmp/pytest-1/y/other"])
    runs = expand([a, b, c])
    assert run_labels(runs, varying_settings(runs)) == [
        "model.pretrained=x/tiny-vlm",
        "model.pretrained=y/tiny-vlm",
        "model.pretrained=other",
    ]
    assert run_labels(expand([a, c]), varying_settings(expand([a, c]))) == [
        "model.pretrained=tiny-vlm",
        "model.pretrained=other",
    ]
    assert (
        shortest_tails(["a", "b"]) == ["a", "b"]
        and shortest_tails(["/m/", "/n/m"]) == ["/m/", "n/m"]
        and shortest_tails(["/a", "/a"]) == ["a", "a"]
    )
