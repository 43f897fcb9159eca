"""``subset=``: a partial run evaluates some documents with the prompts the whole run gives them.

Few-shot examples come from one sampler stream in document order, so a document's prompt depends
on the documents before it; a subset keeps the whole stream and drops the other documents after.
So a partial run's per-document results equal the whole run's, and a whole run after it asks the
model only for the documents the partial run did not evaluate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalflow import evaluate
from evalflow.errors import ConfigError
from evalflow.output.partial import partial_tasks
from evalflow.output.run_paths import results_file, samples_file
from tests.support.models import CountingModel

MODEL = {"type": "tests.support.models:CountingModel"}
PICKED = (3, 17, 18, 40, 59)


def _rows(folder: Path) -> dict[int, dict[str, object]]:
    lines = samples_file(folder, "arith_mc").read_text().splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    return {int(r["doc_id"]): {k: r[k] for k in ("arguments", "resps", "acc", "acc_norm")} for r in rows}


def test_a_subset_pairs_with_the_whole_run_and_a_whole_run_computes_only_the_rest(tmp_path: Path) -> None:
    common = {"cache_dir": str(tmp_path / "cache"), "num_fewshot": 3, "seed": 7}
    CountingModel.reset()
    partial = evaluate("arith_mc", MODEL, output_dir=tmp_path / "part", subset={"arith_mc": list(PICKED)}, **common)
    asked_by_part = CountingModel.calls_total
    assert asked_by_part == 4 * len(PICKED)  # four choices per document
    assert partial["n-samples"]["arith_mc"] == {"original": 60, "effective": len(PICKED)}
    assert partial_tasks(partial) == {"arith_mc": (len(PICKED), 60)}
    CountingModel.reset()
    whole = evaluate("arith_mc", MODEL, output_dir=tmp_path / "whole", **common)
    assert CountingModel.calls_total == 4 * (60 - len(PICKED))  # every answer of the subset reused
    assert partial_tasks(whole) == {} and "partial" not in json.loads(results_file(tmp_path / "whole").read_text())
    part_rows, whole_rows = _rows(tmp_path / "part"), _rows(tmp_path / "whole")
    assert set(part_rows) == set(PICKED)
    assert all(part_rows[d] == whole_rows[d] for d in PICKED)  # same prompts (3 random shots), same scores


def test_the_subsets_prompts_differ_from_samples_which_restarts_the_stream(tmp_path: Path) -> None:
    """``samples=`` gives a document the prompt it would get as the k-th listed one (lm-eval's
    rule): with random shots that is another prompt, which is why the gate cannot use it."""
    common = {"cache_dir": str(tmp_path / "cache"), "num_fewshot": 3, "seed": 7}
    evaluate("arith_mc", MODEL, output_dir=tmp_path / "part", subset={"arith_mc": list(PICKED)}, **common)
    evaluate("arith_mc", MODEL, output_dir=tmp_path / "samp", samples={"arith_mc": list(PICKED)}, **common)
    part, samp = _rows(tmp_path / "part"), _rows(tmp_path / "samp")
    assert [part[d]["arguments"] for d in PICKED[1:]] != [samp[d]["arguments"] for d in PICKED[1:]]


def test_a_subset_outside_the_selection_is_refused_before_any_model_call(tmp_path: Path) -> None:
    CountingModel.reset()
    with pytest.raises(ConfigError, match=r"subset: task 'arith_mc': document 30 is not among the 10 documents"):
        evaluate("arith_mc", MODEL, cache_dir=str(tmp_path / "cache"), limit=10, subset={"arith_mc": [2, 30]})
    assert CountingModel.calls_total == 0
