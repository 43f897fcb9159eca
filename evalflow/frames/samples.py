"""A run's samples as data: a page of them by query (the viewer's samples table), one in full, and
every sample of many runs as one pandas dataframe.

All three read a samples file through its index (:mod:`evalflow.frames.samples_index`): a page is
cut from the index's columns and never opens the file; one sample in full is one ``seek`` and one
parse. The viewer's filters are the dataframe's queries, literally (``q`` a :class:`SampleQuery`,
``df = samples_df([...])`` narrowed to one run and task: ``df[(df.run_id == ID) & (df.task == T)]``):

====================================  ==============================================================
viewer (``SampleQuery``)              ``samples_df`` query
====================================  ==============================================================
``filter="strict-match"``             ``df[df["filter"] == "strict-match"]``
``metric="acc", value=1.0``           ``df[df["metric.acc"] == 1.0]``
``metric="acc"`` (no value)           ``df[df["metric.acc"].notna()]``
``correct=True`` / ``False``          ``df[df["correct"] == True]`` / ``df[df["correct"] == False]``
``verdict="1"``                       ``df[df["verdict"] == "1"]``
``has_image=True``                    ``df[df["has_image"] == True]``
``stop_reason="length"``              ``df[df["stop_reason"] == "length"]``
``text="paris"``                      ``df[df["prompt"].str.contains("paris", case=False, regex=False)
                                      | df["answer"].str.contains("paris", case=False, regex=False)
                                      | df["target"].str.contains("paris", case=False, regex=False)]``
``offset=50, limit=50``               ``.iloc[50:100]`` (rows stay in the samples file's order)
====================================  ==============================================================

Filters given together are and-ed, as ``&`` between the masks. ``correct`` is the task's first
metric whose values are all 0 or 1 (``correct_metric`` in a page), NA where a record has no value;
``verdict`` is the first judge metric's verdict (its score as text, or ``"unparsed"``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evalflow.frames.samples_index import (
    FEWSHOT_DELIMITER,
    SamplesIndex,
    answer_of,
    choices_of,
    chosen,
    images_of,
    parse_json,
    prompt_of,
    samples_index,
    split_prompt,
    target_of,
    verdict_text,
)
from evalflow.output.contained import inside, kept
from evalflow.output.run_paths import (
    lmeval_results_name,
    lmeval_samples_files,
    results_file,
    samples_files,
    samples_stem,
)

if TYPE_CHECKING:
    import pandas

SHOWN_CHARS = 300  # a page row's prompt, answer and target are cut to this many characters
CODE_METRICS = ("pass_at_1", "pass_at_k")  # evalflow.scoring.code_exec's, and their "pass@k" keys


@dataclass(frozen=True)
class SampleQuery:
    """One page of one task's samples: the filters (and-ed; None: not filtered) and the window."""

    task: str
    offset: int = 0
    limit: int = 50
    filter: str | None = None  # the samples' "filter" field
    metric: str | None = None  # with value: rows whose metric == value; alone: rows with a value of it
    value: float | None = None
    correct: bool | None = None  # the task's first 0/1 metric is 1 (True) / 0 (False)
    verdict: str | None = None  # the first judge metric's verdict text
    has_image: bool | None = None
    text: str | None = None  # case-insensitive substring of the prompt, the answer or the target
    stop_reason: str | None = None  # why the first generation ended ("length": cut off at max_gen_toks)


class SampleNotFound(LookupError):
    """No record of that document (and filter) in the samples file."""


# --- the run's task settings -------------------------------------------------------------------


@dataclass(frozen=True)
class TaskSettings:
    """What a samples file's records are read with, from the run's results (``configs``)."""

    task: str
    fewshot_delimiter: str = FEWSHOT_DELIMITER
    target_delimiter: str = " "
    judges: tuple[tuple[str, str], ...] = ()  # (metric, judge prompt template)


def task_settings(run_folder: Path, samples_file: Path) -> TaskSettings:
    """The task of ``samples_file`` and its delimiters and judge prompts, read from the run's results
    file (evalflow's results.json, or lm-eval's results_<date>.json of the same date); the
    defaults when the run has none (still running, or written by another tool)."""
    task = samples_stem(samples_file)
    results = results_file(run_folder)
    if not inside(run_folder, results) and "_" in task:  # lm-eval's <task>_<date>, when its results file is there
        named, date = task.rsplit("_", 1)
        results = Path(run_folder) / lmeval_results_name(date)
        task = named if inside(run_folder, results) else task
    if not inside(run_folder, results):  # a run still running, a folder without results, a link out
        return TaskSettings(task)
    st = os.stat(results)
    return _settings(str(results), st.st_size, st.st_mtime_ns).get(task) or TaskSettings(task)


