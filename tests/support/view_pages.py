"""What the browser tests of ``evalflow view``'s front end share: a set of contract payloads whose every
text (run ids, task names, model output, config values, tracker links) carries hostile markup, a small
stand-in server that answers them by the HTTP contract (with the real Content-Security-Policy), the
same payloads written as a static bundle, and chromium driven by Playwright, offline.

The stand-in lets the front end be tested on its own, against exactly the JSON the contract names
(docs/view.md), whether or not the real server's run folders can produce every field."""

from __future__ import annotations

import asyncio
import queue
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

STATIC = Path(__file__).resolve().parents[2] / "evalflow" / "view" / "static"
CHROMIUM = Path("/usr/bin/chromium")
DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images" / "view"  # docs/view.md's screenshots
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
# Each is markup that would run or inject an element if the page ever parsed data as HTML.
SCRIPT = "<script>window.__pwned='script'</script>"
IMG = "<img src=x onerror=\"window.__pwned='img'\">"
JS_LINK = "javascript:window.__pwned='link'"
TEXTAREA = "</textarea><b id=pwn>injected</b>"
HOSTILE = [SCRIPT, IMG, JS_LINK, TEXTAREA]


# the characters encodeURIComponent leaves as they are, beyond quote()'s own (letters, digits, _.-~)
URI_COMPONENT_SAFE = "!*'()"


def api_key(path: str, params: dict[str, Any]) -> str:
    """The api path with its query sorted by key, as app.js's apiPath builds it (encodeURIComponent)."""
    words = [f"{k}={quote(str(v), safe=URI_COMPONENT_SAFE)}" for k, v in sorted(params.items()) if v not in (None, "")]
    return path + ("?" + "&".join(words) if words else "")


RUN_A, RUN_B, EVIL, LIVE = "sweep/0", "sweep/1", f"evil{IMG}", "live/run"
TASK, EVIL_TASK = "toy_mc", f"task{SCRIPT}"


def _summary(run_id: str, status: str, value: float, model: str = "dummy", task: str = TASK) -> dict[str, Any]:
    sweep = "sweep" if run_id.startswith("sweep/") else None
    return {
        "id": run_id,
        "layout": "evalflow",
        "path": f"/runs/{run_id}",
        "model": model,
        "tasks": [task],
        "date": "2026-12-06T10:00:00",
        "status": status,
        "metrics": {task: {"metric": "acc,none", "value": value, "stderr": 0.05}} if status != "running" else {},
        "overrides": {"model.seed": run_id[-1]} if sweep else {},
        "sweep": sweep,
        "partial": None,
    }


def _rows(n: int, hostile: bool) -> list[dict[str, Any]]:
    rows = []
    for doc in range(n):
        answer = HOSTILE[doc % 4] if hostile else f"answer {doc}"
        correct = doc % 3 != 0
        rows.append(
            {
                "doc_id": doc,
                "filter": "none",
                "target": TEXTAREA if hostile else f"target {doc}",
                "answer": answer,
                "prompt": f"question {doc} {SCRIPT if hostile else ''}",
                "metrics": {"acc": 1.0 if correct else 0.0},
                "correct": correct,
                "verdict": "yes" if correct else "no",
                "has_image": doc % 5 == 0,
            }
        )
    return rows


