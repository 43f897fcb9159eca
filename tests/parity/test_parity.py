"""evalflow with SmolLM2 against lm-eval 0.4.13 itself, on the built-in tasks, lm-eval's own task
library (``library``: its YAML read from its tasks folder) and the shared data: identical prompts,
log-likelihoods within 1e-3, identical greedy flags, per-document metrics and task and group
aggregates, and identical generations for at least 95% of each generating setting's documents.

The default scope is short (about two minutes on two cores: one run per side, loading the model
once): arc_easy, an mmlu subject and gsm8k 5-shot together. lm-eval's library is compared in the
suite by tests/taskspec/sidenv/test_side_env_math_parity.py (MATH scoring against lm-eval's own
code) and here under the full scope, whose first case (leaderboard_ifeval and a leaderboard_bbh
subtask, 3 documents, generations capped at 64 tokens on both sides) takes minutes. With
``EVALFLOW_FULL_PARITY=1`` it runs the acceptance scope (``FULL``): the classic suite takes about an
hour, issue 21's settings about two more hours on two cores shared with other jobs (5 to 19 minutes
each, lm-eval the slower side); ``benchmarks/parity.py`` runs the same and prints one verdict line
per setting.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.parity_harness import Setting, lm_eval_missing, missing, run_setting

LIB = {"library": True}  # lm-eval's own YAML from its tasks folder, the shared data map
BBH4 = (
    "leaderboard_bbh_boolean_expressions,leaderboard_bbh_date_understanding,"
    "leaderboard_bbh_object_counting,leaderboard_bbh_formal_fallacies"
)
MATH_HARD3 = "leaderboard_math_algebra_hard,leaderboard_math_counting_and_prob_hard,leaderboard_math_geometry_hard"
MINERVA3 = "minerva_math_algebra,minerva_math_geometry,minerva_math_num_theory"
BBH_COT3 = "bbh_cot_fewshot_boolean_expressions,bbh_cot_fewshot_date_understanding,bbh_cot_fewshot_object_counting"
SHORT = [  # one run per side for the classic suite (each lm-eval start indexes its whole library: ~1 CPU-minute)
    Setting("arc_easy,mmlu_high_school_geography,gsm8k", 5, 4),
]
FULL = [
    # issue 21's quick case (minutes): a generation task's ifeval scoring and a leaderboard bbh subtask
    Setting("leaderboard_ifeval,leaderboard_bbh_boolean_expressions", None, 3, max_gen_toks=64, **LIB),
    Setting("arc_easy", 0, 300),
    Setting("arc_easy", 5, 300),
    Setting("arc_challenge", 0, 300),
    Setting("arc_challenge", 5, 300),
    Setting("mmlu", 5, 10),
    Setting("gsm8k", 5, 30),
    Setting("gsm8k_cot", 8, 30),  # one few-shot prefix for every request: the shared-prefix decode path
    Setting("humaneval", 0, 30),
    Setting("mbpp", 3, 30),  # programs run: lm-eval's code_eval stand-in vs the sandbox
    # issue 21, lm-eval's library: generations capped on both sides (max_gen_toks) to fit two cores
    Setting("leaderboard_ifeval", None, 10, max_gen_toks=128, **LIB),
    Setting("ifeval", None, 5, max_gen_toks=64, **LIB),
    Setting(BBH4, None, 5, **LIB),  # answers True/False, (A)-(F), a number, valid/invalid
    Setting("leaderboard_bbh", None, 1, **LIB),  # all 24 subtasks and the group's weighted acc_norm
    Setting(BBH_COT3, None, 2, max_gen_toks=64, **LIB),
    Setting("hendrycks_math500", None, 5, max_gen_toks=64, **LIB),
    Setting("truthfulqa_mc1,truthfulqa_mc2", None, 5, **LIB),
    Setting("truthfulqa_gen", None, 5, max_gen_toks=64, **LIB),  # bleu and rouge per document
    # MATH scored with math-verify and sympy's LaTeX parser (antlr 4.11; issue 21 item 2)
    Setting(MATH_HARD3, None, 2, max_gen_toks=96, **LIB),
    Setting("leaderboard_math_hard", None, 1, max_gen_toks=96, **LIB),  # 7 subjects and the group's exact_match
    Setting(MINERVA3, None, 2, max_gen_toks=96, **LIB),  # exact_match and math_verify
    # the Open LLM Leaderboard v2 protocol for instruct models
    Setting("leaderboard_ifeval", None, 10, max_gen_toks=128, chat=True, **LIB),
    Setting("leaderboard_bbh_boolean_expressions,leaderboard_bbh_date_understanding", None, 10, chat=True, **LIB),
    Setting("leaderboard_math_algebra_hard", None, 2, max_gen_toks=96, chat=True, **LIB),
]
SETTINGS = FULL if os.environ.get("EVALFLOW_FULL_PARITY") == "1" else SHORT

pytestmark = [pytest.mark.slow, pytest.mark.skipif(missing() is not None, reason=str(missing()))]


@pytest.mark.timeout(7200)
@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name.replace(" ", "_"))
def test_same_samples_as_lm_eval(setting: Setting, tmp_path: Path) -> None:
    if setting.library and lm_eval_missing():
        pytest.skip(lm_eval_missing())
    report = run_setting(setting, tmp_path)
    details = "\n".join(
        [*(out for code, out in report.outputs.values() if code), *report.generation_diffs, *report.aggregate_diffs]
    )
    assert report.ok, f"{report.verdict}\n{details[-6000:]}"
