"""The toy task library most tests run: toy_mc (multiple choice, 40 documents) and toy_gen
(generation) over local JSONL, written into a folder (the ``toy_library`` fixture calls it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MC_YAML = """\
task: toy_mc
dataset_path: json
dataset_kwargs:
  data_files:
    train: {data}/train.jsonl
    test: {data}/test.jsonl
training_split: train
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: label
doc_to_choice: "{{{{choices}}}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""

GEN_YAML = """\
task: toy_gen
dataset_path: json
dataset_kwargs:
  data_files:
    train: {data}/train.jsonl
    test: {data}/test.jsonl
training_split: train
test_split: test
output_type: generate_until
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer.split('####')[-1].strip()}}}}"
generation_kwargs:
  until: ["\\n\\n", "Question:"]
  do_sample: false
filter_list:
  - name: get-answer
    filter:
      - function: regex
        regex_pattern: "#### (\\\\-?[0-9\\\\.\\\\,]+)"
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


def rows(n: int, offset: int = 0) -> list[dict[str, Any]]:
    """``n`` addition questions from ``offset`` on; the first choice is always the right one."""
    out = []
    for i in range(offset, offset + n):
        a, b = i + 1, i % 5 + 2
        out.append(
            {
                "question": f"What is {a} plus {b}?",
                "choices": [str(a + b), str(a + b + 1), str(a + b + 10), str(a + b + 20)],
                "label": 0,
                "answer": f"{a} + {b} = {a + b}\n#### {a + b}",
            }
        )
    return out


def write_toy_data(folder: Path) -> Path:
    """``folder``/data with train.jsonl (10 rows) and test.jsonl (40 rows); returns it."""
    data = folder / "data"
    data.mkdir()
    for name, split in (("train", rows(10, 100)), ("test", rows(40))):
        (data / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in split))
    return data


def write_toy_library(folder: Path) -> Path:
    """``folder``/data (:func:`write_toy_data`) and ``folder``/tasks (toy_mc, toy_gen); returns the latter."""
    data = write_toy_data(folder)
    lib = folder / "tasks"
    lib.mkdir()
    (lib / "toy_mc.yaml").write_text(MC_YAML.format(data=data))
    (lib / "toy_gen.yaml").write_text(GEN_YAML.format(data=data))
    return lib


def with_acc_norm(yaml_text: str) -> str:
    """A task YAML (toy_mc's) that also scores acc_norm: a metric edit, which rescores without inference."""
    return yaml_text.replace(
        "metric_list:\n", "metric_list:\n  - metric: acc_norm\n    aggregation: mean\n    higher_is_better: true\n"
    )


CODE_DOCS = [
    {"prompt": "def ok():\n    return True  # ", "test": "assert ok()"},
    {"prompt": "def ok():\n    return False  # ", "test": "assert ok()"},
    {"prompt": "while True:\n    pass  # ", "test": "assert ok()"},
    {"prompt": "import math\ndef ok():\n    return math.pi > 3  # ", "test": "assert ok()"},
]

CODE_YAML = """\
task: toy_code
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
unsafe_code: true
output_type: generate_until
doc_to_text: "{{{{prompt}}}}"
doc_to_target: "{{{{test}}}}"
metric_list:
  - metric: pass_at_k
    aggregation: mean
    higher_is_better: true
    k: [1]
    timeout: 1.0
generation_kwargs:
  until: ["\\n"]
  do_sample: false
filter_list:
  - name: create_test
    filter:
      - function: custom
        filter_fn: !function code_utils.build_predictions
"""

CODE_UTILS = (
    "def build_predictions(resps, docs):\n"
    "    return [[doc['prompt'] + r for r in resp] for resp, doc in zip(resps, docs)]\n"
)


def write_code_task(library: Path, docs: list[dict[str, str]] = CODE_DOCS) -> Path:
    """``toy_code`` (humaneval's shape: the model completes a function, ``pass_at_k`` runs the
    test) in ``library``: the dummy model's one-line answer lands in a comment, so each prompt
    alone passes (``return True``, ``math.pi > 3``), fails (``return False``) or times out."""
    data = library / "code.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in docs))
    (library / "toy_code.yaml").write_text(CODE_YAML.format(data=data))
    (library / "code_utils.py").write_text(CODE_UTILS)
    return library
