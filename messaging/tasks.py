"""Celery interface of the messaging app: ids and plain JSON in, one service call each.

Tasks are sent by reference, never by a name in a string. This module imports what its tasks
run at the top, and nothing imports it back: ``storage.convcache.prewarm`` enqueues
``convcache_prewarm`` through an ``infra.taskref.TaskRef`` that MessagingConfig.ready binds to it
(docs/design.md, "Layers").
"""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task

from infra.outages import retry_while_unavailable
from messaging import services
from storage.convcache import build, prewarm
from storage.events import LATER_MAX_S


@shared_task(name="messaging.send", acks_late=True)
def send(sender_uid: int, receiver_uid: int, content: dict[str, Any], client_msg_id: str) -> str:
    """Send a 1:1 message; idempotent by (sender_uid, client_msg_id). Returns the msgkey."""
    result = services.message_send(
        sender_uid=sender_uid,
        receiver_uid=receiver_uid,
        content=content,
        client_msg_id=client_msg_id,
    )
    return str(result.message.msgkey)


@shared_task(name="messaging.events_publish", acks_late=True, bind=True, max_retries=None)
def events_publish(self: Task, receiver_uids: list[int], peer_uid: int, msgkey: int) -> None:
    """A 1:1 send's delivery events its request could not publish (their Redis node did not
    answer): published once it does, retried with backoff for as long as it takes."""
    try:
        services.events_publish(receiver_uids=receiver_uids, peer_uid=peer_uid, msgkey=msgkey)
    except Exception as exc:
        retry_while_unavailable(self, exc, LATER_MAX_S)


@shared_task(name="messaging.sends_complete", acks_late=True)
def sends_complete() -> int:
    """Every 30 s: finish 1:1 sends an outage interrupted after their content was stored."""
    return services.sends_complete_stalled()


@shared_task(name="messaging.convcache_prewarm", acks_late=True)
def convcache_prewarm(owner_uid: int) -> bool:
    """Build the owner's first CONVCACHE_SIZE conversations into HBase and Redis (idempotent)."""
    return prewarm.prewarm_owner(owner_uid)


@shared_task(name="messaging.convcache_index", acks_late=True)
def convcache_index() -> int:
    """Every 10 s: once per Redis run, complete the HBase index bulk pushes read (a scan of
    HBase's meta cells after a restart or failover; nothing to do otherwise)."""
    return build.index_rebuild()


@shared_task(name="messaging.convcache_big_ups", acks_late=True)
def convcache_big_ups() -> int:
    """Daily: recompute the big-UP sets (owners above BIG_UP_THRESHOLD conversations)."""
    return prewarm.compute_big_ups()
