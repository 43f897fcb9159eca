"""One samples file's index: what the viewer pages, filters and searches, built in one pass and cached.

A samples file (evalflow's ``samples_<task>.jsonl``, lm-eval's ``samples_<task>_<date>.jsonl``: the
same record schema, :mod:`evalflow.output.samples`) can hold tens of megabytes of prompts. A page of
samples needs, per record, only a few small values; so the file is read once and each record kept as
its byte offset and length (to read it again by ``seek`` when one sample is opened in full) and:

- ``doc_id``, ``filter`` and each metric's value (a float matrix, NaN where a record has none);
- ``correct``: the task's first metric whose values are all 0 or 1 (``acc``, ``exact_match``), as
  1, 0 or -1 (no value);
- ``verdict``: the first judge metric's verdict on the record's answer, as text: the score (``"1"``,
  ``"4.5"``) or ``"unparsed"`` (the judge's answer did not parse); None for an unjudged record;
- ``has_image``: whether the record's document or requests show an image;
- ``stop_reason``: why its first generation ended (evalflow's ``finish``: ``length`` and
  ``thinking_unclosed`` are the truncated ones), None for lm-eval's and for log-likelihoods;
- ``prompt`` (the question: the prompt after its last few-shot delimiter), ``answer`` (a multiple
  choice record's winning choice, a generation's filtered answer) and ``target`` (a choice index as
  its choice's text), each cut to :data:`TEXT_CHARS` characters: what the text search reads.

The index is kept in memory by :func:`samples_index`, an LRU keyed by the file's path, size and
modification time (a file that changes is indexed again); nothing is ever written beside a run.
The full mmlu run (57 files, 14,042 records, 50 MB) indexes in 0.6 s on two idle cores and holds
11 MB; a warm page is cut from the columns in under a millisecond.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from evalflow.errors import RunFolderError

try:  # orjson parses a samples line ~4x faster; json is the fallback (and reads NaN, which orjson refuses)
    import orjson

    def parse_json(data: bytes) -> Any:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            return json.loads(data)

except ImportError:  # pragma: no cover - orjson is a dependency of evalflow's output

    def parse_json(data: bytes) -> Any:
        return json.loads(data)


TEXT_CHARS = 2000  # each of prompt, answer and target, as the index keeps them and the search reads them
FEWSHOT_DELIMITER = "\n\n"  # lm-eval's default fewshot_delimiter, when the run's config does not say
MAX_FILES = 512  # indexes kept in memory at most
MAX_BYTES = 512 * 1024 * 1024  # and their estimated size at most


@dataclass(frozen=True, eq=False)
class SamplesIndex:
    """Per record of one samples file (in file order), the values a page shows and its filters read."""

    path: Path
    stamp: tuple[int, int]  # (size, mtime_ns) of the file as read
    delimiter: str  # the few-shot delimiter the prompts were split at
    offsets: np.ndarray  # int64 byte offset of each record's line
    lengths: np.ndarray  # int64 byte length of each line
    doc_ids: np.ndarray  # int64
    filters: np.ndarray  # object (str)
    metrics: tuple[str, ...]  # metric names, in the records' order
    values: np.ndarray  # float64 [records, metrics], NaN: no value
    correct_metric: str | None  # the first metric with only 0/1 values
    correct: np.ndarray  # int8: 1, 0, or -1 (no value of correct_metric)
    verdicts: np.ndarray  # object (str | None)
    has_image: np.ndarray  # bool
    prompts: np.ndarray  # object (str): the question part of each prompt, cut to TEXT_CHARS
    answers: np.ndarray  # object (str)
    targets: np.ndarray  # object (str)
    stop_reasons: np.ndarray  # object (str | None): why the first generation ended (evalflow's ``finish``)
    nbytes: int = field(default=0)  # estimated memory held

    def __len__(self) -> int:
        return len(self.offsets)

    @cached_property
    def upper(self) -> tuple[list[str], list[str], list[str]]:
        """prompt, answer and target upper-cased (what a case-insensitive search compares, as
        pandas' ``str.contains(case=False, regex=False)`` does), made on the first search."""
        return ([s.upper() for s in self.prompts], [s.upper() for s in self.answers], [s.upper() for s in self.targets])

    def row(self, doc_id: int, filter_name: str | None) -> int | None:
        """The record of ``doc_id`` under ``filter_name`` (None: its first filter)."""
        hits = self.doc_ids == doc_id
        if filter_name is not None:
            hits &= self.filters == filter_name
        found = np.flatnonzero(hits)
        return int(found[0]) if len(found) else None

    def records(self, rows: Sequence[int]) -> list[dict[str, Any]]:
        """The full records of ``rows``, read by seek (the file is opened once, nothing else parsed)."""
        out = []
        with open(self.path, "rb") as fh:
            for row in rows:
                fh.seek(int(self.offsets[row]))
                out.append(parse_json(fh.read(int(self.lengths[row]))))
        return out


# --- the cache ---------------------------------------------------------------------------------

_CACHE: OrderedDict[tuple[str, str], SamplesIndex] = OrderedDict()
_LOCK = threading.Lock()


def samples_index(path: Path, delimiter: str = FEWSHOT_DELIMITER) -> SamplesIndex:
    """The index of ``path``: from memory while the file's size and mtime are those it was built
    from, else built anew (one read, one parse per line) and kept, the least recently used dropped."""
    st = os.stat(path)
    key = (os.path.abspath(path), delimiter)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None and hit.stamp == (st.st_size, st.st_mtime_ns):
            _CACHE.move_to_end(key)
            return hit
    built = build_index(Path(path), delimiter)
    with _LOCK:
        _CACHE[key] = built
        _CACHE.move_to_end(key)
        while len(_CACHE) > 1 and (len(_CACHE) > MAX_FILES or sum(i.nbytes for i in _CACHE.values()) > MAX_BYTES):
            _CACHE.popitem(last=False)
    return built


def cache_info() -> dict[str, int]:
    """How many indexes are held and their estimated bytes (the benchmark prints it)."""
    with _LOCK:
        return {"files": len(_CACHE), "bytes": sum(i.nbytes for i in _CACHE.values())}


def clear_cache() -> None:
    with _LOCK:
        _CACHE.clear()


# --- building ----------------------------------------------------------------------------------


def build_index(path: Path, delimiter: str = FEWSHOT_DELIMITER) -> SamplesIndex:
    """Read ``path`` once and index every record (a last line cut short, a file still being
    written, is left out; a bad line elsewhere is an error naming the file and line)."""
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        data = fh.read()
    entries, offset = [], 0
    lines = data.split(b"\n")
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                record = parse_json(line)
            except ValueError as exc:
                if number == len(lines):  # no newline yet: the writer is still writing it
                    break
                raise RunFolderError(f"{path}, line {number}: not JSON ({exc}); is the file complete?") from None
            entries.append((offset, len(line), record, b"__image__" in line or b'"visual"' in line))
        offset += len(line) + 1
    return _columns(path, (st.st_size, st.st_mtime_ns), delimiter, entries)


def _columns(
    path: Path, stamp: tuple[int, int], delimiter: str, entries: list[tuple[int, int, Any, bool]]
) -> SamplesIndex:
    metrics: dict[str, None] = {}
    rows = []
    for offset, length, record, maybe_image in entries:
        values = metric_values(record)
        metrics.update(dict.fromkeys(values))
        choices = choices_of(record)
        rows.append(
            (
                offset,
                length,
                int(record.get("doc_id", -1)),
                str(record.get("filter", "none")),
                values,
                verdict_of(record),
                maybe_image and has_image(record),
                split_prompt(prompt_of(record), delimiter)[1][:TEXT_CHARS],
                answer_of(record, choices)[:TEXT_CHARS],
                target_of(record, choices)[:TEXT_CHARS],
                stop_reason_of(record),
            )
        )
    names = tuple(metrics)
    matrix = np.array([[r[4].get(m, np.nan) for m in names] for r in rows], dtype=np.float64).reshape(len(rows), -1)
    correct_metric = next((m for i, m in enumerate(names) if _zero_one(matrix[:, i])), None)
    correct = np.full(len(rows), -1, dtype=np.int8)
    if correct_metric is not None:
        column = matrix[:, names.index(correct_metric)]
        correct[~np.isnan(column)] = column[~np.isnan(column)].astype(np.int8)

    def objects(i: int) -> np.ndarray:
        out = np.empty(len(rows), dtype=object)
        out[:] = [r[i] for r in rows]
        return out

    filters, verdicts, prompts, answers, targets, stops = (objects(i) for i in (3, 5, 7, 8, 9, 10))
    offsets, lengths, doc_ids = (np.array([r[i] for r in rows], dtype=np.int64) for i in (0, 1, 2))
    texts = sum(sys.getsizeof(s) + 8 for column in (filters, prompts, answers, targets) for s in column)
    return SamplesIndex(
        path=path,
        stamp=stamp,
        delimiter=delimiter,
        offsets=offsets,
        lengths=lengths,
        doc_ids=doc_ids,
        filters=filters,
        metrics=names,
        values=matrix,
        correct_metric=correct_metric,
        correct=correct,
        verdicts=verdicts,
        has_image=np.array([r[6] for r in rows], dtype=bool),
        prompts=prompts,
        answers=answers,
        targets=targets,
        stop_reasons=stops,
        nbytes=texts + sum(a.nbytes for a in (offsets, lengths, doc_ids, matrix, correct)) + 16 * len(rows),
    )


def _zero_one(column: np.ndarray) -> bool:
    known = column[~np.isnan(column)]
    return len(known) > 0 and bool(np.isin(known, (0.0, 1.0)).all())


# --- reading one record ------------------------------------------------------------------------


def metric_values(record: Mapping[str, Any]) -> dict[str, float]:
    """The record's numeric metric values (``metrics`` names them), in the record's key order."""
    named = set(record.get("metrics") or ())
    return {
        k: float(v) for k, v in record.items() if k in named and isinstance(v, (int, float)) and not isinstance(v, str)
    }


def prompt_of(record: Mapping[str, Any]) -> str:
    """The first request's context (``arguments.gen_args_0.arg_0``): the prompt the model read."""
    args = record.get("arguments")
    first: Any = None
    if isinstance(args, Mapping) and args:
        first = next(iter(args.values()))
        first = first.get("arg_0") if isinstance(first, Mapping) else None
    elif isinstance(args, list) and args and isinstance(args[0], list) and args[0]:
        first = args[0][0]
    return first if isinstance(first, str) else ("" if first is None else json.dumps(first, default=str))


def split_prompt(prompt: str, delimiter: str = FEWSHOT_DELIMITER) -> tuple[str | None, str]:
    """(the context before the question: description and few-shot examples, or None; the question),
    split at the last few-shot delimiter. A question that itself holds the delimiter is split there
    too: the fold then holds its start, which the detail view shows one click away."""
    at = prompt.rfind(delimiter) if delimiter else -1
    if at <= 0 or not prompt[at + len(delimiter) :].strip():
        return None, prompt
    return prompt[:at], prompt[at + len(delimiter) :]


def choices_of(record: Mapping[str, Any]) -> list[tuple[str, float, bool]] | None:
    """A log-likelihood record's (continuation, log-likelihood, is_greedy) per request, or None
    (a generation, a rolling log-likelihood); lm-eval writes the pairs as strings, evalflow as values."""
    args, answered = record.get("arguments"), record.get("filtered_resps")
    if not isinstance(args, Mapping) or not isinstance(answered, list) or len(answered) != len(args) or not args:
        return None
    out = []
    for request, pair in zip(args.values(), answered):
        text = request.get("arg_1") if isinstance(request, Mapping) else None
        if not isinstance(text, str) or not isinstance(pair, list) or len(pair) != 2:
            return None
        try:
            out.append((text, float(pair[0]), pair[1] in (True, "True")))
        except (TypeError, ValueError):
            return None
    return out


def chosen(choices: Sequence[tuple[str, float, bool]]) -> int:
    """The winning choice: the largest log-likelihood, the first of ties (``acc``'s argmax)."""
    return int(np.argmax([ll for _, ll, _ in choices]))


def answer_of(record: Mapping[str, Any], choices: Sequence[tuple[str, float, bool]] | None) -> str:
    """The record's answer as text: the winning choice (several), whether the continuation is the
    greedy one (a single log-likelihood), else the filtered answer."""
    if choices is not None and len(choices) > 1:
        return choices[chosen(choices)][0].strip()
    if choices is not None:
        return "greedy" if choices[0][2] else "not greedy"
    answered = record.get("filtered_resps")
    while isinstance(answered, list) and len(answered) == 1:
        answered = answered[0]
    return answered if isinstance(answered, str) else json.dumps(answered, default=str)


def target_of(record: Mapping[str, Any], choices: Sequence[tuple[str, float, bool]] | None) -> str:
    """The target as text: a choice index (lm-eval writes ``"0"``) as its choice's text."""
    target = record.get("target")
    if choices is not None and len(choices) > 1:
        index = int(target) if isinstance(target, str) and target.isdigit() else target
        if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(choices):
            return choices[index][0].strip()
    return target if isinstance(target, str) else json.dumps(target, default=str)


def verdict_of(record: Mapping[str, Any]) -> str | None:
    """The first judge metric's verdict on the record's (first graded) answer: its score as text,
    or ``"unparsed"``; None for a record no judge graded."""
    judged = record.get("judge")
    if not isinstance(judged, Mapping):
        return None
    for rows in judged.values():
        if rows:
            return verdict_text(rows[0])
    return None


def verdict_text(row: Mapping[str, Any]) -> str:
    score = row.get("score")
    if not row.get("parsed", True):
        return "unparsed"
    return f"{score:g}" if isinstance(score, (int, float)) else str(score)


def stop_reason_of(record: Mapping[str, Any]) -> str | None:
    """Why the record's first generation ended (``stop``, ``eos``, ``length``,
    ``thinking_unclosed``, ``error``), from evalflow's ``finish``; None where nothing says."""
    finish = record.get("finish")
    while isinstance(finish, list) and finish:
        finish = finish[0]
    reason = finish.get("stop_reason") if isinstance(finish, Mapping) else None
    return str(reason) if reason is not None else None


def has_image(record: Mapping[str, Any]) -> bool:
    return bool(images_of(record.get("arguments"))) or bool(images_of(record.get("doc")))


def images_of(value: Any) -> list[dict[str, Any]]:
    """The images a samples value shows: evalflow's ``{"__image__": digest, width, height, mode}``,
    and lm-eval's ``visual`` entries (a repr or a name: no pixels), in order."""
    if isinstance(value, Mapping):
        if "__image__" in value:
            return [{"digest": str(value["__image__"]), **{k: value.get(k) for k in ("width", "height", "mode")}}]
        found = [i for v in value.values() for i in images_of(v)]
        visual = value.get("visual")
        if isinstance(visual, list):
            found += [{"name": str(v)[:200]} for v in visual if not isinstance(v, Mapping)]
        return found
    if isinstance(value, list):
        return [i for v in value for i in images_of(v)]
    return []
