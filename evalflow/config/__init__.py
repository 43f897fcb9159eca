"""Run settings: their types and defaults (schema.py); values live in ``conf/`` YAML."""

from evalflow.config.schema import RunConfig, register_configs

__all__ = ["RunConfig", "register_configs"]
