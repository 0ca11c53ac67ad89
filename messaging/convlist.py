"""The conversation list's read model: its page item, its cursor, its last-message summary, and
the one MySQL pager. Every tier of the conversation-list cache (``convcache/``) builds on it.

- ``ConversationItem`` / ``ConversationPage``: what ``GET /users/{uid}/conversations`` serves.
- ``Cursor``: ``<sort_key>:<peer_uid>`` of the last item served. The list order is
  (sort_key, peer_uid) descending.
- ``last_message`` / ``message_preview``: the summary an item shows of its newest message
  (a recalled one reads ``RECALLED_PREVIEW``).
- ``top`` / ``mysql_page``: MySQL walks the ``(owner_uid, sort_key)`` index (or
  ``(owner_uid, category, sort_key)``) with ``ORDER BY sort_key DESC LIMIT n``: no filesort, however
  many conversations the owner has. Asking SQL for the peer tie-break too would make MySQL sort all
  of the owner's rows (200,000 for the largest accounts: p50 196 ms against 2.3 ms,
  scripts/bench_reads.py), so the tie-break is applied here, after one more indexed lookup of the
  rows that tie with the last one (in practice none). ``mysql_page`` (the cold tier) reads the
  read replica (``infra.dbrouter.replica``); ``top`` reads whichever alias its caller names.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.db.models import QuerySet

from infra.dbrouter import PRIMARY, read_replica
from messaging.models import Conversation, Message, MessageStatus
from storage import msgkey as keys
from storage.content import preview
from storage.counters.store import unread_for_peers

RECALLED_PREVIEW = "[recalled]"


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


class Cursor(NamedTuple):
    """Where a page ends: the (sort_key, peer_uid) of the last item served."""

    sort_key: int
    peer: int

    def __str__(self) -> str:
        return f"{self.sort_key}:{self.peer}"

    @classmethod
    def parse(cls, text: str | None) -> Cursor | None:
        """None for the first page; ValueError for text this API never returned."""
        if not text:
            return None
        sort_key, sep, peer = text.partition(":")
        if not sep or not sort_key.isdigit() or not peer.isdigit():
            raise ValueError(f"not a conversation-list cursor: {text!r}")
        return cls(int(sort_key), int(peer))


def message_preview(message: Message) -> str:
    if message.status == MessageStatus.RECALLED:
        return RECALLED_PREVIEW
    return preview(message.type, message.body)


def last_message(msgkey: int, sender_uid: int, text: str | None) -> dict[str, Any]:
    return {
        "msgkey": msgkey,
        "sender_uid": sender_uid,
        "preview": text,
        "created_at": keys.created_at(msgkey).isoformat(),
    }


def messages_by_key(msgkeys: Iterable[int], *, db: str = PRIMARY) -> dict[int, Message]:
    return {m.msgkey: m for m in Message.objects.using(db).filter(msgkey__in=set(msgkeys))}


# -- the MySQL pager -------------------------------------------------------------------------
def top(
    owner: int,
    n: int,
    *,
    after: Cursor | None = None,
    category: str | None = None,
    db: str = PRIMARY,
) -> tuple[list[Conversation], bool]:
    """The first ``n`` conversations after ``after`` in list order, and whether more follow."""
    qs = Conversation.objects.using(db).filter(owner_uid=owner)
    if category:
        qs = qs.filter(category=category)
    rows: list[Conversation] = []
    if after is not None:
        rows += qs.filter(sort_key=after.sort_key, peer_uid__lt=after.peer).order_by("-peer_uid")[
            : n + 1
        ]
        qs = qs.filter(sort_key__lt=after.sort_key)
    if len(rows) <= n:
        rest = list(qs.order_by("-sort_key")[: n + 1 - len(rows)])
        rows += rest + _ties(qs, rest)
    rows = sorted(set(rows), key=lambda c: (c.sort_key, c.peer_uid), reverse=True)
    return rows[:n], len(rows) > n


def _ties(qs: QuerySet[Conversation], rest: list[Conversation]) -> list[Conversation]:
    """Rows sharing the last row's sort key, which LIMIT may have cut in an arbitrary place."""
    if not rest:
        return []
    return list(qs.filter(sort_key=rest[-1].sort_key).order_by("-peer_uid")[: len(rest)])


def items_for(
    owner_uid: int, rows: list[Conversation], *, db: str = PRIMARY
) -> list[ConversationItem]:
    messages = messages_by_key((r.last_msgkey for r in rows), db=db)
    unread = unread_for_peers(owner_uid, [r.peer_uid for r in rows])
    return [_item(r, messages.get(r.last_msgkey), unread.get(r.peer_uid, 0)) for r in rows]


def _item(row: Conversation, message: Message | None, unread: int) -> ConversationItem:
    last = None
    if message is not None:
        last = last_message(message.msgkey, message.sender_uid, message_preview(message))
    return ConversationItem(
        row.peer_uid,
        row.category,
        unread,
        last,
        row.sort_key,
        row.pinned,
        row.muted,
        row.mtime,
    )


def mysql_page(
    owner: int, *, category: str | None, cursor: str | None, limit: int
) -> ConversationPage:
    """One page straight from MySQL (pages past the cached prefix, or no cache at all): the
    cold tier, read from the replica (it may lag; no cache is filled from this page), or the
    primary when the replica is out (``read_replica``)."""

    def page(db: str) -> ConversationPage:
        rows, more = top(owner, limit, after=Cursor.parse(cursor), category=category, db=db)
        next_cursor = str(Cursor(rows[-1].sort_key, rows[-1].peer_uid)) if more and rows else None
        return ConversationPage(items_for(owner, rows, db=db), next_cursor)

    return read_replica(page)
