"""The run's settings: their schema, their composition, and where evalflow's own files are.

Lives here: ``schema`` (each setting's name, type, default), ``settings``, ``compose``, resolvers, ``packaged``.
May import only ``errors``, ``registry``, ``core`` and ``cache`` (the rooms below it in docs/architecture.md).

Values live in ``conf/`` YAML, found by ``packaged``. Nothing is imported here: the task catalog finds
``tasks/`` through ``evalflow.config.packaged`` without loading Hydra (``schema`` imports it).
"""
