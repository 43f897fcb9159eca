"""Experiment tracking: a finished run folder's results, samples and config snapshot logged to
Weights & Biases, MLflow or Trackio, as Hydra callbacks; and lm-eval's logging flags
(``--wandb_args``, ``--wandb_config_args``, ``--trackio_args``, ``--hf_hub_log_args``) for
``python -m evalflow lm-eval``, logged as lm-eval's own loggers log them (``lmeval_loggers``)::

Lives here: the W&B, MLflow and Trackio callbacks, what they log of a run folder, the checks before
a run, lm-eval's W&B and Trackio loggers and its Hub push.
May import ``errors`` … ``lmeval_compat`` (the rooms below it in docs/architecture.md); never ``commands``.

    python -m evalflow task=arc_easy hydra/callbacks=wandb hydra.callbacks.wandb.project=evals
    python -m evalflow task=arc_easy hydra/callbacks=mlflow hydra.callbacks.mlflow.tracking_uri=http://host:5000
    python -m evalflow task=arc_easy 'hydra/callbacks=[wandb,mlflow]'
    python -m evalflow task=arc_easy hydra/callbacks=trackio hydra.callbacks.trackio.project=evals

or from Python, after ``evaluate(..., output_dir=folder)``: ``log_to_wandb(folder, project=...)``,
``log_to_mlflow(folder, ...)``. The optional extra ``evalflow[tracking]`` installs both clients.

Credentials are never a setting (the settings are saved in every run folder's ``.hydra/``): the
clients read them from their own environment variables (``WANDB_API_KEY``,
``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD`` / ``MLFLOW_TRACKING_TOKEN``) or login
files, and a tracking URI with a password in it is refused.
"""
