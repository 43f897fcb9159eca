"""samples_<task>.jsonl carries lm-eval 0.4.13's doc_hash, prompt_hash and target_hash.

The expected hashes (``lmeval_sample_hashes.json``) are lm-eval's own samples files for the same
documents, made with its dummy model (prompts and targets only, fast)::

    ../shared/parity/peer.sh arc_easy --limit 5 --num_fewshot 0 --model dummy --model_args ""
    ../shared/parity/peer.sh gsm8k --limit 3 --num_fewshot 2 --model dummy --model_args ""
    ../shared/parity/peer.sh gsm8k --samples '{"gsm8k": [1, 4]}' --num_fewshot 2 --model dummy --model_args ""

keeping doc_id, filter and the three hashes of each line (the documents stay in ../shared/data).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalflow.output.samples import lm_eval_hashes
from tests.support.paths import SHARED_DATA

RUNS = json.loads((Path(__file__).parent / "lmeval_sample_hashes.json").read_text())["runs"]


def _run_values(peer_args: str) -> dict:
    """peer.sh's arguments as evalflow settings (--limit, --samples, --num_fewshot)."""
    if "--samples" in peer_args:
        picked, shots = peer_args.split("--samples ", 1)[1].rsplit(" --num_fewshot ", 1)
        return {"samples": json.loads(picked), "num_fewshot": int(shots)}
    args = peer_args.split()
    return {"limit": int(args[args.index("--limit") + 1]), "num_fewshot": int(args[args.index("--num_fewshot") + 1])}


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"the shared data folder {SHARED_DATA} is absent")
@pytest.mark.parametrize("run", RUNS, ids=[f"{r['task']} {r['peer_args']}" for r in RUNS])
def test_hashes_equal_lm_eval_samples_file(run: dict, tmp_path: Path) -> None:
    """Also shows that samples= evaluates the documents lm-eval's --samples does, with the same
    few-shot draws (equal prompt hashes)."""
    from evalflow import evaluate

    task = run["task"]
    evaluate(
        task=task,
        model="dummy",
        bootstrap_iters=0,
        data_map="shared",
        cache_dir=str(tmp_path / "cache"),
        output_dir=tmp_path / "run",
        **_run_values(run["peer_args"]),
    )
    lines = [json.loads(line) for line in (tmp_path / "run" / f"samples_{task}.jsonl").read_text().splitlines()]
    keys = ("doc_id", "filter", "doc_hash", "prompt_hash", "target_hash")
    mine = sorted(({k: line[k] for k in keys} for line in lines), key=lambda r: (r["doc_id"], r["filter"]))
    theirs = sorted(run["lines"], key=lambda r: (r["doc_id"], r["filter"]))
    assert mine == theirs
    assert list(lines[0])[7:11] == ["metrics", "doc_hash", "prompt_hash", "target_hash"]  # lm-eval's key order


def test_list_targets_hash_as_lm_eval_prints_them() -> None:
    """lm-eval hashes str(target): a list target is its Python repr, a tuple would differ."""
    hashes = lm_eval_hashes({"q": "é"}, "Q: é", ["a", "b"])
    assert hashes["target_hash"] == lm_eval_hashes({}, "", "['a', 'b']")["target_hash"]
    assert (
        hashes["doc_hash"]
        == lm_eval_hashes({"q": "é"}, "", 0)["doc_hash"]
        != lm_eval_hashes({"q": "e"}, "", 0)["doc_hash"]
    )
