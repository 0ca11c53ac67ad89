"""Celery interface of the groups app: one service call each."""

from __future__ import annotations

from celery import shared_task

from groups import services


@shared_task(name="groups.sends_complete", acks_late=True)
def sends_complete() -> int:
    """Every 30 s: finish group sends an outage interrupted after their commit (the timeline
    entry outside SQL, the head in Redis), exactly as the client's retry would."""
    return services.sends_complete_stalled()
