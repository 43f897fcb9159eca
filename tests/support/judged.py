"""A small generation task with one judge metric, written to a temp folder, and runs of it.

The scored model is :class:`~tests.support.judge_models.ScriptedAnswerer` (the test sets each
answer); the judge is whatever ``model`` (YAML) names, ScriptedJudge by default.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalflow.config.compose import compose_settings
from evalflow.run.phases import run
from tests.support.judge_models import ScriptedAnswerer, ScriptedJudge

ANSWERER = "tests.support.judge_models:ScriptedAnswerer"
JUDGE = "tests.support.judge_models:ScriptedJudge"
N = 100
PROMPT = "Question: {{ doc.question }}\\nAnswer: {{ response }}\\nGold: {{ target }}\\nGrade:"

TASK_YAML = """\
task: judged
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n"]
REPEATS
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
  - metric: graded
    judge:
      model: {model}
      prompt: "{prompt}"
      parser: PARSER
      gen_kwargs: {{max_gen_toks: {tokens}}}
      POLICY
    aggregation: mean
    higher_is_better: true
"""
PARSER = '{type: regex, pattern: "Score: (\\\\d+)"}'


def right(i: int) -> str:
    return str(i + 1)


class Judged:
    """A 100-document task judged by ScriptedJudge, and runs of it against one private cache."""

    def __init__(self, tmp_path: Path, n: int = N, model: str = '{type: "' + JUDGE + '"}') -> None:
        self.root, self.docs, self.model = tmp_path, n, model
        data = tmp_path / "test.jsonl"
        data.write_text(
            "".join(json.dumps({"question": f"What is {i} plus 1?", "answer": right(i)}) + "\n" for i in range(n))
        )
        (tmp_path / "tasks").mkdir()
        self.yaml = tmp_path / "tasks" / "judged.yaml"
        self.write()
        self.answers({i: right(i) if i % 4 else "wrong" for i in range(n)})
        self.n = 0

    def write(
        self, prompt: str = PROMPT, parser: str = PARSER, policy: str = "", repeats: str = "", tokens: int = 8
    ) -> None:
        text = TASK_YAML.format(data=self.root / "test.jsonl", model=self.model, prompt=prompt, tokens=tokens)
        self.yaml.write_text(text.replace("PARSER", parser).replace("POLICY", policy).replace("REPEATS", repeats))

    def answers(self, by_doc: dict[int, str]) -> None:
        ScriptedAnswerer.ANSWERS = {f"What is {i} plus 1?": a for i, a in by_doc.items()}

    def __call__(self, **values: Any) -> tuple[dict, dict, Path]:
        self.n += 1
        folder = self.root / "outputs" / f"run{self.n}"
        settings = compose_settings(
            task="judged",
            preset="dummy",
            overrides=[f"model.type={ANSWERER}"],
            values={
                "include_path": [str(self.yaml.parent)],
                "cache_dir": str(self.root / "cache"),
                "bootstrap_iters": 0,
                **values,
            },
        )
        ScriptedJudge.reset()
        ScriptedAnswerer.calls = 0
        results = run(settings, folder)
        return results["results"]["judged"], json.loads((folder / "manifest.json").read_text()), folder
