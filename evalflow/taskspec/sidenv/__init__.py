"""Side environments: task code whose packages conflict with evalflow's runs in a worker interpreter.

The lowest room of :mod:`evalflow.taskspec`: it imports none of the others. :mod:`.envs` decides
which task module needs which environment (from the files it imports, :mod:`.local_modules`),
:mod:`.provision` installs an environment's pins, :mod:`.worker` runs task code there through
:mod:`.worker_main`.
"""
