"""``python -m evalflow decontaminate``: which evaluated documents overlap a model's training data.

    python -m evalflow decontaminate task=lambada_openai ngrams=pile_13grams/ out=clean.json
    python -m evalflow task=lambada_openai samples=clean.json ...      # evaluate the clean ones

For each selected task marked ``should_decontaminate: true``, every evaluated document's
``doc_to_decontamination_query`` is matched against the training set's n-grams (lm-eval's
``get_train_overlap``; the folder format is described in :mod:`evalflow.taskspec.data.decontamination`).
It prints how many documents overlap and their ids; ``out=FILE`` writes ``{task: [clean document
ids]}``, which ``samples=FILE`` then evaluates. Other settings are a run's ``key=value`` overrides
(``limit``, ``samples``, ``include_path``, ``data_map``...); documents come through the run's
``load_docs`` and ``fewshot`` stages and cache. Tasks without ``should_decontaminate`` are listed
as skipped.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from evalflow.commands.overrides import preview_command, preview_settings
from evalflow.commands.reference import print_help
from evalflow.commands.words import Option, asks_for_help, parse_words
from evalflow.errors import ConfigError
from evalflow.run.preview import prompt_outputs

COMMAND = dataclasses.replace(
    preview_command("decontaminate", "documents that overlap training n-grams", __doc__, default_n=None),
    options=(
        Option("ngrams", str, None, "the training set's n-grams folder (required)"),
        Option("out", str, None, "write {task: [clean document ids]} here, for samples=FILE"),
    ),
)


def main(argv: list[str]) -> int:
    if asks_for_help(argv):
        print_help(COMMAND)
        return 0
    from evalflow.cache.store import CacheStore
    from evalflow.run.parts import select_tasks
    from evalflow.taskspec.data.decontamination import decontamination_query, ngram_size, overlapping_docs

    words = parse_words(argv, COMMAND)
    options = words.options
    if "ngrams" not in options:
        raise ConfigError(f"decontaminate: give the training n-grams folder, ngrams=DIR. {COMMAND.line()}")
    ngram_size(options["ngrams"])  # a bad folder fails before any data is loaded
    settings = preview_settings(words.passed, "decontaminate", n_limits=False)
    clean: dict[str, list[int]] = {}
    store = CacheStore(settings.cache_dir)
    try:
        for task in select_tasks(settings).tasks:
            if not task.should_decontaminate:
                print(f"{task.task}: skipped (should_decontaminate is not set)")
                continue
            outputs = prompt_outputs(task, settings, store, ("load_docs", "fewshot"))
            docs = outputs["load_docs"].docs
            ids = [ctx.doc_id for ctx in outputs["fewshot"]]
            queries = {i: decontamination_query(task, docs[i], doc_id=i) for i in ids}
            dirty = sorted(overlapping_docs(queries, options["ngrams"]))
            clean[task.task] = [i for i in ids if i not in set(dirty)]
            shown = ", ".join(map(str, dirty[:20])) + (", ..." if len(dirty) > 20 else "")
            print(
                f"{task.task}: {len(dirty)} of {len(ids)} documents overlap the training n-grams"
                + (f" ({shown})" if dirty else "")
            )
    finally:
        store.close()
    if "out" in options:
        Path(options["out"]).write_text(json.dumps(clean, indent=1) + "\n", encoding="utf-8")
        print(
            f"clean document ids written to {options['out']} (evaluate them with samples={options['out']})",
            file=sys.stderr,
        )
    return 0
