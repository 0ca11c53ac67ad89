"""The conversation list's truth in MySQL: the one indexed pager, and the reader the storage
floor's cache reads as its MySQL tier (``storage.convcache.mysql_tier.Truth``, bound by
MessagingConfig.ready). The read model itself (page item, page, cursor, last-message summary) is
``storage.convcache.model``.

- ``message_preview``: the preview an item shows of a message (a recalled one reads
  ``RECALLED_PREVIEW``).
- ``top`` / ``mysql_page``: MySQL walks the ``(owner_uid, sort_key)`` index (or
  ``(owner_uid, category, sort_key)``) with ``ORDER BY sort_key DESC LIMIT n``: no filesort, however
  many conversations the owner has. Asking SQL for the peer tie-break too would make MySQL sort all
  of the owner's rows (200,000 for the largest accounts: p50 196 ms against 2.3 ms,
  scripts/bench_reads.py), so the tie-break is applied here, after one more indexed lookup of the
  rows that tie with the last one (in practice none). ``mysql_page`` (the cold tier) reads the
  read replica (``infra.dbrouter.replica``); ``top`` reads whichever alias its caller names.
- ``fill`` / ``current`` / ``owners_above``: what the cache tiers above ask of the truth. Fills
  read the read replica (``infra.dbrouter.replica``); ``current`` (the state a push writes) reads
  the primary.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from django.conf import settings
from django.db.models import Count, Q, QuerySet

from infra.dbrouter import PRIMARY, caught_up_replica, read_replica
from messaging.models import Conversation, Message, MessageStatus
from storage.content import preview
from storage.convcache.codec import Fill, Packed, Summary
from storage.convcache.model import (
    RECALLED_PREVIEW,
    ConversationItem,
    ConversationPage,
    Cursor,
    last_message,
)
from storage.counters.store import unread_for_peers


def message_preview(message: Message) -> str:
    if message.status == MessageStatus.RECALLED:
        return RECALLED_PREVIEW
    return preview(message.type, message.body)


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


# -- what the cache tiers read (storage.convcache.mysql_tier) ---------------------------------
def summary(conv: Conversation, messages: Mapping[int, Message]) -> Summary:
    """A conversation row as the cache's packed summary (``storage.convcache.codec``)."""
    message = messages.get(conv.last_msgkey)
    sender = text = None
    if message is not None:
        sender, text = message.sender_uid, message_preview(message)
    return Summary(
        conv.peer_uid,
        conv.mtime,
        conv.sort_key,
        conv.category,
        conv.last_msgkey,
        sender,
        text,
        conv.pinned,
        conv.muted,
        conv.read_upto,
    )


def summaries(rows: Sequence[Conversation], *, db: str = PRIMARY) -> list[Summary]:
    messages = messages_by_key((r.last_msgkey for r in rows), db=db)
    return [summary(r, messages) for r in rows]


def fill(owner: int, *, db: str = "") -> Fill:
    """The owner's first CONVCACHE_SIZE conversations, as a tier answer, read from the replica
    once it has caught up with the primary as of now (``caught_up_replica``), so the fill holds
    every change committed before its generation began; a push after that is merged by mtime
    (compare-and-set): even a lagging fill never regresses an entry a newer push wrote."""
    if db:
        return _fill(owner, db)
    return read_replica(lambda alias: _fill(owner, alias), caught_up_replica())


def _fill(owner: int, db: str) -> Fill:
    rows, more = top(owner, int(settings.CONVCACHE_SIZE), db=db)
    entries = [Packed.from_summary(s) for s in summaries(rows, db=db)]
    boundary = entries[-1].member if more else ""
    return Fill(entries, boundary, not more, "m")


def current(pairs: Sequence[tuple[int, int]]) -> dict[int, list[Summary]]:
    """The current state of those (owner, peer) conversations that exist, by owner (one query
    for the rows, one for their last messages)."""
    if not pairs:
        return {}
    rows = list(Conversation.objects.filter(_pairs_filter(pairs)))
    by_owner: dict[int, list[Summary]] = {}
    for row, s in zip(rows, summaries(rows), strict=True):
        by_owner.setdefault(row.owner_uid, []).append(s)
    return by_owner


def _pairs_filter(pairs: Sequence[tuple[int, int]]) -> Q:
    """Group by whichever side repeats (a fan-out shares its peer, an outbox its owner)."""
    by_peer: dict[int, list[int]] = {}
    by_owner: dict[int, list[int]] = {}
    for owner, peer in pairs:
        by_peer.setdefault(peer, []).append(owner)
        by_owner.setdefault(owner, []).append(peer)
    q = Q(pk__in=[])
    if len(by_peer) <= len(by_owner):
        for peer, owners in by_peer.items():
            q |= Q(peer_uid=peer, owner_uid__in=owners)
    else:
        for owner, peers in by_owner.items():
            q |= Q(owner_uid=owner, peer_uid__in=peers)
    return q


def owners_above(threshold: int) -> Iterator[int]:
    """Every owner with more than ``threshold`` conversations (the big UPs), streamed."""
    owners = (
        Conversation.objects.values("owner_uid")
        .annotate(n=Count("id"))
        .filter(n__gt=threshold)
        .values_list("owner_uid", flat=True)
    )
    return owners.iterator()
