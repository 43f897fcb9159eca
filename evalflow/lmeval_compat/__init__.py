"""lm-eval 0.4.13 users' entry points onto evalflow, so their commands and notebooks run unchanged:

Lives here: lm-eval's parser, its translation into an evalflow run, lm-eval's output layout, ``simple_evaluate``.
May import ``errors`` … ``run`` (the rooms below it in docs/architecture.md); only ``commands`` and the API import it.

- ``python -m evalflow lm-eval ARGS...`` / ``evalflow-lm-eval``: lm-eval's command line (run.py:
  parser.py parses it, with run_file.py's ``--config`` YAML, translate.py turns it into an evalflow
  run, layout.py writes lm-eval's files);
- :func:`evalflow.simple_evaluate` and lm-eval's ``evaluate(lm, task_dict)`` (evaluate.py), taking
  lm-eval's task specs (task_specs.py: names, config dicts, Task and Group objects), its
  ``TaskManager`` or evalflow's (task_manager.py), models lm-eval's registry builds (lm_models.py);
  ``evalflow.lm_eval`` mirrors lm-eval's modules over them;
- args.py: lm-eval's ``model_args`` strings and value typing, also behind the native
  ``model_args=...`` and the hint for ``--model``/``--tasks`` given to the native command line (native.py).

docs/lm-eval-migration.md maps every flag to its evalflow setting.
"""
