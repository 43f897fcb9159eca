"""``evalflow view bundle FOLDER... out=DIR``: the viewer as static files, for a colleague or a
static host; it opens from ``file://`` with no server and no network.

DIR holds the same front end the server sends (``index.html``, marked
``<meta name="evalflow-mode" content="bundle">``, and ``static/app.js``, ``static/app.css``) and one
script per payload, ``data/<name>.js``, each ``window.EVALFLOW_BUNDLE.put("<key>", <json>);``. The
key is the API path the server would have been asked, its query words sorted and each value
encoded as JavaScript's ``encodeURIComponent`` encodes it (:func:`api_key`); the name is the
8-digit hex of the key's FNV-1a 32-bit hash (:func:`fnv1a32`), which app.js computes the same way
to find the script to insert (a ``<script src>`` works from ``file://`` where ``fetch`` does not).
Two keys with one name share the file: it calls ``put`` once per key.

The payloads come from :mod:`evalflow.view.payloads`, the functions the server calls. JSON inside
a script is escaped so no text can end it: ``<``, ``>``, ``&`` and U+2028/U+2029 are written as
``\\uXXXX`` (and the rest of non-ASCII too). A payload that fails (a comparison of runs over
different documents) is written as ``{"error": ...}``, as the server would answer it. What is in
the bundle: the runs, each run's detail, each task's samples as one payload (``all=1``; the page
filters and pages them itself), each document in full for the first ``docs`` documents of each
task (its images as PNG data URLs from the run's cache), explain of each evalflow run (also
against each other one, up to ``PAIRS_ALL`` runs), compare for every ordered pair (or, past
``PAIRS_ALL`` runs, each run against the next), and the across-runs views of each run, each
compared pair and all runs, and the runs' results side by side for the same selections. Live
progress is not (a bundle is a snapshot).

A bundle is read on other machines, so it holds no path of this one: each bundled folder's
absolute path is written as the folder's name (a run's ``path``, the ``roots``, the command that
reproduces a run, which then runs from the folder above the bundled one). A symbolic link where
the bundle writes (``static/``, ``data/``, ``index.html`` of an earlier bundle) is removed, never
written through.
"""

from __future__ import annotations

import base64
import io
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import pairwise, permutations
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from evalflow.errors import ConfigError, EvalflowError
from evalflow.frames.discovery import EVALFLOW, RunEntry
from evalflow.output.run_paths import LMEVAL_RESULTS_PATTERN, RESULTS, SNAPSHOT
from evalflow.view.payloads import ROUTES, Catalog, cached_image, json_text, samples_path
from evalflow.view.server import INDEX, STATIC_DIR, STATIC_FILES

FNV_OFFSET, FNV_PRIME = 0x811C9DC5, 0x01000193
PAIRS_ALL = 6  # up to this many runs, every ordered pair is compared; past it, each with the next
DOCS = 200  # documents per task written in full
THUMBNAIL = 320  # an embedded image's longer side, in pixels
MODE_META = '<meta name="evalflow-mode" content="bundle">'
URI_SAFE = "-_.!~*'()"  # what encodeURIComponent leaves as it is (besides letters and digits)


def fnv1a32(text: str) -> int:
    """FNV-1a, 32 bits, over the UTF-8 bytes of ``text`` (app.js's ``fnv1a32`` is the same).

    >>> f"{fnv1a32(''):08x}", f"{fnv1a32('a'):08x}", f"{fnv1a32('/api/runs'):08x}"
    ('811c9dc5', 'e40c292c', '47ce6271')
    """
    h = FNV_OFFSET
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * FNV_PRIME) & 0xFFFFFFFF
    return h


def api_key(path: str, params: Mapping[str, str]) -> str:
    """The API path with its query words sorted by name, each name and value encoded as
    ``encodeURIComponent`` encodes it: ``/api/run?id=sweep%2F0``."""
    query = "&".join(f"{quote(k, safe=URI_SAFE)}={quote(str(v), safe=URI_SAFE)}" for k, v in sorted(params.items()))
    return f"{path}?{query}" if query else path


def data_name(key: str) -> str:
    return f"{fnv1a32(key):08x}.js"


def js_json(value: Any) -> str:
    """JSON that can sit inside a ``<script>`` (and an HTML attribute) without ending it."""
    text = json_text(value, ensure_ascii=True, separators=(",", ":"))
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def script(key: str, payload: Any) -> str:
    return f"window.EVALFLOW_BUNDLE.put({js_json(key)}, {js_json(payload)});\n"


def bundle_index(html: str) -> str:
    """The server's index.html marked as a bundle, its static paths made relative (for ``file://``)."""
    marker = 'name="evalflow-mode"'
    lines = html.splitlines(keepends=True)
    if any(marker in line for line in lines):
        lines = [MODE_META + "\n" if marker in line else line for line in lines]
        html = "".join(lines)
    else:
        at = html.lower().find("<head>")
        html = html[: at + 6] + "\n" + MODE_META + html[at + 6 :] if at >= 0 else MODE_META + "\n" + html
    return html.replace('"/static/', '"static/')


