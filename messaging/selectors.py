"""Reads: conversation lists and message history, assembled from MySQL, the inbox and Redis."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from messaging import msgkey as keys
from messaging.content import preview
from messaging.inbox import get_inbox
from messaging.models import Conversation, Message, MessageStatus
from unread.selectors import unread_for_peers


@dataclass(frozen=True)
class ConversationItem:
    peer_uid: int
    category: str
    unread: int
    last_message: dict[str, Any] | None
    sort_key: int
    pinned: bool
    muted: bool
    mtime: int


@dataclass(frozen=True)
class ConversationPage:
    results: list[ConversationItem]
    next_cursor: str | None


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


def messages_by_key(msgkeys: Iterable[int]) -> dict[int, Message]:
    return {m.msgkey: m for m in Message.objects.filter(msgkey__in=set(msgkeys))}


def last_message_summary(message: Message | None) -> dict[str, Any] | None:
    if message is None:
        return None
    recalled = message.status == MessageStatus.RECALLED
    return {
        "msgkey": message.msgkey,
        "sender_uid": message.sender_uid,
        "preview": "[recalled]" if recalled else preview(message.type, message.body),
        "created_at": keys.created_at(message.msgkey).isoformat(),
    }


def parse_cursor(cursor: str | None) -> tuple[int, int] | None:
    """A conversation-list cursor is ``<sort_key>:<peer_uid>`` of the last item served."""
    if not cursor:
        return None
    sort_key, _, peer = cursor.partition(":")
    return int(sort_key), int(peer)


def conversation_list(
    owner_uid: int, *, category: str | None = None, cursor: str | None = None, limit: int = 20
) -> ConversationPage:
    from messaging import convcache  # the cache tiers build on this module's dataclasses

    cached = convcache.conversation_page(owner_uid, category=category, cursor=cursor, limit=limit)
    if cached is not None:  # Redis → HBase → MySQL; None only with the cache switched off
        return cached
    qs = Conversation.objects.filter(owner_uid=owner_uid)
    if category:
        qs = qs.filter(category=category)
    after = parse_cursor(cursor)
    if after is not None:
        sort_key, peer = after
        qs = qs.filter(sort_key__lt=sort_key) | qs.filter(sort_key=sort_key, peer_uid__lt=peer)
    rows = list(qs.order_by("-sort_key", "-peer_uid")[: limit + 1])
    return ConversationPage(items_for(owner_uid, rows[:limit]), _next(rows, limit))


def items_for(owner_uid: int, rows: list[Conversation]) -> list[ConversationItem]:
    messages = messages_by_key(r.last_msgkey for r in rows)
    unread = unread_for_peers(owner_uid, [r.peer_uid for r in rows])
    return [
        ConversationItem(
            r.peer_uid,
            r.category,
            unread.get(r.peer_uid, 0),
            last_message_summary(messages.get(r.last_msgkey)),
            r.sort_key,
            r.pinned,
            r.muted,
            r.mtime,
        )
        for r in rows
    ]


def _next(rows: list[Conversation], limit: int) -> str | None:
    if len(rows) <= limit:
        return None
    last = rows[limit - 1]
    return f"{last.sort_key}:{last.peer_uid}"


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