def _detail(summary: dict[str, Any], hostile: bool) -> dict[str, Any]:
    task = summary["tasks"][0]
    value = summary["metrics"].get(task, {}).get("value")
    results = (
        []
        if value is None
        else [
            {
                "name": task,
                "kind": "task",
                "depth": 0,
                "n_shot": 2,
                "n_samples": 30,
                "higher_is_better": {"acc": True},
                "metrics": [{"metric": "acc", "filter": "none", "value": value, "stderr": 0.05}],
            }
        ]
    )
    text = SCRIPT + IMG + TEXTAREA if hostile else "model: dummy"
    return {
        **summary,
        "results": results,
        "config_yaml": f"task: {task}\nnote: {text}\n",
        "command": f"python -m evalflow tasks={task} note='{text}'",
        "manifest": {
            "inference": {"cached": 10, "computed": 20, IMG: TEXTAREA} if hostile else {"cached": 10, "computed": 20},
            "stages": [
                {"task": task, "stage": s, "cached": s != "inference", "seconds": 0.5}
                for s in ("load_docs", "fewshot", "inference")
            ],
            "workers": {"server-0": {"answered": 20, "died": 0}},
            "code_execution": {"ran": 0},
            "seconds": 2.5,
        },
        "trackers": [
            {"name": f"wandb {SCRIPT}", "url": JS_LINK},
            {"name": "mlflow", "url": "https://mlflow.example/run/1"},
        ]
        if hostile
        else [],
        "samples": [{"task": task, "count": 30}],
        "progress": None,
    }


def _sample(task: str, row: dict[str, Any], hostile: bool) -> dict[str, Any]:
    text = SCRIPT + IMG + TEXTAREA if hostile else "plain"
    return {
        "task": task,
        "doc_id": row["doc_id"],
        "filter": "none",
        "doc": {"question": text},
        "fewshot": f"Q: 1+1? A: 2\n{text}",
        "prompt": f"Q: {row['prompt']}\nA:",
        "choices": [
            {"text": f"{c} {text}", "loglikelihood": -1.0 - i, "is_greedy": i == 0, "chosen": i == 0}
            for i, c in enumerate("ABCD")
        ],
        "generations": [row["answer"]],
        "filtered": [row["answer"]],
        "target": row["target"],
        "metrics": row["metrics"],
        "judge": {"prompt": f"judge {text}", "rationale": f"because {JS_LINK}", "verdict": row["verdict"]},
        "code": {"verdict": "passed", "output": TEXTAREA},
        "images": [],
        "raw": {"doc": text},
    }


def _reasoning(run_id: str) -> dict[str, Any]:
    tasks = [{"task": TASK, "stop_reasons": {"length": 2, IMG: 1}, "truncated": 0.1, "cost": None}]
    return {
        "id": run_id,
        "model": SCRIPT,
        "tokens": None,
        "cost": None,
        "tasks": tasks,
        "lines": [TEXTAREA],
        "note": None,
    }


@dataclass
class Payloads:
    """Every api path's JSON (``by_key``), each task's rows (for the samples route), and the live state."""

    by_key: dict[str, Any] = field(default_factory=dict)
    rows: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    live: dict[str, Any] = field(default_factory=dict)

    def put(self, path: str, params: dict[str, Any], value: Any) -> None:
        self.by_key[api_key(path, params)] = value


