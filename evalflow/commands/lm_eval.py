"""``python -m evalflow lm-eval ARGS...`` (and ``evalflow-lm-eval``): lm-eval 0.4.13's command line.

    python -m evalflow lm-eval --model hf --model_args pretrained=HuggingFaceTB/SmolLM2-135M,dtype=float32 \\
        --tasks arc_easy,boolq --limit 10 --output_path out --log_samples

It runs the translated config through :mod:`evalflow.lmeval_compat.execute` (the same stages, cache
and run folder as the printed native command), then writes lm-eval's output layout under ``--output_path``.
"""

from __future__ import annotations

import json
import logging
import sys

from evalflow.commands.stopping import exit_status, stop_on_termination, stopped_line
from evalflow.commands.words import Command
from evalflow.errors import EvalflowError
from evalflow.lmeval_compat.execute import execute, run_folder
from evalflow.lmeval_compat.parser import FLAGS
from evalflow.lmeval_compat.translate import flag_meaning


def _flag_list() -> str:
    """Each of lm-eval's flags and what it becomes: lm-eval's grammar (argparse, lmeval_compat/parser.py)
    mapped onto the run's settings (lmeval_compat/translate.py's SETTING_FLAGS)."""
    rows = [", ".join(f"``{name}``" for name in names) + f": {flag_meaning(names[0].lstrip('-'))}" for names in FLAGS]
    return "Each flag, and what evalflow makes of it:\n\n" + "\n".join(f"- {row}" for row in rows)


COMMAND = Command(
    "lm-eval",
    "lm-eval 0.4.13's command line, run by evalflow",
    "--model hf --model_args pretrained=NAME --tasks a,b ...",
    doc=f"{__doc__}\n{_flag_list()}",
)


def main(argv: list[str]) -> int:
    from evalflow.lmeval_compat.layout import write_layout
    from evalflow.lmeval_compat.parser import parse
    from evalflow.lmeval_compat.translate import translate
    from evalflow.output.run_summary import LM_EVAL, summary_lines
    from evalflow.output.table import print_results
    from evalflow.tracking.lmeval_loggers import LmEvalLoggers

    logging.getLogger("evalflow").setLevel(logging.INFO)
    stop_on_termination()
    if argv[:1] in (["ls"], ["validate"]):
        print(
            f"evalflow lm-eval: `lm-eval {argv[0]}` is `python -m evalflow {argv[0]}` here (task=NAME for validate)",
            file=sys.stderr,
        )
        return 2
    tr = translate(parse(argv))
    print(f"evalflow lm-eval: the same run natively: {tr.native()}", file=sys.stderr)
    for note in tr.notes:
        print(f"evalflow lm-eval: {note}", file=sys.stderr)
    loggers = LmEvalLoggers(tr)  # W&B's and Trackio's runs open before the evaluation, as in lm-eval
    folder = run_folder()
    try:
        results = execute(tr, folder)
    except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM, SIGHUP (commands.stopping)
        print(stopped_line(stop, None, folder), file=sys.stderr)
        return exit_status(stop)
    loggers.log(results, folder)
    written = write_layout(tr.output_path, results, folder, tr.lm_model, tr.lm_model_args) if tr.output_path else []
    for path in written:
        print(f"evalflow lm-eval: wrote {path}", file=sys.stderr)
    loggers.push(results, written, folder)
    if tr.show_config:
        print(json.dumps({k: v for k, v in results.items() if k != "samples"}, indent=2, default=str))
    print_results(results)
    for line in summary_lines(folder, LM_EVAL):
        print(line)
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
