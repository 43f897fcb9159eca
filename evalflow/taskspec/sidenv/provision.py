"""Provisioning a side environment's private package folder, once, with pip.

The folder is ``<root>/<env name>/`` where the root is ``$EVALFLOW_SIDE_ENVS``, else
``side-envs/`` in evalflow's user cache folder (next to converted weights: shared by every cache
folder). It is filled by ``pip install --no-deps --target`` into a temporary folder beside it,
which is renamed into place only once pip succeeded and a ``side-env.json`` records the pins: a
folder that exists is complete. A file lock makes two processes provisioning at once install it
once; the other waits and uses it.

Offline machines run ``python -m evalflow side-env provision`` once while online (or copy the
folder); :func:`ensure_provisioned` otherwise fails at task load time, before any model call, with
that command.

    folder = ensure_provisioned(SIDE_ENVS[0], needed_by="minerva_math/utils.py")
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from filelock import FileLock

from evalflow.cache.store import user_cache_dir
from evalflow.errors import TaskError
from evalflow.taskspec.sidenv.envs import SideEnv

MARKER = "side-env.json"
PROVISION_COMMAND = "python -m evalflow side-env provision"


def side_env_root() -> Path:
    """``$EVALFLOW_SIDE_ENVS``, else ``side-envs/`` in evalflow's user cache folder."""
    env = os.environ.get("EVALFLOW_SIDE_ENVS")
    return Path(env).expanduser() if env else user_cache_dir() / "side-envs"


def env_folder(env: SideEnv, root: Path | None = None) -> Path:
    return (root or side_env_root()) / env.name


def is_provisioned(env: SideEnv, root: Path | None = None) -> bool:
    """Whether the folder exists and holds exactly ``env``'s pins (a table edit re-provisions)."""
    marker = env_folder(env, root) / MARKER
    try:
        return tuple(json.loads(marker.read_text())["requirements"]) == env.requirements
    except (OSError, ValueError, KeyError, TypeError):
        return False


def provision(env: SideEnv, root: Path | None = None) -> Path:
    """Install ``env``'s pins into its folder unless they are there; the folder.

    Raises :class:`ProvisionError` with pip's last output lines when pip fails.
    """
    folder = env_folder(env, root)
    if is_provisioned(env, root):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        if is_provisioned(env, root):  # another process finished while this one waited
            return folder
        staging = Path(tempfile.mkdtemp(prefix=f".{env.name}-", dir=folder.parent))
        try:
            _pip_install(env, staging)
            (staging / MARKER).write_text(json.dumps({"name": env.name, "requirements": list(env.requirements)}))
            if folder.exists():  # an older table's pins: replaced whole
                shutil.rmtree(folder)
            os.rename(staging, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return folder


class ProvisionError(Exception):
    """pip could not install a side environment's pins (offline, no such version, ...)."""


def _pip_install(env: SideEnv, target: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-input",
        "--quiet",
        "--disable-pip-version-check",
        "--retries",
        "1",
        "--timeout",
        "30",
        "--target",
        str(target),
        *env.requirements,
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise ProvisionError(f"`{sys.executable} -m pip` exited with {done.returncode}: {tail[-600:]}")


def ensure_provisioned(env: SideEnv, needed_by: str) -> Path:
    """The environment's folder, provisioned now if need be; a :class:`TaskError` paragraph that
    names the module, the environment and the command to run online when that fails."""
    try:
        return provision(env)
    except (ProvisionError, OSError) as exc:
        raise TaskError(
            f"{needed_by} needs the side environment '{env.name}' ({', '.join(env.requirements)}: "
            f"{env.why}), which evalflow installs once into {env_folder(env)} with pip, and that "
            f"failed ({exc}). Run `{PROVISION_COMMAND} {env.name}` on a machine with access to the "
            "package index (then copy the folder here if this one stays offline; "
            "$EVALFLOW_SIDE_ENVS moves it), or leave out the tasks that need it."
        ) from exc
