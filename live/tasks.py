"""Live delivery's tasks (queue ``messaging``).

``group_push(gid, event)``: one event (a group message, a recall) to the group's current members,
read in chunks of ``CHUNK`` uids, each chunk one ``publish_many`` (one Redis call that keeps the
recently online; pushes for the connected only): a 100,000-member group with 2,000 online costs
25 Redis calls and 2,000 pushes. At least once: a redelivered task logs the event again, which a
device then sees twice (it keys messages by msgkey). ``enqueue_group_push`` is the group sink of
``infra.live_hooks``. A broker that does not take the task never fails the send: a group of at
most INLINE_MAX_MEMBERS members is pushed from the sender's process instead (one member query,
one Redis call); a bigger group's push is parked on the data Redis (``services.park_group_push``)
and ``resend_parked_group_pushes``, which the beat sends every 5 s, hands it to ``group_push``
once the broker answers: its online devices get it late rather than never. Only when the data
Redis does not answer either is a push lost (logged, counted; its devices see the message when
they next read).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from groups.selectors import member_uid_chunks
from infra import metrics
from live import services

log = logging.getLogger(__name__)
CHUNK = 4000


@shared_task(name="live.group_push", queue="messaging", acks_late=True)
def group_push(gid: int, event: dict[str, Any]) -> int:
    members = 0
    for chunk in member_uid_chunks(gid, CHUNK):
        services.publish_many(chunk, event)
        members += len(chunk)
    return members


INLINE_MAX_MEMBERS = CHUNK  # pushed by the sender's process when the broker is out: one chunk


def enqueue_group_push(gid: int, event: dict[str, Any]) -> None:
    try:
        group_push.delay(gid, event)
    except (OperationalError, OSError) as exc:
        _push_here(gid, event, exc)


def _push_here(gid: int, event: dict[str, Any], exc: BaseException) -> None:
    """The broker did not take ``group_push``: the members pushed from this process when the
    group fits in one chunk, else the push parked for the beat (module docstring)."""
    members = next(member_uid_chunks(gid, INLINE_MAX_MEMBERS + 1), [])
    if len(members) <= INLINE_MAX_MEMBERS:
        log.warning("live: group %s pushed from the sender's process, the broker: %r", gid, exc)
        services.publish_many(members, event)
        return
    try:
        services.park_group_push(gid, event)
    except RedisError as parked:
        log.warning("live: group %s push lost, neither broker nor Redis took it: %r", gid, parked)
        metrics.inc("live_group_pushes_parked", outcome="lost")
        return
    log.warning("live: group %s push parked until the broker answers: %r", gid, exc)
    metrics.inc("live_group_pushes_parked", outcome="parked")


@shared_task(name="live.resend_parked_group_pushes", queue="messaging", acks_late=True)
def resend_parked_group_pushes() -> int:
    return services.resend_parked_group_pushes(group_push.delay)