@functools.lru_cache(maxsize=256)
def _settings(path: str, size: int, mtime_ns: int) -> Mapping[str, TaskSettings]:
    """Each task's settings in one results file (keyed by its stamp too: a changed file is read
    again); only these small values are kept, not the results."""
    with open(path, "rb") as fh:
        data = parse_json(fh.read())
    configs = data.get("configs") if isinstance(data, Mapping) else None
    if not isinstance(configs, Mapping):
        return {}
    return {task: _task_settings(task, config) for task, config in configs.items() if isinstance(config, Mapping)}


def _task_settings(task: str, config: Mapping[str, Any]) -> TaskSettings:
    judges = tuple(
        (str(m["metric"]), str(m["judge"]["prompt"]))
        for m in config.get("metric_list") or ()
        if isinstance(m, Mapping) and isinstance(m.get("judge"), Mapping) and "prompt" in m["judge"]
    )
    return TaskSettings(
        task,
        str(config.get("fewshot_delimiter", FEWSHOT_DELIMITER)),
        str(config.get("target_delimiter", " ")),
        judges,
    )


# --- a page ------------------------------------------------------------------------------------


def select(index: SamplesIndex, q: SampleQuery) -> np.ndarray:
    """The rows (record numbers, file order) that pass every filter of ``q``."""
    mask = np.ones(len(index), dtype=bool)
    if q.filter is not None:
        mask &= index.filters == q.filter
    if q.metric is not None:
        if q.metric not in index.metrics:
            raise ValueError(
                f"{index.path}: no metric '{q.metric}' in its samples; its metrics are {list(index.metrics)}"
            )
        column = index.values[:, index.metrics.index(q.metric)]
        mask &= ~np.isnan(column) if q.value is None else column == float(q.value)
    elif q.value is not None:
        raise ValueError("a metric value filter needs the metric it is a value of (metric=NAME)")
    if q.correct is not None:
        mask &= index.correct == int(q.correct)
    if q.verdict is not None:
        mask &= index.verdicts == q.verdict
    if q.has_image is not None:
        mask &= index.has_image == q.has_image
    if q.stop_reason is not None:
        mask &= index.stop_reasons == q.stop_reason
    if q.text:
        needle = q.text.upper()
        prompts, answers, targets = index.upper
        found = (needle in p or needle in a or needle in t for p, a, t in zip(prompts, answers, targets))
        mask &= np.fromiter(found, dtype=bool, count=len(index))
    return np.flatnonzero(mask)


def query(run_folder: Path, samples_file: Path, q: SampleQuery, *, cut: int = SHOWN_CHARS) -> dict[str, Any]:
    """One page of ``samples_file``'s records that pass ``q``'s filters, cut from its index (built
    on the first query, then from memory: the file is not read again). Each row's prompt, answer
    and target are cut to ``cut`` characters; a static bundle, which filters every row in the
    browser, passes ``TEXT_CHARS`` so that its search reads what this one reads."""
    if q.offset < 0 or q.limit < 0:
        raise ValueError(f"offset and limit must be 0 or more (got offset={q.offset}, limit={q.limit})")
    settings = task_settings(run_folder, samples_file)
    index = samples_index(samples_file, settings.fewshot_delimiter)
    rows = select(index, q)
    return {
        "task": q.task,
        "total": len(rows),
        "offset": q.offset,
        "limit": q.limit,
        "metrics": list(index.metrics),
        "correct_metric": index.correct_metric,
        "filters": list(dict.fromkeys(index.filters.tolist())),
        "verdicts": sorted({v for v in index.verdicts.tolist() if v is not None}),
        "stop_reasons": sorted({v for v in index.stop_reasons.tolist() if v is not None}),
        # which of the page's filters can match anything here (the page shows only those controls)
        "applies": {
            "verdict": any(v is not None for v in index.verdicts.tolist()),
            "has_image": bool(index.has_image.any()),
        },
        "rows": [page_row(index, int(r), cut) for r in rows[q.offset : q.offset + q.limit]],
    }


