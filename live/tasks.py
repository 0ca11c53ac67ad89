"""Live delivery's tasks (queue ``messaging``).

``group_push(gid, event)``: one event (a group message, a recall) to the group's current members,
read in chunks of ``CHUNK`` uids, each chunk one ``publish_many`` (one Redis call that keeps the
recently online; pushes for the connected only): a 100,000-member group with 2,000 online costs
25 Redis calls and 2,000 pushes. At least once: a redelivered task logs the event again, which a
device then sees twice (it keys messages by msgkey). ``enqueue_group_push`` is the group sink of
``infra.live_hooks``; a broker that does not answer loses the pushes, never the send.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from kombu.exceptions import OperationalError

from groups.selectors import member_uid_chunks
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


def enqueue_group_push(gid: int, event: dict[str, Any]) -> None:
    try:
        group_push.delay(gid, event)
    except (OperationalError, OSError) as exc:
        log.warning("live: group %s pushes lost: %r", gid, exc)
