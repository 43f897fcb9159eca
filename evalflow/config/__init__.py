"""The run's settings: declared once (``schema.py``), read and checked, composed from ``conf/`` YAML.

Lives here: the settings' declaration and parsers, the data map, composition, where evalflow's files are (``packaged``).
May import ``errors``, ``registry``, ``core`` and ``cache``. Nothing is imported here: the task catalog finds
``tasks/`` through ``evalflow.config.packaged`` without loading Hydra (``schema.py`` imports it).
"""
