"""The ``evalflow view`` web server: aiohttp, on 127.0.0.1 unless told otherwise.

aiohttp because evalflow already depends on it for served models (the ``api`` extra), it serves
files and JSON with no framework around it, and its test client drives the whole app in-process
(tests/view/). Each ``/api/...`` route is a function of :mod:`evalflow.view.payloads`, run in a
worker thread so that building one samples index does not hold up another request (the live
view polls every second while a run goes on). The front end is the three files of
``view/static/``, served by name from a fixed list; nothing else on disk is served, except a run's
images, through :mod:`evalflow.view.safe_paths`.

Every response, errors and files included, carries the Content-Security-Policy below (no inline
script or style, nothing from another origin), ``nosniff`` and ``no-referrer``. A request whose
Host header names another machine is refused (421), on any address it listens on (0.0.0.0 too):
a page whose domain was re-pointed at this machine (DNS rebinding) cannot read the runs. The
server only reads: it writes nothing into the folders it is given, nor into the caches their
manifests name.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from aiohttp import web

from evalflow.config.packaged import package_dir
from evalflow.errors import EvalflowError
from evalflow.view.payloads import (
    IDS_APART,
    ROUTES,
    BadRequest,
    Catalog,
    NotFound,
    Unreadable,
    image_of,
    isolated,
    json_text,
)
from evalflow.view.safe_paths import UnsafePath

log = logging.getLogger("evalflow.view")

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
STATIC_DIR = package_dir() / "view" / "static"  # package data: found as evalflow finds its own files
INDEX = "index.html"
# The front end's files: the only names /static/ answers (nothing is listed or globbed).
STATIC_FILES = {"app.js": "text/javascript", "app.css": "text/css"}
# What /api/image sends, by suffix: raster images only (an SVG can carry script).
IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".bmp": "image/bmp",
}
CATALOG = web.AppKey("catalog", Catalog)
# Routes that compute over whole runs (bootstrap, every document of several runs): run on their own
# few threads, so however many are asked at once the runs list, pages and live progress still answer.
HEAVY_ROUTES = frozenset({"/api/compare", "/api/wrong", "/api/reasoning"})
HEAVY_THREADS = 2
HEAVY_POOL = web.AppKey("heavy_pool", ThreadPoolExecutor)
ALLOWED_HOSTS = web.AppKey("allowed_hosts", frozenset)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure as JSON ``{"error": ...}`` with its status; an unexpected one is logged and
    answered 500 without its traceback."""
    try:
        return await handler(request)
    except web.HTTPException as exc:  # aiohttp's own: no such route, wrong method
        return _error(exc.status, exc.reason)
    except NotFound as exc:
        return _error(404, str(exc))
    except UnsafePath as exc:
        return _error(403, str(exc))
    except Unreadable as exc:  # the run's own files are damaged: not the request's fault
        return _error(422, str(exc))
    except (BadRequest, EvalflowError) as exc:
        return _error(400, str(exc))
    except Exception:
        log.exception("evalflow view: %s failed", request.path_qs)
        return _error(500, "the server failed on this request; its log has the traceback")


async def _headers(request: web.Request, response: web.StreamResponse) -> None:
    """On every response the app prepares (files, errors, aiohttp's own answers)."""
    response.headers.update(SECURITY_HEADERS)


def _params(request: web.Request) -> dict[str, str]:
    """The query's words, the first value of each (a repeated word does not override it), except
    ``ids=``: repeated, each is one run id whole (a comma in it too), joined for payloads."""
    params = {key: request.query.getone(key) for key in request.query}
    ids = request.query.getall("ids", [])
    if len(ids) > 1:
        params["ids"] = IDS_APART.join(ids)
    return params


async def _api(request: web.Request) -> web.Response:
    route = ROUTES[request.path]
    catalog = request.app[CATALOG]
    pool = request.app[HEAVY_POOL] if request.path in HEAVY_ROUTES else None
    payload = await asyncio.get_running_loop().run_in_executor(pool, route, catalog, _params(request))
    return web.json_response(payload, dumps=json_text)


async def _image(request: web.Request) -> web.StreamResponse:
    catalog = request.app[CATALOG]
    found = await asyncio.get_running_loop().run_in_executor(None, isolated(image_of), catalog, _params(request))
    if isinstance(found, bytes):  # an image of the run's cache, by its digest: stored as PNG
        return web.Response(body=found, content_type="image/png")
    kind = IMAGE_TYPES.get(found.suffix.lower())
    if kind is None:
        raise UnsafePath(f"{found.name!r}: not an image ({', '.join(sorted(IMAGE_TYPES))}); only images are served")
    return web.FileResponse(found, headers={"Content-Type": kind})


