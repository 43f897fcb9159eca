"""lm-eval's MATH scoring through evalflow's side environment equals lm-eval's own (antlr 4.11).

minerva_math's ``exact_match``/``math_verify`` and leaderboard_math_hard's ``exact_match``/
``exact_match_original`` are computed per (document, candidate) pair three ways: through
``resolve_function`` (the antlr-4.11 worker), by the same task code in lm-eval's peer venv, and in
a plain interpreter of evalflow's environment (antlr 4.9, no mechanism). The first two must agree
on every pair; the third shows what the mechanism prevents (minerva cannot even be imported, and
leaderboard's bare ``except: 0`` turns parse_latex's refusal into "not equivalent").

The default scope is 50 pairs (half a minute); ``EVALFLOW_FULL_PARITY=1`` (the parity suite's
switch) scores 300. Pairs: Level-5 rows of ../shared/data's MATH test split and MATH-500, each with five candidates:
its own solution, its answer in ``\\boxed{}`` with minerva's final-answer line, another row's
solution, an equivalent answer written differently (``0.5`` for ``\\frac{1}{2}``, ``\\frac12``,
``\\dfrac``), and an answer parse_latex cannot read.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROOT

lm_eval = pytest.importorskip("lm_eval")
pytest.importorskip("math_verify")
pytest.importorskip("datasets")

DATA = ROOT.parent / "shared" / "data"
PEER_PYTHON = Path(os.environ.get("PEER_VENV", Path.home() / ".cache" / "evalflow-peer" / "venv")) / "bin" / "python"
SCORER = Path(__file__).with_name("score_math_pairs.py")
MODULES = {"minerva_math": "minerva_math", "leaderboard_math_hard": "leaderboard/math"}
# rows per MATH subject (7) and from MATH-500; five candidates each: 300 pairs, or 50
PER_SUBJECT, MATH500 = (6, 18) if os.environ.get("EVALFLOW_FULL_PARITY") == "1" else (1, 3)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not PEER_PYTHON.is_file(),
        reason=f"lm-eval's peer venv is absent ({PEER_PYTHON}); build it with ../shared/parity/peer.sh --setup",
    ),
    pytest.mark.skipif(not (DATA / "hendrycks_math").is_dir(), reason=f"{DATA} has no MATH data"),
]


def _rows() -> list[dict[str, Any]]:
    """Level-5 rows (leaderboard_math_hard keeps only those), in the MATH schema."""
    rows: list[dict[str, Any]] = []
    for path in sorted((DATA / "hendrycks_math" / "test").glob("*.jsonl")):
        hard = [r for r in map(json.loads, path.read_text().splitlines()) if r["level"] == "Level 5"]
        rows += [{k: r[k] for k in ("problem", "solution", "level", "type")} for r in hard[:PER_SUBJECT]]
    math500 = [json.loads(line) for line in (DATA / "math500" / "test.jsonl").read_text().splitlines()]
    rows += [
        {"problem": r["problem"], "solution": r["solution"], "level": "Level 5", "type": r["subject"]}
        for r in math500
        if r["level"] == 5
    ][:MATH500]
    return rows


def _boxed(solution: str) -> str:
    """The content of the last ``\\boxed{...}`` (brace-matched)."""
    start = solution.rindex("\\boxed{") + len("\\boxed{")
    depth = 1
    for i in range(start, len(solution)):
        depth += {"{": 1, "}": -1}.get(solution[i], 0)
        if depth == 0:
            return solution[start:i]
    return solution[start:]


def _equivalent(answer: str) -> str:
    """``answer`` written another way that means the same."""
    if answer.lstrip("-").isdigit():
        return f"\\frac{{{2 * int(answer)}}}{{2}}"
    fraction = re.fullmatch(r"\\frac\{(\d+)\}\{(\d+)\}", answer)
    if fraction:
        num, den = fraction.groups()
        if num.isdigit() and den.isdigit() and 10**6 % int(den) == 0:
            return str(int(num) / int(den))  # \frac{1}{2} -> 0.5
        if len(num) == len(den) == 1:
            return f"\\frac{num}{den}"  # \frac{1}{3} -> \frac13
    return answer.replace("\\frac", "\\dfrac").replace(",", ", ")


def _final(answer: str) -> str:
    return (
        f"So the answer is $\\boxed{{{answer}}}$.\nFinal Answer: The final answer is ${answer}$. I hope it is correct."
    )


def _pairs(rows: list[dict[str, Any]]) -> list[tuple[int, str]]:
    broken = ("\\frac{{{a}", "{a}^{{", "\\left( {a} \\right]]")
    pairs: list[tuple[int, str]] = []
    for i, row in enumerate(rows):
        answer, other = _boxed(row["solution"]), rows[(i + 7) % len(rows)]
        pairs += [
            (i, row["solution"]),
            (i, _final(answer)),
            (i, other["solution"] + "\n" + _final(_boxed(other["solution"]))),
            (i, _final(_equivalent(answer))),
            (i, _final(broken[i % 3].format(a=answer))),
        ]
    return pairs


def _evalflow_side(rows: list[dict[str, Any]], pairs: list[tuple[int, str]]) -> dict[str, Any]:
    import datasets

    from evalflow.taskspec.format.loader import function_ref, resolve_function
    from evalflow.taskspec.sidenv.worker import SideFunction

    tasks = Path(lm_eval.__file__).parent / "tasks"
    out: dict[str, Any] = {}
    for task, folder in MODULES.items():
        process_docs = resolve_function(function_ref("utils.process_docs", str(tasks / folder)))
        process_results = resolve_function(function_ref("utils.process_results", str(tasks / folder)))
        assert isinstance(process_results, SideFunction) and isinstance(process_docs, SideFunction)
        docs = list(process_docs(datasets.Dataset.from_list(rows)))
        out[task] = {"results": [process_results(docs[i], [c]) for i, c in pairs]}
    return out


def _interpreter(python: Path | str, tasks: Path, given: Path, tmp: Path, name: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(python), str(SCORER), str(tasks), str(given), str(tmp / f"{name}.json")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp,
    )


def _finished(proc: subprocess.Popen[str], out: Path) -> dict[str, Any]:
    output, _ = proc.communicate(timeout=1200)
    assert proc.returncode == 0, output[-3000:]
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def test_math_scoring_in_the_side_environment_equals_lm_evals_own(tmp_path: Path, capsys: Any) -> None:
    from evalflow.taskspec.sidenv.envs import SIDE_ENVS
    from evalflow.taskspec.sidenv.provision import ProvisionError, provision

    try:
        provision(SIDE_ENVS[0])  # where runs keep it ($EVALFLOW_SIDE_ENVS or the user cache)
    except ProvisionError as exc:
        pytest.skip(f"the side environment is not provisioned and pip cannot install it here: {exc}")
    rows = _rows()
    pairs = _pairs(rows)
    given = tmp_path / "pairs.json"
    given.write_text(json.dumps({"rows": rows, "pairs": pairs}))
    ours_tasks = Path(lm_eval.__file__).parent / "tasks"
    peer_tasks = next(PEER_PYTHON.parents[1].glob("lib/python3*/site-packages/lm_eval/tasks"))
    for folder in MODULES.values():  # the same task code on both sides
        assert (ours_tasks / folder / "utils.py").read_bytes() == (peer_tasks / folder / "utils.py").read_bytes()
    peer = _interpreter(PEER_PYTHON, peer_tasks, given, tmp_path, "peer")
    plain = _interpreter(sys.executable, ours_tasks, given, tmp_path, "plain")
    ours = _evalflow_side(rows, pairs)
    theirs, without = _finished(peer, tmp_path / "peer.json"), _finished(plain, tmp_path / "plain.json")

    lines = [f"{len(pairs)} (doc, candidate) pairs from {len(rows)} rows"]
    for task in MODULES:
        mine, ref = ours[task]["results"], theirs[task]["results"]
        assert not any("error" in r for r in ref), [r for r in ref if "error" in r][:3]
        differing = [(pairs[k], a, b) for k, (a, b) in enumerate(zip(mine, ref)) if a != b]
        assert not differing, f"{task}: {len(differing)} pairs differ from lm-eval's, e.g. {differing[:3]}"
        for metric in ref[0]:
            lines.append(
                f"{task} {metric}: {sum(r[metric] for r in ref)} equivalent, all {len(ref)} equal to lm-eval's"
            )
        plain_out = without[task]
        if "import_error" in plain_out:
            lines.append(
                f"{task} without the side environment: cannot be imported ({plain_out['import_error'][:90]}...)"
            )
        else:
            changed = {m: sum(a.get(m) != b[m] for a, b in zip(plain_out["results"], ref)) for m in ref[0]}
            lines.append(f"{task} without the side environment (antlr 4.9): pairs that differ per metric {changed}")
    assert "import_error" in without["minerva_math"]  # the mechanism is what makes minerva load
    plain_lb = without["leaderboard_math_hard"]["results"]
    assert (
        sum(
            a["exact_match_original"] != b["exact_match_original"]
            for a, b in zip(plain_lb, theirs["leaderboard_math_hard"]["results"])
        )
        > 0
    )
    with capsys.disabled():
        print("\n" + "\n".join(lines))