def contract_payloads() -> Payloads:
    """Two runs of a sweep, one hostile run, and one running run, as the contract's JSON."""
    out = Payloads()
    summaries = [
        _summary(RUN_A, "complete", 0.6),
        _summary(RUN_B, "complete", 0.7),
        _summary(EVIL, "partial", 0.5, model=f"model{TEXTAREA}", task=EVIL_TASK),
        _summary(LIVE, "running", 0.0),
    ]
    out.put("/api/runs", {}, {"roots": [f"/runs/{SCRIPT}"], "runs": summaries})
    for summary in summaries:
        run_id, task, hostile = summary["id"], summary["tasks"][0], summary["id"] == EVIL
        out.put("/api/run", {"id": run_id}, _detail(summary, hostile))
        rows = _rows(30, hostile)
        out.rows[(run_id, task)] = rows
        out.put(
            "/api/samples",
            {"id": run_id, "task": task, "all": 1},
            {"total": 30, "offset": 0, "limit": 30, "metrics": ["acc"], "rows": rows},
        )
        for row in rows:
            out.put(
                "/api/sample",
                {"id": run_id, "task": task, "doc_id": row["doc_id"], "filter": "none"},
                _sample(task, row, hostile),
            )
        others = [s["id"] for s in summaries if s["id"] != run_id]
        for against in ["", *others]:
            out.put(
                "/api/explain",
                {"id": run_id, "against": against},
                {
                    "id": run_id,
                    "against": against or others[0],
                    "lines": [f"inference: recomputed, model changed {IMG if hostile else ''}"],
                    "stages": [
                        {"task": task, "stage": "inference", "cached": False},
                        {"task": task, "stage": "load_docs", "cached": True},
                    ],
                },
            )
    flips = [
        {
            "task": TASK,
            "doc_id": d,
            "filter": "none",
            "metric": "acc",
            "a": 0.0,
            "b": 1.0,
            "answer_a": f"wrong {SCRIPT}",
            "answer_b": f"right {IMG}",
            "target": TEXTAREA,
        }
        for d in (3, 6)
    ]
    for ids in ([RUN_A, RUN_B], [RUN_B, RUN_A], [RUN_A, EVIL]):
        out.put(
            "/api/compare",
            {"ids": ",".join(ids)},
            {
                "runs": [next(s for s in summaries if s["id"] == i) for i in ids],
                "rows": [
                    {
                        "name": TASK,
                        "metric": "acc",
                        "filter": "none",
                        "a": 0.6,
                        "b": 0.7,
                        "difference": 0.1,
                        "low": 0.02,
                        "high": 0.18,
                        "p_value": 0.01,
                        "verdict": f"better {SCRIPT}",
                        "significant": True,
                    }
                ],
                "gate": [f"gate: pass {IMG}"],
                "flips": {"total": len(flips), "rows": flips},
            },
        )
        out.put(
            "/api/wrong",
            {"ids": ",".join(ids)},
            {
                "tasks": [
                    {
                        "task": TASK,
                        "docs": [
                            {"doc_id": 0, "prompt": SCRIPT, "target": TEXTAREA, "answers": dict.fromkeys(ids, IMG)}
                        ],
                    }
                ]
            },
        )
        out.put(
            "/api/reasoning",
            {"ids": ",".join(ids)},
            {"runs": [_reasoning(i) for i in ids]},
        )
    out.live = {
        "status": "running",
        "started": "2026-12-06T10:00:00",
        "updated": "2026-12-06T10:00:05",
        "tasks": {TASK: {"done": 10, "total": 100, "rate": 2.0, "eta_s": 45.0}},
        "events": 3,
    }
    return out


def query_rows(rows: list[dict[str, Any]], params: dict[str, str]) -> dict[str, Any]:
    """query()'s semantics over the rows, for the stand-in server (the bundle's app.js does the same)."""
    text = params.get("text", "").lower()
    kept = [
        r
        for r in rows
        if (not params.get("correct") or r["correct"] == (params["correct"] == "true"))
        and (not params.get("verdict") or r["verdict"] == params["verdict"])
        and (not params.get("has_image") or r["has_image"] == (params["has_image"] == "true"))
        and (
            not params.get("metric")
            or not params.get("value")
            or r["metrics"].get(params["metric"]) == float(params["value"])
        )
        and (not text or any(text in str(r[k]).lower() for k in ("prompt", "answer", "target")))
    ]
    offset, limit = int(params.get("offset") or 0), int(params.get("limit") or 50)
    return {
        "total": len(kept),
        "offset": offset,
        "limit": limit,
        "metrics": ["acc"],
        "rows": kept[offset : offset + limit],
        "correct_metric": "acc",
        "verdicts": ["no", "yes"],
    }


