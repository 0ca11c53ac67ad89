"""A Celery task object handed down to the module that enqueues it.

An app's ``tasks.py`` imports the code its tasks run (bulk's planner, a campaign recall, the
conversation-list prewarm), and that code enqueues those same tasks (the next plan step, a busy
batch again, a prewarm). It cannot import ``tasks.py`` back: that is an import cycle, inside a
function too (tests/test_layers.py). Nor does it send by a name in a string, a link no reader,
type checker or test follows. It declares a ``TaskRef``, the app's ``AppConfig.ready`` binds it to
the task object (the one registration mechanism, docs/design.md "Layers"), and it sends
``ref.task.apply_async(...)``: the task's own name, routing and options, from the object.
"""

from __future__ import annotations

from celery import Task
from django.core.exceptions import ImproperlyConfigured


class TaskRef:
    __slots__ = ("_task",)

    def __init__(self) -> None:
        self._task: Task | None = None

    def bind(self, task: Task) -> None:
        """Called from the owning app's ``AppConfig.ready`` (again in tests: the same task)."""
        self._task = task

    @property
    def task(self) -> Task:
        if self._task is None:
            raise ImproperlyConfigured("A task was sent before its app's AppConfig.ready bound it.")
        return self._task
