"""Where this evalflow's own files are: its configs (``conf/``), its built-in tasks (``tasks/``), its
code, and the source checkout it runs from, if any. Every path into evalflow's own files is computed
here, through the import system (``tests/config/test_packaged.py`` checks that no module reads its
``__file__`` but the two that open a file beside themselves).

The repository keeps ``conf/`` and ``tasks/`` at its top level; an install carries them as the
packages ``evalflow.conf`` and ``evalflow.tasks`` (``setup.py``). The code runs in one of two layouts:

- **installed** (a wheel, or an sdist pip built into one): ``evalflow/conf`` and ``evalflow/tasks``
  inside the installed package, found through the import system (``importlib.resources``);
- **a source checkout** (``pip install -e .``, or the checkout on ``PYTHONPATH``): the folder holding
  the running ``evalflow`` package also holds ``pyproject.toml``, ``conf/`` and ``tasks/``. Its own
  folders are read whatever else is installed: with ``PYTHONPATH=<worktree>`` in a venv where
  another checkout is installed editable, the import system would answer ``evalflow.conf`` with the
  other checkout's folder (setuptools' editable finder maps it there).

    >>> conf_dir().joinpath("config.yaml").is_file(), tasks_dir().joinpath("demo", "arith_mc.yaml").is_file()
    (True, True)
"""

from __future__ import annotations

import hashlib
import os
from importlib import metadata, resources
from pathlib import Path

from evalflow.errors import ConfigError

DISTRIBUTION = "evalflow"
DATA_FOLDERS = ("conf", "tasks")  # top-level folders of the checkout, packages evalflow.<name> when installed


def package_dir() -> Path:
    """The folder of the running ``evalflow`` package (its ``__init__.py``'s folder), symbolic links resolved."""
    return Path(str(resources.files("evalflow"))).resolve()


def source_checkout() -> Path | None:
    """The source checkout the running code comes from: the folder holding the ``evalflow`` package
    when it also holds ``pyproject.toml`` and the checkout's ``conf/`` and ``tasks/`` packages; None
    for an installed wheel (whose folder is site-packages, or a ``pip install --target`` folder)."""
    root = package_dir().parent
    marks = [root / "pyproject.toml", *(root / name / "__init__.py" for name in DATA_FOLDERS)]
    return root if all(m.is_file() for m in marks) else None


def conf_dir() -> Path:
    """Hydra's config folder (``config.yaml``, ``model/``, ``data_maps/``, ``hydra/``)."""
    return _data_folder("conf")


def tasks_dir() -> Path:
    """The built-in tasks' folder (lm-eval's YAML format, with the data and code some of them ship)."""
    return _data_folder("tasks")


def _data_folder(name: str) -> Path:
    checkout = source_checkout()
    if checkout is not None:
        return checkout / name
    try:
        return Path(str(resources.files(f"evalflow.{name}")))
    except ModuleNotFoundError:
        raise ConfigError(
            f"evalflow's {name}/ folder (the package evalflow.{name}) is not installed beside its code in "
            f"{package_dir()}: this installation is incomplete. Reinstall evalflow from a wheel or an sdist "
            "built with its setup.py (`pip install --force-reinstall evalflow-*.whl`), or from a checkout "
            "with `pip install -e .`."
        ) from None


def version() -> str | None:
    """The installed distribution's version (None when evalflow runs from a checkout not installed)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


def code_identity() -> str:
    """Which evalflow code this is, comparable across interpreters (a side venv's evalflow against
    this one): a checkout by its folder (an editable install follows its edits), an installed copy
    by its version and a hash of every file of its package, ``conf/`` and ``tasks/`` included."""
    checkout = source_checkout()
    if checkout is not None:
        return f"checkout {checkout.resolve()}"
    root = package_dir()
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(os.fsencode(path.relative_to(root).as_posix()) + b"\0" + path.read_bytes() + b"\0")
    return f"installed {version()} {digest.hexdigest()}"