@contextmanager
def stand_in_server(payloads: Payloads) -> Iterator[str]:
    """An aiohttp server on 127.0.0.1 answering the contract's routes from ``payloads``; yields its URL."""
    web = pytest.importorskip("aiohttp.web", reason="aiohttp is not installed (pip install evalflow[view])")

    async def answer(request: Any) -> Any:
        params = dict(request.query)
        if (
            len(request.query.getall("ids", [])) > 1
        ):  # the page sends repeated ids= words, as the real server takes them
            params["ids"] = ",".join(request.query.getall("ids"))
        if request.path == "/":
            return web.Response(body=(STATIC / "index.html").read_bytes(), content_type="text/html")
        if request.path.startswith("/static/"):
            name = request.path.removeprefix("/static/")
            if name not in {"app.js", "app.css"}:
                return web.json_response({"error": "no such file"}, status=404)
            kind = "text/javascript" if name.endswith(".js") else "text/css"
            return web.Response(body=(STATIC / name).read_bytes(), content_type=kind)
        if request.path == "/api/live":
            return web.json_response(payloads.live)
        if request.path == "/api/samples" and "all" not in params:
            return web.json_response(query_rows(payloads.rows[(params["id"], params["task"])], params))
        key = api_key(request.path, params)
        if key not in payloads.by_key:
            return web.json_response({"error": f"no payload for {key}"}, status=404)
        return web.json_response(payloads.by_key[key])

    @web.middleware
    async def headers(request: Any, handler: Any) -> Any:
        response = await handler(request)
        response.headers.update({"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff"})
        return response

    app = web.Application(middlewares=[headers])
    app.router.add_route("GET", "/{tail:.*}", answer)
    with serving(app) as url:
        yield url


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """An aiohttp app listening on 127.0.0.1 (a free port) in a thread of its own (Playwright's sync
    API runs an event loop in the test's thread); yields its URL, stops it on leaving."""
    from aiohttp import web

    started: queue.Queue[int | BaseException] = queue.Queue()
    stop = threading.Event()

    async def serve() -> None:
        runner = web.AppRunner(app)
        try:
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            started.put(runner.addresses[0][1])
            await asyncio.get_running_loop().run_in_executor(None, stop.wait)
        except BaseException as exc:  # handed to the test's thread, which raises it
            started.put(exc)
        finally:
            await runner.cleanup()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    port = started.get(timeout=60)
    if isinstance(port, BaseException):
        raise port
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        stop.set()
        thread.join(timeout=30)


def write_bundle(payloads: Payloads, out: Path) -> Path:
    """The payloads as a static bundle, written with the real bundle's own pieces (its index.html
    in bundle mode, its file names and its escaped payload scripts)."""
    from evalflow.view.bundle import bundle_index, data_name, script

    (out / "static").mkdir(parents=True)
    (out / "data").mkdir()
    (out / "index.html").write_text(bundle_index((STATIC / "index.html").read_text()))
    for name in ("app.js", "app.css"):
        shutil.copy(STATIC / name, out / "static" / name)
    for key, value in payloads.by_key.items():
        (out / "data" / data_name(key)).write_text(script(key, value))
    return out / "index.html"


def route(*parts: str) -> str:
    """A hash route as app.js writes it (each part encodeURIComponent'ed)."""
    return "#/" + "/".join(quote(p, safe="!*'()") for p in parts)


class Watched:
    """A page with the things that must never happen recorded: dialogs, remote requests, page errors."""

    def __init__(self, browser: Any, origin: str) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 860})
        self.page = self.context.new_page()
        self.dialogs: list[str] = []
        self.remote: list[str] = []
        self.errors: list[str] = []
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.context.route("**/*", lambda r: self._only_local(r, origin))

    def _only_local(self, request_route: Any, origin: str) -> None:
        url = request_route.request.url
        if url.startswith(origin):
            request_route.continue_()
        else:
            self.remote.append(url)
            request_route.abort()

    def open(self, url: str) -> Any:
        self.page.goto(url)
        return self.page

    def assert_nothing_ran(self) -> None:
        page = self.page
        assert self.dialogs == [], self.dialogs
        assert self.remote == [], self.remote
        assert self.errors == [], self.errors
        assert page.evaluate("window.__pwned") is None
        assert page.locator("#pwn").count() == 0
        assert page.locator("main b").count() == 0
        assert page.locator("img[src='x']").count() == 0
        assert page.locator("main script").count() == 0
        assert page.locator("a[href^='javascript']").count() == 0
