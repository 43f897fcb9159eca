"""A file name from a request, resolved under one run folder or refused.

The server answers ``/api/image?id=ID&name=NAME`` with a file of that run; NAME is text from the
network, so it is treated as hostile: a name that reaches outside the folder by ``..``, by an
absolute path, by a drive or backslash, by a NUL byte, by percent-encoding (``%2e%2e``, and
``%252e%252e`` decoded twice), or through a symbolic link that points out of the folder, is
refused before any file is opened. The check resolves the real path and requires it to lie under
the folder's real path, so a link inside the folder to another place inside it is fine.

    >>> from pathlib import Path
    >>> unsafe_reason("../results.json")
    "it climbs out with '..'"
    >>> unsafe_reason("%2e%2e/x") is not None and unsafe_reason("images/cat.png") is None
    True
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from urllib.parse import unquote

from evalflow.errors import EvalflowError
from evalflow.output.contained import link_out

_MAX_DECODINGS = 4  # %25 nested deeper than this is refused rather than decoded further


class UnsafePath(EvalflowError):
    """A requested name that would read outside its run folder (the server answers 403)."""


def _decodings(name: str) -> list[str]:
    """The name and each successive percent-decoding of it, until it stops changing."""
    forms = [name]
    for _ in range(_MAX_DECODINGS):
        decoded = unquote(forms[-1])
        if decoded == forms[-1]:
            return forms
        forms.append(decoded)
    return [*forms, "%"]  # still changing: treated as encoded past what we check


def unsafe_reason(name: str) -> str | None:
    """Why ``name`` may not be read from a run folder, or None when its text is acceptable."""
    if not name:
        return "it is empty"
    for form in _decodings(name):
        if form == "%":
            return "it is percent-encoded more than 4 times"
        if "\x00" in form:
            return "it holds a NUL byte"
        if "\\" in form:
            return "it holds a backslash"
        if form.startswith("/") or (len(form) > 1 and form[1] == ":"):
            return "it is an absolute path"
        if ".." in PurePosixPath(form).parts:
            return "it climbs out with '..'"
    if name != unquote(name):
        return "it is percent-encoded (names are sent decoded once)"
    return None


def resolve_under(folder: Path, name: str) -> Path:
    """The file ``name`` names inside ``folder``, following links only where they stay inside it;
    :class:`UnsafePath` for anything else (including a name with no such file)."""
    reason = unsafe_reason(name)
    if reason is not None:
        raise UnsafePath(f"{name!r}: refused, {reason}; ask for a file of the run by its name inside the run folder")
    path = Path(folder) / name
    if link_out(folder, path) is not None:  # the one check every reader of a run folder makes
        raise UnsafePath(f"{name!r}: refused, it leads outside the run folder (a symbolic link out)")
    if not path.exists():
        raise UnsafePath(f"{name!r}: no such file in the run folder")
    target = path.resolve()
    if not target.is_file():
        raise UnsafePath(f"{name!r}: not a file of the run folder")
    return target
