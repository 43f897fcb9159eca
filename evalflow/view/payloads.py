"""Each route's JSON, the one rendering the server sends and the bundle writes.

A route is ``ROUTES[path](catalog, params)``: ``params`` is the request's query (text values, as
the browser sent them), the answer a plain JSON-able dict. The server calls these on each request
(in a worker thread) and ``view bundle`` calls the same functions to write its data files, so a
page served live and a page read from a bundle are built from the same payloads.

A run is named only by its catalog id (:class:`Catalog`, built by
:func:`evalflow.frames.discovery.find_runs`); a request's text never becomes a path, except the
image name, which :mod:`evalflow.view.safe_paths` keeps inside the run folder. What is costly and
cannot change while a run's results.json stays the same (a run's summary and detail, a
comparison) is computed once per results file and kept.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evalflow.errors import EvalflowError
from evalflow.frames.across import always_wrong, reasoning_figures
from evalflow.frames.discovery import EVALFLOW, LMEVAL, RunEntry, find_runs
from evalflow.frames.runs import run_detail, run_summary, unreadable_reason
from evalflow.frames.samples import SampleQuery, query, sample_detail
from evalflow.frames.status import live_progress
from evalflow.insight.comparison import DEFAULT_ITERS
from evalflow.insight.explanation import explain_compared, read_manifest
from evalflow.insight.gate import GateSettings
from evalflow.output.contained import inside, kept, left_out
from evalflow.output.run_folder import Run, load_run
from evalflow.output.run_paths import (
    MANIFEST,
    gate_record_file,
    lmeval_samples_files,
    manifest_file,
    results_file,
    samples_files,
    snapshot_config,
    snapshot_overrides,
)
from evalflow.view.comparing import compare_payload
from evalflow.view.safe_paths import UnsafePath, resolve_under
from evalflow.view.side_by_side import side_by_side

Params = Mapping[str, str]
Route = Callable[["Catalog", Params], Any]
PAGE_LIMIT = 1000  # the most rows one samples page may ask for (``all=1``: the bundle's whole task)
ALL_ROWS = 1 << 30
# Payloads kept, the oldest dropped first: a run's summary and detail are small and asked for
# often (every runs list); a comparison or an across-runs view can hold 500 pairs of answers.
MEMO_SIZES = {"summary": 4096, "detail": 256}
MEMO_HEAVY = 32  # comparisons, always-wrong documents, reasoning figures


class NotFound(EvalflowError):
    """An id, task or document the catalog does not know (the server answers 404)."""


class BadRequest(EvalflowError):
    """A query word missing or of the wrong kind (the server answers 400)."""


class Unreadable(EvalflowError):
    """A run's files could not be read (damaged, or of another tool): that run's pages say why
    (the server answers 422); the other runs are not affected."""


def isolated(route: Route) -> Route:
    """``route``, with an unexpected failure reading a run's files (a field of the wrong type, a
    damaged file) turned into :class:`Unreadable` naming the run and the reason, rather than a
    server error or, in a bundle, the whole bundle stopped."""

    @functools.wraps(route)
    def guarded(catalog: Catalog, params: Params) -> Any:
        try:
            return route(catalog, params)
        except EvalflowError:
            raise
        except Exception as exc:
            named = params.get("id") or params.get("ids", "").replace(IDS_APART, ",")
            raise Unreadable(
                f"run {named} could not be read: {type(exc).__name__}: {exc}; a file of its run folder is "
                "damaged or was written by another tool"
            ) from exc

    return guarded


def json_text(value: Any, **options: Any) -> str:
    """``value`` as strict JSON: a NaN or infinity (a metric that could not be computed) becomes
    null, since a browser's JSON.parse refuses them; other non-JSON values become their text."""
    try:
        return json.dumps(value, allow_nan=False, default=str, **options)
    except ValueError:
        return json.dumps(_finite(value), allow_nan=False, default=str, **options)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _stamp(entry: RunEntry) -> tuple[Any, ...] | None:
    """What identifies a finished run's content (its results file, written last, by time and size);
    None for a run without one (running or failed): its payloads are computed each time."""
    if entry.results is None:
        return None
    try:
        stat = entry.results.stat()
    except OSError:
        return None
    return (entry.folder, entry.results, stat.st_mtime_ns, stat.st_size)


