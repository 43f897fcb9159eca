"""The decontamination path: doc_to_decontamination_query and lm-eval's n-gram overlap, checked
against lm-eval 0.4.13's own output (tests/scoring/golden/decontamination.json), and the
`decontaminate` subcommand whose output `samples=` evaluates."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import zstandard

from evalflow.errors import ConfigError
from evalflow.taskspec.data.decontamination import decontamination_query, overlapping_docs
from evalflow.taskspec.format.spec import TaskConfig
from tests.support.cli import cli_in, task_folder
from tests.support.scoring_golden import PEER_PYTHON, load_golden, peer_available, run_oracle

GOLDEN = load_golden("decontamination")


def ngram_folder(folder: Path, size: int, lines: list[str]) -> Path:
    """A training n-grams folder as lm-eval's clean_training_data scripts write it."""
    folder.mkdir(parents=True)
    (folder / "info.json").write_text(json.dumps({"ngram_size": size}))
    text = "".join(line + "\n" for line in lines).encode()
    (folder / "ngrams_0.bkt.txt.sorted.zst").write_bytes(zstandard.ZstdCompressor().compress(text))
    return folder


def evalflow_side(case: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    task = TaskConfig(
        task=case["id"],
        doc_to_text=case["doc_to_text"],
        should_decontaminate=True,
        doc_to_decontamination_query=case["query"],
    )
    queries = [decontamination_query(task, doc, doc_id=i) for i, doc in enumerate(case["docs"])]
    grams = ngram_folder(tmp_path / "grams", case["ngram_size"], case["train_ngrams"])
    return {"queries": queries, "contaminated": sorted(overlapping_docs(dict(enumerate(queries)), grams))}


@pytest.mark.parametrize("golden", GOLDEN, ids=[c["input"]["id"] for c in GOLDEN])
def test_queries_and_overlap_match_lm_eval(golden: dict[str, Any], tmp_path: Path) -> None:
    assert evalflow_side(golden["input"], tmp_path) == golden["expected"]


def _peer_reads_zstd() -> bool:
    return (
        peer_available()
        and subprocess.run([str(PEER_PYTHON), "-c", "import zstandard, jsonlines"], capture_output=True).returncode == 0
    )


@pytest.mark.skipif(
    not _peer_reads_zstd(), reason="lm-eval's venv with zstandard and jsonlines (its decontamination imports) is absent"
)
def test_golden_file_is_what_lm_eval_computes_today() -> None:
    fresh = run_oracle("decontamination", [c["input"] for c in GOLDEN])
    assert fresh == [c["expected"] for c in GOLDEN]


def test_text_template_query_is_the_text() -> None:
    """lm-eval would literal_eval "Question: ..." and fail; evalflow keeps the rendered text."""
    task = TaskConfig(task="t", should_decontaminate=True, doc_to_decontamination_query="Question: {{q}}")
    assert decontamination_query(task, {"q": "why?"}) == "Question: why?"
    assert decontamination_query(TaskConfig(task="t", doc_to_text="x"), {"q": "why?"}) is None


def test_a_folder_without_info_json_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="info.json with an 'ngram_size'"):
        overlapping_docs({0: "a b c"}, tmp_path)


DECON_TASK = """\
task: decon
include: mytask.yaml
should_decontaminate: true
doc_to_decontamination_query: q
"""


def test_decontaminate_command_then_evaluate_the_clean_documents(tmp_path: Path) -> None:
    lib, cache = task_folder(tmp_path / "T"), tmp_path / "cache"
    (lib / "decon.yaml").write_text(DECON_TASK)
    rows = [{"q": f"what is item number {i} in the list", "label": i % 2} for i in range(6)]
    (lib / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    grams = ngram_folder(tmp_path / "grams", 4, sorted(["item number 2 in 55", "number 4 in the 7"]))

    done = cli_in(
        ["decontaminate", "task=decon", f"include_path=[{lib}]", f"ngrams={grams}", "out=clean.json"], tmp_path, cache
    )
    assert done.returncode == 0, done.stderr
    assert "decon: 2 of 6 documents overlap the training n-grams (2, 4)" in done.stdout
    assert json.loads((tmp_path / "clean.json").read_text()) == {"decon": [0, 1, 3, 5]}
    run = cli_in(
        [
            "model=dummy",
            "task=decon",
            f"include_path=[{lib}]",
            "samples=clean.json",
            "bootstrap_iters=0",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        tmp_path,
        cache,
    )
    assert run.returncode == 0, run.stderr
    lines = (tmp_path / "run" / "samples_decon.jsonl").read_text().splitlines()
    assert [json.loads(line)["doc_id"] for line in lines] == [0, 1, 3, 5]
