"""lm-eval 0.4.13's whole user surface, row by row, marked by what evalflow's front door does with
each word: docs/lm-eval-surface.md, generated here.

lm-eval's surface is the snapshot ``lmeval_surface.yaml`` beside this module (its subcommands and
flags, model types, each model class's arguments, ``simple_evaluate``'s and ``TaskManager``'s
parameters, dumped from lm-eval's source by ``python -m tests.support.lmeval_surface_dump``; a slow
test re-dumps it from the peer venv). Each row's mark comes from the front door's declarations, so a
flag un-refused, a model type mapped or a key added to a preset changes the table when it is
regenerated (``python -m evalflow.lmeval_compat.surface``; tests/lmeval_compat/test_surface.py fails
when the page is stale):

- *same*: taken under lm-eval's name with lm-eval's meaning;
- *mapped*: turned into an evalflow setting (named in the row);
- *differs*: accepted, with a declared difference (``FLAG_DIFFERENCES``, ``ModelMap.differs``, ...);
- *refused*: refused before any model call, with the paragraph the front door gives.

Model types and model arguments are marked by asking the front door itself (:func:`translate` on
``--model NAME --model_args {"KEY": ...}``), so a row says what a user would see.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalflow.config.packaged import package_dir
from evalflow.errors import ConfigError
from evalflow.lmeval_compat import evaluate, parser, translate
from evalflow.lmeval_compat.args import RUN_MODEL_ARGS
from evalflow.lmeval_compat.model_map import MODELS
from evalflow.lmeval_compat.task_manager import TASK_MANAGER_ARGS
from evalflow.lmeval_compat.thinking_args import RUN_SETTING_OF

SNAPSHOT = package_dir() / "lmeval_compat" / "lmeval_surface.yaml"
MARKS = ("same", "mapped", "differs", "refused")
_PROBE_TASK = "arc_easy"  # any task both libraries have: probes never reach a task
_PROBE_VALUE = "probe"  # a model argument's value in a probe (but those in _PROBES)
# enable_thinking=True needs think_end_token, in lm-eval as here, and chat_template_args is a mapping
_PROBES: dict[str, Any] = {"enable_thinking": False, "chat_template_args": {"enable_thinking": False}}
_PROBE_NUMBER = 1  # the value of a probe of a run setting's key in --model_args (batch sizes: integers)
OTHER_KEYWORDS = "any other keyword"  # the row of a class that takes **kwargs


@dataclass(frozen=True)
class Row:
    """One word of lm-eval's surface and what evalflow does with it."""

    surface: str  # subcommand, flag, model type, model argument, simple_evaluate, TaskManager
    word: str  # as an lm-eval user writes it
    mark: str  # one of MARKS
    text: str  # what it becomes, or why not


def load_surface(path: Path = SNAPSHOT) -> dict[str, Any]:
    """lm-eval's surface as the snapshot records it."""
    import yaml

    return dict(yaml.safe_load(path.read_text(encoding="utf-8")))


def rows(surface: dict[str, Any]) -> list[Row]:
    """Every row of the table, in lm-eval's order: subcommands, flags, model types, model
    arguments (class by class), ``simple_evaluate``, ``TaskManager``."""
    return [
        *_subcommands(surface["subcommands"]),
        *_flags(surface["subcommands"]["run"]),
        *_model_types(surface["models"]),
        *_model_args(surface["models"], surface["classes"]),
        *_simple_evaluate(surface["simple_evaluate"]),
        *_task_manager(surface["task_manager"]),
    ]


def _front_door(argv: list[str], word: str) -> str | translate.Translation:
    """The translation of ``argv``, or the refusal paragraph's part about ``word``."""
    try:
        return translate.translate(parser.parse([*argv, "--tasks", _PROBE_TASK]))
    except ConfigError as exc:
        parts = str(exc).split(" | ")
        part = next((p for p in parts if word in p), parts[0])
        rest = part[part.index(word) + len(word) :] if word in part else part
        return rest.split(": ", 1)[-1]  # past the word and its value, as in "--model_args k=v: why"


