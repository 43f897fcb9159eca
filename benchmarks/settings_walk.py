"""The walk of a run's settings through the rooms: how far one value travels, before and after a change.

    python benchmarks/settings_walk.py                  # this tree
    python benchmarks/settings_walk.py --before 0f40239 # and the tree at a git ref, side by side

Runs ``python -m evalflow model=dummy task=arith_mc limit=5`` (and the lm-eval front door's
``evalflow lm-eval --model dummy --tasks arith_mc --limit 5``) with a profile hook that notes, in
call order, every evalflow function called with the run's settings object (a ``RunSettings``) among
its arguments (``settings``: the value's own walk), and every evalflow function called from the
first of those to the first stage function (``path``: the run's way from its settings through the
load checks to the stages). Each function is placed in its room (docs/architecture.md's room
order, this tree's; an earlier tree's modules are mapped to the room they moved to), and each walk
is counted as issue 50 counts it:

- **rooms entered**: how many times the walk moves into another room;
- **climbs**: moves into a room on a higher floor than the one it leaves (a layered design calls down);
- **returns**: moves into a room the walk had already left.

Not a speed figure: the numbers are properties of the code and do not depend on the machine.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/checkouts.py
from checkouts import source_at

ROOT = Path(__file__).resolve().parents[1]

MOVED = {
    "evalflow.app": "run",
    "evalflow.run_parts": "run",
    "evalflow.load_checks": "run",
    "evalflow.preview": "run",
    "evalflow.validate": "run",
    "evalflow.user_modules": "run",
    "evalflow.insight.rescore": "run",
    "evalflow.records": "core",
    "evalflow.settings": "config",
    "evalflow.lazy_numpy": "scoring",
    "evalflow.lmeval_compat.lm_objects": "models",
    "evalflow.lmeval_compat.model_info": "output",
    "evalflow.models.chat_templates": "taskspec",
    "evalflow.models.smollm2": "config",
}
"""Modules of earlier trees and the room each lives in now, so both walks are placed on one map."""

TRACER = r"""
import sys, json, runpy
walk, path, state = [], [], {"on": False, "done": False}
def hook(frame, event, arg):
    if event != "call" or state["done"]:
        return
    module = frame.f_globals.get("__name__", "")
    if not module.startswith("evalflow") or frame.f_code.co_name.startswith("<"):
        return
    if module.startswith("evalflow.stages"):
        state["done"] = True
        return
    names = frame.f_code.co_varnames[: frame.f_code.co_argcount + frame.f_code.co_kwonlyargcount]
    if any(type(frame.f_locals.get(n)).__name__ == "RunSettings" for n in names):
        state["on"] = True
        walk.append(f"{module}:{frame.f_code.co_name}")
    if state["on"]:
        caller = frame.f_back
        while caller is not None and not caller.f_globals.get("__name__", "").startswith("evalflow"):
            caller = caller.f_back
        if caller is not None:
            path.append(f"{caller.f_globals['__name__']}:{caller.f_code.co_name} {module}:{frame.f_code.co_name}")
sys.argv = ["evalflow", *json.loads(sys.argv[1])]
sys.setprofile(hook)
try:
    runpy.run_module("evalflow", run_name="__main__")
except SystemExit:
    pass
finally:
    sys.setprofile(None)
    with open(OUT, "w") as f:
        json.dump({"settings": walk, "path": path}, f)
"""


def declared_rooms(tree: Path) -> list[str]:
    """docs/architecture.md's room order, bottom first (this tree's: one map for both walks)."""
    text = (tree / "docs" / "architecture.md").read_text()
    block = text.split("<!-- rooms -->", 1)[1].split("<!-- /rooms -->", 1)[0]
    return re.findall(r"^\d+\. `([\w.]+)`", block, flags=re.M)


def room_of(module: str) -> str:
    """The room a module lives in today (``evalflow.config.schema`` → ``config``)."""
    for old, room in MOVED.items():
        if module == old or module.startswith(old + "."):
            return room
    return own_room(module)


def own_room(module: str) -> str:
    """The room a module lived in where it ran: its package, or itself beside the packages."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "evalflow"