def page_row(index: SamplesIndex, row: int, cut: int = SHOWN_CHARS) -> dict[str, Any]:
    """One row of a page: plain values only (no NaN: a metric without a value is left out)."""
    values = index.values[row]
    correct = int(index.correct[row])
    return {
        "doc_id": int(index.doc_ids[row]),
        "filter": index.filters[row],
        "prompt": index.prompts[row][:cut],
        "target": index.targets[row][:cut],
        "answer": index.answers[row][:cut],
        "metrics": {m: float(v) for m, v in zip(index.metrics, values) if not np.isnan(v)},
        "correct": None if correct < 0 else bool(correct),
        "verdict": index.verdicts[row],
        "has_image": bool(index.has_image[row]),
        "stop_reason": index.stop_reasons[row],
    }


# --- one sample in full ------------------------------------------------------------------------


def sample_detail(samples_file: Path, doc_id: int, filter: str | None) -> dict[str, Any]:
    """Document ``doc_id``'s record (under ``filter``; None: its first) in full, read by seek: the
    prompt split into its few-shot context and the question, each choice's log-likelihood and the
    winner, the generations and filtered answers, the judge's and the code execution's verdicts,
    the images (by digest: the run's cache holds the pixels) and the whole record."""
    samples_file = Path(samples_file)
    settings = task_settings(samples_file.parent, samples_file)
    index = samples_index(samples_file, settings.fewshot_delimiter)
    row = index.row(int(doc_id), filter)
    if row is None:
        which = f" under filter '{filter}'" if filter is not None else ""
        raise SampleNotFound(f"{samples_file}: no record of document {doc_id}{which}")
    (record,) = index.records([row])
    choices = choices_of(record)
    fewshot, prompt = split_prompt(prompt_of(record), settings.fewshot_delimiter)
    metrics = {m: record[m] for m in record.get("metrics") or () if m in record}
    judges = _judges(record, settings, choices)
    return {
        "task": settings.task,
        "doc_id": int(record.get("doc_id", doc_id)),
        "filter": str(record.get("filter", "none")),
        "doc": record.get("doc"),
        "fewshot": fewshot,
        "prompt": prompt,
        "choices": _choices(record, choices, settings.target_delimiter),
        "generations": None if choices is not None else _generations(record.get("resps")),
        "filtered": None if choices is not None else record.get("filtered_resps"),
        "finish": [f for per in record.get("finish") or () for f in (per if isinstance(per, list) else [per])] or None,
        "answer": answer_of(record, choices),
        "target": target_of(record, choices),
        "metrics": metrics,
        "correct_metric": index.correct_metric,
        "judge": judges[0] if judges else None,
        "judges": judges,
        "code": _code(record, metrics, answer_of(record, choices)),
        "images": _unique(images_of(record.get("arguments")) + images_of(record.get("doc"))),
        "raw": record,
    }


def _choices(
    record: Mapping[str, Any], choices: list[tuple[str, float, bool]] | None, delimiter: str
) -> list[dict[str, Any]] | None:
    if choices is None:
        return None
    won = chosen(choices)
    gold = target_of(record, choices) if len(choices) > 1 else None
    return [
        {
            "text": text.removeprefix(delimiter),
            "loglikelihood": ll,
            "is_greedy": greedy,
            "chosen": i == won,
            "gold": gold is not None and text.strip() == gold,
        }
        for i, (text, ll, greedy) in enumerate(choices)
    ]


def _generations(resps: Any) -> list[str] | None:
    """Every raw answer (per request, per repeat) as text."""
    if not isinstance(resps, list):
        return None
    flat = [r for per in resps for r in (per if isinstance(per, list) else [per])]
    return [r if isinstance(r, str) else str(r) for r in flat]


def _judges(
    record: Mapping[str, Any], settings: TaskSettings, choices: list[tuple[str, float, bool]] | None
) -> list[dict[str, Any]]:
    """Each judge metric's graded answers: the judge prompt (rendered again from the task's
    template, when the run's results hold it), the judge's answer (its rationale) and verdict."""
    judged = record.get("judge")
    if not isinstance(judged, Mapping):
        return []
    templates = dict(settings.judges)
    out = []
    for metric, rows in judged.items():
        for row in rows or ():
            response = str(row.get("response", ""))
            out.append(
                {
                    "metric": metric,
                    "response": response,
                    "prompt": _judge_prompt(templates.get(metric), record, response, choices, settings),
                    "rationale": row.get("judge_output"),
                    "verdict": verdict_text(row),
                    "score": row.get("score"),
                }
            )
    return out


def _judge_prompt(
    template: str | None,
    record: Mapping[str, Any],
    response: str,
    choices: list[tuple[str, float, bool]] | None,
    settings: TaskSettings,
) -> str | None:
    doc = record.get("doc")
    if template is None or not isinstance(doc, Mapping):
        return None
    from evalflow.errors import DataError, TaskError
    from evalflow.judges.judge_prompts import render_judge_prompt

    texts = [c[0].removeprefix(settings.target_delimiter) for c in choices] if choices else None
    target = target_of(record, choices) if choices else record.get("target")
    try:
        return render_judge_prompt(template, doc, response, target, texts, where=f"task '{settings.task}'")
    except (TaskError, DataError):
        return None


