"""The seven stages of an evaluation, in pipeline order, each a pure function named for its output.

Lives here: one module per stage, each a pure function of its inputs (and the two judge stages).
May import ``errors`` … ``scoring`` (the rooms below it in docs/architecture.md); never ``dag``, which runs them.

    load_docs -> fewshot -> instances -> inference -> filters -> metrics -> aggregate

A stage's parameters are its inputs; it knows nothing of caching, run folders or Hydra. The DAG
(:mod:`evalflow.dag.pipeline`) says which task fields and run settings each stage reads, and
memoizes it by exactly those.
"""

from evalflow.stages.aggregate import aggregate
from evalflow.stages.fewshot import fewshot
from evalflow.stages.filters import filters
from evalflow.stages.inference import inference
from evalflow.stages.instances import instances
from evalflow.stages.load_docs import load_docs
from evalflow.stages.metrics import metrics

__all__ = ["aggregate", "fewshot", "filters", "inference", "instances", "load_docs", "metrics"]
