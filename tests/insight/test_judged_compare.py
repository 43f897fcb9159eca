"""`compare`, its release gate and `kappa=` on judged runs (a scripted judge, as in tests/stages/test_judge_stages):
documents a judge left without a value (``on_unparsed: exclude``) are left out of the pairing and
counted, a judge metric with no value at all is reported (and fails the gate in the candidate),
and kappa pairs a judge metric with exact_match, also under different filters (``metric@filter``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalflow.commands.compare import main
from evalflow.insight.agreement import cohen_kappa
from tests.support.judged import Judged, right

N = 20
BINARY = '{type: regex, pattern: "Score: (\\\\d+)", map: {"5": 1, "1": 0}}'  # the judge's verdict as 0/1
FILTERS = """filter_list:
  - name: raw
    filter:
      - function: take_first
  - name: digits
    filter:
      - function: regex
        regex_pattern: "(\\\\d+)"
      - function: take_first
"""


def answers(unparsed: range = range(0), wrong: tuple[int, ...] = (), spaced: tuple[int, ...] = ()) -> dict[int, str]:
    """Every 4th document wrong, plus ``wrong``; ``???`` (the judge cannot grade it) for ``unparsed``;
    ``spaced``: right but with a leading space (exact_match 0, the judge, which strips, says right)."""
    out = {i: right(i) if i % 4 and i not in wrong else "wrong" for i in range(N)}
    out.update(dict.fromkeys(unparsed, "???"))
    out.update({i: " " + right(i) for i in spaced})
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A: every document judged; B: 4 documents unparsed (excluded), 2 more wrong, 1 spaced;
    C: every verdict unparsed."""
    judged = Judged(tmp_path_factory.mktemp("judged"), n=N)
    judged.write(parser=BINARY)
    folders = {}
    for name, table in (("a", answers()), ("b", answers(range(4), (5, 6), (9,))), ("c", answers(range(N)))):
        judged.answers(table)
        folders[name] = judged()[2]
    return folders


def json_out(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> dict[str, Any]:
    assert main([*argv, "--json"]) == code
    return json.loads(capsys.readouterr().out)


def test_compare_pairs_only_documents_with_a_value_in_both_runs(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    rows = {r["metric"]: r for r in json_out(capsys, str(runs["a"]), str(runs["b"]))["rows"]}
    graded, em = rows["graded"], rows["exact_match"]
    assert (graded["n"], graded["left_out"], graded["test"]) == (16, 4, "mcnemar")
    assert "4 of 20 documents without a value in both (A lacks 0, B lacks 4: judge verdicts unparsed" in graded["note"]
    assert graded["a"] == 15 / 20 and graded["b"] == 10 / 16  # each run's own mean
    assert (em["n"], em["left_out"], em["note"]) == (20, 0, "")
    assert main([str(runs["a"]), str(runs["b"])]) == 0
    assert "PAIRED: judged graded,none: 4 of 20 documents without a value in both" in capsys.readouterr().out


def test_a_judge_metric_without_any_value_is_reported_and_fails_the_gate(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    report = json_out(capsys, str(runs["a"]), str(runs["c"]), "max_drop=0.5", "alpha=0.05", code=1)
    graded = next(r for r in report["rows"] if r["metric"] == "graded")
    assert (
        graded["b"] is None
        and graded["diff"] is None
        and graded["note"].startswith("no value in B: judge verdicts unparsed")
    )
    assert "judged graded,none" in report["gate"]["failed"]
    assert main([str(runs["a"]), str(runs["c"]), "max_drop=0.5", "alpha=0.05"]) == 1
    assert "REGRESSION: judged graded,none: no value in B: judge verdicts unparsed" in capsys.readouterr().out
    assert main([str(runs["c"]), str(runs["a"]), "max_drop=0.5", "alpha=0.05"]) == 0  # no baseline: not gated
    assert "NOT GATED: judged graded,none: not gated: no value in A" in capsys.readouterr().out


def test_kappa_of_the_judge_against_exact_match_leaves_out_the_unparsed(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    (row,) = json_out(capsys, str(runs["b"]), "kappa=graded,exact_match")["kappa"]
    samples = [json.loads(line) for line in (runs["b"] / "samples_judged.jsonl").read_text().splitlines()]
    kept = [s for s in samples if "graded" in s]
    expected = cohen_kappa([int(s["graded"]) for s in kept], [int(s["exact_match"]) for s in kept])
    assert (row["n"], row["left_out"]) == (16, 4) and row["kappa"] == pytest.approx(expected.kappa)
    assert 0 < row["kappa"] < 1  # document 9: exact_match 0, the judge 1
    assert main([str(runs["b"]), "kappa=graded,exact_match"]) == 0
    assert "4 documents without both values (left out)" in capsys.readouterr().out


def test_kappa_across_filters_with_metric_at_filter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The judge on the raw answer against exact_match on the digits the regex filter extracts."""
    judged = Judged(tmp_path, n=N)
    judged.write(parser=BINARY)
    judged.yaml.write_text(judged.yaml.read_text() + FILTERS)
    judged.answers(answers(range(2), spaced=(5, 6)))
    folder = judged()[2]
    same = json_out(capsys, str(folder), "kappa=graded,exact_match")["kappa"]
    assert [(r["filter"], r["filter_b"]) for r in same] == [("raw", "raw"), ("digits", "digits")]
    (cross,) = json_out(capsys, str(folder), "kappa=graded@raw,exact_match@digits")["kappa"]
    rows = [json.loads(line) for line in (folder / "samples_judged.jsonl").read_text().splitlines()]
    raw = {r["doc_id"]: r["graded"] for r in rows if r["filter"] == "raw" and "graded" in r}
    digits = {r["doc_id"]: r["exact_match"] for r in rows if r["filter"] == "digits"}
    expected = cohen_kappa([int(raw[d]) for d in sorted(raw)], [int(digits[d]) for d in sorted(raw)])
    assert (cross["filter"], cross["filter_b"], cross["n"], cross["left_out"]) == ("raw", "digits", N - 2, 2)
    assert cross["kappa"] == pytest.approx(expected.kappa)
    assert main([str(folder), "kappa=graded@raw,exact_match@digits"]) == 0
    assert "raw / digits" in capsys.readouterr().out
