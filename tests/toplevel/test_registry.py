"""The one generic registry behind every extension point: built-ins by import path, imported on
first use; a taken name refused with what holds it; a miss names the closest names."""

from __future__ import annotations

import pytest

from evalflow.errors import ModelError, SandboxError, TaskError
from evalflow.models.registry import MODELS
from evalflow.registry import Registry
from evalflow.sandbox.registry import SANDBOXES
from evalflow.scoring import FILTERS


def test_builtin_paths_import_on_first_use_and_cannot_be_taken() -> None:
    reg: Registry[object] = Registry(
        "widget", error=ValueError, hint="Register one.", builtin={"od": "collections:OrderedDict"}
    )
    assert reg.names() == ("od",) and "od" in reg
    from collections import OrderedDict, defaultdict

    assert reg.get("od") is OrderedDict
    reg.add("od", OrderedDict)  # the object the path names: a re-registration, not a change
    with pytest.raises(ValueError, match=r"'od' is already registered \(collections:OrderedDict\)"):
        reg.add("od", defaultdict)
    with pytest.raises(ValueError, match=r"unknown widget 'o'; .*'od'.* Register one\."):
        reg.get("o")


def test_a_check_refuses_before_anything_is_registered() -> None:
    def positive(name: str, value: object) -> None:
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name}: not positive")

    reg: Registry[int] = Registry("number", error=ValueError, hint="", check=positive)
    with pytest.raises(ValueError, match="not positive"):
        reg.add("minus", -1)
    assert "minus" not in reg and len(reg) == 0


@pytest.mark.parametrize(
    ("registry", "error", "builtin"),
    [
        (FILTERS, TaskError, "regex"),
        (MODELS, ModelError, "hf"),
        (SANDBOXES, SandboxError, "bwrap"),
    ],
)
def test_every_extension_point_is_the_generic_registry(registry: Registry, error: type, builtin: str) -> None:
    class Impostor:  # passes every registry's own check: only the taken name refuses it
        description = "an impostor"

        def unavailable(self) -> None: ...
        def run(self) -> None: ...
        def loglikelihood(self) -> None: ...
        def loglikelihood_rolling(self) -> None: ...
        def generate_until(self) -> None: ...

    assert isinstance(registry, Registry) and builtin in registry.names()
    with pytest.raises(error, match=f"'{builtin}' is already registered"):
        registry.add(builtin, Impostor)
    with pytest.raises(error, match=f"did you mean '{builtin}'"):
        registry.get(builtin + "x")
