"""``python -m evalflow view [FOLDER ...]``: every run under the folders in the browser, served on
this machine; ``python -m evalflow view bundle FOLDER... out=DIR``: the same viewer as static files.

The server (aiohttp) finds every run under the folders (default ``outputs/``), evalflow's run
folders and lm-eval's output folders, recursively, and prints its URL. It listens on 127.0.0.1
unless ``host=`` says otherwise (another host is reachable from the network: it warns);
``port=0`` takes a free port. Ctrl-C stops it. It only reads the folders::

    python -m evalflow view                                   # outputs/, http://127.0.0.1:8765/
    python -m evalflow view outputs/multirun peer-out/ port=0
    python -m evalflow view bundle outputs/multirun/2026-12-01 out=sweep-view   # open sweep-view/index.html

Pages: runs (filter, sort, a sweep grouped by its overrides), a run (metrics, config, the command
that reproduces it, the manifest), samples (paged, filtered, searched; one in full), compare
(paired rows, gate verdicts, flipped documents), explain, the documents every run gets wrong, and
a running run's progress, live. Needs the ``view`` extra: ``pip install "evalflow[view]"``.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from evalflow.commands.reference import print_help
from evalflow.commands.words import Command, Option, asks_for_help, parse_words
from evalflow.errors import ConfigError

DEFAULT_FOLDER = "outputs"


def port_number(value: str) -> int:
    """a port number, 0 to 65535"""
    number = int(value)
    if not 0 <= number <= 65535:
        raise ValueError(value)
    return number


def host_names(value: str) -> list[str]:
    """a host name, or a list of them: [a,b]"""
    value = value.strip()
    items = value[1:-1].split(",") if value.startswith("[") and value.endswith("]") else value.split(",")
    return [item.strip().strip("'\"") for item in items if item.strip().strip("'\"")]


def _documents(value: str) -> int:
    """a whole number of documents, 0 or more"""
    number = int(value)
    if number < 0:
        raise ValueError(value)
    return number


BUNDLE = Command(
    "view bundle",
    "the viewer as static files, for file:// or any static host",
    "FOLDER...",
    1,
    options=(
        Option("out", str, None, "the folder to write (new, empty, or an earlier bundle, which is replaced)"),
        Option("docs", _documents, 200, "documents of each task written in full (the samples list has them all)"),
    ),
)
COMMAND = Command(
    "view",
    "every run, sample and comparison in the browser (a local server), or a static bundle",
    "[FOLDER ...]",
    0,
    options=(
        Option("port", port_number, 8765, "the port to listen on (0: a free one, printed)"),
        Option(
            "host", str, "127.0.0.1", "the address to listen on; other than loopback, the network can read the runs"
        ),
        Option(
            "allow_hosts",
            host_names,
            [],
            "more names a request's Host header may give (a proxy's, a DNS alias); others are refused (421)",
        ),
    ),
    doc=__doc__ or "",
    actions=(BUNDLE,),
)

MISSING_AIOHTTP = (
    "view: the viewer needs aiohttp (and pandas), which are not installed in this environment "
    f'({sys.executable}); install the view extra with `pip install "evalflow[view]"` (or `pip install '
    "aiohttp pandas`) and run the command again. The run folders themselves need nothing more."
)


def _require_view_extra() -> None:
    try:
        import aiohttp  # noqa: F401
        import pandas  # noqa: F401
    except ImportError:
        raise ConfigError(MISSING_AIOHTTP) from None


def _folders(words: tuple[str, ...], command: Command) -> list[Path]:
    """The folders given (default outputs/), each one that is not a folder refused with the usage
    line of the command that was typed (``view`` or ``view bundle``)."""
    folders = [Path(w) for w in words] or [Path(DEFAULT_FOLDER)]
    missing = [str(f) for f in folders if not f.is_dir()]
    if missing:
        raise ConfigError(
            f"{command.name}: no such folder: {', '.join(missing)}; give folders that hold run folders "
            f"(default {DEFAULT_FOLDER}/, where runs write). {command.line()}"
        )
    return folders


WILDCARD_HOSTS = ("0.0.0.0", "::", "")  # every address of this machine: no one can open such a URL


def shown_url(host: str, port: int) -> str:
    """The URL to print: for a wildcard address the machine's outward address (others open that
    one; ``http://0.0.0.0:PORT/`` opens nothing elsewhere, and the host name may resolve to
    127.0.0.1 only), else the address listened on."""
    name = outward_address() if host in WILDCARD_HOSTS else host
    return f"http://[{name}]:{port}/" if ":" in name else f"http://{name}:{port}/"


def outward_address() -> str:
    """The address other machines reach this one at: the source address of a route out (a UDP
    socket's connect sends no packet), else the host name."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: never reached, only routed
            address = str(probe.getsockname()[0])
        except OSError:
            return socket.gethostname()
    return socket.gethostname() if address.startswith("127.") or address == "0.0.0.0" else address


def warn_if_empty(folders: list[Path]) -> None:
    """A warning when no run lies under the folders (the page says so too): a wrong folder given
    would otherwise start a server that shows an empty list and nothing else."""
    from evalflow.frames.discovery import find_runs

    if not find_runs(folders):
        print(
            f"view: warning: no run found under {', '.join(map(str, folders))}; runs appear there when "
            "`python -m evalflow` (or lm-eval's --output_path) writes into them",
            file=sys.stderr,
        )


def bundle_main(argv: list[str]) -> int:
    words = parse_words(argv, BUNDLE)
    out = words.value("out")
    if not out:
        raise ConfigError(f"view bundle: out= is missing: the folder to write the bundle into. {BUNDLE.line()}")
    _require_view_extra()
    from evalflow.view.bundle import write_bundle

    folders = _folders(words.positional, BUNDLE)
    count = write_bundle(folders, Path(out), words.value("docs"), lambda line: print(line, file=sys.stderr))
    print(f"bundle: {count} payloads in {out}; open {Path(out) / 'index.html'} (no server needed)")
    return 0


def main(argv: list[str]) -> int:
    """``view [FOLDER ...] [port=8765] [host=127.0.0.1]`` or ``view bundle FOLDER... out=DIR``."""
    if asks_for_help(argv):
        print_help(COMMAND)
        return 0
    if argv[:1] == ["bundle"]:
        return bundle_main(argv[1:])
    words = parse_words(argv, COMMAND)
    folders = _folders(words.positional, COMMAND)
    _require_view_extra()
    import asyncio

    from evalflow.view.server import is_loopback, make_app, serve

    host, port = words.value("host"), words.value("port")
    if not is_loopback(host):
        print(
            f"view: warning: host={host} is not a loopback address: anyone who can reach this machine can read "
            "these runs (their prompts, answers and configs); use host=127.0.0.1 unless that is meant. Requests "
            "naming another host (DNS rebinding) are still refused: only this machine's names and addresses "
            "and allow_hosts= are answered",
            file=sys.stderr,
        )
    warn_if_empty(folders)
    app = make_app(folders, host, words.value("allow_hosts"))

    def announce(url: str) -> None:
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        where = f"listening on {host}; " if host in WILDCARD_HOSTS else ""
        print(
            f"evalflow view: {shown_url(host, port)}  ({where}{', '.join(map(str, folders))}; Ctrl-C stops it)",
            flush=True,
        )

    try:
        asyncio.run(serve(app, host, port, announce))
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        raise ConfigError(
            f"view: cannot listen on {host}:{port} ({exc.strerror or exc}); pick another port= (0: a free one)"
        ) from None
    return 0
