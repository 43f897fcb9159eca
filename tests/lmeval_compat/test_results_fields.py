"""results.json's fields that lm-eval 0.4.13 derives from the task config, the tokenizer and the
environment, checked against lm-eval's own functions on the same inputs (lm-eval's core package is
a dev dependency: ``lm-eval-tasks``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from evalflow.output import environment
from evalflow.output.model_info import lm_eval_fields
from evalflow.output.results import lmeval_task_config
from evalflow.taskspec.format.loader import task_from_dict

lm_eval_task = pytest.importorskip("lm_eval.config.task")

DATA = {"dataset_path": "json", "dataset_kwargs": {"data_files": {"test": "/data/test.jsonl"}}, "test_split": "test"}
SHAPES = {
    "multiple choice": {
        "task": "mc",
        "tag": ["suite"],
        **DATA,
        "output_type": "multiple_choice",
        "doc_to_text": "{{q}}",
        "doc_to_target": 0,
        "doc_to_choice": ["a", "b"],
        "metric_list": [{"metric": "acc"}],
        "metadata": {"version": 2.0},
    },
    "generation": {
        "task": "gen",
        **DATA,
        "training_split": "test",
        "doc_to_text": "Q: {{q}}\nA:",
        "doc_to_target": "{{a}}",
        "generation_kwargs": {"until": ["\n"], "do_sample": False},
        "filter_list": [{"name": "first", "filter": [{"function": "take_first"}]}],
        "fewshot_config": {"sampler": "first_n"},
        "metric_list": [{"metric": "exact_match"}],
    },
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_task_configs_are_dumped_as_lm_evals_task_config(shape: str) -> None:
    raw = SHAPES[shape]
    ours = lmeval_task_config(task_from_dict(copy.deepcopy(raw), "/lib/t.yaml"), 3)
    cfg = {k: v for k, v in copy.deepcopy(raw).items() if k != "tag"}  # lm-eval's factory drops tag
    cfg["metadata"] = {**cfg.get("metadata", {}), "config_source": "/lib/t.yaml"}
    theirs = lm_eval_task.TaskConfig(**cfg, num_fewshot=3).to_dict()
    assert list(ours) == list(theirs)
    assert json.loads(json.dumps(ours)) == json.loads(json.dumps(theirs, default=str))


def test_a_local_completions_tokenizer_gives_lm_evals_tokenizer_fields(tmp_path: Path) -> None:
    from lm_eval.loggers.utils import add_tokenizer_info
    from transformers import AutoTokenizer

    from tests.support.tiny_models import build_tiny_model

    tiny_model_dir = build_tiny_model(tmp_path / "tiny", add_bos=True)
    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    theirs: dict = {}
    add_tokenizer_info(theirs, SimpleNamespace(tokenizer=tok, eot_token_id=tok.eos_token_id, max_length=1024 - 1))
    top, config = lm_eval_fields(
        {"type": "openai_completions", "model": "m", "tokenizer": str(tiny_model_dir), "max_length": 1024}
    )
    assert top == theirs and config == {}  # lm-eval's API models have no get_model_info
    assert lm_eval_fields({"type": "openai_chat", "model": "m"}) == ({}, {})  # its tokenizer backend is off


def test_a_vllm_model_gives_lm_evals_tokenizer_fields(tmp_path: Path) -> None:
    """lm-eval's VLLM: add_tokenizer_info over its tokenizer (pad token configured), max_length the
    window set or the model config's; no get_model_info."""
    from lm_eval.loggers.utils import add_tokenizer_info
    from lm_eval.models.utils import configure_pad_token
    from transformers import AutoConfig, AutoTokenizer

    from tests.support.tiny_models import build_tiny_model

    folder = build_tiny_model(tmp_path / "tiny", add_bos=True)
    tok = configure_pad_token(AutoTokenizer.from_pretrained(str(folder)))
    for window, expected in ((512, 512), (None, AutoConfig.from_pretrained(str(folder)).max_position_embeddings)):
        theirs: dict = {}
        add_tokenizer_info(theirs, SimpleNamespace(tokenizer=tok, eot_token_id=tok.eos_token_id, max_length=expected))
        top, config = lm_eval_fields({"type": "vllm", "pretrained": str(folder), "max_model_len": window})
        assert top == theirs and config == {}


def test_the_environment_report_is_memoized_until_the_environment_changes(tmp_path, monkeypatch) -> None:
    import torch.utils.collect_env

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    reports: list[str] = []
    monkeypatch.setattr(
        torch.utils.collect_env, "get_pretty_env_info", lambda: reports.append("r") or f"report {len(reports)}"
    )
    assert environment.pretty_env_info() == "report 1" == environment.pretty_env_info()
    real_key = environment._environment_key
    monkeypatch.setattr(environment, "_environment_key", lambda: (*real_key(), "another package installed"))
    assert environment.pretty_env_info() == "report 2" and len(reports) == 2


def test_the_environment_key_ignores_vendored_copies_but_not_installs(tmp_path, monkeypatch) -> None:
    """Importing setuptools puts setuptools/_vendor on sys.path (vLLM's engine does), importing Ray
    ray/thirdparty_files (vLLM does where Ray is installed): the same environment, so the same
    report; a distribution really added is a new one."""
    import sys

    def folder_with_a_distribution(folder: Path) -> str:
        (folder / "extra-1.0.dist-info").mkdir(parents=True)
        (folder / "extra-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: extra\nVersion: 1.0\n")
        return str(folder)

    site = tmp_path / "venv" / "site-packages"
    site.mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    before = environment._environment_key()
    for vendored in ("setuptools/_vendor", "ray/thirdparty_files"):
        monkeypatch.setattr(sys, "path", [*sys.path, folder_with_a_distribution(site / vendored)])
        assert environment._environment_key() == before, vendored
    monkeypatch.setattr(sys, "path", [*sys.path, folder_with_a_distribution(tmp_path / "site")])
    assert environment._environment_key() != before


def test_upper_git_hash_reads_head_as_lm_eval_does(tmp_path: Path) -> None:
    from lm_eval.loggers.utils import get_commit_from_path

    plain, linked, none = tmp_path / "plain", tmp_path / "linked", tmp_path / "none"
    (plain / ".git" / "refs" / "heads").mkdir(parents=True)
    (plain / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (plain / ".git" / "refs" / "heads" / "main").write_text("0123abcd\n")
    linked.mkdir()
    (linked / ".git").write_text("gitdir: ../plain/.git\n")  # a submodule's or worktree's pointer file
    none.mkdir()
    for repo in (plain, linked, none):
        assert environment.commit_of(repo) == get_commit_from_path(repo)
    assert environment.commit_of(plain) == "0123abcd" and environment.commit_of(none) is None
