"""The report's per-document view: per task, each document's prompt, target, and per run its
answers, filtered answer and scores (and an image task's thumbnails: each run's, labelled, where
the runs' pixels differ), embedded as one gzip-compressed, base64-encoded JSON blob per
task that the page decodes only when the task is opened.

Rendering every document into the page made a 20-documents-per-subject mmlu pair 4.5 MB of HTML
whose table rows the browser laid out before showing anything; a blob inside a
``<script type="application/gzip+base64">`` is not parsed as markup, so the page's first paint
no longer grows with the documents, and gzip takes most of the repetition out of prompts and
answers. A task is shown for the runs that have it (a task × shot sweep has each task in only some
runs), and :func:`document_notes` says what is left out and why.

    views = document_view(runs, ["A", "B"])
    json.loads(gzip.decompress(base64.b64decode(encode_docs(views[0]))))["docs"][0]["prompt"]
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Mapping, Sequence
from typing import Any

from evalflow.insight.report_images import Thumbnails
from evalflow.output.run_folder import Run, image_digests


def document_view(runs: Sequence[Run], labels: Sequence[str], max_docs: int | None = None) -> list[dict[str, Any]]:
    """Per task (in any run with samples for it): the documents every such run scored, the first
    ``max_docs`` of them when given."""
    views = []
    thumbs = Thumbnails()
    try:
        for task in _tasks(runs):
            views.append(_task_view(runs, labels, task, max_docs, thumbs))
    finally:
        thumbs.close()
    return views


def _task_view(
    runs: Sequence[Run], labels: Sequence[str], task: str, max_docs: int | None, thumbs: Thumbnails
) -> dict[str, Any]:
    having = [i for i, r in enumerate(runs) if task in r.samples_files]
    per_run = [_by_doc(runs[i], task) for i in having]
    all_ids = set.union(*(set(p) for p in per_run))
    doc_ids = sorted(set.intersection(*(set(p) for p in per_run)))
    shown = doc_ids if max_docs is None else doc_ids[:max_docs]
    columns = [labels[i] for i in having]
    hashed = all(runs[i].hashes_images for i in having)  # lm-eval's samples name no pixels to compare
    manifests = [runs[i].manifest for i in having]
    docs = []
    for doc_id in shown:
        rows = [p[doc_id] for p in per_run]
        docs.append(_doc(doc_id, rows, columns, *_images(manifests, rows, columns, thumbs, hashed)))
    return {
        "task": task,
        "runs": having,
        "columns": columns,
        "docs": docs,
        "filter": runs[having[0]].filters(task)[0],
        "left_out": len(doc_ids) - len(shown),
        "unpaired": len(all_ids) - len(doc_ids),
        "disagree": sum(d["disagree"] for d in docs),
    }


def _tasks(runs: Sequence[Run]) -> list[str]:
    """Leaf tasks with samples in some run, in the order the runs list them."""
    return list(dict.fromkeys(t for r in runs for t in r.tasks() if t in r.samples_files))


def _by_doc(run: Run, task: str) -> dict[int, dict[str, Any]]:
    """doc_id -> the run's row under the task's first filter (the one the table shows)."""
    first = run.filters(task)[0]
    return {int(r["doc_id"]): r for r in run.rows(task) if str(r.get("filter", "none")) == first}


def _images(
    manifests: Sequence[Mapping[str, Any]],
    rows: Sequence[dict[str, Any]],
    labels: Sequence[str],
    thumbs: Thumbnails,
    hashed: bool,
) -> tuple[list[dict[str, str]], bool]:
    """The document's thumbnails, and whether the runs' pixels differ: once when every run showed
    the same, else each run's, labelled with the run (an edited image file)."""
    if not hashed or len({tuple(image_digests(r.get("arguments"))) for r in rows}) <= 1:
        return thumbs.of_row(manifests[0], rows[0]), False
    return [
        {**im, "label": f"{label}: {im['label']}"}
        for manifest, row, label in zip(manifests, rows, labels)
        for im in thumbs.of_row(manifest, row)
    ], True


def _doc(
    doc_id: int,
    rows: Sequence[dict[str, Any]],
    labels: Sequence[str],
    images: list[dict[str, str]],
    images_differ: bool,
) -> dict[str, Any]:
    scores = [{m: r.get(m) for m in r.get("metrics", [])} for r in rows]
    args = list(rows[0].get("arguments", {}).values())
    return {
        "doc_id": doc_id,
        "prompt": str(args[0].get("arg_0", "")) if args else "",
        **({"images": images} if images else {}),  # thumbnails of an image task (report_images)
        "target": str(rows[0].get("target", "")),
        "runs": [
            {
                "label": lb,
                "resps": _short(r.get("resps")),
                "filtered": _short(r.get("filtered_resps")),
                "scores": ", ".join(f"{k}={_fmt(v)}" for k, v in s.items()),
            }
            for lb, r, s in zip(labels, rows, scores)
        ],
        "disagree": images_differ or (len(rows) > 1 and any(s != scores[0] for s in scores[1:])),
    }


def _short(value: Any, limit: int = 400) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "…"


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def encode_docs(view: dict[str, Any]) -> str:
    """The task's documents as base64 of gzip of JSON (mtime 0: the same runs give the same page)."""
    payload = json.dumps(
        {"columns": view["columns"], "docs": view["docs"]}, ensure_ascii=False, separators=(",", ":")
    ).encode("utf-8")
    return base64.b64encode(gzip.compress(payload, compresslevel=6, mtime=0)).decode("ascii")


def document_notes(
    runs: Sequence[Run], labels: Sequence[str], views: Sequence[dict[str, Any]], max_docs: int | None
) -> list[str]:
    """What the Documents section leaves out, one line per reason."""
    notes = []
    without = [labels[i] for i, r in enumerate(runs) if not r.samples_files]
    if without:
        notes.append(
            f"no samples files in {', '.join(without)} (evalflow: log_samples=true; lm-eval: "
            "--log_samples): their documents are not shown"
        )
    for view in views:
        task, having = view["task"], view["runs"]
        if len(having) < len(runs) and len(runs) > 1:
            runs_with = ", ".join(view["columns"])
            notes.append(
                f"{task} is only in {runs_with}: its documents show {'that run' if len(having) == 1 else 'those runs'}"
            )
        if view["unpaired"]:
            notes.append(f"{task}: {view['unpaired']} documents not scored by every run that has it are left out")
        if view["left_out"]:
            notes.append(
                f"{task}: the first {max_docs} of {max_docs + view['left_out']} documents are embedded "
                "(report docs=N sets how many; docs=all embeds every one)"
            )
    return notes
