"""``python -m evalflow validate``: check task configs before spending model time on them.

    python -m evalflow validate task=my_task include_path=[my_tasks]
    python -m evalflow validate task=mmlu n=1 data_map=shared        # every subject

For each selected task: its YAML resolves (includes, groups, ``!function`` references), its
metrics and aggregations and its filters exist with the options given, every ``!function`` it
names imports (the load-time checks of :mod:`evalflow.run.load_checks`, which a run makes too), and its
templates render on the first ``n`` documents (default 3): the prompts and requests through the
run's own stages (as :mod:`evalflow.run.preview` shows them), plus each document's target, choices and
(``should_decontaminate``) decontamination query. Every task is checked; each failure is printed
as the usual one-paragraph error, and the exit code is 2 if any task failed, else 0. Load-time
warnings (a literal ``\\n`` in a YAML, a ``num_fewshot`` a task ignores, a metric the task's
output type never computes) are printed first. A task that runs but scores in a way its author
cannot have meant (such a metric; a multiple_choice label outside its choices, named by document)
is listed as ``warn``, not ``ok``; it does not fail validation, since it runs as in lm-eval.
Settings are a run's ``key=value`` overrides; no model is loaded.
"""

from __future__ import annotations

import sys

from evalflow.commands.overrides import preview_command, preview_settings
from evalflow.commands.reference import print_help
from evalflow.commands.words import asks_for_help, parse_words
from evalflow.errors import EvalflowError
from evalflow.run import load_checks
from evalflow.run.validate_task import check_task, located

COMMAND = preview_command("validate", "check task configs on their first documents", __doc__)


def main(argv: list[str]) -> int:
    if asks_for_help(argv):
        print_help(COMMAND)
        return 0
    from evalflow.cache.store import CacheStore
    from evalflow.run.parts import select_tasks

    words = parse_words(argv, COMMAND)
    n = words.value("n")
    settings = preview_settings(words.passed, "validate", n)
    # unknown names, bad YAML, untrusted code: the usual error; the load-time checks run per task below
    selection = select_tasks(settings, checked=False)
    for line in load_checks.load_warnings(selection.tasks, settings.num_fewshot):
        print(f"evalflow: warning: {line}", file=sys.stderr)
    store = CacheStore(settings.cache_dir)
    failed = warned = 0
    try:
        for task in selection.tasks:
            try:
                checked = check_task(task, settings, store, n)
            except EvalflowError as exc:
                failed += 1
                print(f"evalflow: error: {located(exc, task)}", file=sys.stderr)
                continue
            for line in checked.warnings:
                print(f"evalflow: warning: {line}", file=sys.stderr)
            warned += not checked.clean
            print(f"{'ok ' if checked.clean else 'warn'} {task.task}: {checked.summary}")
    finally:
        store.close()
    if warned:
        print(f"{warned} of {len(selection.tasks)} task(s) run with the warnings above", file=sys.stderr)
    if failed:
        print(f"{failed} of {len(selection.tasks)} task(s) failed validation", file=sys.stderr)
        return 2
    return 0
