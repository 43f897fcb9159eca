"""The built-in tasks, in lm-eval's YAML format: this folder installs as the package ``evalflow.tasks``
(setup.py), so an installed evalflow carries them with their data and task code;
evalflow.config.packaged finds it."""
