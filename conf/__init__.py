"""Hydra's configs (config.yaml, model/, data_maps/, hydra/): this folder installs as the package
``evalflow.conf`` (setup.py), so an installed evalflow carries them; evalflow.config.packaged finds it."""