def _code(record: Mapping[str, Any], metrics: Mapping[str, Any], answer: str) -> dict[str, Any] | None:
    """A code task's verdict (its pass@1 as "passed"/"failed"; pass@k as the value) and, as its
    output, the program the sandbox ran: the answer, a newline, the task's test (the target).
    The program's printed output is not recorded by evalflow or lm-eval."""
    metric = next((m for m in metrics if m in CODE_METRICS or m.startswith("pass@")), None)
    if metric is None:
        return None
    value = metrics[metric]
    verdict = {1.0: "passed", 0.0: "failed"}.get(value, f"{value:g}") if isinstance(value, (int, float)) else None
    from evalflow.scoring.code_exec import program

    test = record.get("target")
    return {"metric": metric, "verdict": verdict, "output": program(answer, test if isinstance(test, str) else "")}


def _unique(images: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for image in images:
        seen.setdefault(str(image.get("digest") or image.get("name")), image)
    return list(seen.values())


# --- every sample as a dataframe ---------------------------------------------------------------


def run_samples(folder: Path, layout: str, results: Path | None) -> dict[str, Path]:
    """task -> samples file of one run (evalflow's folder, or lm-eval's beside its results file)."""
    if layout == "lm-eval":
        return kept(folder, lmeval_samples_files(results)) if results is not None else {}
    return kept(folder, samples_files(folder))


def samples_df(paths: Sequence[Path | str], tasks: Sequence[str] | None = None) -> pandas.DataFrame:
    """One row per sample (record) of every run found under ``paths`` (each a run folder or a
    folder of runs, evalflow's or lm-eval's), of ``tasks`` only when given. Columns:

    ``run_id`` (as :func:`evalflow.frames.discovery.find_runs` names the run), ``task``, ``doc_id``,
    ``filter``, ``prompt`` (the question: the prompt after its few-shot context), ``answer`` (the
    winning choice, or the filtered answer), ``target`` (a choice index as its text), each cut to
    2,000 characters; ``correct`` (nullable boolean: the task's first 0/1 metric), ``has_image``,
    ``verdict`` (the first judge metric's score as text, ``"unparsed"``, or None), ``stop_reason``
    (why the first generation ended: ``length`` is cut off at max_gen_toks; None without one), and
    ``metric.<name>`` (float, NaN where a record has none) per metric. Text columns are object
    dtype, so ``str.contains(case=False)`` matches exactly as the viewer's search does."""
    import pandas as pd

    from evalflow.frames.discovery import find_runs

    frames = []
    for entry in find_runs([Path(p) for p in paths]):
        for task, path in sorted(run_samples(entry.folder, entry.layout, entry.results).items()):
            if tasks is None or task in tasks:
                settings = task_settings(entry.folder, path)
                frames.append(index_frame(samples_index(path, settings.fewshot_delimiter), entry.id, task))
    if not frames:
        return pd.DataFrame({name: pd.Series([], dtype=dtype) for name, dtype in DTYPES.items()})
    return pd.concat(frames, ignore_index=True)


DTYPES = {"run_id": object, "task": object, "doc_id": "int64", "filter": object, "prompt": object, "answer": object}
DTYPES.update({"target": object, "correct": "boolean", "has_image": bool, "verdict": object, "stop_reason": object})


def index_frame(index: SamplesIndex, run_id: str, task: str) -> pandas.DataFrame:
    """One samples file's rows as :func:`samples_df` gives them."""
    import pandas as pd

    n = len(index)
    values: dict[str, Any] = {
        "run_id": [run_id] * n,
        "task": [task] * n,
        "doc_id": index.doc_ids,
        "filter": index.filters,
        "prompt": index.prompts,
        "answer": index.answers,
        "target": index.targets,
        "correct": [None if c < 0 else bool(c) for c in index.correct.tolist()],
        "has_image": index.has_image,
        "verdict": index.verdicts,
        "stop_reason": index.stop_reasons,
    }
    columns = {name: pd.Series(values[name], dtype=dtype) for name, dtype in DTYPES.items()}
    for i, metric in enumerate(index.metrics):
        columns[f"metric.{metric}"] = pd.Series(index.values[:, i], dtype="float64")
    return pd.DataFrame(columns)
