"""Experiment tracking: a finished run folder's results, samples and config snapshot logged to
Weights & Biases or MLflow, as Hydra callbacks (lm-eval's ``--wandb_args``)::

Lives here: the W&B and MLflow callbacks, what they log of a run folder, the checks before a run.
May import ``errors`` … ``lmeval_compat`` (the rooms below it in docs/architecture.md); never ``commands``.

    python -m evalflow task=arc_easy hydra/callbacks=wandb hydra.callbacks.wandb.project=evals
    python -m evalflow task=arc_easy hydra/callbacks=mlflow hydra.callbacks.mlflow.tracking_uri=http://host:5000
    python -m evalflow task=arc_easy 'hydra/callbacks=[wandb,mlflow]'

or from Python, after ``evaluate(..., output_dir=folder)``: ``log_to_wandb(folder, project=...)``,
``log_to_mlflow(folder, ...)``. The optional extra ``evalflow[tracking]`` installs both clients.

Credentials are never a setting (the settings are saved in every run folder's ``.hydra/``): the
clients read them from their own environment variables (``WANDB_API_KEY``,
``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD`` / ``MLFLOW_TRACKING_TOKEN``) or login
files, and a tracking URI with a password in it is refused.
"""
