"""OmegaConf resolvers used by ``conf/`` (e.g. ``${evalflow.smollm2_dir:}`` in conf/model/smollm2.yaml)."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf


def _smollm2_dir() -> str:
    from evalflow.models.smollm2 import smollm2_dir

    return smollm2_dir()


def _repo_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def _run_id() -> str:
    """A short random suffix that keeps run folders started in the same second apart."""
    import uuid

    return uuid.uuid4().hex[:6]


def _presets(folder: str) -> str:
    """The preset names in ``conf/<folder>/`` (for --help), so the list never goes stale."""
    conf = Path(__file__).resolve().parents[2] / "conf" / folder
    return ", ".join(sorted(p.stem for p in conf.glob("*.yaml")))


def register_resolvers() -> None:
    if not OmegaConf.has_resolver("evalflow.presets"):
        OmegaConf.register_new_resolver("evalflow.presets", _presets)
    if not OmegaConf.has_resolver("evalflow.run_id"):  # cached: one value per composed config
        OmegaConf.register_new_resolver("evalflow.run_id", _run_id, use_cache=True)
    if not OmegaConf.has_resolver("evalflow.smollm2_dir"):
        OmegaConf.register_new_resolver("evalflow.smollm2_dir", _smollm2_dir)
    if not OmegaConf.has_resolver("evalflow.repo_root"):
        OmegaConf.register_new_resolver("evalflow.repo_root", _repo_root)