def settings_walk(tree: Path, argv: list[str], work: Path) -> dict[str, list[str]]:
    """Running ``tree``: the ``module:function`` calls that received the run's settings, in order
    (``settings``), and every evalflow call from the first of them to the first stage (``path``)."""
    out = work / "walk.json"
    args = [*argv, f"cache_dir={work / 'cache'}", f"hydra.run.dir={work / 'run'}"]
    if argv[0] == "lm-eval":
        args = [*argv, "--output_path", str(work / "out")]
    code = f"OUT = {str(out)!r}\n" + TRACER
    env = {"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "HOME": str(work), "EVALFLOW_CACHE": str(work / "cache")}
    done = subprocess.run([sys.executable, "-c", code, json.dumps(args)], cwd=work, env=env, capture_output=True)
    if not out.exists() or done.returncode:
        raise SystemExit(f"{tree}: {' '.join(argv)} failed:\n{done.stderr.decode()[-3000:]}")
    return json.loads(out.read_text())


def walk_counts(walk: list[str], floors: dict[str, int]) -> dict[str, int]:
    """Rooms entered, climbs and returns of the settings' own walk (consecutive calls in one room are
    one stay)."""
    rooms = [room_of(call.split(":")[0]) for call in walk]
    entered = climbs = returns = 0
    left: set[str] = set()
    for here, there in itertools.pairwise(rooms):
        if here == there:
            continue
        entered += 1
        climbs += floors.get(there, 0) > floors.get(here, 0)
        returns += there in left
        left.add(here)
    return {"calls": len(walk), "rooms entered": entered, "climbs": climbs, "returns": returns}


def edge_counts(path: list[str], floors: dict[str, int]) -> dict[str, int]:
    """The distinct caller → callee function pairs that cross rooms on the way to the first stage
    (each counted once however often it ran): between the rooms the code ran in (``own``), and
    between today's rooms with how many of those call a higher floor (``upward``)."""
    own, mapped = set(), set()
    for edge in path:
        ends = [end.split(":")[0] for end in edge.split(" ")]
        if own_room(ends[0]) != own_room(ends[1]):
            own.add(edge)
        caller, callee = (room_of(end) for end in ends)
        if caller != callee:
            mapped.add((edge, floors.get(callee, 0) > floors.get(caller, 0)))
    return {
        "rooms run in": len({own_room(end.split(":")[0]) for edge in path for end in edge.split(" ")}),
        "crossing calls": len(own),
        "crossing today's rooms": len(mapped),
        "upward": sum(up for _, up in mapped),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", metavar="REF", help="also walk the evalflow of this git ref")
    args = parser.parse_args()
    floors = {room: i for i, room in enumerate(declared_rooms(ROOT))}
    commands = {
        "run": ["model=dummy", "task=arith_mc", "limit=5"],
        "lm-eval": ["lm-eval", "--model", "dummy", "--tasks", "arith_mc", "--limit", "5"],
    }
    with tempfile.TemporaryDirectory(prefix="settings_walk_") as tmp:
        trees = {"this tree": ROOT}
        if args.before:
            trees[args.before] = source_at(args.before, Path(tmp) / "before" / "evalflow")
        for name, tree in trees.items():
            for label, argv in commands.items():
                work = Path(tmp) / f"{name}-{label}".replace(" ", "_")
                work.mkdir(parents=True)
                walks = settings_walk(tree, argv, work)
                rooms = " → ".join(dict.fromkeys(room_of(c.split(":")[0]) for c in walks["settings"]))
                print(f"{name}, {label}: the settings' walk {walk_counts(walks['settings'], floors)} ({rooms}); ")
                print(f"    on the way to the first stage: {edge_counts(walks['path'], floors)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
