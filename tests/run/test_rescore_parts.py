"""``rescore`` runs through the same parts and runner as a run (``evalflow.run.parts``,
``evalflow.dag.runner``), not through the run's phases: one way to build a run's tasks and edges."""

from __future__ import annotations

from tests.support.import_graph import import_graph


def test_rescore_runs_through_the_runs_own_parts() -> None:
    graph = import_graph()
    assert {"evalflow.run.parts", "evalflow.dag.runner"} <= graph["evalflow.run.rescoring"]
    assert {"evalflow.run.parts", "evalflow.dag.runner"} <= graph["evalflow.run.phases"]
    assert "evalflow.run.phases" not in graph["evalflow.run.rescoring"]
