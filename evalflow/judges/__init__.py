"""LLM-as-a-judge: metrics whose value a judge model's answer gives, in one room.

Lives here: the ``judge:`` block and its checks, the judge prompts, the judge models and their calls,
verdict parsing and what the aggregate adds for judge metrics (the modules below).
May import ``scale`` and the rooms below it (see docs/architecture.md); never ``scoring``, ``stages`` or ``dag``,
which import it.

- :mod:`~evalflow.judges.judge_spec`: the ``judge:`` block of a ``metric_list`` entry, checked at load
  time (:class:`~evalflow.judges.judge_spec.JudgeSpec`);
- :mod:`~evalflow.judges.parsers`: the registry of judge parsers (judge text -> score);
- :mod:`~evalflow.judges.judge_metrics`: a task's judge metrics; :func:`~evalflow.judges.judge_metrics.judge_metric`
  is the one function scoring calls to resolve a judge entry;
- :mod:`~evalflow.judges.judge_prompts`: the judge requests rendered from the answers to grade;
- :mod:`~evalflow.judges.judge_answers`: the judges asked, one model edge per judge metric;
- :mod:`~evalflow.judges.judge_models`: each judge's model config, identity and caching edge;
- :mod:`~evalflow.judges.verdicts`: the judge's answers parsed, as the metrics stage reads them;
- :mod:`~evalflow.judges.judge_results`: what the aggregate adds for judge metrics (unparsed counts, no-value results).

The pipeline wires them as every stage (``evalflow/dag/pipeline.py``): the stages ``judge_requests``
and ``judge_inference`` (``evalflow/stages/``) run between filters and metrics for the tasks
:func:`~evalflow.judges.judge_metrics.has_judges` selects; each stage calls this room through one
function (``judge_requests_for``, ``ask_judges``, ``verdicts_for``, ``judge_results``).
"""