class Catalog:
    """The runs under some folders, found once and again on :meth:`refresh`, with the payloads of
    finished runs kept by their results file's stamp (a re-run folder is read again)."""

    def __init__(self, roots: Sequence[Path | str]) -> None:
        self.roots = tuple(Path(r) for r in roots)
        self._lock = threading.Lock()
        self._memo: dict[str, dict[tuple[Any, ...], Any]] = {}
        self.entries: dict[str, RunEntry] = {}
        self.refresh()

    def refresh(self) -> None:
        """Find the runs again (a run started or finished since)."""
        self.entries = {e.id: e for e in find_runs(self.roots)}

    def entry(self, run_id: str | None) -> RunEntry:
        if not run_id:
            raise BadRequest("id= is missing: name a run by the id /api/runs gives it")
        found = self.entries.get(run_id)
        if found is not None and found.results is None and results_file(found.folder).exists():
            self.refresh()  # it was found running and has finished since: its entry names its results now
            found = self.entries.get(run_id)
        if found is None:
            raise NotFound(f"no run with id {run_id!r} under {', '.join(map(str, self.roots))}")
        return found

    def memo(self, key: tuple[Any, ...], entries: Sequence[RunEntry], compute: Callable[[], Any]) -> Any:
        """``compute()``, kept while every run in ``entries`` keeps the same results file."""
        stamps = tuple(_stamp(e) for e in entries)
        if any(s is None for s in stamps):
            return compute()
        full = (*key, *stamps)
        with self._lock:
            kept = self._memo.setdefault(str(key[0]), {})
            if full in kept:
                return kept[full]
        value = compute()
        with self._lock:
            kept[full] = value
            while len(kept) > MEMO_SIZES.get(str(key[0]), MEMO_HEAVY):  # dicts keep insertion order
                del kept[next(iter(kept))]
        return value

    def run(self, entry: RunEntry) -> Run:
        """The finished run, loaded (a running or failed one: its folder's own refusal), without
        the files that are links out of its folder (:mod:`evalflow.output.contained`)."""
        target = entry.results if entry.layout == "lm-eval" and entry.results is not None else entry.folder
        run = load_run(target)  # not kept: a loaded run holds its samples once read
        manifest = run.manifest if inside(entry.folder, manifest_file(entry.folder)) else {}
        return dataclasses.replace(run, samples_files=kept(entry.folder, run.samples_files), manifest=manifest)

    def root_of(self, entry: RunEntry) -> Path:
        """The given folder the run was found under (where explain looks for earlier runs)."""
        folder = entry.folder.resolve()
        for root in self.roots:
            if folder.is_relative_to(root.resolve()):
                return root
        return self.roots[0]


IDS_APART = "\x00"  # how the server joins repeated ``ids=`` words (no file name holds a NUL)
# The largest value each numeric word takes: past it a request could hold a worker for minutes or
# allocate gigabytes (1e8 bootstrap draws), so it is refused (400) rather than computed.
LIMITS = {"bootstrap_iters": 100_000, "seed": 2**32 - 1, "offset": ALL_ROWS, "limit": ALL_ROWS, "doc_id": 2**62}
FLOAT_LIMITS = {"max_drop": (0.0, 1e6), "alpha": (0.0, 1.0), "value": (-1e300, 1e300)}


def _ids(params: Params) -> list[str]:
    """The run ids of ``ids=``: repeated words (``ids=A&ids=B``, each one id whole, a comma in it
    too) or one word, comma-separated (``ids=A,B``)."""
    text = params.get("ids", "")
    ids = [i for i in text.split(IDS_APART if IDS_APART in text else ",") if i]
    if not ids:
        raise BadRequest("ids= is missing: name runs by their ids, comma-separated (ids=A,B) or repeated (ids=A&ids=B)")
    return ids


