"""lm-eval 0.4.13's ``run`` command line (``lm_eval/_cli/run.py``), flag for flag, as an argparse parser.

Values are kept as the words given (typed later, by :mod:`evalflow.lmeval_compat.translate`), so a
flag evalflow refuses is refused by its own name and never half-parsed.
"""

from __future__ import annotations

import argparse

from evalflow.lmeval_compat.run_file import with_run_file
from evalflow.lmeval_compat.translate import flag_meaning

# flag (with lm-eval's short aliases) -> how many values: "?" optional, "+" one or more, 1 one, 0 a switch
FLAGS: dict[tuple[str, ...], str | int] = {
    ("--config", "-C"): 1,
    ("--tasks", "-t"): "+",
    ("--model", "-M"): 1,
    ("--model_args", "-a"): "+",
    ("--apply_chat_template",): "?",
    ("--limit", "-L"): 1,
    ("--use_cache", "-c"): 1,
    ("--num_fewshot", "-f"): 1,
    ("--batch_size", "-b"): 1,
    ("--max_batch_size",): 1,
    ("--device",): 1,
    ("--gen_kwargs",): "+",
    ("--output_path", "-o"): 1,
    ("--log_samples", "-s"): 0,
    ("--samples", "-E"): 1,
    ("--cache_requests",): "?",
    ("--check_integrity",): 0,
    ("--system_instruction",): 1,
    ("--fewshot_as_multiturn",): "?",
    ("--include_path",): 1,
    ("--verbosity", "-v"): 1,
    ("--write_out", "-w"): 0,
    ("--show_config",): 0,
    ("--wandb_args",): "+",
    ("--wandb_config_args",): "+",
    ("--trackio_args",): "+",
    ("--hf_hub_log_args",): "+",
    ("--predict_only", "-x"): 0,
    ("--seed",): 1,
    ("--trust_remote_code",): 0,
    ("--confirm_run_unsafe_code",): 0,
    ("--metadata",): "+",
    ("--bootstrap_iters",): 1,  # simple_evaluate's; lm-eval 0.4.13's command line has none
}

# lm-eval's subcommands, and what the front door does with each (the run's flags are FLAGS;
# ls and validate: commands/lm_eval_subcommands.py)
SUBCOMMANDS = {
    "run": "the run (lm-eval's legacy form, with no subcommand, is the same)",
    "ls": "lm-eval's Markdown tables of the task index (tasks, groups, subtasks, tags)",
    "validate": "lm-eval's lines around `python -m evalflow validate`, which also renders each task's first documents",
}

FLAG_NAMES = frozenset(name for names in FLAGS for name in names if name.startswith("--"))


def build_parser() -> argparse.ArgumentParser:
    """The parser; every flag defaults to None (absent), so translation sees only what was given."""
    parser = argparse.ArgumentParser(
        prog="python -m evalflow lm-eval",
        description="lm-eval 0.4.13's command line, run by evalflow (the same stages, cache and run "
        "folder as `python -m evalflow`; the equivalent native command is printed). "
        "docs/lm-eval-migration.md maps every flag.",
    )
    for names, nargs in FLAGS.items():
        meaning = flag_meaning(names[0].lstrip("-")).replace("%", "%%")  # argparse formats help with %
        if nargs == 0:
            parser.add_argument(*names, action="store_true", default=None, help=meaning)
        elif nargs == 1:
            parser.add_argument(*names, default=None, help=meaning)
        elif nargs == "?":
            parser.add_argument(*names, nargs="?", const="true", default=None, help=meaning)
        else:
            parser.add_argument(*names, nargs="+", action="extend", default=None, help=meaning)
    return parser


# lm-eval 0.4.13's `ls` argument (lm_eval/_cli/ls.py): what to list; none prints the help
LS_WHAT = ("tasks", "groups", "subtasks", "tags")


def subcommand_parser(name: str) -> argparse.ArgumentParser:
    """lm-eval's ``ls [tasks|groups|subtasks|tags]`` or ``validate --tasks A,B`` parser (both with one
    ``--include_path DIR``, as lm-eval's: its help's ``a:b`` form is one path there too)."""
    parser = argparse.ArgumentParser(
        prog=f"python -m evalflow lm-eval {name}",
        description="lm-eval 0.4.13's `"
        + name
        + "`, answered from evalflow's task index (lm-eval's task library beneath evalflow's built-in tasks)"
        + (" and checked by `python -m evalflow validate`" if name == "validate" else ""),
    )
    if name == "ls":
        parser.add_argument(
            "what", choices=LS_WHAT, nargs="?", help="what to list: tasks (all), groups, subtasks, or tags"
        )
    else:
        parser.add_argument("--tasks", "-t", required=True, metavar="TASK1,TASK2", help="comma-separated task names")
    parser.add_argument("--include_path", default=None, metavar="DIR", help="a folder of task YAMLs, trusted")
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    """lm-eval's argv (a leading ``run`` subcommand dropped, as lm-eval's legacy form inserts it),
    with a ``--config`` YAML run file's keys filling the flags not given."""
    ns = build_parser().parse_args(argv[1:] if argv[:1] and argv[0] in SUBCOMMANDS else argv)
    return with_run_file(ns, {names[0].lstrip("-"): nargs for names, nargs in FLAGS.items()})
