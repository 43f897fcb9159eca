"""lm-eval's task format: a task YAML read into a :class:`~.spec.TaskConfig`, and its task code.

Above :mod:`evalflow.taskspec.sidenv` (a ``!function`` may run in a side environment), below every
other room. :mod:`.spec` holds the fields, :mod:`.loader` reads YAML (``include``, ``!function``),
:mod:`.escapes` finds literal ``\\n`` typos; :mod:`.taskcode` imports task code, with
:mod:`.installed` (lm-eval's own task modules), :mod:`.lmeval_registrations`, :mod:`.extras`,
:mod:`.downloads` and :mod:`.lmeval_seeds` (the global RNG state task code imports and scores under).
"""
