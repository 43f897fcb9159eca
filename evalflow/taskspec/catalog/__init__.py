"""The task catalog: which tasks, groups and tags exist and what a run's ``task=`` selects.

The top room of :mod:`evalflow.taskspec`. :mod:`.index` (with :mod:`.index_scan`) indexes task
folders, :mod:`.groups` expands groups and tags, :mod:`.selection` holds the selected entries,
:mod:`.run_options` a run's per-task options, :mod:`.listing` is ``evalflow ls``.
"""
