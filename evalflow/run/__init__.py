"""The run: compose → plan → execute → write, for every kind of run (a run, ``rescore``, ``show``, ``validate``).

Lives here: the run's phases, the tasks it loads and checks before any model call, ``imports=``,
previews. May import every room below it (see docs/architecture.md); only ``lmeval_compat``,
``tracking`` and ``commands`` import it.
"""
