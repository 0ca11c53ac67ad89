"""Celery interface of the groups app: one service call each.

This module imports the services its tasks run at the top and nothing imports it back; the
beat sends these tasks. Code below that had to enqueue one would hold an ``infra.taskref.TaskRef``
bound in GroupsConfig.ready, never a name in a string (docs/design.md, "Layers").
"""

from __future__ import annotations

from celery import shared_task

from groups import services


@shared_task(name="groups.sends_complete", acks_late=True)
def sends_complete() -> int:
    """Every 30 s: finish group sends an outage interrupted after their commit (the timeline
    entry outside SQL, the head in Redis), exactly as the client's retry would."""
    return services.sends_complete_stalled()
