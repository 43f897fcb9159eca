"""Run folders for the viewer's tests (tests/view/): two runs of the toy tasks that differ (the
dummy model under two salts, so documents flip), a run whose task texts are hostile markup, and
an lm-eval output folder; plus a listing of every file under a folder, to show the viewer wrote
nothing there."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.support.lm_eval_folders import LM_EVAL_FOLDERS
from tests.support.runs import Runner
from tests.support.toy_tasks import MC_YAML

# Text that is markup if anything renders it as HTML or ends a <script> early; U+2028 ends a
# JavaScript string literal in older engines, so a bundle must escape it.
HOSTILE = (
    "</script><script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=1">',
    "javascript:window.__pwned=1",
    "</textarea><b>bold</b>",
    "line\u2028separator & <amp>",
)


def hostile_rows(n: int) -> list[dict]:
    """``n`` multiple-choice documents whose question and choices carry :data:`HOSTILE`."""
    return [
        {
            "question": f"{HOSTILE[i % len(HOSTILE)]} #{i}",
            "choices": [HOSTILE[(i + 1) % len(HOSTILE)], "b", "c", HOSTILE[(i + 2) % len(HOSTILE)]],
            "label": 0,
        }
        for i in range(n)
    ]


def write_hostile_task(folder: Path) -> Path:
    """A task library with ``toy_hostile`` (toy_mc's YAML over hostile documents); returns it."""
    data = folder / "hostile_data"
    data.mkdir(parents=True)
    for name, n in (("train", 4), ("test", 12)):
        (data / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in hostile_rows(n)))
    lib = folder / "hostile_tasks"
    lib.mkdir()
    (lib / "toy_hostile.yaml").write_text(MC_YAML.format(data=data).replace("task: toy_mc", "task: toy_hostile"))
    return lib


def make_view_runs(runner: Runner, root: Path) -> dict[str, Path]:
    """Under ``root``: ``a`` and ``b`` (toy_mc and toy_gen, 20 documents, the dummy model under two
    salts), ``hostile`` (toy_hostile) and ``peer`` (an lm-eval folder); name -> folder."""
    runner.out = root
    _, _, a = runner(["toy_mc", "toy_gen"], model="dummy", limit=20)
    _, _, b = runner(["toy_mc", "toy_gen"], model="dummy", limit=20, overrides=["model.salt=other"])
    lib = write_hostile_task(root.parent / "hostile_lib")
    _, _, hostile = runner("toy_hostile", model="dummy", include_path=[str(runner.library), str(lib)])
    peer = root / "peer"
    shutil.copytree(LM_EVAL_FOLDERS / "lm_eval_arc_easy", peer)
    return {"a": a, "b": b, "hostile": hostile, "peer": peer}


def listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder``: relative path -> (size, modification time in ns)."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }
