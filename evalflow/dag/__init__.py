"""The pipeline's declaration and its runner: which stage reads what, and a plan that computes only the misses.

Lives here: ``pipeline`` (the one declaration of the DAG), ``node``, ``runner``, ``answer_cache`` (the inference edge).
May import ``errors`` … ``stages`` (the rooms below it in docs/architecture.md); ``output`` and those above import it.
"""
