"""The front end's source: no sink that parses markup or evaluates text in app.js, no inline script
or style in index.html."""

from __future__ import annotations

import re

from tests.support.view_pages import STATIC

SINKS = [
    "innerHTML",
    "outerHTML",
    "insertAdjacentHTML",
    "document.write",
    "eval(",
    "new Function",
    'setAttribute("on',
    "srcdoc",
]


ON_ATTRIBUTE = re.compile(r"<[^>]*\son[a-z]+\s*=", re.IGNORECASE)
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)


def sinks_in(source: str) -> list[str]:
    return [sink for sink in SINKS if sink in source]


def inline_code_in(html: str) -> list[str]:
    """Inline script, inline style and event-handler attributes of an HTML page."""
    found = INLINE_SCRIPT.findall(html) + ON_ATTRIBUTE.findall(html)
    return found + [m for m in ("style=", "<style") if m in html]


def test_app_js_has_no_markup_sinks() -> None:
    """The DOM is built only from elements and text: no HTML parsing, no string evaluation."""
    assert sinks_in((STATIC / "app.js").read_text()) == []
    assert sinks_in("node.innerHTML = x; eval(y)") == ["innerHTML", "eval("]


def test_index_html_has_no_inline_script_or_style() -> None:
    assert inline_code_in((STATIC / "index.html").read_text()) == []
    assert len(inline_code_in('<script>x()</script><p onclick="y()" style="z">')) == 3
