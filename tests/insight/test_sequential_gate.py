"""``python -m evalflow gate``: the sequential release gate, driven round by round by the candidate's
own runs (no sleeps: each round ends when its run returns). A damaged checkpoint fails after a
fraction of the documents; an equal one passes; a budget stops it undecided (exit 3); when the
documents run out the verdict is the full-run gate's; the stopped run is partial everywhere it is
read, and a later whole run computes only the documents the gate did not use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalflow import evaluate
from evalflow.commands import gate
from evalflow.errors import ConfigError, RunFolderError
from evalflow.insight.comparison import compare
from evalflow.insight.explanation import explain
from evalflow.output.partial import partial_tasks
from evalflow.output.run_folder import load_run
from evalflow.output.run_paths import gate_record_file, gate_rounds_dir, manifest_file, results_file
from tests.support.toy_tasks import MC_YAML

CHECKPOINT = "tests.support.checkpoints:ArithCheckpoint"
DOCS = 400
TASK = MC_YAML.replace("task: toy_mc", "task: gate_arith", 1)  # the toy multiple-choice task, renamed


def _rows(n: int, offset: int) -> str:
    lines = []
    for i in range(offset, offset + n):
        a, b = i % 97 + 1, i % 7 + 2
        choices = [str(a + b + k) for k in (0, 1, 10, 20)]
        lines.append(json.dumps({"question": f"What is {a} + {b}?", "choices": choices, "label": 0}))
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A task of 400 documents and a baseline checkpoint's whole run of it (2 random shots)."""
    root = tmp_path_factory.mktemp("seqgate")
    (root / "data").mkdir()
    (root / "data" / "train.jsonl").write_text(_rows(20, 1000))
    (root / "data" / "test.jsonl").write_text(_rows(DOCS, 0))
    (root / "tasks").mkdir()
    (root / "tasks" / "gate_arith.yaml").write_text(TASK.format(data=root / "data"))
    paths = {"root": root, "tasks": root / "tasks", "cache": root / "cache", "baseline": root / "baseline"}
    evaluate(
        "gate_arith",
        {"type": CHECKPOINT, "skill": 0.9},
        output_dir=paths["baseline"],
        include_path=[str(paths["tasks"])],
        cache_dir=str(paths["cache"]),
        num_fewshot=2,
    )
    return paths


def _gate(release: dict[str, Path], out: Path, skill: float, *words: str) -> int:
    return gate.main(
        [
            f"baseline={release['baseline']}",
            f"model.type={CHECKPOINT}",
            f"+model.skill={skill}",
            f"include_path=[{release['tasks']}]",
            f"cache_dir={release['cache']}",
            "num_fewshot=2",
            f"out={out}",
            *words,
        ]
    )


def _record(out: Path) -> dict:
    return json.loads(gate_record_file(out).read_text())


