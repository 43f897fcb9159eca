"""What a tracker needs, checked before the evaluation starts, and the one way a tracker failure ends
a run.

Hydra calls a callback's ``on_job_end`` inside a ``try`` that turns any exception into a Python
warning: a tracker that could not log would leave a run that exits 0 with nothing logged. So the
callbacks check what can be checked when they are created (before any document is loaded): the
client package, the store (MLflow: a file store MLflow 3 refuses, a SQLite store without its
driver, a server that does not answer), the credentials (W&B online mode without an API key); and
a failure while logging ends the process with exit code 1 (:func:`tracker_failed`), the run folder
complete, with one ``evalflow: error:`` paragraph saying what failed and how to log it later.
"""

from __future__ import annotations

import contextlib
import importlib.util
import netrc
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

from evalflow.errors import ConfigError
from evalflow.output.run_paths import RESULTS

PROBE_TIMEOUT_S = "10"


def log_finished_job(
    tracker: str, log: Callable[..., Any], config: Any, job_return: Any, options: dict[str, Any]
) -> None:
    """A callback's ``on_job_end``: log a completed job's run folder with ``log(folder, **options)``;
    a failure ends the run (:func:`tracker_failed`) instead of becoming Hydra's warning."""
    from hydra.core.utils import JobStatus

    if job_return.status != JobStatus.COMPLETED:
        return
    folder = Path(config.hydra.runtime.output_dir)
    try:
        log(folder, **options)
    except Exception as exc:  # Hydra would turn it into a warning and exit 0
        tracker_failed(tracker, folder, exc, f"{log.__module__}.{log.__name__}({str(folder)!r}, {describe(options)})")


def tracker_failed(tracker: str, folder: Path, exc: BaseException, later: str) -> NoReturn:
    """Print why ``tracker`` could not log the finished run in ``folder`` and exit 1.

    SystemExit is the one exception Hydra's callback loop does not swallow; the evaluation is in
    the run folder and the cache, so fixing the tracker and re-running costs no model call.
    """
    cause = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    print(
        f"evalflow: error: {tracker} could not log the finished run in {folder}: {type(exc).__name__}: {cause}. "
        f"The run folder is complete ({RESULTS}, samples); fix the tracker and log it with {later}, or run the "
        "same command again (every stage is served from the cache).",
        file=sys.stderr,
        flush=True,
    )
    raise SystemExit(1)


def mlflow_store_uri(tracking_uri: str | None) -> str:
    """The store MLflow will log to: the setting, else ``MLFLOW_TRACKING_URI``, else MLflow's default."""
    if tracking_uri:
        return tracking_uri
    import mlflow

    return str(mlflow.get_tracking_uri())


def check_mlflow_store(tracking_uri: str | None) -> None:
    """Refuse a store MLflow cannot log to, naming the store and the fix."""
    uri = mlflow_store_uri(tracking_uri)
    scheme = urlsplit(uri).scheme
    if scheme in ("", "file") and not _file_store_allowed():
        folder = urlsplit(uri).path or uri
        raise ConfigError(
            f"hydra/callbacks=mlflow: the tracking store {uri} is MLflow's file store, which MLflow 3 refuses unless "
            "MLFLOW_ALLOW_FILE_STORE=true is set (it keeps that store in maintenance mode). Set that variable to use "
            f"the folder as it is, or log to a SQLite file: hydra.callbacks.mlflow.tracking_uri=sqlite:///{folder}.db "
            "(the tracking extra installs its driver), or to a server: tracking_uri=http://HOST:5000."
        )
    if scheme.startswith(("sqlite", "postgresql", "mysql", "mssql")):
        missing = [m for m in ("sqlalchemy", "alembic") if importlib.util.find_spec(m) is None]
        if missing:
            raise ConfigError(
                f"hydra/callbacks=mlflow: the tracking store {uri} is a database, which MLflow reaches through "
                f'{" and ".join(missing)}: pip install "evalflow[tracking]" (or the full mlflow package), or point '
                "it at a server: hydra.callbacks.mlflow.tracking_uri=http://HOST:5000 (or set MLFLOW_TRACKING_URI)."
            )
    _probe(uri)


def _file_store_allowed() -> bool:
    from mlflow import environment_variables

    allow = getattr(environment_variables, "MLFLOW_ALLOW_FILE_STORE", None)
    return allow is None or bool(allow.get())  # MLflow 2 has no such switch and allows the file store


def _probe(uri: str) -> None:
    """One cheap read from the store (no retries), so an unreachable server fails now, not after the run."""
    from mlflow.tracking import MlflowClient

    try:
        with _env(MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT=PROBE_TIMEOUT_S):
            MlflowClient(uri).search_experiments(max_results=1)
    except Exception as exc:  # any client error: the store is not usable as given
        cause = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            f"hydra/callbacks=mlflow: the tracking store {uri} cannot be used: {type(exc).__name__}: {cause[:300]}. "
            "Check hydra.callbacks.mlflow.tracking_uri (or MLFLOW_TRACKING_URI), that the server is up, and its "
            "credentials (MLFLOW_TRACKING_USERNAME/PASSWORD or MLFLOW_TRACKING_TOKEN)."
        ) from None


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def check_wandb_login(mode: str | None) -> None:
    """W&B's online mode needs an API key (``WANDB_API_KEY`` or ``wandb login``'s netrc entry)."""
    effective = (mode or os.environ.get("WANDB_MODE") or "online").lower()
    if effective in ("offline", "disabled", "dryrun") or os.environ.get("WANDB_API_KEY"):
        return
    if _netrc_has(urlsplit(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname or ""):
        return
    raise ConfigError(
        "hydra/callbacks=wandb logs online, which needs a W&B API key, and none is set: run `wandb login` (or set "
        "WANDB_API_KEY), or log offline with hydra.callbacks.wandb.mode=offline (then `wandb sync` the run folder's "
        "wandb/ later)."
    )


def _netrc_has(host: str) -> bool:
    path = Path(os.environ.get("NETRC") or Path.home() / ".netrc")
    try:
        return path.is_file() and netrc.netrc(str(path)).authenticators(host) is not None
    except (netrc.NetrcParseError, OSError):
        return False


def describe(options: dict[str, Any]) -> str:
    """The options of a callback as the Python call that logs a folder later."""
    return ", ".join(f"{k}={v!r}" for k, v in options.items() if v not in (None, (), {}, []))
