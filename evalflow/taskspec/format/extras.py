"""Which pip extra installs a package that a task module needs and this environment lacks.

Read from the packages' own installed metadata, never from a hand-kept table: evalflow's extras
(``importlib.metadata.requires("evalflow")``, an editable install's as well as a wheel's) come first,
since ``evalflow[lm-eval-tasks]`` resolves with Hydra; then lm-eval's (``importlib.metadata.requires
("lm-eval")``, the ``extra == "..."`` markers), whose task extras list every optional package of its
task library.

    >>> install_hint("surely_not_a_real_package_name")
    '`pip install surely_not_a_real_package_name`'
"""

from __future__ import annotations

import functools
from importlib import metadata

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

__all__ = ["install_hint", "pip_name"]

# Import names whose pip package is named differently (pip treats `_` and `-` alike otherwise).
_PIP_NAMES = {
    "sklearn": "scikit-learn",
    "yaml": "PyYAML",
    "PIL": "Pillow",
    "cv2": "opencv-python",
    "bs4": "beautifulsoup4",
    "dateutil": "python-dateutil",
    "lm_eval": "lm-eval",
    "antlr4": "antlr4-python3-runtime",
    "Levenshtein": "levenshtein",
    "google": "protobuf",
}
_LM_EVAL = "lm-eval"
_AGGREGATE_EXTRAS = {"all", "dev", "tasks", "testing"}  # extras that only gather other extras


def pip_name(module: str) -> str:
    """The pip package that provides top-level import name ``module`` (its usual spelling)."""
    top = module.split(".")[0]
    return _PIP_NAMES.get(top, top)


def install_hint(module: str) -> str:
    """The install command for the package behind import name ``module``, naming the extra that
    has it: evalflow's own, else lm-eval's; a core dependency of lm-eval says so."""
    package = pip_name(module)
    wanted = canonicalize_name(package)
    ours = [e for e, names in _evalflow_extras().items() if wanted in names and e not in _AGGREGATE_EXTRAS]
    if ours:
        return (
            f"`pip install 'evalflow[{ours[0]}]'` (evalflow's `{ours[0]}` extra installs {package} "
            "with versions that resolve alongside Hydra), or `pip install " + package + "`"
        )
    core, extras = _lm_eval_requirements()
    theirs = [e for e, names in extras.items() if wanted in names and e not in _AGGREGATE_EXTRAS]
    if theirs:
        return (
            f"`pip install {package}`; lm-eval's `{theirs[0]}` extra lists it "
            f"(`pip install 'lm-eval[{theirs[0]}]'` installs that extra's packages)"
        )
    if wanted in core:
        return f"`pip install {package}` (a dependency of lm-eval itself: its installation is incomplete)"
    return f"`pip install {package}`"


@functools.cache
def _evalflow_extras() -> dict[str, frozenset[str]]:
    """evalflow's extras -> the canonical names they list (``evalflow[x]`` self-references expanded),
    from its installed metadata (none when evalflow runs from a checkout that is not installed)."""
    installed = _installed("evalflow")
    names = (metadata.metadata("evalflow").get_all("Provides-Extra") or []) if installed else []
    raw = _by_extra((metadata.requires("evalflow") or []) if installed else [], names)[1]
    return {extra: frozenset(_names(raw, extra)) for extra in raw}


def _names(raw: dict[str, list[str]], extra: str, seen: frozenset[str] = frozenset()) -> set[str]:
    names: set[str] = set()
    for text in raw.get(extra, []):
        req = _parse(text)
        if req is None:
            continue
        if canonicalize_name(req.name) == "evalflow":
            names |= set().union(*(_names(raw, e, seen | {extra}) for e in req.extras if e not in seen))
        else:
            names.add(canonicalize_name(req.name))
    return names


@functools.cache
def _lm_eval_requirements() -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """lm-eval's core dependencies and its extras, from its installed metadata (empty without it)."""
    if not _installed(_LM_EVAL):
        return frozenset(), {}
    names = metadata.metadata(_LM_EVAL).get_all("Provides-Extra") or []
    core, extras = _by_extra(metadata.requires(_LM_EVAL) or [], names)
    return frozenset(core), {
        e: frozenset(canonicalize_name(r.name) for r in map(_parse, reqs) if r) for e, reqs in extras.items()
    }


def _by_extra(requirements: list[str], extra_names: list[str]) -> tuple[set[str], dict[str, list[str]]]:
    """Split ``Requires-Dist`` lines into the core names and ``{extra: [requirement, ...]}``: a line
    belongs to each extra its marker (``extra == "ifeval"``) is true for."""
    core: set[str] = set()
    extras: dict[str, list[str]] = {}
    for text in requirements:
        req = _parse(text)
        if req is None:
            continue
        if req.marker is None:
            core.add(canonicalize_name(req.name))
            continue
        for extra in extra_names:
            if req.marker.evaluate({"extra": extra}):
                extras.setdefault(extra, []).append(text.split(";")[0].strip())
    return core, extras


def _parse(text: str) -> Requirement | None:
    try:
        return Requirement(text)
    except InvalidRequirement:
        return None


def _installed(name: str) -> bool:
    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True