def test_a_damaged_candidate_fails_on_a_fraction_and_its_folder_is_partial_everywhere(
    release: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "damaged"
    assert _gate(release, out, 0.0, "max_drop=0.05", "first=16") == 1
    record = _record(out)
    assert record["verdict"] == "fail" and record["decided_by"] == "sequential"
    assert record["decided_rows"] == ["gate_arith acc,none"]
    used = record["rounds"][-1]["documents"]["gate_arith"][0]
    assert used < DOCS / 4 and record["rounds"][-1]["rows"][0]["high"] < -0.05
    printed = capsys.readouterr().out
    assert f"round 1: gate_arith 16 of {DOCS}" in printed and "verdict so far: fail" in printed
    assert not gate_rounds_dir(out).exists()
    results = json.loads(results_file(out).read_text())
    assert partial_tasks(results) == {"gate_arith": (used, DOCS)}
    assert results["n-samples"]["gate_arith"] == {"original": DOCS, "effective": used}
    with pytest.raises(RunFolderError, match="is a partial run"):
        compare(load_run(release["baseline"]), load_run(out))
    assert explain(out)[0].startswith(f"gate against {release['baseline']}") and "gate round 1:" in explain(out)[1]
    assert explain(out)[-1].startswith("each round computed only its new documents")  # not another run's story
    assert not [line for line in explain(out) if "re-ran" in line]
    from evalflow.view.payloads import Catalog, results_payload

    (shown,) = results_payload(Catalog([out]), {"ids": "."})["runs"]  # the report's results side by side
    assert f"partial: gate_arith {used} of {DOCS}" in shown["partial"]
    assert "gate round 1: gate_arith 16 of 400" in "\n".join(shown["gate"])


def test_a_later_whole_run_computes_only_the_documents_the_gate_did_not_use(
    release: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "gated"
    assert _gate(release, out, 0.3, "max_drop=0.05", "first=16") == 1
    used = _record(out)["rounds"][-1]["documents"]["gate_arith"][0]
    whole = tmp_path / "whole"
    evaluate(
        "gate_arith",
        {"type": CHECKPOINT, "skill": 0.3},
        output_dir=whole,
        include_path=[str(release["tasks"])],
        cache_dir=str(release["cache"]),
        num_fewshot=2,
    )
    inference = json.loads(manifest_file(whole).read_text())["inference"]
    assert (inference["computed"], inference["cached"]) == (4 * (DOCS - used), 4 * used)  # 4 choices each
    ours = {r["doc_id"]: r["acc"] for r in load_run(out).rows("gate_arith")}
    theirs = {r["doc_id"]: r["acc"] for r in load_run(whole).rows("gate_arith")}
    assert ours == {d: theirs[d] for d in ours}  # the gate's documents scored as the whole run scores them


def test_an_equal_candidate_passes_before_the_last_document(release: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "same"
    assert _gate(release, out, 0.9, "max_drop=0.1", "first=32") == 0
    record = _record(out)
    assert record["verdict"] == "pass" and record["decided_by"] == "sequential"
    assert record["rounds"][-1]["documents"]["gate_arith"][0] < DOCS


def test_an_interrupted_gate_begins_again_into_the_same_folder(release: dict[str, Path], tmp_path: Path) -> None:
    """A gate stopped mid-round leaves its round runs behind (its own scratch); the same command
    again starts over into the same out= folder, every answer from the cache."""
    out = tmp_path / "again"
    stale = gate_rounds_dir(out) / "1"
    stale.mkdir(parents=True)
    results_file(stale).write_text("{}")  # a round run that finished before the stop
    assert _gate(release, out, 0.9, "max_drop=0.1", "first=32") == 0
    assert _record(out)["verdict"] == "pass" and not gate_rounds_dir(out).exists()


def test_a_spent_budget_exits_undecided(release: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "budget"
    assert _gate(release, out, 0.85, "max_drop=0.02", "first=16", "budget=40") == gate.BUDGET_EXIT
    record = _record(out)
    assert record["verdict"] == "undecided" and record["decided_by"] == "budget"
    assert [r["documents"]["gate_arith"][0] for r in record["rounds"]] == [16, 24, 36, 40]  # rounds grow 1.5x


def test_when_the_documents_run_out_the_verdict_is_the_full_run_gates(
    release: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "exhausted"
    # the baseline's own checkpoint with no tolerated drop: no interval short of the whole task is above 0
    code = _gate(release, out, 0.9, "max_drop=0.0", "first=128")
    record = _record(out)
    assert record["decided_by"] == "full run" and record["rounds"][-1]["documents"]["gate_arith"] == [DOCS, DOCS]
    assert "the documents ran out: the full-run gate (compare's paired test at alpha) decides: pass" in (
        capsys.readouterr().out
    )
    results = json.loads(results_file(out).read_text())
    assert "partial" not in results
    from evalflow.commands.compare import main as compare_main

    assert code == compare_main([str(release["baseline"]), str(out), "max_drop=0.0", "alpha=0.05"])


def _two_tasks(root: Path) -> dict[str, Path]:
    """A baseline of two tasks: gate_arith (400 documents) and gate_small (10)."""
    for name, rows in (("gate_arith", _rows(DOCS, 0)), ("gate_small", _rows(10, 500))):
        (root / name).mkdir()
        (root / name / "train.jsonl").write_text(_rows(20, 1000))
        (root / name / "test.jsonl").write_text(rows)
        (root / f"{name}.yaml").write_text(MC_YAML.replace("task: toy_mc", f"task: {name}", 1).format(data=root / name))
    common = {"include_path": [str(root)], "cache_dir": str(root / "cache"), "num_fewshot": 2}
    evaluate(["gate_arith", "gate_small"], {"type": CHECKPOINT}, output_dir=root / "base", **common)
    return {"root": root, "tasks": root, "cache": root / "cache", "baseline": root / "base"}


def test_every_task_is_evaluated_in_part_one_model_built_each_warning_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A round whose prefix has no unit of the small task yet evaluates that task's first unit (a
    run evaluates a task missing from subset= whole), not the whole task; the model is built
    once for all the rounds, and a warning every round repeats is said once."""
    from evalflow.insight.gate_sequence import unit_order
    from tests.support.checkpoints import ArithCheckpoint

    suite = _two_tasks(tmp_path)
    ids = {"gate_arith": dict.fromkeys(range(DOCS)), "gate_small": dict.fromkeys(range(10))}
    seed = next(s for s in range(100) if all(u.task == "gate_arith" for u in unit_order(ids, s)[:16]))
    built = ArithCheckpoint.built
    caplog.clear()
    code = _gate(suite, tmp_path / "gated", 0.6, "max_drop=0.05", "first=16", f"order_seed={seed}")
    record = _record(tmp_path / "gated")
    assert code == 1 and record["rounds"][0]["documents"] == {"gate_arith": [16, DOCS], "gate_small": [1, 10]}
    small = next(r for r in record["rounds"][0]["rows"] if r["name"] == "gate_small acc,none")
    assert (small["seen"], small["low"], small["high"], small["verdict"]) == (0, -1.0, 1.0, None)  # nothing judged
    assert len(record["rounds"]) > 1 and ArithCheckpoint.built - built == 1
    warned = [r.getMessage() for r in caplog.records if "fewshot_split is None" in r.getMessage()]
    assert sorted(warned) == [
        f"[Task: {t}] num_fewshot > 0 but fewshot_split is None. using preconfigured rule."
        for t in ("gate_arith", "gate_small")
    ]


def test_rows_gates_and_evaluates_the_chosen_task_alone(tmp_path: Path) -> None:
    """rows=gate_arith: the candidate runs gate_arith only (not a prefix of every task's
    documents), its row alone is gated, and the full-run verdict reads that row; a name the
    baseline does not have is one paragraph before any model call."""
    suite = _two_tasks(tmp_path)
    code = _gate(suite, tmp_path / "one", 0.0, "max_drop=0.05", "first=16", "rows=gate_arith:acc")
    record = _record(tmp_path / "one")
    assert code == 1 and record["rows"] == ["gate_arith acc,none"]
    assert {tuple(r["documents"]) for r in record["rounds"]} == {("gate_arith",)}
    assert load_run(tmp_path / "one").tasks() == ["gate_arith"]
    assert _gate(suite, tmp_path / "all", 0.0, "max_drop=0.0", "first=400", "rows=gate_small") == 1  # full run
    assert _record(tmp_path / "all")["decided_by"] == "full run"
    with pytest.raises(ConfigError, match="rows=gate_smal names no task or group of the baseline"):
        _gate(suite, tmp_path / "x", 1.0, "max_drop=0.01", "rows=gate_smal")
    with pytest.raises(ConfigError, match="rows=gate_small:accc names no row the gate can judge"):
        _gate(suite, tmp_path / "y", 1.0, "max_drop=0.01", "rows=gate_small:accc")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_bad_input_is_one_paragraph_before_any_model_call(release: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(RunFolderError, match="no such folder"):
        gate.main([f"baseline={tmp_path / 'nowhere'}", "max_drop=0.01"])
    limited = tmp_path / "limited"
    evaluate(
        "gate_arith",
        {"type": CHECKPOINT},
        output_dir=limited,
        include_path=[str(release["tasks"])],
        cache_dir=str(release["cache"]),
        limit=10,
    )
    with pytest.raises(ConfigError, match="rerun the baseline without limit"):
        _gate({**release, "baseline": limited}, tmp_path / "x", 1.0, "max_drop=0.01")
    with pytest.raises(ConfigError, match="limit= chooses documents"):
        _gate(release, tmp_path / "y", 1.0, "max_drop=0.01", "limit=5")
    with pytest.raises(ConfigError, match="max_drop= missing"):
        gate.main([f"baseline={release['baseline']}"])
    with pytest.raises(
        ConfigError, match=r"candidate's tasks \(arith_mc\) are not the ones the gate pairs \(gate_arith"
    ):
        _gate(release, tmp_path / "z", 1.0, "max_drop=0.01", "task=arith_mc")  # refused before any model call
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists() and not (tmp_path / "z").exists()


def test_stop_at_stderr_stops_a_task_once_its_interval_is_narrow_and_marks_it_partial(
    release: dict[str, Path], tmp_path: Path
) -> None:
    """The 95% anytime-valid interval of a task's accuracy narrows as its prefix grows; with
    stop_at_stderr=0.05 (half-width <= 0.098) this task stops before its 400th document."""
    common = {"include_path": [str(release["tasks"])], "cache_dir": str(tmp_path / "cache"), "num_fewshot": 2}
    model = {"type": CHECKPOINT, "skill": 0.5}
    stopped = evaluate("gate_arith", model, output_dir=tmp_path / "precise", stop_at_stderr=0.05, **common)
    n, total = partial_tasks(stopped)["gate_arith"]
    assert total == DOCS and 64 <= n < DOCS and stopped["n-samples"]["gate_arith"]["effective"] == n
    # counted as one run of the n documents, computed in its rounds (not each round's requests again)
    counted = json.loads(manifest_file(tmp_path / "precise").read_text())["inference"]
    assert (counted["requests"], counted["computed"], counted["cached"]) == (4 * n, 4 * n, 0)
    whole = evaluate("gate_arith", model, output_dir=tmp_path / "whole", **common)
    assert json.loads(manifest_file(tmp_path / "whole").read_text())["inference"]["computed"] == 4 * (DOCS - n)
    assert abs(stopped["results"]["gate_arith"]["acc,none"] - whole["results"]["gate_arith"]["acc,none"]) <= 0.098
    with pytest.raises(ConfigError, match="stop_at_stderr chooses the documents"):
        evaluate("gate_arith", model, stop_at_stderr=0.05, subset={"gate_arith": [1]}, **common)
