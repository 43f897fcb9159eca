"""Run settings: their types and defaults (``schema.py``); values live in ``conf/`` YAML, found by
``packaged.py``. Nothing is imported here: the task catalog finds ``tasks/`` through
``evalflow.config.packaged`` without loading Hydra (``schema.py`` imports it)."""