def _int(params: Params, name: str, default: int | None = None) -> int:
    text = params.get(name)
    if text is None or text == "":
        if default is None:
            raise BadRequest(f"{name}= is missing (a whole number)")
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadRequest(f"{name}={text!r}: a whole number is wanted") from None
    top = LIMITS.get(name, ALL_ROWS)
    if not 0 <= value <= top:
        raise BadRequest(f"{name}={text}: a whole number from 0 to {top} is wanted")
    return value


def _bool(params: Params, name: str) -> bool | None:
    text = params.get(name)
    if text is None or text == "":
        return None
    if text not in ("true", "false"):
        raise BadRequest(f"{name}={text!r}: true or false is wanted")
    return text == "true"


def _float(params: Params, name: str) -> float | None:
    text = params.get(name)
    if text is None or text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        raise BadRequest(f"{name}={text!r}: a number is wanted") from None
    low, high = FLOAT_LIMITS.get(name, (-1e300, 1e300))
    if not low <= value <= high:  # NaN too
        raise BadRequest(f"{name}={text}: a number from {low:g} to {high:g} is wanted")
    return value


def samples_path(entry: RunEntry, task: str | None) -> Path:
    """The samples file of ``task`` in the run, looked up among the files the folder holds."""
    if not task:
        raise BadRequest("task= is missing: name one of the run's tasks")
    files = kept(
        entry.folder,
        lmeval_samples_files(entry.results)
        if entry.layout == "lm-eval" and entry.results is not None
        else samples_files(entry.folder),
    )
    if task not in files:
        raise NotFound(
            f"run {entry.id!r} has no samples of task {task!r} (it has: {', '.join(sorted(files)) or 'none'})"
        )
    return files[task]


# --- the routes --------------------------------------------------------------------------------


def summary(catalog: Catalog, entry: RunEntry) -> dict[str, Any]:
    """The run's summary, kept while its results file stays the same (a running run's: each time)."""
    found: dict[str, Any] = catalog.memo(("summary",), [entry], lambda: run_summary(entry))
    return found


def runs_payload(catalog: Catalog, params: Params) -> dict[str, Any]:
    """``/api/runs``: the catalog found again, each run's summary (a finished one's kept)."""
    catalog.refresh()
    runs = [summary(catalog, e) for e in catalog.entries.values()]
    return {"roots": [str(r) for r in catalog.roots], "runs": runs}


def run_payload(catalog: Catalog, params: Params) -> dict[str, Any]:
    """``/api/run?id=ID``: the run page; an unreadable run's: its reason (422), as its row says."""
    entry = catalog.entry(params.get("id"))
    try:
        detail: dict[str, Any] = catalog.memo(("detail",), [entry], lambda: run_detail(entry))
    except Exception as exc:  # damaged JSON or YAML (RunFolderError) too: the run's, not the request's
        raise Unreadable(unreadable_reason(entry, exc)) from exc
    return detail


def sample_query(params: Params) -> SampleQuery:
    """The samples route's words as a :class:`SampleQuery` (``all=1``: every row, for a bundle)."""
    every = params.get("all") == "1"
    if params.get("value") and not params.get("metric"):
        raise BadRequest("value= needs metric=: name the metric whose value the rows must have (metric=acc&value=1)")
    limit = ALL_ROWS if every else min(_int(params, "limit", 50), PAGE_LIMIT)
    return SampleQuery(
        task=params.get("task") or "",
        offset=0 if every else _int(params, "offset", 0),
        limit=limit,
        filter=None if every else params.get("filter") or None,
        metric=None if every else params.get("metric") or None,
        value=None if every else _float(params, "value"),
        correct=None if every else _bool(params, "correct"),
        verdict=None if every else params.get("verdict") or None,
        has_image=None if every else _bool(params, "has_image"),
        text=None if every else params.get("text") or None,
        stop_reason=None if every else params.get("stop_reason") or None,
    )


