"""Reads: conversation lists and message history, assembled from MySQL, the inbox and Redis, and
what other apps ask of messaging (who blocks whom, which category a sender files under)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from messaging import convlist
from messaging import msgkey as keys
from messaging.convcache import reader
from messaging.convlist import ConversationPage, messages_by_key
from messaging.inbox import get_inbox
from messaging.models import Message, MessageStatus


@dataclass(frozen=True)
class HistoryItem:
    msgkey: int
    sender_uid: int
    content: dict[str, Any] | None
    created_at: str
    status: str


@dataclass(frozen=True)
class HistoryPage:
    results: list[HistoryItem]
    next_cursor: str | None


def conversation_list(
    owner_uid: int, *, category: str | None = None, cursor: str | None = None, limit: int = 20
) -> ConversationPage:
    """A page of the owner's conversations, newest first (the read model: messaging.convlist)."""
    if settings.CONVCACHE_ENABLED:  # Redis → HBase → MySQL
        return reader.conversation_page(owner_uid, category=category, cursor=cursor, limit=limit)
    return convlist.mysql_page(owner_uid, category=category, cursor=cursor, limit=limit)


def history(
    owner_uid: int, peer_uid: int, *, before: int | None = None, limit: int = 50
) -> HistoryPage:
    page = get_inbox().page(owner_uid, peer_uid, before, limit)
    messages = messages_by_key(e.msgkey for e in page.entries)
    items = [_history_item(e.msgkey, messages.get(e.msgkey)) for e in page.entries]
    cursor = str(page.next_before) if page.next_before else None
    return HistoryPage([i for i in items if i is not None], cursor)


def _history_item(msgkey: int, message: Message | None) -> HistoryItem | None:
    if message is None:
        return None  # content archived away with a dropped partition
    recalled = message.status == MessageStatus.RECALLED
    return HistoryItem(
        msgkey,
        message.sender_uid,
        None if recalled else {**message.body},
        keys.created_at(msgkey).isoformat(),
        "recalled" if recalled else "normal",
    )
