"""evaluate() from Python: presets, config mappings and model objects of the user's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalflow import evaluate
from evalflow.errors import ConfigError
from tests.support.models import UserModel


class MyModel(UserModel):
    """A user's model: only the three request types, plus an identity for caching."""

    def identity(self) -> dict[str, Any]:
        return {"name": "my-model", "version": 1}


def test_evaluate_with_a_model_object_caches_by_its_identity(toy_library: Path, tmp_path: Path) -> None:
    model = MyModel()
    kw = dict(include_path=[str(toy_library)], cache_dir=str(tmp_path / "c"), limit=8, bootstrap_iters=0)
    first = evaluate("toy_mc", model, **kw)
    assert model.calls == 8 * 4
    second = evaluate("toy_mc", model, **kw)
    assert model.calls == 8 * 4 and second["results"] == first["results"]
    assert 0 <= first["results"]["toy_mc"]["acc,none"] <= 1


def test_evaluate_with_a_config_mapping_and_output_dir(toy_library: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    results = evaluate(
        ["toy_mc", "toy_gen"],
        {"type": "dummy", "salt": "x"},
        output_dir=out,
        include_path=[str(toy_library)],
        cache_dir=str(tmp_path / "c"),
        bootstrap_iters=0,
    )
    assert set(results["results"]) == {"toy_mc", "toy_gen"}
    assert "exact_match,get-answer" in results["results"]["toy_gen"]
    assert (out / "results.json").exists() and (out / "samples_toy_gen.jsonl").exists()


def test_unknown_setting_is_refused(toy_library: Path) -> None:
    with pytest.raises(ConfigError, match="num_fewshots"):
        evaluate("toy_mc", "dummy", num_fewshots=3)
