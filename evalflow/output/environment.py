"""lm-eval's environment fields of results.json (``add_env_info``): ``pretty_env_info`` (torch's
``collect_env`` report) and ``upper_git_hash`` (the commit of a git checkout in the parent of the
working directory, for a harness used as a submodule).

torch's report costs about 3 s (it runs pip and probes compilers and GPUs), more than many runs
served from the cache take in all, so it is kept under ``<user cache>/env-info/`` by a key of what
it reports: the Python build, the platform, every installed distribution and version, the CPU
model and the NVIDIA driver. A change to any of them writes a new report; what a run imported
does not (:func:`_install_paths`).
"""

from __future__ import annotations

import logging
import os
import platform
import sys
from importlib import metadata
from pathlib import Path

from evalflow.cache.fingerprint import fingerprint
from evalflow.cache.store import user_cache_dir

log = logging.getLogger(__name__)


def environment_fields() -> dict[str, str | None]:
    """``{"pretty_env_info": ..., "upper_git_hash": ...}`` as lm-eval 0.4.13 computes them."""
    return {"pretty_env_info": pretty_env_info(), "upper_git_hash": commit_of(Path(os.getcwd(), ".."))}


def pretty_env_info() -> str:
    """torch's ``get_pretty_env_info()`` (lm-eval writes the error text when it fails), memoized."""
    memo = user_cache_dir() / "env-info" / f"{fingerprint(_environment_key())}.txt"
    if memo.is_file():
        return memo.read_text(encoding="utf-8")
    try:
        from torch.utils.collect_env import get_pretty_env_info

        report = get_pretty_env_info()
    except Exception as exc:  # lm-eval's own fallback: the error's text
        return str(exc)
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_name(f"{memo.name}.tmp-{os.getpid()}")
        tmp.write_text(report, encoding="utf-8")
        tmp.replace(memo)
    except OSError as exc:  # a read-only cache costs the next run 3 s, nothing else
        log.debug("environment report not memoized (%s)", exc)
    return report


def _environment_key() -> tuple:
    """What the report says: the distributions installed on ``sys.path``, the Python build, the
    platform, the CPU model and the NVIDIA driver."""
    distributions = sorted((d.metadata["Name"] or "", d.version) for d in metadata.distributions(path=_install_paths()))
    return (
        "pretty-env-info",
        1,
        sys.version,
        platform.platform(),
        distributions,
        _first_line("/proc/cpuinfo", "model name"),
        _first_line("/proc/driver/nvidia/version", ""),
    )


def _install_paths() -> list[str]:
    """``sys.path`` without the folders a package puts there from inside an installation folder:
    ``setuptools/_vendor`` (importing setuptools adds it, as vLLM's engine does) and
    ``ray/thirdparty_files`` (importing Ray adds it, as vLLM does where Ray is installed). Their
    copies are part of the package already keyed; counted, a run that imported one would key a new
    report and the next run, which did not, would miss it (and import torch to write it again)."""
    roots = [Path(p) for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    return [p for p in sys.path if not any(root in Path(p).parents for root in roots)]


def _first_line(path: str, prefix: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return next((line.strip() for line in f if line.startswith(prefix)), None)
    except OSError:
        return None


def commit_of(repo: Path) -> str | None:
    """lm-eval's ``get_commit_from_path``: HEAD's commit read from the ``.git`` folder (or the
    folder a ``.git`` file points to), None when there is none."""
    try:
        git = repo / ".git"
        if git.is_file():
            git = git.parent / git.read_text(encoding="utf-8").split("\n")[0].split(" ")[-1]
        head = git / "HEAD"
        if not head.exists():
            return None
        name = head.read_text(encoding="utf-8").split("\n")[0].split(" ")[-1]
        return (git / name).read_text(encoding="utf-8").replace("\n", "")
    except Exception:
        return None
