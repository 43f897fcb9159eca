"""Truncation reported, never silent: a run whose generations hit max_gen_toks or never close their
thinking says so per task (results.json, the manifest, the samples, the printed table and a
paragraph), scores exactly as lm-eval 0.4.13 scores the same generations, and a changed warning
threshold re-runs nothing but the report."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from evalflow import evaluate
from evalflow.core.records import Finish
from evalflow.output.generations import suggested_cap
from evalflow.output.run_summary import LM_EVAL, summary_lines
from evalflow.output.table import print_results
from tests.support.cli import cli
from tests.support.thinking import SHAPES, TRUNCATED_SHAPES, ScriptedThinker, raw_generation, shape_of
from tests.support.toy_tasks import rows

MARKER = "</think>"


def expected_shapes() -> list[int]:
    """Each toy_gen document's shape, from its question "What is A plus B?"."""
    pairs = [re.findall(r"What is (\d+) plus (\d+)\?", r["question"])[0] for r in rows(40)]
    return [shape_of(int(a), int(b)) for a, b in pairs]


def run(toy_library: Path, tmp_path: Path, name: str, **settings: Any) -> dict[str, Any]:
    kw: dict[str, Any] = dict(include_path=[str(toy_library)], cache_dir=str(tmp_path / "cache"), bootstrap_iters=0)
    model = {"type": "tests.support.thinking:ScriptedThinker"}
    kw["think_end_token"] = MARKER
    return evaluate("toy_gen", model, output_dir=tmp_path / name, **{**kw, **settings})


def test_stop_reasons_counted_and_the_finished_score_given_beside_the_score(toy_library: Path, tmp_path: Path) -> None:
    results = run(toy_library, tmp_path, "run")
    shapes = expected_shapes()
    stats = results["generations"]["toy_gen"]
    cut = sum(1 for s in shapes if s in TRUNCATED_SHAPES)
    assert stats["generations"] == 40
    assert stats["truncated"] == cut and stats["truncated_share"] == cut / 40
    assert stats["stop_reasons"] == {
        "eos": sum(1 for s in shapes if SHAPES[s][1] == "eos"),
        "stop": sum(1 for s in shapes if SHAPES[s][1] == "stop"),
        "thinking_unclosed": cut,  # both cut-off shapes lack the marker
    }
    assert stats["unclosed_by"] == {"length": cut}
    right = [s in (0, 2, 5) for s in shapes]  # the shapes whose answer after the marker is the sum
    finished = [r for r, s in zip(right, shapes) if s not in TRUNCATED_SHAPES]
    assert stats["finished_docs"] == len(finished)
    assert stats["finished_score"] == {"exact_match,get-answer": sum(finished) / len(finished)}
    assert stats["score"] == {"exact_match,get-answer": sum(right) / 40}
    assert results["results"]["toy_gen"]["exact_match,get-answer"] == sum(right) / 40
    assert stats["longest_finished_tokens"] == max(SHAPES[s][2] for s in shapes if s not in TRUNCATED_SHAPES)
    assert stats["max_gen_toks"] == 32 and stats["suggested_max_gen_toks"] == 64
    prompts = sum(len(raw_prompt.split()) for raw_prompt in _prompts(tmp_path / "run"))
    assert stats["tokens"] == {
        "prompt": prompts,
        "completion": sum(SHAPES[s][2] for s in shapes),
        "reasoning": None,
        "counted": 40,
    }


def test_the_score_is_given_when_no_generation_finished(toy_library: Path, tmp_path: Path) -> None:
    """A marker no generation writes: every one is thinking_unclosed, so no score over finished
    documents exists (empty), but the score over every document is still given beside it."""
    results = run(toy_library, tmp_path, "never", think_end_token="</never>")
    stats = results["generations"]["toy_gen"]
    assert stats["truncated"] == 40 and stats["finished_docs"] == 0
    assert stats["finished_score"] == {}
    assert stats["score"] == {"exact_match,get-answer": results["results"]["toy_gen"]["exact_match,get-answer"]}


def _prompts(folder: Path) -> list[str]:
    lines = (folder / "samples_toy_gen.jsonl").read_text().splitlines()
    return [json.loads(line)["arguments"]["gen_args_0"]["arg_0"] for line in lines]


def test_the_samples_keep_each_finish_beside_resps(toy_library: Path, tmp_path: Path) -> None:
    run(toy_library, tmp_path, "run", log_samples=True)
    for line in (tmp_path / "run" / "samples_toy_gen.jsonl").read_text().splitlines():
        row = json.loads(line)
        raw, finish = raw_generation(row["arguments"]["gen_args_0"]["arg_0"])
        assert row["resps"] == [[raw]]  # lm-eval's field unchanged: the raw generation
        (entry,) = row["finish"][0]
        reason = Finish(finish.stop_reason).stop_with(raw, MARKER)
        assert entry == {
            "stop_reason": reason,
            "prompt_tokens": finish.prompt_tokens,
            "completion_tokens": finish.completion_tokens,
            "reasoning_tokens": None,
            **({"stopped_by": finish.stop_reason} if reason != finish.stop_reason else {}),
        }


def test_a_rescore_of_the_samples_reports_the_same_figures(toy_library: Path, tmp_path: Path) -> None:
    ran = run(toy_library, tmp_path, "run", log_samples=True)
    done = cli(
        [
            "rescore",
            str(tmp_path / "run" / "samples_toy_gen.jsonl"),
            "task=toy_gen",
            f"include_path=[{toy_library}]",
            f"cache_dir={tmp_path / 'cache2'}",
            f"think_end_token='{MARKER}'",
            "bootstrap_iters=0",
            f"out={tmp_path / 'rescored'}",
        ]
    )
    assert done.returncode == 0, done.stderr
    rescored = json.loads(next((tmp_path / "rescored").glob("results*.json")).read_text())
    assert rescored["generations"] == ran["generations"]


