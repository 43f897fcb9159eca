"""``python -m evalflow lm-eval ARGS...`` (and ``evalflow-lm-eval``): lm-eval 0.4.13's command line.

    python -m evalflow lm-eval --model hf --model_args pretrained=HuggingFaceTB/SmolLM2-135M,dtype=float32 \\
        --tasks arc_easy,boolq --limit 10 --output_path out --log_samples
    python -m evalflow lm-eval ls tasks|groups|subtasks|tags [--include_path DIR]
    python -m evalflow lm-eval validate --tasks ifeval,my_task [--include_path DIR]

It runs the translated config through :mod:`evalflow.lmeval_compat.execute` (the same stages, cache
and run folder as the printed native command), then writes lm-eval's output layout under ``--output_path``.
stdout holds what lm-eval prints (its header line and results table: lmeval_compat/printed.py);
evalflow's own lines (the native command, the cache summary, the run folder) go to stderr.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from evalflow.commands.stopping import exit_status, stop_on_termination, stopped_line
from evalflow.commands.words import Command
from evalflow.errors import ConfigError, EvalflowError
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
    from evalflow.commands import validate
    from evalflow.lmeval_compat.before_run import setup_logging
    from evalflow.lmeval_compat.layout import write_layout
    from evalflow.lmeval_compat.parser import build_parser, parse
    from evalflow.lmeval_compat.printed import printed_results
    from evalflow.lmeval_compat.served_args import CHAT_PRESETS
    from evalflow.lmeval_compat.subcommands import RUNS_ELSEWHERE, run_subcommand
    from evalflow.lmeval_compat.translate import translate
    from evalflow.output.run_summary import LM_EVAL, summary_lines
    from evalflow.tracking.lmeval_loggers import LmEvalLoggers

    logging.getLogger("evalflow").setLevel(logging.INFO)
    setup_logging()  # as lm-eval's command line: what it logs (--write_out) on stderr in its format
    stop_on_termination()
    if argv[:1] and argv[0] in RUNS_ELSEWHERE:  # lm-eval's `ls` and `validate`
        return run_subcommand(argv[0], argv[1:], validate.main)
    if argv == ["run"]:  # lm-eval prints run's help
        build_parser().print_help()
        return 0
    ns = parse(argv)
    refuse_samples_without_output(ns)
    tr = translate(ns)
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
    # lm-eval's API models hold a chat-templated prompt as a JsonChatStr (chat models: always)
    chat = bool(ns.apply_chat_template) and tr.preset in CHAT_PRESETS
    written = (
        write_layout(tr.output_path, results, folder, tr.lm_model, tr.lm_model_args, chat_prompts=chat)
        if tr.output_path
        else []
    )
    for path in written:
        print(f"evalflow lm-eval: wrote {path}", file=sys.stderr)
    loggers.push(results, written, folder)
    if tr.show_config:
        print(json.dumps({k: v for k, v in results.items() if k != "samples"}, indent=2, default=str))
    print(printed_results(ns, tr.lm_model_args, results), end="")  # stdout: exactly lm-eval's
    for line in summary_lines(folder, LM_EVAL):
        print(line, file=sys.stderr)
    print(f"run folder: {folder}", file=sys.stderr)
    return 0


def refuse_samples_without_output(ns: Any) -> None:
    """lm-eval's command line refuses ``--log_samples``/``--predict_only`` without ``--output_path``
    (its EvaluatorConfig), before any model loads: so does its front door here (simple_evaluate,
    which returns the samples, takes them without one, as lm-eval's does)."""
    if (ns.log_samples or ns.predict_only) and not ns.output_path:
        flag = "--predict_only" if ns.predict_only else "--log_samples"
        raise ConfigError(
            f"{flag} writes lm-eval's samples files under --output_path, and lm-eval refuses it without one "
            '("Specify --output_path if providing --log_samples or --predict_only"); add --output_path DIR, '
            "or drop the flag (the run folder keeps evalflow's own samples files either way)"
        )


def entry() -> None:
    """The ``evalflow-lm-eval`` console script."""
    try:
        code = main(sys.argv[1:])
    except EvalflowError as exc:
        print(f"evalflow: error: {exc}", file=sys.stderr)
        code = 2
    raise SystemExit(code)
