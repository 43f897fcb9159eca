"""OmegaConf resolvers used by ``conf/`` (e.g. ``${evalflow.smollm2_dir:}`` in conf/model/smollm2.yaml)."""

from __future__ import annotations

import os
from pathlib import Path

from omegaconf import OmegaConf

from evalflow.config import packaged


def _smollm2_dir() -> str:
    from evalflow.config.smollm2 import smollm2_dir

    return smollm2_dir()


SHARED_DATA_ENV = "EVALFLOW_SHARED_DATA"


def shared_data_candidates() -> list[Path]:
    """Where ``data_map=shared`` looks for its data, in order: ``$EVALFLOW_SHARED_DATA``; when
    evalflow runs from a source checkout (:func:`~evalflow.config.packaged.source_checkout`: an
    editable install or the checkout on ``PYTHONPATH``), the ``shared/data`` folder beside it; then
    ``./shared/data`` (an installed evalflow, a worktree or a copy of the code elsewhere finds the
    data of the folder it is run from)."""
    env = os.environ.get(SHARED_DATA_ENV)
    checkout = packaged.source_checkout()
    found = [Path(env).expanduser()] if env else []
    beside = [checkout.parent / "shared" / "data"] if checkout is not None else []
    return found + beside + [Path.cwd() / "shared" / "data"]


def shared_data() -> str:
    """The first folder of :func:`shared_data_candidates` that exists (``${evalflow.shared_data:}``,
    the root of conf/data_maps/shared.yaml), or one paragraph naming the paths tried and the fix."""
    candidates = shared_data_candidates()
    for folder in candidates:
        if folder.is_dir():
            return str(folder.resolve())
    from evalflow.errors import DataError

    tried = ", ".join(str(c) for c in candidates)
    raise DataError(
        f"data_map=shared: no shared data folder found (tried {tried}). Set ${SHARED_DATA_ENV} to the folder "
        "holding the local dataset copies (gsm8k/, arc_easy/, ...), run from the folder that holds shared/data, "
        "point data_map= at another map file, or leave data_map out to load the datasets from the hub."
    )


def _run_id() -> str:
    """A short random suffix that keeps run folders started in the same second apart."""
    import uuid

    return uuid.uuid4().hex[:6]


def _presets(folder: str) -> str:
    """The preset names in ``conf/<folder>/`` (for --help), so the list never goes stale."""
    conf = packaged.conf_dir() / folder
    return ", ".join(sorted(p.stem for p in conf.glob("*.yaml")))


def register_resolvers() -> None:
    if not OmegaConf.has_resolver("evalflow.presets"):
        OmegaConf.register_new_resolver("evalflow.presets", _presets)
    if not OmegaConf.has_resolver("evalflow.run_id"):  # cached: one value per composed config
        OmegaConf.register_new_resolver("evalflow.run_id", _run_id, use_cache=True)
    if not OmegaConf.has_resolver("evalflow.smollm2_dir"):
        OmegaConf.register_new_resolver("evalflow.smollm2_dir", _smollm2_dir)
    if not OmegaConf.has_resolver("evalflow.shared_data"):
        OmegaConf.register_new_resolver("evalflow.shared_data", shared_data)
