"""The viewer as ONE HTML file (``python -m evalflow report RUN... out=report.html``): the bundle of
:mod:`evalflow.view.bundle` folded into a page that opens from ``file://``, mailed or attached to a
review, with no server, no network and no second rendering: the same app.js, app.css and payloads.

The page is the viewer's index.html marked ``<meta name="evalflow-mode" content="single">``, with
app.css in one ``<style>`` and app.js in one ``<script>``, and a Content-Security-Policy that
allows exactly those two blocks by their sha256 hashes (no ``'unsafe-inline'``: an injected
``<script>`` or ``onerror=`` would not run even if markup got in). The payloads, the ones the
bundle writes (:func:`evalflow.view.bundle.payloads`), are one line each (the key and the payload
as JSON, escaped as the bundle escapes them, a tab between), gzip-compressed and base64-encoded
into ``<script type="application/gzip+base64" data-block="NAME">`` blocks: never executed, holding
only base64's letters, so no text of a run can end one early. The documents in full of one run's
task are one block, unpacked when one of them is opened; everything else is the first block,
unpacked on opening (:func:`block_name`); app.js decompresses with the browser's
DecompressionStream and parses each payload when a view asks for it. Compressed, a pair of
arc_easy runs with every document in full is a fifth of its JSON. The page opens on the
comparison of two runs, the results side by side of more, or the one run's page.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import parse_qs, quote

from evalflow.errors import ConfigError
from evalflow.output.run_paths import LMEVAL_RESULTS_PATTERN, RESULTS, SNAPSHOT
from evalflow.view.bundle import URI_SAFE, api_key, js_json, payloads, relative_paths, roots_named
from evalflow.view.payloads import Catalog
from evalflow.view.server import INDEX, STATIC_DIR

MODE = "single"
ALL_DOCS = 1 << 30
_META = re.compile(r'<meta (name="evalflow-mode"|http-equiv="Content-Security-Policy")[^>]*>')
_STYLE_LINK = '<link rel="stylesheet" href="static/app.css">'
_SCRIPT_SRC = '<script src="static/app.js" defer></script>'


def digest(text: str) -> str:
    """A CSP source for an inline block: ``'sha256-<base64 of the block's UTF-8 bytes>'``."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def policy(script: str, style: str) -> str:
    """Only the page's own two inline blocks run or style; images only as data: URLs."""
    return (
        f"default-src 'none'; script-src {digest(script)}; style-src {digest(style)}; img-src data:; "
        "connect-src 'none'; base-uri 'none'; form-action 'none'"
    )


