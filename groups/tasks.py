"""Celery interface of the groups app: one service call each.

This module imports the services its tasks run at the top and nothing imports it back; the
beat sends ``sends_complete``; ``events_publish`` is sent by the services through an
``infra.taskref.TaskRef`` bound in GroupsConfig.ready, never a name in a string (docs/design.md,
"Layers").
"""

from __future__ import annotations

from celery import Task, shared_task

from groups import services
from infra.outages import retry_while_unavailable
from storage.events import LATER_MAX_S


@shared_task(name="groups.sends_complete", acks_late=True)
def sends_complete() -> int:
    """Every 30 s: finish group sends an outage interrupted after their commit (the timeline
    entry outside SQL, the head in Redis), exactly as the client's retry would."""
    return services.sends_complete_stalled()


@shared_task(name="groups.events_publish", acks_late=True, bind=True, max_retries=None)
def events_publish(self: Task, gid: int, seq: int, msgkey: int, sender_uid: int) -> None:
    """A group send's delivery event its request could not publish (its Redis node did not
    answer): published once it does, retried with backoff for as long as it takes."""
    try:
        services.events_publish(gid=gid, seq=seq, msgkey=msgkey, sender_uid=sender_uid)
    except Exception as exc:
        retry_while_unavailable(self, exc, LATER_MAX_S)