def test_the_table_gains_a_column_and_the_run_a_paragraph(toy_library: Path, tmp_path: Path) -> None:
    results = run(toy_library, tmp_path, "run")
    table = io.StringIO()
    print_results(results, table)
    header, _, row = table.getvalue().splitlines()[:3]
    share = results["generations"]["toy_gen"]["truncated_share"]
    assert header.rstrip("|").split("|")[-1].strip() == "Truncated"
    assert row.rstrip("|").split("|")[-1].strip() == f"{100 * share:.1f}%"
    (paragraph,) = [line for line in summary_lines(tmp_path / "run") if line.startswith("TRUNCATED")]
    assert (
        f"toy_gen: {results['generations']['toy_gen']['truncated']} of 40 generations ({100 * share:.1f}%)" in paragraph
    )
    assert "max_gen_toks=32" in paragraph and "gen_kwargs={max_gen_toks:64}" in paragraph


def test_no_column_and_no_paragraph_when_nothing_was_cut_off(toy_library: Path, tmp_path: Path) -> None:
    results = run(toy_library, tmp_path, "run", truncation_warning=1.0)
    assert not [line for line in summary_lines(tmp_path / "run") if line.startswith("TRUNCATED")]
    results["generations"]["toy_gen"]["truncated_share"] = 0.0
    table = io.StringIO()
    print_results(results, table)
    assert "Truncated" not in table.getvalue()


def test_a_changed_threshold_re_runs_nothing_but_the_report(toy_library: Path, tmp_path: Path) -> None:
    run(toy_library, tmp_path, "first")
    calls = ScriptedThinker.calls
    run(toy_library, tmp_path, "second", truncation_warning=0.5)
    assert ScriptedThinker.calls == calls  # every answer from the cache
    manifest = json.loads((tmp_path / "second" / "manifest.json").read_text())
    assert all(stage["hit"] for stage in manifest["stages"])  # and every stage
    assert manifest["truncation_warning"] == 0.5
    assert not [line for line in summary_lines(tmp_path / "second") if line.startswith("TRUNCATED")]


def test_the_command_line_prints_the_paragraph(toy_library: Path, tmp_path: Path) -> None:
    args = [
        "model=dummy",
        "model.type=tests.support.thinking:ScriptedThinker",
        "task=toy_gen",
        f"include_path=[{toy_library}]",
        f"cache_dir={tmp_path / 'cache'}",
        "bootstrap_iters=0",
        f"think_end_token='{MARKER}'",
        f"hydra.run.dir={tmp_path / 'cli'}",
    ]
    done = cli(args)
    assert done.returncode == 0, done.stderr
    assert "| Truncated|" in done.stdout.replace(" ", "").replace("|Truncated|", "| Truncated|")
    assert "TRUNCATED: toy_gen:" in done.stdout and "gen_kwargs={max_gen_toks:64}" in done.stdout
    assert "tokens: " in done.stdout


@pytest.mark.parametrize(
    ("cap", "longest", "suggested"), [(32, 20, 64), (256, 250, 512), (None, 300, 1024), (None, None, None)]
)
def test_the_suggested_cap_doubles_past_the_longest_seen(
    cap: int | None, longest: int | None, suggested: int | None
) -> None:
    assert suggested_cap(cap, longest) == suggested


def test_the_scores_equal_lm_evals_on_the_same_generations(toy_library: Path, tmp_path: Path) -> None:
    """lm-eval 0.4.13's models cut the thinking, then the stop sequences (postprocess_generated_text),
    and score what is left: the same generations give the same numbers here, and lm-eval's keys only."""
    pytest.importorskip("lm_eval.models.utils")
    ours = run(toy_library, tmp_path, "run")
    theirs = lm_eval_results(toy_library)
    keys = {k for k in theirs["results"]["toy_gen"] if "," in k}
    assert keys == {k for k in ours["results"]["toy_gen"] if "," in k}
    assert {k: ours["results"]["toy_gen"][k] for k in keys} == {k: theirs["results"]["toy_gen"][k] for k in keys}


def lm_eval_results(toy_library: Path) -> dict[str, Any]:
    """lm-eval's own evaluator over toy_gen with a model that returns the scripted generations as
    lm-eval's HFLM and VLLM return theirs (thinking cut, then stop sequences)."""
    from lm_eval import simple_evaluate
    from lm_eval.api.model import LM
    from lm_eval.models.utils import postprocess_generated_text
    from lm_eval.tasks import TaskManager

    class Peer(LM):
        def generate_until(self, requests: Any) -> list[str]:
            out = []
            for request in requests:
                context, kwargs = request.args
                text, _ = raw_generation(context)
                out.append(postprocess_generated_text(text, kwargs.get("until"), MARKER))
            return out

        def loglikelihood(self, requests: Any) -> Any:
            raise AssertionError("not asked")

        loglikelihood_rolling = loglikelihood

    return simple_evaluate(
        model=Peer(), tasks=["toy_gen"], task_manager=TaskManager(include_path=str(toy_library)), bootstrap_iters=0
    )


def test_the_lm_eval_front_door_says_it_in_its_own_flags(toy_library: Path, tmp_path: Path) -> None:
    run(toy_library, tmp_path, "run")
    (paragraph,) = [line for line in summary_lines(tmp_path / "run", LM_EVAL) if line.startswith("TRUNCATED")]
    assert paragraph.endswith("Run again with --gen_kwargs max_gen_toks=64.")
