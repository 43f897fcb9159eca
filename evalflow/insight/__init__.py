"""Answers from finished runs: why a stage re-ran (explain), whether B beats A (compare), runs side by side.

Lives here: ``explanation``, ``comparison`` (+ statistics, the gate), ``run_names`` and ``report_tables``
(what ``evalflow report`` shows, drawn by the viewer: :mod:`evalflow.view.single_file`).
May import ``errors`` … ``output`` (the rooms below it in docs/architecture.md); never ``run``.

Each is a subcommand of ``python -m evalflow`` (``rescore``, which scores saved answers again, is a run:
:mod:`evalflow.run.rescoring`); they read run folders (evalflow's, and lm-eval's for compare and report)
and never need the model.
"""
