"""Real run folders for the viewer's browser tests: two dummy-model runs of the toy multiple-choice
task (different salts, so some documents flip between them) and one run of a task whose documents,
choices and targets carry hostile markup, with a hostile config value, all under one root."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tests.support.runs import Runner
from tests.support.toy_tasks import MC_YAML, write_toy_library

HOSTILE_TASK = "toy_hostile"
SCRIPT = "<script>window.__pwned='script'</script>"
IMG = "<img src=x onerror=\"window.__pwned='img'\">"
JS_LINK = "javascript:window.__pwned='link'"
TEXTAREA = "</textarea><b id=pwn>injected</b>"
HOSTILE = (SCRIPT, IMG, JS_LINK, TEXTAREA)
HOSTILE_SALT = "<b id=pwn>salt</b>"  # a config value; Hydra's grammar refuses quotes and parentheses unquoted


def hostile_rows(n: int) -> list[dict[str, object]]:
    """Documents whose question and choices are hostile markup; the right choice cycles."""
    return [
        {"question": f"{HOSTILE[i % 4]} {i}", "choices": [f"{h} {i}" for h in HOSTILE], "label": i % 4}
        for i in range(n)
    ]


def write_hostile_task(library: Path) -> None:
    """``toy_hostile``: toy_mc's YAML over :func:`hostile_rows`."""
    data = library.parent / "hostile_data"
    data.mkdir()
    for split, n in (("train", 4), ("test", 12)):
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in hostile_rows(n)))
    yaml_text = MC_YAML.format(data=data).replace("task: toy_mc", f"task: {HOSTILE_TASK}")
    (library / f"{HOSTILE_TASK}.yaml").write_text(yaml_text)


@dataclass(frozen=True)
class ViewRuns:
    root: Path  # the folder `evalflow view` is pointed at
    baseline: Path
    candidate: Path
    hostile: Path


def write_view_runs(folder: Path) -> ViewRuns:
    """Three finished runs under ``folder``/outputs (run1, run2: toy_mc; run3: toy_hostile)."""
    library = write_toy_library(folder)
    write_hostile_task(library)
    runner = Runner(library, folder / "cache", folder / "outputs")
    baseline = runner("toy_mc", model="dummy", overrides=["model.salt=a", "num_fewshot=2"])[2]
    candidate = runner("toy_mc", model="dummy", overrides=["model.salt=b", "num_fewshot=2"])[2]
    hostile = runner(HOSTILE_TASK, model="dummy", overrides=[f"model.salt='{HOSTILE_SALT}'", "num_fewshot=1"])[2]
    return ViewRuns(folder / "outputs", baseline, candidate, hostile)
