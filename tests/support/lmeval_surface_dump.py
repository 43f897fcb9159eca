"""lm-eval 0.4.13's user surface as it declares it, read from the peer venv's lm_eval: its command
line's subcommands and flags (argparse), its registered model types, each model class's keyword
arguments, and ``simple_evaluate``'s and ``TaskManager``'s parameters. It is the snapshot
evalflow/lmeval_compat/lmeval_surface.yaml, from which the surface table is generated (the docs
build and the generator need no peer venv); tests/lmeval_compat/test_surface.py re-dumps it and
fails when lm-eval's surface and the snapshot differ.

    python -m tests.support.lmeval_surface_dump     # (re)writes the snapshot from the peer venv

As a script (run by the peer venv's python): prints the surface as JSON.

The model classes are read from their source (``ast``), not imported: several need engines the
peer venv lacks (vllm, sglang, ...). A class's arguments are its ``__init__``'s named parameters,
plus its base's when ``**kwargs`` goes on to ``super().__init__`` (less those that call sets);
``extra`` says whether other keywords go somewhere else (``vllm.LLM``, ``from_pretrained``, ...).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).resolve().parents[2] / "evalflow" / "lmeval_compat" / "lmeval_surface.yaml"


def dump() -> dict[str, Any]:
    """The surface, as the peer venv's lm_eval declares it (its python run in a subprocess)."""
    from tests.support.parity_harness import PEER_VENV

    proc = subprocess.run(
        [str(PEER_VENV / "bin" / "python"), __file__], capture_output=True, text=True, check=False, timeout=300
    )
    if proc.returncode != 0:
        raise RuntimeError(f"dumping lm-eval's surface failed:\n{proc.stderr[-4000:]}")
    return dict(json.loads(proc.stdout))


def write_snapshot(path: Path = SNAPSHOT) -> None:
    import yaml

    header = "# lm-eval 0.4.13's user surface, dumped from its source by python -m tests.support.lmeval_surface_dump\n"
    path.write_text(
        header + yaml.safe_dump(dump(), sort_keys=False, width=110, default_flow_style=None), encoding="utf-8"
    )


# --- run by the peer venv's python ---------------------------------------------------------------


def _cli() -> dict[str, Any]:
    """Each subcommand's arguments: option strings (long name first) or a positional's name."""
    from lm_eval._cli.harness import HarnessCLI

    out: dict[str, Any] = {}
    for name, sub in HarnessCLI()._subparsers.choices.items():
        words = []
        for action in sub._actions:
            if action.dest == "help":
                continue
            names = sorted(action.option_strings, key=lambda s: (not s.startswith("--"), s))
            words.append(names or [action.dest])
        out[name] = words
    return out


class _Source:
    """Model classes found in lm_eval's modules by their source."""

    def __init__(self) -> None:
        self._trees: dict[str, ast.Module] = {}

    def tree(self, module: str) -> ast.Module:
        if module not in self._trees:
            spec = importlib.util.find_spec(module)
            assert spec is not None and spec.origin is not None, module
            self._trees[module] = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
        return self._trees[module]

    def registered(self, module: str, alias: str) -> str | None:
        """The class of ``module`` that ``@register_model(..., alias, ...)`` decorates."""
        for node in self.tree(module).body:
            if isinstance(node, ast.ClassDef) and any(
                isinstance(d, ast.Call) and any(isinstance(a, ast.Constant) and a.value == alias for a in d.args)
                for d in node.decorator_list
            ):
                return node.name
        return None

    def resolve(self, module: str, name: str) -> tuple[str, str] | None:
        """Where the class ``name`` seen in ``module`` is defined, if inside lm_eval."""
        tree = self.tree(module)
        if any(isinstance(n, ast.ClassDef) and n.name == name for n in tree.body):
            return module, name
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lm_eval"):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        return node.module, alias.name
        return None

    def args(self, module: str, name: str) -> tuple[list[str], bool]:
        """The class's keyword arguments, and whether it takes others it passes elsewhere."""
        cls = next(n for n in self.tree(module).body if isinstance(n, ast.ClassDef) and n.name == name)
        bases = [self.resolve(module, b.id) for b in cls.bases if isinstance(b, ast.Name)]
        base = next((b for b in bases if b is not None), None)
        init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is None:
            return self.args(*base) if base else ([], False)
        params = [a.arg for a in [*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs][1:]]
        kwargs = init.args.kwarg.arg if init.args.kwarg else None
        if kwargs is None:
            return params, False
        call = next((c for c in ast.walk(init) if _is_super_init(c) and _passes(c, kwargs)), None)
        uses = sum(isinstance(n, ast.Name) and n.id == kwargs for n in ast.walk(init))
        if call is None or base is None:
            return params, True
        base_params, base_extra = self.args(*base)
        taken = {k.arg for k in call.keywords if k.arg} | set(base_params[: len(call.args)])
        more = [p for p in base_params if p not in taken and p not in params]
        return params + more, base_extra or uses > 1


def _is_super_init(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "__init__"
        and isinstance(node.func.value, (ast.Call, ast.Name))
    )


def _passes(call: ast.Call, kwargs: str) -> bool:
    return any(k.arg is None and isinstance(k.value, ast.Name) and k.value.id == kwargs for k in call.keywords)


def _target(obj: Any) -> str:
    """A registry entry as ``module:Class`` (a placeholder string, an entry point, or the class)."""
    if isinstance(obj, str):
        return obj
    return str(getattr(obj, "value", None) or f"{obj.__module__}:{obj.__name__}")


def _parameters(func: Any) -> list[str]:
    import inspect

    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p.name for p in inspect.signature(func).parameters.values() if p.kind in kinds and p.name != "self"]


def surface() -> dict[str, Any]:
    """The whole surface (run in the peer venv)."""
    import lm_eval
    import lm_eval.models  # registers every model type (lazily: module:Class placeholders)
    from lm_eval.api.registry import model_registry
    from lm_eval.evaluator import simple_evaluate
    from lm_eval.tasks import TaskManager

    source = _Source()
    models: dict[str, str] = {}
    classes: dict[str, dict[str, Any]] = {}
    for name, target in model_registry._objs.items():
        module, cls = _target(target).split(":")
        cls = source.registered(module, name) or cls  # a few placeholders name a class the module lacks
        models[name] = cls
        if cls not in classes:
            args, extra = source.args(module, cls)
            classes[cls] = {"module": module, "args": args, "extra": extra}
    return {
        "lm_eval_version": lm_eval.__version__,
        "subcommands": _cli(),
        "models": models,
        "classes": classes,
        "simple_evaluate": _parameters(simple_evaluate),
        "task_manager": _parameters(TaskManager.__init__),
    }


if __name__ == "__main__" and not __package__:  # the peer venv's python, run on this file
    print(json.dumps(surface()))
elif __name__ == "__main__":  # python -m tests.support.lmeval_surface_dump
    write_snapshot()
    print(SNAPSHOT)
    sys.exit(0)