def samples_payload(catalog: Catalog, params: Params) -> dict[str, Any]:
    entry = catalog.entry(params.get("id"))
    path = samples_path(entry, params.get("task"))
    return query(entry.folder, path, sample_query(params))


def sample_payload(catalog: Catalog, params: Params) -> dict[str, Any]:
    entry = catalog.entry(params.get("id"))
    path = samples_path(entry, params.get("task"))
    doc_id = _int(params, "doc_id")
    try:
        return sample_detail(path, doc_id, params.get("filter") or None)
    except (KeyError, IndexError, LookupError):
        raise NotFound(f"task {params.get('task')!r} of run {entry.id!r} has no document {doc_id}") from None


def compare_payload_of(catalog: Catalog, params: Params) -> dict[str, Any]:
    """``/api/compare?ids=A,B[,C...]``: A is the baseline; B (and each further run) the candidate."""
    max_drop, alpha = _float(params, "max_drop"), _float(params, "alpha")
    # a verdict only when a gate is asked for (max_drop=); alpha= alone sets the test level
    level = GateSettings(max_drop or 0.0, 0.05 if alpha is None else alpha)
    gate = None if max_drop is None else level
    iters, seed = _int(params, "bootstrap_iters", DEFAULT_ITERS), _int(params, "seed", 1234)
    entries = [catalog.entry(i) for i in _ids(params)]
    if len(entries) < 2:
        raise BadRequest("ids= names one run; compare needs a baseline and a candidate (ids=A,B)")
    base = catalog.run(entries[0])

    def pair(candidate: RunEntry) -> dict[str, Any]:
        key = ("compare", gate, level.alpha, iters, seed)
        return dict(
            catalog.memo(
                key,
                [entries[0], candidate],
                lambda: compare_payload(base, catalog.run(candidate), gate, iters, seed, alpha=level.alpha),
            )
        )

    first = pair(entries[1])
    more = [{"id": e.id, **pair(e)} for e in entries[2:]]
    summaries = [summary(catalog, e) for e in entries]
    return {"runs": summaries, **first, "more": more}


def _refuse_links_out(entry: RunEntry) -> None:
    """Explain reads the run's manifest and snapshot itself: one that is a link out of the run
    folder (:mod:`evalflow.output.contained`) is refused, named, rather than followed."""
    files = [
        manifest_file(entry.folder),
        snapshot_config(entry.folder),
        snapshot_overrides(entry.folder),
        gate_record_file(entry.folder),
    ]
    for out in left_out(entry.folder, files):
        raise BadRequest(f"run {entry.id!r}: {out['file']} was not read: {out['reason']}")


NO_MANIFEST = (
    "{id} is an lm-eval output folder: lm-eval writes no " + MANIFEST + " (evalflow's record of each "
    "stage and its cache key), so there is nothing to explain; explain works on evalflow's run folders"
)


def explain_payload(catalog: Catalog, params: Params) -> dict[str, Any]:
    """``/api/explain?id=ID[&against=ID2]``: why each stage re-ran, each stage's cache hit, and
    ``compared``: per task, the run it was explained against (the closest earlier one when no
    ``against`` is given; its catalog id, or its folder when it lies outside the roots)."""
    entry = catalog.entry(params.get("id"))
    against = catalog.entry(params["against"]) if params.get("against") else None
    for one in (entry, against):
        if one is not None and one.layout == LMEVAL:
            raise BadRequest(NO_MANIFEST.format(id=one.id))
        if one is not None:
            _refuse_links_out(one)
    reference = against.folder if against else None
    root = catalog.root_of(entry)  # a run given as a folder of its own: where its outputs/ is, as `explain` looks
    search = None if root.resolve() == entry.folder.resolve() else root
    lines, bases = explain_compared(entry.folder, reference, search)
    ids = {e.folder.resolve(): e.id for e in catalog.entries.values() if e.layout == EVALFLOW}
    compared = [
        {"task": task, "id": ids.get(folder.resolve()) if folder else None, "path": str(folder) if folder else None}
        for task, folder in bases.items()
    ]
    manifest = read_manifest(entry.folder)
    stages = [
        {"task": task, "stage": name, "cached": bool(stage.get("hit"))}
        for task in manifest.tasks()
        for name, stage in manifest.stages(task).items()
    ]
    if not lines:
        lines = ["every stage was served from the cache"]
    return {
        "id": entry.id,
        "against": against.id if against else None,
        "compared": compared,
        "lines": lines,
        "stages": stages,
    }


