"""LLM-as-a-judge: metrics whose value a judge model's answer gives, in one package.

Lives here: the judge spec and prompt, judge models and their caching edge, parsers, verdicts (listed below).
May import ``errors`` … ``scale`` (the rooms below it in docs/architecture.md); never ``scoring``, ``stages``, ``dag``.

- :mod:`~evalflow.judges.judge_spec`: the ``judge:`` block of a ``metric_list`` entry, checked at load
  time, and the judge prompt it renders;
- :mod:`~evalflow.judges.parsers`: the registry of judge parsers (judge text -> score);
- :mod:`~evalflow.judges.metric`: a task's judge metrics;
- :mod:`~evalflow.judges.judge_models`: each judge's model config, identity and caching edge;
- :mod:`~evalflow.judges.verdicts`: the judge's answers parsed, as the metrics stage reads them.

The pipeline wires them as every stage (``evalflow/dag/pipeline.py``): the stages
``judge_requests`` and ``judge_inference`` (``evalflow/stages/``) run between filters and metrics
for the tasks :func:`~evalflow.judges.metric.has_judges` selects.
"""
