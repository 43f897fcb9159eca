"""The model contract (models/protocol.py) and the model registry: declared defaults that duck-typed
models get too, names taken once, and the model's code in its identity."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

import evalflow.cache.fingerprint as fingerprint_module
from evalflow.core.records import Request
from evalflow.errors import ModelError
from evalflow.models import registry
from evalflow.models.dummy import DummyModel
from evalflow.models.protocol import LanguageModel, feature
from tests.support.models import UserModel

REQUESTS = [Request("loglikelihood", ("2+2=", " 4")), Request("loglikelihood", ("2+2=", " 5"))]


def test_a_duck_typed_model_gets_the_contracts_defaults() -> None:
    model = UserModel()
    assert not isinstance(model, LanguageModel)
    assert feature(UserModel, "RUN_SETTINGS") == () and feature(UserModel, "CHAT_MESSAGES") is False
    assert feature(UserModel, "ANSWERS_EACH") is False and feature(UserModel, "CODE") == ()
    assert feature(UserModel, "identity")(salt="x") is None and feature(model, "identity")() is None
    assert feature(model, "describe")() is None
    assert feature(UserModel, "chat_template_source")({"type": "x", "pretrained": "p"}) == {
        "type": "x",
        "pretrained": "p",
    }
    got: dict[int, Any] = {}
    feature(model, "answer_each")("loglikelihood", REQUESTS, got.__setitem__)
    assert [got[i] for i in range(2)] == model.loglikelihood(REQUESTS)


def test_declared_features_override_the_defaults() -> None:
    from evalflow.models.api.chat_model import OpenAIChat
    from evalflow.models.hf import HFModel

    assert feature(HFModel, "RUN_SETTINGS") == ("batch_size", "max_batch_size")
    assert feature(OpenAIChat, "CHAT_MESSAGES") is True and feature(OpenAIChat, "ANSWERS_EACH") is True
    assert feature(DummyModel, "RUN_SETTINGS") == () and feature(DummyModel, "identity")()["type"] == "dummy"
    with pytest.raises(AttributeError, match="not a feature"):
        feature(DummyModel, "RUN_BATCH_SIZE")


class Mine(DummyModel):
    pass


class Other(DummyModel):
    pass


def test_the_registry_refuses_a_taken_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry.MODELS, "_objects", {})
    registry.register_model("mine_for_test")(Mine)
    registry.register_model("mine_for_test")(Mine)  # the same class again (a reloaded module): fine
    assert registry.model_class("mine_for_test") is Mine
    with pytest.raises(ModelError, match="'mine_for_test' is already registered"):
        registry.register_model("mine_for_test")(Other)
    with pytest.raises(ModelError, match="'hf' is already registered"):
        registry.register_model("hf")(Other)
    with pytest.raises(ModelError, match="not a model class"):
        registry.register_model("not_a_model")(dict)
    assert registry.model_class("mine_for_test") is Mine and "hf" in registry.model_names()


def test_builtin_identities_hash_the_code_that_computes_the_answers() -> None:
    from evalflow.models.api.completions import OpenAICompletions
    from evalflow.models.hf import HFModel

    def names(cls: type) -> set[str]:
        return {str(Path(p).relative_to(Path(registry.__file__).parent)) for p in registry.code_files(cls)}

    assert names(HFModel) == {  # the semantic modules only: not hf/fast/ (the speed engine), not hf/vlm/
        "protocol.py",
        "hf/hf_model.py",
        "hf/load.py",
        "hf/lmeval_args.py",
        "hf/adapters.py",
        "hf/answer_key.py",
        "hf/gguf_memo.py",
        "hf/identity.py",
        "hf/batching.py",
        "hf/engine.py",
        "hf/score.py",
        "hf/generate.py",
        "hf/finish.py",
        "hf/torch_ops.py",
        "lmeval_tokens.py",
    }
    assert {"api/payloads.py", "api/tokens.py", "api/completions.py", "lmeval_tokens.py", "protocol.py"} <= names(
        OpenAICompletions
    )
    assert names(DummyModel) == {"dummy.py", "protocol.py"}
    assert registry.model_identity({"type": "dummy"})["code"] == registry.model_code_hash(DummyModel)


def test_editing_a_declared_code_module_changes_the_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "engine_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "passes.py").write_text("SCALE = 1.0\n")
    (pkg / "model.py").write_text(
        "from evalflow.models.dummy import DummyModel\nclass Engine(DummyModel):\n    CODE = ('engine_pkg',)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    before = registry.model_identity({"type": "engine_pkg.model:Engine"})["code"]
    (pkg / "passes.py").write_text("SCALE = 2.0  # a fix to a helper the class never imports at load\n")
    after = registry.model_identity({"type": "engine_pkg.model:Engine"})["code"]
    assert before != after
    for name in [m for m in sys.modules if m.startswith("engine_pkg")]:
        monkeypatch.delitem(sys.modules, name)


def test_the_code_hash_is_memoized(monkeypatch: pytest.MonkeyPatch) -> None:
    from evalflow.models.hf import HFModel

    registry.model_code_hash(HFModel)
    opened: list[str] = []
    real_open = open

    def counting_open(path: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(fingerprint_module, "open", counting_open, raising=False)
    monkeypatch.setattr(registry.inspect, "getsourcefile", lambda _: pytest.fail("the file list is memoized"))
    registry.model_code_hash(HFModel)
    assert opened == [], "unchanged files are not read again"