def ordered_ids(catalog: Catalog) -> list[str]:
    """The runs in the order given on the command line (a root's index first), a sweep's jobs by
    number: the first is compare's baseline A."""

    def key(run_id: str) -> tuple[int, list[object]]:
        head, colon, rest = run_id.partition(":")
        root, rel = (int(head), rest) if colon and head.isdigit() else (0, run_id)
        return root, [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", rel)]

    return sorted(catalog.entries, key=key)


def start_route(ids: Sequence[str]) -> str:
    """The hash the page opens on: one run's page, two runs' comparison, more runs side by side."""
    parts = [quote(i, safe=URI_SAFE) for i in ids]
    if len(parts) == 1:
        return f"#/run/{parts[0]}"
    if len(parts) == 2:
        return f"#/compare/{parts[0]}/{parts[1]}"
    return f"#/results/{','.join(parts)}"


def page_chunks(
    template: str, script: str, style: str, data: Iterator[tuple[str, object]], start: str
) -> Iterator[str]:
    """The page, in pieces (a big run's payloads are not all held at once)."""
    for needed in (_STYLE_LINK, _SCRIPT_SRC, "</body>"):
        if needed not in template:
            raise ConfigError(f"the viewer's {INDEX} lacks {needed!r}; reinstall evalflow")
    for name, text, ends in (("app.js", script, ("</script", "<!--")), ("app.css", style, ("</style",))):
        for end in ends:
            if end in text.lower():
                raise ConfigError(f"the viewer's {name} holds {end!r} and cannot be inlined; reinstall evalflow")
    anchor = '<meta charset="utf-8">' if '<meta charset="utf-8">' in template else "<head>"
    head = _META.sub("", template).replace(anchor, anchor + "\n" + _metas(script, style, start), 1)
    head = head.replace(_STYLE_LINK, f"<style>{style}</style>").replace(_SCRIPT_SRC, "")
    before, _, after = head.rpartition("</body>")
    yield before
    yield from data_blocks(data)
    yield f"<script>{script}</script>\n</body>{after}"


def block_name(key: str) -> str:
    """The block a payload is in: a document in full in its run and task's block (named like the
    key, ``/api/sample?id=…&task=…``: app.js unpacks it when one of them is opened), the rest in
    the first block (``""``), which the page unpacks on opening."""
    if not key.startswith("/api/sample?"):
        return ""
    query = parse_qs(key.split("?", 1)[1], keep_blank_values=True)
    return api_key("/api/sample", {"id": query["id"][0], "task": query["task"][0]})


def data_blocks(data: Iterator[tuple[str, object]]) -> Iterator[str]:
    """The payloads as blocks, each streamed out as it fills; the first block (held compressed
    while the documents stream) last."""
    first = Packer()
    held: list[str] = []
    current: tuple[str, Packer] | None = None
    for key, payload in data:
        line = f"{js_json(key)}\t{js_json(payload)}\n"
        name = block_name(key)
        if not name:
            held.append(first.feed(line))
            continue
        if current is None or current[0] != name:
            if current is not None:
                yield current[1].close() + "</script>\n"
            current = (name, Packer())
            yield f'<script type="application/gzip+base64" data-block="{html.escape(name)}">\n'
        yield current[1].feed(line)
    if current is not None:
        yield current[1].close() + "</script>\n"
    yield '<script type="application/gzip+base64" data-block="">\n' + "".join(held) + first.close() + "</script>\n"


class Packer:
    """Lines gzip-compressed and base64-encoded as they come (76-character lines, as MIME wraps)."""

    def __init__(self) -> None:
        self._zip = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: a gzip member, as DecompressionStream reads
        self._pending = b""

    def feed(self, line: str) -> str:
        self._pending += self._zip.compress(line.encode("utf-8"))
        cut = len(self._pending) - len(self._pending) % 57  # 57 bytes: one 76-character base64 line
        out, self._pending = self._pending[:cut], self._pending[cut:]
        return _wrapped(out)

    def close(self) -> str:
        return _wrapped(self._pending + self._zip.flush())


def _wrapped(chunk: bytes) -> str:
    return "".join(base64.b64encode(chunk[i : i + 57]).decode("ascii") + "\n" for i in range(0, len(chunk), 57))


def _metas(script: str, style: str, start: str) -> str:
    return (
        f'<meta http-equiv="Content-Security-Policy" content="{policy(script, style)}">\n'
        f'<meta name="evalflow-mode" content="{MODE}">\n'
        f'<meta name="evalflow-start" content="{html.escape(start)}">'
    )


def write_single_file(folders: Sequence[Path | str], out: Path, docs: int | None = None) -> int:
    """Write the page of the runs in ``folders`` (run folders, multirun folders, lm-eval output
    folders) to ``out``, the first ``docs`` documents of each task in full (None: all); returns
    its size in bytes."""
    from evalflow.output.run_folder import atomic_write

    catalog = Catalog(folders)
    if not catalog.entries:
        raise ConfigError(
            f"report: no run found in {', '.join(map(str, folders))}; give run folders "
            f"(evalflow's {RESULTS} or {SNAPSHOT}/, or lm-eval's {LMEVAL_RESULTS_PATTERN}) or folders holding them"
        )
    target = out.resolve()
    for entry in catalog.entries.values():
        if target.is_relative_to(entry.folder.resolve()):
            raise ConfigError(f"report: out={out} lies inside the run folder {entry.folder}; write the page elsewhere")
    template = (STATIC_DIR / INDEX).read_text(encoding="utf-8")
    script = (STATIC_DIR / "app.js").read_text(encoding="utf-8")
    style = (STATIC_DIR / "app.css").read_text(encoding="utf-8")
    ids = ordered_ids(catalog)
    named = roots_named(folders)  # no path of this machine in a page that travels
    data = (
        (key, relative_paths(payload, named))
        for key, payload in payloads(catalog, ALL_DOCS if docs is None else docs, ids)
    )
    atomic_write(out, page_chunks(template, script, style, data, start_route(ids)))
    return out.stat().st_size
