"""What the lm-eval front door prints and writes, in lm-eval 0.4.13's forms: the header line and
``make_table`` text on stdout, the samples files' value types, results.json's ``config`` values,
and the refusal of ``--log_samples``/``--predict_only`` without ``--output_path``. lm-eval's own
functions (installed with the dev extras) are the reference where they can be called directly."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from evalflow.errors import ConfigError
from evalflow.lmeval_compat.layout import as_tracker_writes
from evalflow.lmeval_compat.parser import parse
from evalflow.lmeval_compat.printed import header_line, make_table
from evalflow.lmeval_compat.translate import recorded_config

HERE = Path(__file__).parent
PEER_RESULTS = json.loads((HERE / "lmeval_results_hf_arc_easy.json").read_text())


def _variants() -> list[dict[str, Any]]:
    """lm-eval results of the shapes its table meets: real scores, all-integral scores (printed as
    integers by its writer), a group with members, N/A stderr."""
    zeros = copy.deepcopy(PEER_RESULTS)
    zeros["results"]["arc_easy"] = {k: 0.0 if "," in k else v for k, v in zeros["results"]["arc_easy"].items()}
    group = copy.deepcopy(PEER_RESULTS)
    group["results"]["g"] = {"alias": "g", "acc,none": 0.25, "acc_stderr,none": "N/A"}
    group["groups"] = {"g": group["results"]["g"]}
    group["group_subtasks"] = {"g": ["arc_easy"]}
    group["versions"]["g"] = 1.0
    return [PEER_RESULTS, zeros, group]


@pytest.mark.parametrize("results", _variants(), ids=["scores", "integral", "group"])
def test_make_table_is_lm_evals_text(results: dict[str, Any]) -> None:
    lm_eval_utils = pytest.importorskip("lm_eval.utils")
    assert make_table(results) == lm_eval_utils.make_table(copy.deepcopy(results))
    if "groups" in results:
        assert make_table(results, "groups") == lm_eval_utils.make_table(copy.deepcopy(results), "groups")


def test_header_line_is_lm_evals() -> None:
    ns = parse(["--model", "hf", "--model_args", "pretrained=org/m,trust_remote_code=True", "--tasks", "t"])
    ns.limit, ns.gen_kwargs = "10", ["max_gen_toks=20"]
    results = {"config": recorded_config(ns)}
    assert header_line(ns, {"pretrained": "org/m", "trust_remote_code": True}, results) == (
        "hf ({'pretrained': 'org/m'}), gen_kwargs: ({'max_gen_toks': 20}), "
        "limit: 10.0, num_fewshot: None, batch_size: 1"
    )


@pytest.mark.parametrize("flag", ["--log_samples", "--predict_only"])
def test_samples_without_output_path_are_refused_before_any_model(flag: str, monkeypatch) -> None:
    import evalflow.commands.lm_eval as command

    monkeypatch.setattr(command, "execute", lambda *a, **k: pytest.fail("a model ran"))
    with pytest.raises(ConfigError, match="Specify --output_path if providing --log_samples or --predict_only"):
        command.main(["--model", "dummy", "--tasks", "t", flag])


def test_samples_rows_as_lm_evals_tracker_writes_them() -> None:
    lm_eval_utils = pytest.importorskip("lm_eval.utils")
    row = {
        "doc_id": 0,
        "target": 2,
        "resps": [[[-2.5, False]], [[-0.25, True]]],
        "filtered_resps": [[-2.5, False], [-0.25, True]],
        "acc": 1.0,
    }
    written = as_tracker_writes(row)
    assert written["resps"] == lm_eval_utils.sanitize_list(row["resps"]) == [[["-2.5", "False"]], [["-0.25", "True"]]]
    assert written["filtered_resps"] == lm_eval_utils.sanitize_list(row["filtered_resps"])
    assert written["target"] == "2" and written["acc"] == 1.0  # metric values stay numbers, as lm-eval's
    assert as_tracker_writes({**row, "target": ["a", "b"]})["target"] == str(["a", "b"])


def test_config_values_typed_as_lm_evals_command_line_records_them() -> None:
    given = recorded_config(parse(["--tasks", "t", "--limit", "10", "--batch_size", "4", "--use_cache", "c"]))
    assert (given["limit"], given["batch_size"], given["use_cache"], given["batch_sizes"]) == (10.0, "4", "c", [])
    assert given["fewshot_as_multiturn"] is None and given["gen_kwargs"] == {}
    default = recorded_config(parse(["--tasks", "t"]))
    assert (default["limit"], default["batch_size"], default["use_cache"]) == (None, 1, None)
    assert recorded_config(parse(["--tasks", "t", "--apply_chat_template"]))["fewshot_as_multiturn"] is True


def test_gen_kwargs_are_merged_into_a_generate_until_tasks_config() -> None:
    from evalflow.output.results import lmeval_task_config
    from evalflow.taskspec.format.spec import TaskConfig

    task = TaskConfig(
        task="g",
        output_type="generate_until",
        doc_to_text="{{q}}",
        generation_kwargs={"until": ["\n"], "do_sample": False},
    )
    config = lmeval_task_config(task, 0, {"max_gen_toks": 20})
    assert config["generation_kwargs"] == {"until": ["\n"], "do_sample": False, "max_gen_toks": 20}


def test_a_chat_apis_prompt_is_written_as_lm_evals_json_chat_str() -> None:
    """lm-eval's API models hold a chat-templated prompt as ``JsonChatStr`` (a NamedTuple), which
    its tracker's JSON writes as a one-item list: so does the front door's samples file."""
    api_models = pytest.importorskip("lm_eval.models.api_models")
    prompt = json.dumps([{"role": "user", "content": "2+2?"}])
    row = {"doc_id": 0, "target": "4", "resps": [["4"]], "filtered_resps": ["4"]}
    row["arguments"] = {"gen_args_0": {"arg_0": prompt, "arg_1": {"until": ["\n"]}}}
    theirs = json.loads(json.dumps({"arg_0": api_models.JsonChatStr(prompt)}))["arg_0"]
    assert as_tracker_writes(row, chat_prompts=True)["arguments"]["gen_args_0"]["arg_0"] == theirs == [prompt]
    assert as_tracker_writes(row)["arguments"]["gen_args_0"]["arg_0"] == prompt  # a rendered prompt: text