def _payload(catalog: Catalog, path: str, params: Mapping[str, str]) -> Any:
    try:
        return ROUTES[path](catalog, params)
    except EvalflowError as exc:
        return {"error": str(exc)}


def payloads(catalog: Catalog, docs: int = DOCS, order: Sequence[str] | None = None) -> Iterator[tuple[str, Any]]:
    """(key, payload) of everything the bundle holds, one at a time (a big sweep is not held in
    memory); ``order``: the runs' ids in the order pairs and selections name them (default: the
    catalog's, newest first)."""
    runs = _payload(catalog, "/api/runs", {})
    yield api_key("/api/runs", {}), runs
    ids = list(order) if order is not None else list(catalog.entries)
    for run_id in ids:
        yield from _run_payloads(catalog, run_id, docs)
    pairs = (
        list(permutations(ids, 2)) if len(ids) <= PAIRS_ALL else [p for a, b in pairwise(ids) for p in ((a, b), (b, a))]
    )
    for a, b in pairs:
        params = {"ids": f"{a},{b}"}
        yield api_key("/api/compare", params), _payload(catalog, "/api/compare", params)
    # the across-runs views: each run alone, each compared pair (in either order), and every run
    every = [",".join(ids), ",".join(sorted(ids))] if len(ids) > 2 else []
    selections = list(dict.fromkeys([*ids, *(f"{a},{b}" for a, b in pairs), *every]))
    for ids_text in selections:
        for path in ("/api/wrong", "/api/reasoning", "/api/results"):
            yield api_key(path, {"ids": ids_text}), _payload(catalog, path, {"ids": ids_text})


def _run_payloads(catalog: Catalog, run_id: str, docs: int) -> Iterator[tuple[str, Any]]:
    detail = _payload(catalog, "/api/run", {"id": run_id})
    yield api_key("/api/run", {"id": run_id}), detail
    yield from _explain_payloads(catalog, run_id)
    entry = catalog.entries[run_id]
    tasks = [s["task"] for s in detail.get("samples", [])] if isinstance(detail, dict) else []
    for task in tasks:
        try:
            samples_path(entry, task)
        except EvalflowError:
            continue
        params = {"id": run_id, "task": task, "all": "1"}
        page = _payload(catalog, "/api/samples", params)
        if isinstance(page, dict) and len({row["doc_id"] for row in page.get("rows", [])}) > docs:
            page = {**page, "bundle_docs": docs}  # the page says documents were left out
        yield api_key("/api/samples", params), page
        for doc_id, filt in _first_documents(page, docs):
            one = {"id": run_id, "task": task, "doc_id": str(doc_id), "filter": filt}
            yield api_key("/api/sample", one), with_thumbnails(entry, _payload(catalog, "/api/sample", one))


def with_thumbnails(entry: RunEntry, sample: Any) -> Any:
    """A document's images with their pixels, for a page with no server to ask: each image known
    by its digest gets ``src``, a PNG data URL of it shrunk to at most :data:`THUMBNAIL` pixels,
    read from the run's own cache (an image the cache no longer holds keeps its label alone)."""
    images = sample.get("images") if isinstance(sample, dict) else None
    if not images:
        return sample
    shown = []
    for image in images:
        digest = image.get("digest") if isinstance(image, dict) else None
        try:
            shown.append({**image, "src": _thumbnail(cached_image(entry, str(digest)))} if digest else image)
        except (EvalflowError, OSError, ValueError):
            shown.append(image)
    return {**sample, "images": shown}


def _thumbnail(png: bytes) -> str:
    from PIL import Image

    small = Image.open(io.BytesIO(png))
    small.thumbnail((THUMBNAIL, THUMBNAIL))
    buf = io.BytesIO()
    small.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _explain_payloads(catalog: Catalog, run_id: str) -> Iterator[tuple[str, Any]]:
    """Explain of an evalflow run: against the closest earlier run, and, up to ``PAIRS_ALL`` runs,
    against each other evalflow run; each payload lists in ``bundle_against`` the runs it holds
    explain against, so the page offers only those (never a choice the bundle cannot show)."""
    entry = catalog.entries[run_id]
    if entry.layout != EVALFLOW:
        return  # lm-eval's folders have no manifest: the page offers no explain for them
    evalflow_ids = [i for i, e in catalog.entries.items() if e.layout == EVALFLOW]
    others = [i for i in evalflow_ids if i != run_id] if len(evalflow_ids) <= PAIRS_ALL else []
    for against in ["", *others]:
        params = {"id": run_id, **({"against": against} if against else {})}
        payload = _payload(catalog, "/api/explain", params)
        if isinstance(payload, dict) and "error" not in payload:
            payload = {**payload, "bundle_against": others}
        yield api_key("/api/explain", params), payload