def _runs_of(catalog: Catalog, params: Params) -> list[tuple[str, Run]]:
    return [(e.id, catalog.run(e)) for e in (catalog.entry(i) for i in _ids(params))]


def wrong_payload(catalog: Catalog, params: Params) -> dict[str, Any]:
    entries = [catalog.entry(i) for i in _ids(params)]
    result: dict[str, Any] = catalog.memo(("wrong",), entries, lambda: always_wrong(_runs_of(catalog, params)))
    return result


def reasoning_payload(catalog: Catalog, params: Params) -> dict[str, Any]:
    entries = [catalog.entry(i) for i in _ids(params)]
    result: dict[str, Any] = catalog.memo(("reasoning",), entries, lambda: reasoning_figures(_runs_of(catalog, params)))
    return result


def results_payload(catalog: Catalog, params: Params) -> dict[str, Any]:
    """``/api/results?ids=A,B[,C...]``: the runs' results side by side (:mod:`evalflow.view.side_by_side`)."""
    entries = [catalog.entry(i) for i in _ids(params)]
    result: dict[str, Any] = catalog.memo(
        ("results",), entries, lambda: side_by_side([e.id for e in entries], [catalog.run(e) for e in entries])
    )
    return result


def live_payload(catalog: Catalog, params: Params) -> dict[str, Any] | None:
    """``/api/live?id=ID``: the running run's progress (null when it has no events file)."""
    return live_progress(catalog.entry(params.get("id")).folder)


def image_of(catalog: Catalog, params: Params) -> Path | bytes:
    """``/api/image?id=ID&name=NAME``: a file of the run, its name checked
    (:mod:`~evalflow.view.safe_paths`), or, when NAME is an image's pixel digest (how evalflow's
    samples name images) and no such file exists, that image's PNG bytes from the run's own cache
    (its manifest's ``cache_dir``), read only, as the report reads them."""
    entry = catalog.entry(params.get("id"))
    name = params.get("name")
    if not name:
        raise BadRequest("name= is missing: the image's file name inside the run folder, or its digest")
    try:
        return resolve_under(entry.folder, name)
    except UnsafePath:
        if not _DIGEST.fullmatch(name):
            raise
    return cached_image(entry, name)


_DIGEST = re.compile(r"[0-9a-f]{16,128}")


def cached_image(entry: RunEntry, digest: str) -> bytes:
    """The PNG of the image with this pixel digest in the cache the run used (404 when gone),
    read with the cache file opened read-only: the viewer never writes to a cache."""
    from evalflow.cache.image_store import stored_png

    manifest = manifest_file(entry.folder)
    read = inside(entry.folder, manifest)
    cache_dir = json.loads(manifest.read_text(encoding="utf-8")).get("cache_dir") if read else None
    if not cache_dir or not isinstance(cache_dir, str):
        raise NotFound(f"image {digest}: run {entry.id!r} names no cache that holds its images")
    found = stored_png(Path(cache_dir), digest)
    if found is None:
        raise NotFound(f"image {digest} is not in the cache {cache_dir} (removed by cache gc, or damaged)")
    return found


ROUTES: dict[str, Route] = {
    path: isolated(route)
    for path, route in {
        "/api/runs": runs_payload,
        "/api/run": run_payload,
        "/api/samples": samples_payload,
        "/api/sample": sample_payload,
        "/api/compare": compare_payload_of,
        "/api/explain": explain_payload,
        "/api/wrong": wrong_payload,
        "/api/reasoning": reasoning_payload,
        "/api/results": results_payload,
        "/api/live": live_payload,
    }.items()
}
