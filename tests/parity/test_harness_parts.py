"""The parity harness's own logic, offline: the command lines each side gets for a setting, which
documents count as generations, and the aggregate comparison of two results files. A harness that
compared nothing would report parity for anything, so these pin what it compares."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.parity_aggregates import aggregate_differences, groups_of
from tests.support.parity_harness import Report, Setting, generated_texts, generation_differences


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_both_sides_get_the_same_cap_and_chat_protocol() -> None:
    setting = Setting("leaderboard_ifeval", None, 5, library=True, max_gen_toks=64, chat=True)
    peer, ours = setting.peer_args(), setting.evalflow_args()
    assert peer[peer.index("--gen_kwargs") + 1] == "max_gen_toks=64"
    assert {"--apply_chat_template", "--fewshot_as_multiturn"} <= set(peer) and "--num_fewshot" not in peer
    assert "gen_kwargs={max_gen_toks: 64}" in ours
    assert {"apply_chat_template=true", "fewshot_as_multiturn=true", "trust_task_code=true"} <= set(ours)
    assert any(a.startswith("include_path=") and a.endswith("tasks") for a in ours)
    assert any(a.endswith("lm_eval_tasks_map.yaml") for a in ours)
    assert not any(a.startswith("num_fewshot=") for a in ours)
    assert "," not in setting.slug and "=" not in setting.slug


def test_a_builtin_setting_keeps_its_old_arguments() -> None:
    setting = Setting("arc_easy", 0, 20)
    assert setting.peer_args() == ["--limit", "20", "--batch_size", "8", "--num_fewshot", "0"]
    assert setting.evalflow_args() == ["task=arc_easy", "limit=20", "batch_size=8", "num_fewshot=0", "data_map=shared"]


def test_generations_are_read_from_one_filter_and_loglikelihoods_are_not_generations(tmp_path: Path) -> None:
    gen = [
        {"doc_id": d, "filter": f, "resps": [[f"text {d}"]]}
        for d in (0, 1)
        for f in ("strict-match", "flexible-extract")
    ]
    assert generated_texts(write_jsonl(tmp_path / "g.jsonl", gen)) == {0: "text 0", 1: "text 1"}
    ll = [{"doc_id": 0, "filter": "none", "resps": [[["-1.5", "False"]], [["-0.5", "True"]]]}]
    assert generated_texts(write_jsonl(tmp_path / "l.jsonl", ll)) is None
    assert generation_differences(tmp_path / "l.jsonl", tmp_path / "l.jsonl") == (0, [])


def test_a_differing_generation_is_located(tmp_path: Path) -> None:
    ref = write_jsonl(tmp_path / "r.jsonl", [{"doc_id": 3, "filter": "none", "resps": [["The answer is 4."]]}])
    cand = write_jsonl(tmp_path / "c.jsonl", [{"doc_id": 3, "filter": "none", "resps": [["The answer is 5."]]}])
    n, diffs = generation_differences(ref, cand)
    assert n == 1 and len(diffs) == 1 and "agree for 14 characters" in diffs[0] and "'4.'" in diffs[0]


def results(path: Path, acc_a: float, group: float | None) -> Path:
    data = {
        "results": {
            "t_a": {"alias": "t_a", "acc_norm,none": acc_a, "acc_norm_stderr,none": 0.1},
            "t_b": {"acc_norm,none": 0.25, "acc_norm_stderr,none": "N/A"},
        },
        "groups": {} if group is None else {"g": {"acc_norm,none": group, "acc_norm_stderr,none": 0.2}},
    }
    path.write_text(json.dumps(data))
    return path


def test_aggregates_compare_tasks_and_groups_but_not_stderr(tmp_path: Path) -> None:
    ref = results(tmp_path / "ref.json", 0.5, 0.375)
    assert aggregate_differences(ref, results(tmp_path / "same.json", 0.5 + 1e-12, 0.375)) == ([], [], 3)
    diffs, close, compared = aggregate_differences(ref, results(tmp_path / "other.json", 0.6, None))
    assert compared == 3 and len(diffs) == 2 and not close
    assert diffs[0].startswith("results t_a acc_norm,none: lm-eval 0.5, evalflow 0.6")
    assert diffs[1] == "groups g acc_norm,none: lm-eval 0.375, evalflow has no value"
    assert groups_of(ref) == ["g"]


def test_a_mean_of_loglikelihood_values_agrees_within_their_tolerance(tmp_path: Path) -> None:
    """truthfulqa_mc2's acc is computed from log-likelihoods that agree within 1e-3, not exactly."""
    ref = results(tmp_path / "ref.json", 0.4109879887314964, 0.375)
    diffs, close, _ = aggregate_differences(ref, results(tmp_path / "near.json", 0.41098793563045577, 0.375))
    assert not diffs and len(close) == 1 and close[0].startswith("results t_a acc_norm,none")
    diffs, close, _ = aggregate_differences(ref, results(tmp_path / "far.json", 0.4129, 0.375))
    assert len(diffs) == 1 and not close


def test_a_report_fails_on_an_aggregate_or_too_many_differing_generations() -> None:
    report = Report(Setting("t", 0, 20), outputs={"t": (0, "PARITY OK")}, aggregates=1, documents=20)
    assert report.ok
    report.generation_diffs = ["doc 1: ..."]
    assert report.ok  # 19/20 identical is the 95% bar
    report.generation_diffs = ["doc 1: ...", "doc 2: ..."]
    assert not report.ok
    assert not Report(Setting("t", 0, 20), outputs={"t": (0, "")}, aggregates=1, aggregate_diffs=["x"]).ok
    near = Report(Setting("t", 0, 20), outputs={"t": (0, "")}, aggregates=2, aggregate_close=["x"])
    assert near.ok and "aggregates 1/2 identical + 1 within 1e-3" in near.verdict
    assert not Report(Setting("t", 0, 20), outputs={"t": (0, "")}, aggregates=0).ok