def _first_documents(page: Any, docs: int) -> list[tuple[int, str]]:
    """(doc_id, filter) of every row of the first ``docs`` documents of a samples payload."""
    rows = page.get("rows", []) if isinstance(page, dict) else []
    chosen: set[Any] = set()
    out = []
    for row in rows:
        if row["doc_id"] not in chosen and len(chosen) >= docs:
            continue
        chosen.add(row["doc_id"])
        out.append((row["doc_id"], str(row.get("filter") or "none")))
    return out


def _check_out(out: Path, catalog: Catalog) -> None:
    """Refuse a destination inside a run folder (the viewer never writes there) or a folder that
    holds something other than an earlier bundle (which is replaced)."""
    target = out.resolve()
    for entry in catalog.entries.values():
        if target.is_relative_to(entry.folder.resolve()):
            raise ConfigError(
                f"view bundle: out={out} lies inside the run folder {entry.folder}; write the bundle elsewhere"
            )
    if out.exists() and any(out.iterdir()):
        index = out / INDEX
        if not (index.is_file() and MODE_META in index.read_text(encoding="utf-8", errors="replace")):
            raise ConfigError(
                f"view bundle: out={out} exists and is not an earlier bundle; give an empty or new folder"
            )


def _unlink_links(out: Path) -> None:
    """Remove every symbolic link among the paths the bundle writes (an earlier bundle's
    ``static/`` or ``data/`` replaced by a link would have the files written through it, wherever
    it points): the link goes, never what it points at; the real files are written in its place."""
    for path in (out / INDEX, out / "static", out / "data", *(out / "static" / name for name in STATIC_FILES)):
        if path.is_symlink():
            path.unlink()


def roots_named(roots: Sequence[Path | str]) -> list[tuple[str, str]]:
    """(absolute spelling, the name the bundle writes instead) of each root, longest first: a
    bundle names its runs' folders relative to the folders bundled, never by this machine's paths."""
    pairs: dict[str, str] = {}
    for i, root in enumerate(Path(r) for r in roots):
        name = root.resolve().name or f"root{i}"
        for spelling in (str(root.resolve()), str(root.absolute())):  # a relative one is already relative
            pairs.setdefault(spelling, name)
    return sorted(pairs.items(), key=lambda pair: -len(pair[0]))


def relative_paths(value: Any, named: Sequence[tuple[str, str]]) -> Any:
    """``value`` with each root's path in its text replaced by the root's folder name (``path``,
    ``roots``, the command that reproduces a run, a message naming a file)."""
    if isinstance(value, str):
        for spelling, name in named:
            if spelling in value:
                value = value.replace(spelling, name)
        return value
    if isinstance(value, dict):
        return {k: relative_paths(v, named) for k, v in value.items()}
    if isinstance(value, list):
        return [relative_paths(v, named) for v in value]
    return value


def write_bundle(
    roots: Sequence[Path | str], out: Path, docs: int = DOCS, skipped: Callable[[str], None] | None = None
) -> int:
    """Write the bundle of the runs under ``roots`` into ``out``; returns how many payloads it holds.
    A run that cannot be read is written as its error payload (its pages say why) and the bundle
    goes on; ``skipped`` gets one line per such run."""
    catalog = Catalog(roots)
    if not catalog.entries:
        raise ConfigError(
            f"view bundle: no run found under {', '.join(map(str, roots))}; give folders holding run folders "
            f"(evalflow's {RESULTS} or {SNAPSHOT}/, or lm-eval's {LMEVAL_RESULTS_PATTERN})"
        )
    _check_out(out, catalog)
    _unlink_links(out)
    named = roots_named(roots)
    data = out / "data"
    shutil.rmtree(data, ignore_errors=True)
    (out / "static").mkdir(parents=True, exist_ok=True)
    data.mkdir()
    (out / INDEX).write_text(bundle_index((STATIC_DIR / INDEX).read_text(encoding="utf-8")), encoding="utf-8")
    for name in STATIC_FILES:
        shutil.copyfile(STATIC_DIR / name, out / "static" / name)
    written: set[str] = set()
    count = 0
    for key, raw in payloads(catalog, docs):
        payload = relative_paths(raw, named)
        name = data_name(key)
        with open(data / name, "a" if name in written else "w", encoding="utf-8") as fh:
            fh.write(script(key, payload))
        written.add(name)
        count += 1
        if skipped is not None and key.startswith("/api/run?") and isinstance(payload, dict) and "error" in payload:
            skipped(f"view bundle: run {unquote(key.split('=', 1)[1])} skipped (its pages say why): {payload['error']}")
    return count
