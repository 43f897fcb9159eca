"""lm-eval's task format: YAML, prompts, data, the catalog.

Lives here: one subpackage per inner room, bottom to top: ``sidenv``, ``format``, ``prompts``, ``data``, ``catalog``.
May import ``errors`` … ``sandbox`` (the rooms below it in docs/architecture.md); an inner room, the ones before it.
"""
