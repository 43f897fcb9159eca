"""The lines a run prints after its results table, read from its manifest.json (what the run
recorded, so a line can never disagree with the record): what ran its code
(:mod:`evalflow.output.code_execution`), one line on its cache, one on its tokens and one on their
cost (:mod:`evalflow.output.cost`), and a paragraph per task whose generations were cut off
(:mod:`evalflow.output.truncation`). A user who did not ask for a cache must see that answers came
from one, how many, and from which folder, and how to have them computed anew instead:

    >>> manifest = {"inference": {"requests": 600, "computed": 0, "cached": 600},
    ...             "cache_dir": "/root/.cache/evalflow", "recompute": None, "model_identity": {"type": "hf"}}
    >>> print(cache_line(manifest))  # doctest: +NORMALIZE_WHITESPACE
    cache: 600 of 600 model answers read from the cache /root/.cache/evalflow, 0 computed
    (recompute=answers computes them anew)
    >>> recomputed = {"inference": {"requests": 600, "computed": 600, "cached": 0}, "recompute": "answers"}
    >>> print(cache_line({**manifest, **recomputed}))  # doctest: +NORMALIZE_WHITESPACE
    cache: 0 of 600 model answers read (recompute=answers: computed anew), 600 computed and written
    to the cache /root/.cache/evalflow
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from evalflow.output.code_execution import summary_lines as code_lines
from evalflow.output.cost import cost_line, token_line
from evalflow.output.run_paths import manifest_file
from evalflow.output.truncation import truncation_lines


@dataclass(frozen=True)
class Wording:
    """How one command line names reading or not reading the cache, for :func:`cache_line`."""

    unread: str  # why answers were not read ("{recompute}" stands for the setting's value)
    fresh: str  # how to have cached answers computed anew
    raise_cap: str  # how to set max_gen_toks ("{n}" stands for the number)


NATIVE = Wording(
    "recompute={recompute}: computed anew", "recompute=answers computes them anew", "gen_kwargs={{max_gen_toks:{n}}}"
)
LM_EVAL = Wording(
    "no --use_cache: computed anew, as lm-eval does",
    "leave out --use_cache to compute them anew",
    "--gen_kwargs max_gen_toks={n}",
)


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The run folder's manifest, or None when there is none."""
    path = manifest_file(folder)
    if not path.is_file():
        return None
    data = path.read_bytes()  # a megabyte on a large suite: orjson reads it ~4x faster than json
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:  # NaN or infinity, which json writes and reads
        return json.loads(data)


def summary_lines(folder: Path, wording: Wording = NATIVE) -> list[str]:
    """What the run folder's manifest says of the code that ran and of the cache, one line each."""
    manifest = read_manifest(folder)
    if manifest is None:
        return []
    spent = [line for line in (token_line(manifest), cost_line(manifest)) if line]
    return [
        *code_lines(manifest.get("code_execution")),
        cache_line(manifest, wording),
        *spent,
        *truncation_lines(manifest, wording.raise_cap),
    ]


def cache_line(manifest: Mapping[str, Any], wording: Wording = NATIVE) -> str:
    """One line: the model answers (the inference stage's requests) read from the cache, those
    computed, the cache folder, and the judges' answers likewise when the run had judges."""
    counts, folder = manifest["inference"], manifest["cache_dir"]
    recompute = manifest.get("recompute")
    head = f"cache: {_answers(counts)}"
    if manifest.get("model_identity") is None:  # a model object without identity(): nothing stored
        line = (
            f"{head}, {counts['computed']} computed and not stored (the model object has no identity); "
            f"cache folder {folder}"
        )
    elif recompute:
        unread = wording.unread.format(recompute=recompute)
        line = f"{head} ({unread}), {counts['computed']} computed and written to the cache {folder}"
    else:
        hint = f" ({wording.fresh})" if counts["cached"] else ""
        line = f"{head} from the cache {folder}, {counts['computed']} computed{hint}"
    judge = manifest.get("judge")
    return line if judge is None else f"{line}; judges: {_answers(judge)}, {judge['computed']} computed"


def _answers(counts: Mapping[str, Any]) -> str:
    return f"{counts['cached']} of {counts['requests']} model answers read"
