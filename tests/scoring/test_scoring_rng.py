"""Task code that draws from the global RNGs while scoring (lm-eval's mmmu: ``random.choice`` when an
answer names no option) gets lm-eval's state for that task run alone, whatever else runs.

The expected values are computed by hand from lm-eval 0.4.13's sequence (evalflow.taskspec.format.lmeval_seeds):
``random.seed(0)``, the module's own import-time seeding, three ``random_task_id()`` draws, then
one draw per document, filter pipelines outer, documents inner.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import numpy as np

from evalflow.taskspec.format.lmeval_seeds import scoring_rng
from tests.support.runs import Runner

TASK = """\
include: toy_gen.yaml
task: {name}
process_results: !function {module}.process_results
filter_list:
  - name: first
    filter:
      - function: take_first
  - name: second
    filter:
      - function: take_first
metric_list:
  - metric: draw
    aggregation: mean
    higher_is_better: true
"""
PROCESS = "\ndef process_results(doc, results):\n    return {'draw': random.random()}\n"
MODULES = {"reseeds": "import random\nrandom.seed(42)\n", "plain": "import random\n"}
LIMIT = 4


def _library(lib: Path) -> None:
    for name, head in MODULES.items():
        (lib / f"rng_{name}.py").write_text(head + PROCESS)
        (lib / f"toy_rng_{name}.yaml").write_text(TASK.format(name=f"toy_rng_{name}", module=f"rng_{name}"))


def _by_hand(module_seed: int | None) -> dict[str, list[float]]:
    random.seed(0)
    if module_seed is not None:
        random.seed(module_seed)
    for _ in range(3):
        random.choices(string.ascii_lowercase + string.digits, k=8)
    return {f: [random.random() for _ in range(LIMIT)] for f in ("first", "second")}


def _draws(folder: Path, task: str) -> dict[str, list[float]]:
    rows = [json.loads(line) for line in (folder / f"samples_{task}.jsonl").read_text().splitlines()]
    out: dict[str, list[float]] = {}
    for r in sorted(rows, key=lambda r: r["doc_id"]):
        out.setdefault(r["filter"], []).append(r["draw"])
    return out


def test_draws_are_lm_eval_s_for_the_task_alone(toy_library: Path, tmp_path: Path) -> None:
    _library(toy_library)
    alone = Runner(toy_library, tmp_path / "cache1", tmp_path / "out1")
    _, _, folder = alone(task="toy_rng_reseeds", limit=LIMIT, trust_task_code=True)
    expected = _by_hand(42)
    assert _draws(folder, "toy_rng_reseeds") == expected
    # another task first, in the same process and run, with a cold cache: the same values
    random.seed(7)
    together = Runner(toy_library, tmp_path / "cache2", tmp_path / "out2")
    _, _, folder2 = together(task=["toy_rng_plain", "toy_rng_reseeds"], limit=LIMIT, trust_task_code=True)
    assert _draws(folder2, "toy_rng_reseeds") == expected
    assert _draws(folder2, "toy_rng_plain") == _by_hand(None)
    again = Runner(toy_library, tmp_path / "cache3", tmp_path / "out3")
    _, _, folder3 = again(task="toy_rng_plain", limit=LIMIT, trust_task_code=True)
    assert _draws(folder3, "toy_rng_plain") == _by_hand(None)


def test_the_caller_s_states_come_back() -> None:
    import torch

    expected = _by_hand(None)["first"][0]
    random.seed(5)
    np.random.seed(5)
    torch.manual_seed(5)
    before = (random.getstate(), np.random.get_state()[1].copy(), torch.random.get_rng_state())
    with scoring_rng(()):
        inside = random.random()
        np.random.random()
        torch.rand(1)
    assert inside == expected
    assert random.getstate() == before[0]
    assert np.array_equal(np.random.get_state()[1], before[1])
    assert torch.equal(torch.random.get_rng_state(), before[2])