def _subcommands(subcommands: dict[str, list[list[str]]]) -> Iterator[Row]:
    for name, words in subcommands.items():
        args = " ".join(w[0] for w in words)
        if name == "run":
            yield Row("subcommand", name, "same", parser.SUBCOMMANDS[name] + "; its flags are below")
        elif name in parser.SUBCOMMANDS:
            yield Row("subcommand", f"{name} {args}", "same", parser.SUBCOMMANDS[name])
        else:
            yield Row("subcommand", f"{name} {args}", "refused", "evalflow lm-eval has no such subcommand")


def _flags(declared: list[list[str]]) -> Iterator[Row]:
    taken = {name: names for names in parser.FLAGS for name in names}
    for names in declared:
        flag = names[0].lstrip("-")
        word = ", ".join(names)
        ours = taken.get(names[0])
        if ours is None:
            yield Row("flag", word, "refused", "evalflow lm-eval does not parse it (lmeval_compat/parser.py)")
            continue
        meaning = translate.flag_meaning(flag)
        missing = [n for n in names if n not in ours]
        if flag in translate.REFUSED_FLAGS:
            yield Row("flag", word, "refused", translate.REFUSED_FLAGS[flag])
        elif missing or flag in translate.FLAG_DIFFERENCES:
            why = [translate.FLAG_DIFFERENCES.get(flag, ""), f"{', '.join(missing)} not taken" if missing else ""]
            yield Row("flag", word, "differs", "; ".join([meaning, *filter(None, why)]))
        elif flag in translate.SETTING_FLAGS or flag in translate.MODEL_FLAGS:
            yield Row("flag", word, "mapped", meaning)
        else:
            yield Row("flag", word, "same", meaning)


def _model_types(models: dict[str, str]) -> Iterator[Row]:
    for name, cls in models.items():
        mapped = MODELS.get(name)
        if mapped is None:
            yield Row("model type", name, "refused", str(_front_door(["--model", name], f"--model {name}")))
        elif mapped.differs:
            yield Row("model type", name, "differs", f"`model={mapped.preset}` ({cls}): {mapped.differs}")
        else:
            yield Row("model type", name, "mapped", f"`model={mapped.preset}` ({cls})")


def _model_args(models: dict[str, str], classes: dict[str, dict[str, Any]]) -> Iterator[Row]:
    for cls, spec in classes.items():
        names = [name for name, c in models.items() if c == cls]
        ours = [name for name in names if name in MODELS]
        args = [*spec["args"], *([OTHER_KEYWORDS] if spec["extra"] else [])]
        if not ours:
            why = f"its model type{'s are' if len(names) > 1 else ' is'} refused; its arguments: {', '.join(args)}"
            yield Row("model arguments", f"{cls} ({', '.join(names)})", "refused", why)
            continue
        for arg in args:
            yield _model_arg(cls, ours[0], arg)


def _model_arg(cls: str, model: str, arg: str) -> Row:
    """``arg`` of the class behind ``model``, as the front door takes ``--model_args {"arg": ...}``."""
    key = "any_other_key" if arg == OTHER_KEYWORDS else arg
    word = f"{cls}: {arg}"
    value = _PROBE_NUMBER if key in RUN_MODEL_ARGS else _PROBES.get(key, _PROBE_VALUE)
    said = _front_door(["--model", model, "--model_args", json.dumps({key: value})], f"--model_args {key}")
    if isinstance(said, str):
        return Row("model argument", word, "refused", said)
    preset = MODELS[model].preset
    for override in said.overrides:
        setting = override.split("=", 1)[0]
        if setting in (key, RUN_SETTING_OF.get(key)):  # a run setting lm-eval takes among the model's arguments
            return Row("model argument", word, "mapped", f"`{setting}` (the run setting)")
        if setting.lstrip("+") == f"model.{key}" or setting.endswith(f".{key}"):
            where = "passed to the model as given" if setting.startswith("+") else f"conf/model/{preset}.yaml"
            shown = setting if key == arg else setting.replace(key, "KEY")
            return Row("model argument", word, "mapped", f"`{shown}` ({where})")
    return Row("model argument", word, "same", "accepted; it sets no evalflow setting")


def _simple_evaluate(declared: list[str]) -> Iterator[Row]:
    ours = inspect.signature(evaluate.simple_evaluate).parameters
    for name in declared:
        flag = evaluate.ARGUMENT_FLAGS.get(name, name)
        if name not in ours:
            yield Row("simple_evaluate", name, "refused", "evalflow's simple_evaluate has no such argument")
        elif flag in translate.REFUSED_FLAGS:
            yield Row(
                "simple_evaluate", name, "refused", f"any value but lm-eval's default: {translate.REFUSED_FLAGS[flag]}"
            )
        elif flag in translate.FLAG_DIFFERENCES:
            yield Row("simple_evaluate", name, "differs", f"as --{flag}: {translate.FLAG_DIFFERENCES[flag]}")
        else:
            yield Row("simple_evaluate", name, "same", "as lm-eval takes it (translated as its flag is)")


def _task_manager(declared: list[str]) -> Iterator[Row]:
    for name in declared:
        if name in TASK_MANAGER_ARGS:
            yield Row("TaskManager", name, "mapped", TASK_MANAGER_ARGS[name])
        else:
            read = ", ".join(TASK_MANAGER_ARGS)
            yield Row("TaskManager", name, "differs", f"not read: evalflow reads only {read} off a task_manager")


def extras(surface: dict[str, Any]) -> list[str]:
    """What evalflow's front door takes that lm-eval 0.4.13 does not declare."""
    theirs = {name for names in surface["subcommands"]["run"] for name in names}
    flags = [names[0] for names in parser.FLAGS if names[0] not in theirs]
    params = [p for p in inspect.signature(evaluate.simple_evaluate).parameters if p not in surface["simple_evaluate"]]
    return [f"`{f}` ({translate.flag_meaning(f.lstrip('-'))})" for f in flags] + [
        f"`simple_evaluate({p}=...)`" for p in params
    ]


def counts(table: list[Row]) -> dict[str, int]:
    """How many rows carry each mark."""
    found = Counter(row.mark for row in table)
    return {mark: found[mark] for mark in MARKS}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def page(surface: dict[str, Any]) -> str:
    """docs/lm-eval-surface.md."""
    table = rows(surface)
    summary = " · ".join(f"*{mark}* {n}" for mark, n in counts(table).items())
    lines = [
        "# lm-eval's surface, row by row",
        "",
        "<!-- written by `python -m evalflow.lmeval_compat.surface` from the front door's declarations; "
        "do not edit -->",
        "",
        f"Every word of lm-eval {surface['lm_eval_version']}'s user surface (its command line, model types, "
        "each model class's arguments, `simple_evaluate` and `TaskManager`) and what `evalflow lm-eval` and "
        "`evalflow.simple_evaluate` do with it: *same* (lm-eval's name and meaning), *mapped* (to the evalflow "
        "setting named), *differs* (accepted, with the difference said) or *refused* (before any model call, "
        "with the reason given). See [Coming from lm-eval](lm-eval-migration.md) for the walk-through.",
        "",
        f"Rows: {summary}.",
        "",
        "| lm-eval | surface | mark | evalflow |",
        "|---|---|---|---|",
        *(f"| `{_cell(r.word)}` | {r.surface} | *{r.mark}* | {_cell(r.text)} |" for r in table),
        "",
        "evalflow also takes: " + ", ".join(extras(surface)) + ".",
    ]
    return "\n".join(lines) + "\n"


def page_path() -> Path:
    """docs/lm-eval-surface.md of the source checkout the running code comes from."""
    from evalflow.config.packaged import source_checkout

    checkout = source_checkout()
    if checkout is None:
        raise SystemExit("the surface page lives in a source checkout's docs/; name a file to write")
    return checkout / "docs" / "lm-eval-surface.md"


if __name__ == "__main__":
    surface = load_surface()
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else page_path()
    target.write_text(page(surface), encoding="utf-8")
    print(target)
    print(", ".join(f"{mark}: {n}" for mark, n in counts(rows(surface)).items()))