def _shipped(name: str) -> bytes:
    path = STATIC_DIR / name
    if not path.is_file():
        raise NotFound(f"the front end's {name} is not installed ({STATIC_DIR}); reinstall evalflow")
    return path.read_bytes()


async def _index(request: web.Request) -> web.Response:
    return web.Response(body=_shipped(INDEX), content_type="text/html", charset="utf-8")


async def _static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in STATIC_FILES:
        raise NotFound(f"/static/{name}: not a file of the front end ({', '.join(STATIC_FILES)})")
    return web.Response(body=_shipped(name), content_type=STATIC_FILES[name], charset="utf-8")


@web.middleware
async def _host_names(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A request must name this machine in its Host header (a loopback name, the address the
    server listens on, the machine's names and addresses, or an ``allow_hosts`` name): a web page
    whose domain was re-pointed at this machine (DNS rebinding) would otherwise read the runs as
    its own origin. Checked on every server, loopback or not."""
    name = (request.url.host or "").strip("[]").lower()
    if not (is_loopback(name) or _is_address(name) or name in request.app[ALLOWED_HOSTS]):
        return _error(
            421,
            f"this server answers requests naming this machine only (localhost, its name or address), not "
            f"{name!r}; a name it should answer to is given with allow_hosts=",
        )
    return await handler(request)


def _is_address(name: str) -> bool:
    """An IP address literal (``192.0.2.2``, ``::1``): rebinding needs a domain name that is
    re-pointed, and a page at an address is that address's own origin, so an address in the Host
    header is answered (on a wildcard bind, every address of the machine reaches it)."""
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def machine_names(host: str, extra: Sequence[str] = ()) -> frozenset[str]:
    """The names a request may give in its Host header besides loopback ones: ``host`` (where it
    listens), this machine's host name, fully qualified name and their addresses, and ``extra``."""
    names = {host, socket.gethostname(), socket.getfqdn(), *extra}
    for name in list(names):
        try:
            names.update(str(info[4][0]) for info in socket.getaddrinfo(name, None))
        except (OSError, UnicodeError):
            pass  # a name that does not resolve adds no address
    return frozenset(n.strip("[]").lower() for n in names if n)


def make_app(roots: Sequence[Path | str], host: str = "127.0.0.1", allow_hosts: Sequence[str] = ()) -> web.Application:
    """The app over the runs under ``roots``, its catalog built now (and again on /api/runs);
    ``host``: the address it will listen on; ``allow_hosts``: more names requests may give
    (a reverse proxy's, a DNS alias): only requests naming this machine are answered."""
    app = web.Application(middlewares=[_errors, _host_names])
    app[ALLOWED_HOSTS] = machine_names(host, allow_hosts)
    app[HEAVY_POOL] = ThreadPoolExecutor(HEAVY_THREADS, thread_name_prefix="evalflow-view-heavy")
    app.on_cleanup.append(_stop_pool)
    app[CATALOG] = Catalog(roots)
    app.on_response_prepare.append(_headers)
    app.router.add_get("/", _index)
    app.router.add_get("/static/{name}", _static)
    app.router.add_get("/api/image", _image)
    for path in ROUTES:
        app.router.add_get(path, _api)
    return app


async def _stop_pool(app: web.Application) -> None:
    app[HEAVY_POOL].shutdown(wait=False, cancel_futures=True)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Request(web.Request):
    """A request whose every response gets the security headers, aiohttp's own answers included:
    a request it cannot parse (a line too long, bad syntax) is answered before any route or
    ``on_response_prepare`` signal, through this hook alone."""

    async def _prepare_hook(self, response: web.StreamResponse) -> None:
        response.headers.update(SECURITY_HEADERS)
        await super()._prepare_hook(response)


class _Runner(web.AppRunner):
    """An AppRunner whose server makes :class:`_Request` requests."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.request_factory = functools.partial(self.app._make_request, _cls=_Request)
        return server


async def start(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """The app listening on ``host:port`` (0: a free port); returns the runner and the port it got."""
    runner = _Runner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = int(runner.addresses[0][1]) if runner.addresses else port
    return runner, bound


async def serve(app: web.Application, host: str, port: int, announce: Callable[[str], None]) -> None:
    """Serve until interrupted; ``announce`` gets the URL once the port is bound."""
    runner, bound = await start(app, host, port)
    shown = f"[{host}]" if ":" in host else host
    announce(f"http://{shown}:{bound}/")
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
