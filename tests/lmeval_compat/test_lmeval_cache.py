"""lm-eval's cache flags at the front door, and lm-eval model objects' answers in evalflow's cache.

lm-eval reads cached answers only with ``--use_cache PATH``; so does ``evalflow lm-eval``
(``cache_dir=PATH``), and without it computes every answer anew (``recompute=answers``). An lm-eval
HFLM handed to ``simple_evaluate`` is cached under what it loaded (evalflow.models.lm_objects);
another lm-eval model is not, and the run says why once.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from evalflow import simple_evaluate
from evalflow.lmeval_compat.parser import parse
from evalflow.lmeval_compat.translate import translate
from tests.support.cli import cli


def test_use_cache_is_the_cache_folder_and_without_it_answers_are_computed_anew() -> None:
    given = translate(parse(["--model", "dummy", "--tasks", "t", "--use_cache", "/c"]))
    assert "cache_dir=/c" in given.overrides and not any(o.startswith("recompute=") for o in given.overrides)
    assert any(
        n.startswith("--use_cache /c: model answers are read from and written to this folder") for n in given.notes
    )
    absent = translate(parse(["--model", "dummy", "--tasks", "t"]))
    assert "recompute=answers" in absent.overrides and "recompute=answers" in absent.native()
    assert not any(o.startswith("cache_dir=") for o in absent.overrides)


def test_lm_eval_command_prints_where_answers_came_from(toy_library: Path, tmp_path: Path) -> None:
    args = [
        "lm-eval",
        "--model",
        "dummy",
        "--tasks",
        "toy_mc",
        "--include_path",
        str(toy_library),
        "--limit",
        "3",
        "--bootstrap_iters",
        "0",
    ]
    default = tmp_path / "default-cache"
    fresh = cli(args, env_extra={"EVALFLOW_CACHE": str(default)}, cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    assert (
        f"cache: 0 of 12 model answers read (no --use_cache: computed anew, as lm-eval does), 12 computed and "
        f"written to the cache {default}"
    ) in fresh.stderr.splitlines()
    cached = cli([*args, "--use_cache", str(default)], cwd=tmp_path)
    assert cached.returncode == 0, cached.stderr
    assert (
        f"cache: 12 of 12 model answers read from the cache {default}, 0 computed (leave out --use_cache to "
        "compute them anew)"
    ) in cached.stderr.splitlines()


@pytest.fixture(scope="module")
def tiny_hf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("lm_eval.models.huggingface")
    from tests.support.tiny_models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_hflm"), add_bos=True)


def hflm(folder: Path, **kwargs: Any) -> Any:
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=str(folder), device="cpu", **{"dtype": "float32", **kwargs})


def run(model: Any, folder: Path, library: Path, **kwargs: Any) -> dict:
    """simple_evaluate on toy_mc; returns the run's manifest."""
    simple_evaluate(
        model=model,
        tasks=["toy_mc"],
        include_path=str(library),
        limit=3,
        bootstrap_iters=0,
        output_dir=str(folder),
        **kwargs,
    )
    return json.loads((folder / "manifest.json").read_text())


def answers(manifest: dict) -> tuple[int, int]:
    return manifest["inference"]["cached"], manifest["inference"]["computed"]


def test_an_hflm_is_cached_under_what_it_loaded(
    tiny_hf: Path, toy_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalflow.models.lm_objects import lm_identity

    lm = hflm(tiny_hf)
    cache = str(tmp_path / "c")
    first = run(lm, tmp_path / "r1", toy_library, use_cache=cache)
    assert answers(first) == (0, 12) and first["model_identity"]["backend"] == "lm-eval-HFLM"
    again = hflm(tiny_hf)  # another object loading the same model: the same identity
    assert lm_identity(again) == lm_identity(lm)
    monkeypatch.setattr(again, "loglikelihood", lambda requests: pytest.fail("a cached run called the model"))
    assert answers(run(again, tmp_path / "r2", toy_library, use_cache=cache)) == (12, 0)
    monkeypatch.setenv("EVALFLOW_CACHE", cache)  # the default cache, where answers are still written
    fresh = run(lm, tmp_path / "r3", toy_library)  # no use_cache: computed anew, as lm-eval computes them
    assert answers(fresh) == (0, 12) and (fresh["cache_dir"], fresh["recompute"]) == (cache, "answers")
    for changed in (hflm(tiny_hf, dtype="bfloat16"), hflm(tiny_hf, add_bos_token=True), hflm(tiny_hf, max_length=64)):
        assert lm_identity(changed)[0] != lm_identity(lm)[0]
    assert lm_identity(hflm(tiny_hf, batch_size=4))[0] == lm_identity(lm)[0]  # how many at once changes no answer


def test_another_lm_eval_model_is_not_cached_and_the_run_says_why_once(
    toy_library: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("lm_eval.api.model")
    from lm_eval.api.model import LM

    from tests.support.models import IdentitylessModel

    class MyLM(IdentitylessModel, LM):  # an lm-eval LM subclass evalflow knows nothing of
        pass

    cache = str(tmp_path / "c")
    with caplog.at_level(logging.WARNING, logger="evalflow"):
        run(MyLM(), tmp_path / "r1", toy_library, use_cache=cache)
    warned = [r.getMessage() for r in caplog.records if "never cached" in r.getMessage()]
    assert len(warned) == 1 and "is an lm-eval model (lm_eval.api.model.LM)" in warned[0]
    second = run(MyLM(), tmp_path / "r2", toy_library, use_cache=cache)
    assert answers(second) == (0, 12) and second["model_identity"] is None
