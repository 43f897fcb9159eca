"""Run folders as data: every run found under some folders, its status (live or finished), its
results and its samples as pandas dataframes, read through an index built once per samples file.

Lives here: ``discovery``, ``status``, ``runs``, ``samples_index``, ``samples``, ``across``.
May import ``errors`` … ``insight`` (the rooms below it in docs/architecture.md); never ``view`` or ``run``.
"""

from evalflow.frames.runs import runs_df
from evalflow.frames.samples import samples_df

__all__ = ["runs_df", "samples_df"]
