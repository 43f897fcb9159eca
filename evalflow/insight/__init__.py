"""Answers from finished runs: why a stage re-ran (explain), whether B beats A (compare), a page of it all (report).

Lives here: ``explanation``, ``comparison`` (+ statistics, the gate), ``report_build`` and the report's parts.
May import ``errors`` … ``output`` (the rooms below it in docs/architecture.md); never ``run``.

Each is a subcommand of ``python -m evalflow`` (``rescore``, which scores saved answers again, is a run:
:mod:`evalflow.run.rescoring`); they read run folders (evalflow's, and lm-eval's for compare and report)
and never need the model.
"""
