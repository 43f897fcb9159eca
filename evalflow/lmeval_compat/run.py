"""``python -m evalflow lm-eval ARGS...`` (and ``evalflow-lm-eval``): lm-eval 0.4.13's command line.

    python -m evalflow lm-eval --model hf --model_args pretrained=HuggingFaceTB/SmolLM2-135M,dtype=float32 \\
        --tasks arc_easy,boolq --limit 10 --output_path out --log_samples

It runs :func:`evalflow.evaluate` on the translated config (the same stages, cache and run folder as
the printed native command), then writes lm-eval's output layout under ``--output_path``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from evalflow.errors import EvalflowError
from evalflow.lmeval_compat.translate import Translation


def run_folder() -> Path:
    """Where the native command line would put the run: outputs/<date>/<time>-<random suffix>."""
    return Path("outputs") / time.strftime("%Y-%m-%d") / f"{time.strftime('%H-%M-%S')}-{uuid.uuid4().hex[:6]}"


def execute(tr: Translation, folder: Path, model: Any = None) -> dict[str, Any]:
    """Run the translation (``--write_out`` first prints each task's first prompt, as lm-eval does);
    ``model``: a model object instead of the translation's preset (simple_evaluate)."""
    from evalflow.app import evaluate

    if tr.verbosity:
        logging.getLogger("evalflow").setLevel(tr.verbosity.upper())
    if tr.write_out:
        from evalflow.preview import main as show

        settings = [o for o in tr.overrides if not o.startswith(("model.", "log_samples=", "batch_size=",
                                                                 "max_batch_size=", "predict_only="))]
        show([f"task=[{','.join(tr.tasks)}]", "n=1", *settings])
    return evaluate(list(tr.tasks), tr.preset if model is None else model, output_dir=folder, overrides=list(tr.overrides))


def main(argv: list[str]) -> int:
    from evalflow.lmeval_compat.layout import write_layout
    from evalflow.lmeval_compat.parser import parse
    from evalflow.lmeval_compat.translate import translate
    from evalflow.output.table import print_results

    logging.getLogger("evalflow").setLevel(logging.INFO)
    if argv[:1] in (["ls"], ["validate"]):
        print(f"evalflow lm-eval: `lm-eval {argv[0]}` is `python -m evalflow {argv[0]}` here "
              "(task=NAME for validate)", file=sys.stderr)
        return 2
    tr = translate(parse(argv))
    print(f"evalflow lm-eval: the same run natively: {tr.native()}", file=sys.stderr)
    for note in tr.notes:
        print(f"evalflow lm-eval: {note}", file=sys.stderr)
    folder = run_folder()
    results = execute(tr, folder)
    if tr.output_path:
        for path in write_layout(tr.output_path, results, folder, tr.lm_model, tr.lm_model_args):
            print(f"evalflow lm-eval: wrote {path}", file=sys.stderr)
    if tr.show_config:
        print(json.dumps({k: v for k, v in results.items() if k != "samples"}, indent=2, default=str))
    print_results(results)
    print(f"run folder: {folder}")
    return 0


def entry() -> None:
    """The ``evalflow-lm-eval`` console script."""
    try:
        code = main(sys.argv[1:])
    except EvalflowError as exc:
        print(f"evalflow: error: {exc}", file=sys.stderr)
        code = 2
    raise SystemExit(code)
