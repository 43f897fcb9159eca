"""``python -m evalflow rescore SAMPLES... task=NAME``: its words, read and checked; the rescoring
itself is :func:`evalflow.run.rescoring.rescore`, whose module's docstring is the help."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from evalflow.commands.reference import print_help
from evalflow.commands.words import Command, Option, SettingWords, asks_for_help, parse_words
from evalflow.config.override_words import split_word
from evalflow.errors import ConfigError
from evalflow.output.run_paths import LMEVAL_SAMPLES_PATTERN, SAMPLES_PATTERN, samples_name
from evalflow.run import rescoring

# The run settings rescore reads: the task config and where its cache is. The others (the model,
# num_fewshot, limit, ...) decide the answers, which the samples files already hold: refused.
RESCORE_SETTINGS = (
    "task",
    "include_path",
    "cache_dir",
    "trust_task_code",
    "confirm_unsafe_code",
    "code_sandbox",
    "think_end_token",
    "bootstrap_iters",
    "log_samples",
    "judge_model",
)
COMMAND = Command(
    "rescore",
    "score saved answers again, no model",
    "SAMPLES...",
    min_positional=1,
    options=(
        Option("out", str, None, "the run folder (default outputs/<date>/<time>)"),
        Option("hydra.run.dir", str, None, "the run folder, as a run names it (the same as out=)"),
    ),
    settings=SettingWords(
        RESCORE_SETTINGS, "the run settings that decide scoring; task= is required (docs/reference/run.md)"
    ),
    note="[" + " ".join(f"{k}=..." for k in RESCORE_SETTINGS) + "]; the model and prompt "
    "settings are fixed by the recorded answers, and out= (or hydra.run.dir=) names the run folder",
    doc=rescoring.__doc__ or "",
)


def main(argv: list[str]) -> int:
    """``rescore SAMPLES... task=NAME [out=DIR] [other settings]``: prints the table and the folder."""
    from evalflow.output.table import print_results

    if not argv or asks_for_help(argv):
        print_help(COMMAND)
        return 0 if argv else 2
    words = parse_words(argv, COMMAND)
    paths = [Path(a) for a in words.positional]
    for path in paths:
        if not path.is_file():
            raise ConfigError(
                f"{path}: no such samples file; give lm-eval's {LMEVAL_SAMPLES_PATTERN} or evalflow's {SAMPLES_PATTERN}"
            )
    overrides = list(words.passed)
    if "task" not in [split_word(word)[0] for word in overrides]:
        raise ConfigError(
            "rescore needs samples files and task=NAME, e.g. "
            f"python -m evalflow rescore {samples_name('gsm8k')} task=gsm8k"
        )
    out = words.options.get("out") or words.options.get("hydra.run.dir")
    if "out" in words.options and "hydra.run.dir" in words.options and out != words.options["hydra.run.dir"]:
        raise ConfigError("rescore: out= and hydra.run.dir= name two different run folders; give one of them")
    folder = (
        Path(out)
        if out
        else Path("outputs") / datetime.now().strftime("%Y-%m-%d") / datetime.now().strftime("%H-%M-%S")
    )
    results = rescoring.rescore(paths, overrides, folder)
    print_results(results)
    print(f"run folder: {folder}")
    return 0
