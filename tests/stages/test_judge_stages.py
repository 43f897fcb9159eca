"""Judge metrics as cached DAG stages: what each edit costs in judge calls, counted by the edge.

The scored model is scripted (tests.support.judge_models.ScriptedAnswerer: the test sets each
question's answer) and so is the judge (ScriptedJudge: ``Score: 5`` for a right answer, ``Score:
1`` for a wrong one, ``no idea`` for an answer containing ``???``), so every count below is exact.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalflow.config.compose import compose_settings
from evalflow.errors import ConfigError, EvalflowError, TaskError
from evalflow.insight.explanation import explain
from evalflow.run.phases import run
from evalflow.run.rescoring import rescore
from tests.support.judge_models import ScriptedAnswerer, ScriptedJudge
from tests.support.judged import ANSWERER, JUDGE, PROMPT, Judged, N, right
from tests.support.runs import stage_hits


@pytest.fixture
def judged(tmp_path: Path) -> Judged:
    return Judged(tmp_path)


def judge_calls(manifest: dict) -> int:
    """Judge requests the judge model answered, as the judge edge reports them."""
    return int(manifest["judge"]["computed"])


def test_first_run_judges_every_answer_and_scores_the_parsed_verdicts(judged: Judged) -> None:
    result, manifest, folder = judged()
    assert judge_calls(manifest) == N == len(ScriptedJudge.prompts)
    assert result["graded,none"] == pytest.approx((75 * 5 + 25 * 1) / N)
    assert result["graded_unparsed,none"] == 0
    row = json.loads((folder / "samples_judged.jsonl").read_text().splitlines()[1])
    assert row["graded"] == 5.0 and row["judge_unparsed"] == {"graded": 0}
    assert row["judge"]["graded"][0] == {"response": "2", "judge_output": "Score: 5", "score": 5.0, "parsed": True}
    assert "Answer: 2\nGold: 2" in ScriptedJudge.prompts[0] or any(
        "Answer: 2\nGold: 2" in p for p in ScriptedJudge.prompts
    )


def test_changing_3_of_100_answers_makes_exactly_3_judge_calls(judged: Judged) -> None:
    judged()
    changed = {i: right(i) if i % 4 else "wrong" for i in range(N)}
    for i in (1, 2, 3):  # right before: now wrong
        changed[i] = "wrong again"
    judged.answers(changed)
    result, manifest, folder = judged()
    assert ScriptedAnswerer.calls == N  # the scored model's identity changed: all its answers asked again
    assert judge_calls(manifest) == 3 and manifest["judge"]["cached"] == N - 3
    assert sorted(p.split("Answer: ")[1].split("\n")[0] for p in ScriptedJudge.prompts) == ["wrong again"] * 3
    assert result["graded,none"] == pytest.approx((72 * 5 + 28 * 1) / N)
    lines = explain(folder)
    assert any(
        line.startswith("judged judge_inference re-ran: 3 of 100 judge requests new (inference: model identity changed")
        for line in lines
    ), lines


def test_editing_the_rubric_reruns_only_judge_calls(judged: Judged) -> None:
    judged()
    judged.write(prompt="Rubric v2. " + PROMPT)
    _, manifest, folder = judged()
    assert ScriptedAnswerer.calls == 0 and judge_calls(manifest) == N
    hits = stage_hits(manifest)
    assert [s for s, hit in hits.items() if not hit] == ["judge_requests", "judge_inference", "metrics", "aggregate"]
    assert any("judge_requests re-ran: judge prompt changed (graded: prompt: " in line for line in explain(folder))
    judged.write(prompt="Rubric v2. " + PROMPT)  # unchanged again: nothing at all is recomputed
    _, manifest, _ = judged()
    assert all(stage_hits(manifest).values()) and manifest["judge"]["computed"] == 0


def test_a_parser_edit_makes_no_judge_call(judged: Judged) -> None:
    judged()
    judged.write(parser="{type: number, min: 1, max: 4}")  # "Score: 5" is now out of range: unparsed
    result, manifest, folder = judged()
    assert judge_calls(manifest) == 0 and stage_hits(manifest)["judge_inference"]
    assert result["graded_unparsed,none"] == 75 and result["graded,none"] == 1.0  # the 25 wrong ones parsed
    assert any("metrics re-ran: judge metric graded changed (judge.parser." in line for line in explain(folder))


def test_the_judge_model_override_reruns_the_judge_only(judged: Judged) -> None:
    judged()
    _, manifest, folder = judged(judge_model={"type": JUDGE, "style": "strict"})
    assert ScriptedAnswerer.calls == 0 and judge_calls(manifest) == N
    assert manifest["judge"]["models"] and next(iter(manifest["judge"]["models"].values()))["style"] == "strict"
    assert any(
        'judge_inference re-ran: 100 of 100 judge requests new (judge model changed (graded: style: "plain" → "strict"'
        in line
        for line in explain(folder)
    ), explain(folder)


def test_unparsed_verdicts_are_counted_and_excluded_or_scored_by_the_policy(judged: Judged) -> None:
    judged.answers({i: "???" if i < 10 else right(i) for i in range(N)})
    result, manifest, folder = judged()
    assert result["graded_unparsed,none"] == 10 and result["graded,none"] == 5.0  # the mean of the 90 that parsed
    rows = [json.loads(line) for line in (folder / "samples_judged.jsonl").read_text().splitlines()]
    assert "graded" not in rows[0] and rows[0]["judge_unparsed"] == {"graded": 1}
    assert rows[0]["judge"]["graded"][0]["judge_output"] == "no idea"
    judged.write(policy="on_unparsed: 0")
    result, manifest, _ = judged()
    assert judge_calls(manifest) == 0  # a policy is scoring, not judging
    assert result["graded_unparsed,none"] == 10 and result["graded,none"] == pytest.approx(90 * 5 / N)


def test_explain_shows_an_omitted_policy_as_its_default(judged: Judged) -> None:
    """Regression: explain printed `judge.on_unparsed: null → 0` for a block that had omitted the
    policy, whose documented default is `exclude`; the default comes from the judge itself."""
    from evalflow.judges.judge_spec import ON_UNPARSED_DEFAULT

    _, _, first = judged()
    judged.write(policy="on_unparsed: 0")
    _, _, folder = judged()
    metrics = [line for line in explain(folder) if line.startswith("judged metrics re-ran: ")]
    assert metrics == [
        f'judged metrics re-ran: judge metric graded changed (judge.on_unparsed: "{ON_UNPARSED_DEFAULT}" → 0)'
    ]
    judged.write(policy=f"on_unparsed: {ON_UNPARSED_DEFAULT}")  # the default, now written out
    _, _, folder = judged()
    assert (
        "judged metrics re-ran: judge metric graded changed (judge.on_unparsed: the default, now written out)"
        in explain(folder, first)
    )


def sampled(judged: Judged, reduction: str, parser: str | None = None) -> None:
    """The task with 3 sampled repeats and ``reduction`` on the judge metric."""
    judged.write(repeats="repeats: 3", **({"parser": parser} if parser else {}))
    text = judged.yaml.read_text().replace(
        '  until: ["\\n"]\n', '  until: ["\\n"]\n  do_sample: true\n  temperature: 1.0\n'
    )
    judged.yaml.write_text(text.replace("  - metric: graded\n", f"  - metric: graded\n    reduction: {reduction}\n"))


def test_every_sampled_repeat_is_judged_and_reduced(judged: Judged) -> None:
    sampled(judged, "[mean, max]")
    ScriptedAnswerer.SAMPLED = {
        f"What is {i} plus 1?": [right(i), "wrong", "???" if i == 0 else right(i)] for i in range(N)
    }
    try:
        result, manifest, folder = judged()
    finally:
        ScriptedAnswerer.SAMPLED = {}
    assert judge_calls(manifest) == 2 * N + 1  # each document's distinct answers: right and wrong (doc 0: also ???)
    # per document: samples scored 5, 1, 5 (doc 0: 5, 1 and one unparsed, left out of its reduction)
    assert result["graded_mean@3,none"] == pytest.approx(((N - 1) * 11 / 3 + 3) / N)
    assert result["graded_max@3,none"] == 5.0 and result["graded_unparsed,none"] == 1
    row = json.loads((folder / "samples_judged.jsonl").read_text().splitlines()[0])
    assert [r["score"] for r in row["judge"]["graded"]] == [5.0, 1.0, None]


def test_a_judge_metric_with_every_verdict_unparsed_is_reported_null_not_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evalflow.output.table import print_results

    judged = Judged(tmp_path, n=10)
    judged.answers(dict.fromkeys(range(10), "???"))
    result, _manifest, folder = judged()
    assert result["graded,none"] is None and result["graded_stderr,none"] == "N/A"
    assert result["graded_unparsed,none"] == 10 and result["exact_match,none"] == 0.0
    written = json.loads((folder / "results.json").read_text())
    assert (
        written["results"]["judged"]["graded,none"] is None and written["higher_is_better"]["judged"]["graded"] is True
    )
    print_results(written)
    out = capsys.readouterr().out
    assert "no value" in out
    assert (
        "NO VALUE: judged graded,none: none of its 10 documents has one; the judge answered 10 times unparsed "
        "(graded_unparsed,none)"
    ) in out


def test_a_reduction_needs_k_parsed_samples_else_the_document_is_left_out_and_counted(tmp_path: Path) -> None:
    """pass@k's unbiased estimator needs n >= k samples and maj@k votes over k: a document with
    fewer parsed verdicts gets no value (before: pass@3 of two wrong samples was 1.0)."""
    judged = Judged(tmp_path, n=10)
    sampled(
        judged,
        "[pass@3, pass@2, maj@3, mean]",
        parser='{type: regex, pattern: "Score: (\\\\d+)", map: {"5": 1, "1": 0}}',
    )
    ScriptedAnswerer.SAMPLED = {f"What is {i} plus 1?": [right(i), "wrong", right(i)] for i in range(10)}
    ScriptedAnswerer.SAMPLED.update(
        {
            "What is 0 plus 1?": ["wrong", "wrong", "???"],
            "What is 1 plus 1?": [right(1), "???", "???"],
            "What is 2 plus 1?": ["???"] * 3,
        }
    )
    try:
        result, _, folder = judged()
    finally:
        ScriptedAnswerer.SAMPLED = {}
    assert (result["graded_pass@3,none"], result["graded_pass@3_excluded,none"]) == (1.0, 3)  # docs 0, 1, 2
    assert (result["graded_pass@2,none"], result["graded_pass@2_excluded,none"]) == (
        pytest.approx(7 / 8),
        2,
    )  # doc 0: 0
    assert (result["graded_maj@3,none"], result["graded_maj@3_excluded,none"]) == (1.0, 3)
    assert (
        result["graded_mean@3,none"] == pytest.approx((0 + 1 + 7 * 2 / 3) / 9)
        and result["graded_mean@3_excluded,none"] == 1
    )
    rows = [json.loads(line) for line in (folder / "samples_judged.jsonl").read_text().splitlines()]
    assert "graded_pass@3" not in rows[0] and rows[0]["graded_pass@2"] == 0.0 and "graded_mean@3" not in rows[2]
    written = json.loads((folder / "results.json").read_text())["higher_is_better"]["judged"]
    assert written["graded_pass@3_excluded"] is False and written["graded_pass@3"] is True


def test_a_killed_judge_resumes_from_its_persisted_chunks(judged: Judged) -> None:
    """The judge dies after 4 chunks of 10: those 40 verdicts are in the cache, and the same
    command resumes with the other 60 (the scored model's edge, reused, persists chunk by chunk)."""
    settings = compose_settings(
        task="judged",
        preset="dummy",
        overrides=[f"model.type={ANSWERER}"],
        values={
            "include_path": [str(judged.yaml.parent)],
            "cache_dir": str(judged.root / "cache"),
            "bootstrap_iters": 0,
            "chunk_size": 10,
        },
    )
    ScriptedJudge.reset()
    ScriptedJudge.fail_after = 40
    try:
        with pytest.raises(KeyboardInterrupt):
            run(settings)
    finally:
        ScriptedJudge.fail_after = None
    _, manifest, _ = judged(chunk_size=10)
    assert manifest["judge"]["computed"] == N - 40 and manifest["judge"]["cached"] == 40


@pytest.mark.parametrize(
    "judge_block, message",
    [
        (
            '{model: {type: "JUDGE"}, prompt: "x", parser: {type: regexp, pattern: "a"}}',
            "unknown judge_parser 'regexp'",
        ),
        (
            '{model: {type: "JUDGE"}, prompt: "x", parser: {type: regex, pattern: "Score: ("}}',
            "is not a valid regular expression",
        ),
        ('{model: {type: "JUDGE"}, prompt: "{{ response ", parser: {type: number}}', "does not parse"),
        ('{model: {type: "JUDGE"}, prompt: "{{ answer }}", parser: {type: number}}', "the template names answer"),
        ('{model: no_such_preset, prompt: "x", parser: {type: number}}', "unknown model preset 'no_such_preset'"),
        ('{prompt: "x", parser: {type: number}}', "no judge model"),
        (
            '{model: {type: "JUDGE"}, prompt: "x", parser: {type: number}, on_unparsed: zero}',
            "on_unparsed: 'zero' is not allowed",
        ),
        ('{model: {type: "JUDGE"}, promt: "x", parser: {type: number}}', "unknown key 'promt'"),
        (
            '{model: {type: "tests.support.models:StrictModel", sped: 3}, prompt: "x", parser: {type: number}}',
            "takes no key 'sped'",
        ),
    ],
)
def test_a_bad_judge_is_refused_at_load_before_any_model_call(judged: Judged, judge_block: str, message: str) -> None:
    text = judged.yaml.read_text()
    start = text.index("    judge:\n")
    end = text.index("    aggregation: mean", start)
    judged.yaml.write_text(text[:start] + f"    judge: {judge_block.replace('JUDGE', JUDGE)}\n" + text[end:])
    ScriptedAnswerer.calls = 0
    with pytest.raises(EvalflowError, match=message) as caught:
        judged()
    assert ScriptedAnswerer.calls == 0 and "graded" in str(caught.value) and "judged" in str(caught.value)


def test_a_judge_metric_may_not_take_a_samples_row_field_name(judged: Judged) -> None:
    """`judge` is each samples row's record of verdicts: a metric of that name would be overwritten."""
    judged.yaml.write_text(judged.yaml.read_text().replace("- metric: graded", "- metric: judge"))
    ScriptedAnswerer.calls = 0
    with pytest.raises(TaskError, match="named 'judge', a field every samples row already has"):
        judged()
    assert ScriptedAnswerer.calls == 0


def test_judge_metrics_need_a_generation_task(judged: Judged) -> None:
    judged.yaml.write_text(
        judged.yaml.read_text().replace(
            "output_type: generate_until", "output_type: multiple_choice\ndoc_to_choice: [a, b]"
        )
    )
    with pytest.raises(TaskError, match="needs output_type: generate_until"):
        judged()


def test_a_bad_judge_model_setting_is_refused() -> None:
    with pytest.raises(ConfigError, match="judge_model=3 is not allowed"):
        compose_settings(task="judged", preset="dummy", overrides=[], values={"judge_model": 3})


def test_rescore_reuses_the_answers_and_runs_only_the_judge(judged: Judged, tmp_path: Path) -> None:
    first, _, folder = judged()
    ScriptedAnswerer.calls = 0
    ScriptedJudge.reset()
    overrides = [
        "task=judged",
        f"include_path=[{judged.yaml.parent}]",
        f"cache_dir={tmp_path / 'fresh'}",
        "bootstrap_iters=0",
    ]
    results = rescore([folder / "samples_judged.jsonl"], overrides, tmp_path / "rescored")["results"]["judged"]
    assert (
        ScriptedAnswerer.calls == 0 and len(ScriptedJudge.prompts) == N
    )  # a fresh cache: the judge runs, once per answer
    assert results["graded,none"] == first["graded,none"]
    manifest = json.loads((tmp_path / "rescored" / "manifest.json").read_text())
    assert manifest["judge"]["computed"] == N
    ScriptedJudge.reset()
    again = rescore(
        [folder / "samples_judged.jsonl"],
        [*overrides, f"judge_model={{type: '{JUDGE}', style: strict}}"],
        tmp_path / "rescored2",
    )["results"]["judged"]
    assert len(ScriptedJudge.prompts) == N and again["graded,none"] == first["graded,none"]


def test_validate_checks_the_judge_and_renders_its_prompt(judged: Judged, capsys: pytest.CaptureFixture[str]) -> None:
    from evalflow.commands.validate import main

    args = ["task=judged", f"include_path=[{judged.yaml.parent}]", f"cache_dir={judged.root / 'cache'}", "n=2"]
    assert main(args) == 0
    capsys.readouterr()
    judged.write(prompt="{{ doc.no_such_field }}")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "judge metric 'graded', document 0" in err and "no_such_field" in err


def test_rescore_of_lm_evals_samples_with_a_judge_metric_runs_only_the_judge(tmp_path: Path) -> None:
    """lm-eval 0.4.13's own gsm8k output (SmolLM2's answers), rescored under gsm8k plus a judge
    metric: lm-eval's numbers stay, and the judge grades each distinct filtered answer once."""
    from tests.support.lm_eval_folders import LM_EVAL_FOLDERS, lm_eval_files
    from tests.support.paths import ROOT

    theirs, samples = lm_eval_files(LM_EVAL_FOLDERS / "lm_eval_gsm8k", "gsm8k")
    library = tmp_path / "tasks"
    library.mkdir()
    judge = (
        f'  - metric: graded\n    judge:\n      model: {{type: "{JUDGE}"}}\n      prompt: "{PROMPT}"\n'
        f'      parser: {{type: regex, pattern: "Score: (\\\\d+)"}}\n'
    )
    text = (ROOT / "tasks" / "gsm8k" / "gsm8k.yaml").read_text()
    (library / "gsm8k.yaml").write_text(text.replace("metadata:\n", judge + "metadata:\n", 1))
    ScriptedJudge.reset()
    results = rescore(
        [samples], ["task=gsm8k", f"include_path=[{library}]", f"cache_dir={tmp_path / 'cache'}"], tmp_path / "judged"
    )["results"]["gsm8k"]
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    distinct = {(r["doc_id"], r["filtered_resps"][0]) for r in rows}
    assert len(ScriptedJudge.prompts) == len(distinct)
    for key in ("exact_match,strict-match", "exact_match,flexible-extract"):
        assert results[key] == theirs["results"]["gsm8k"][key]
    assert {"graded,strict-match", "graded,flexible-extract", "graded_unparsed,strict-match"} <= set(results)
