"""``python -m evalflow show``: a task's first documents as the model would see them, no model loaded.

    python -m evalflow show task=arc_easy                     # the first 3 documents
    python -m evalflow show task=gsm8k n=2 num_fewshot=5 data_map=shared
    python -m evalflow show task=mmlu_anatomy n=1 apply_chat_template=true model=smollm2

lm-eval's ``--write_out``: for each document its rendered prompt (description, few-shot examples,
its own text), its target, and every request the model would receive. The settings are a run's
(``key=value``, the same names and meanings), and the documents go through the run's own stages
``load_docs → fewshot → instances`` with the run's cache: what ``show`` prints is what a run with
those settings sends, and a later run reuses what ``show`` computed. Without ``limit`` or
``samples``, ``limit`` is ``n`` (the first ``n`` documents' prompts do not depend on later ones).
``model`` defaults to ``dummy`` here; it matters only with ``apply_chat_template``. An image task's
prompt keeps its ``<image>`` placeholders, followed by one line naming each image's size, mode and
pixel hash (the key its requests are cached under).
"""

from __future__ import annotations

import sys

from evalflow.commands.overrides import preview_command, preview_settings
from evalflow.commands.reference import print_help
from evalflow.commands.words import asks_for_help, parse_words
from evalflow.run.preview import prompt_outputs, write_task

COMMAND = preview_command("show", "print prompts, targets and requests (no model)", __doc__)


def main(argv: list[str]) -> int:
    if asks_for_help(argv):
        print_help(COMMAND)
        return 0
    from evalflow.cache.store import CacheStore
    from evalflow.run.parts import select_tasks

    words = parse_words(argv, COMMAND)
    n = words.value("n")
    settings = preview_settings(words.passed, "show", n)
    store = CacheStore(settings.cache_dir)
    try:
        for task in select_tasks(settings).tasks:
            write_task(task, prompt_outputs(task, settings, store), n, sys.stdout, settings.code_sandbox)
    finally:
        store.close()
    return 0
