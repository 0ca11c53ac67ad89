"""Celery interface of the messaging app: ids and plain JSON in, one service call each."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from messaging import services


@shared_task(name="messaging.send", acks_late=True)
def send(sender_uid: int, receiver_uid: int, content: dict[str, Any], client_msg_id: str) -> str:
    """Send a 1:1 message; idempotent by (sender_uid, client_msg_id). Returns the msgkey."""
    result = services.message_send(
        sender_uid=sender_uid, receiver_uid=receiver_uid, content=content,
        client_msg_id=client_msg_id,
    )
    return str(result.message.msgkey)
