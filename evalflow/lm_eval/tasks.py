"""lm-eval's ``lm_eval.tasks``: ``TaskManager`` and ``get_task_dict``, over evalflow's task index."""

from __future__ import annotations

from evalflow.lmeval_compat.task_manager import TaskManager, get_task_dict

__all__ = ["TaskManager", "get_task_dict"]
