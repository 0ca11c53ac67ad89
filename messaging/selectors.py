"""Reads: 1:1 conversation lists (``conversation_list``: the cache ``storage.convcache`` over
MySQL's pager ``convlist``; ``groups.selectors`` merges the user's groups into it) and message
history, assembled from MySQL, the inbox and Redis, and what other apps ask of messaging (who
blocks whom, which category a sender files under, who follows a sender; for unread's counter
rebuild, which conversations may hold unread messages and who owns any).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, connections
from django.db.models import F, Q

from infra.dbrouter import PRIMARY, read_replica, replica
from infra.sqlvalues import int_list
from messaging import convlist
from messaging.convlist import messages_by_key
from messaging.models import (
    Account,
    Block,
    Category,
    ClientMessage,
    Conversation,
    Follow,
    Message,
    MessageStatus,
)
from storage import msgkey as keys
from storage.convcache import prewarm, reader
from storage.convcache.model import ConversationPage
from storage.counters import epoch
from storage.inbox import get_inbox


@dataclass(frozen=True)
class SendFacts:
    """What a 1:1 send reads before it writes (``send_facts``)."""

    sent: ClientMessage | None  # the send already stored under its client_msg_id
    blocked: bool  # the receiver blocks the sender
    kinds: dict[int, str]  # the two accounts' kinds, where they have one
    follows: set[tuple[int, int]]  # the (follower, followee) pairs between the two


SENT_FIELDS = ("id", "msgkey", "receiver_uid", "digest", "delivered")


def send_facts(sender_uid: int, receiver_uid: int, client_msg_id: str) -> SendFacts:
    """The send already stored under ``client_msg_id``, the block, both accounts' kinds and the
    follows both ways, in ONE round trip to the primary. A send used to make four reads one
    after another (MariaDB's general log of one send), each a round trip: with toxiproxy's 1 ms
    more per round trip that was 4 ms of the send's ~43 ms p50 (BENCHMARKS.md)."""
    q = connection.ops.quote_name
    cm, block, account, follow = (
        q(model._meta.db_table) for model in (ClientMessage, Block, Account, Follow)
    )
    sql = (
        f"SELECT {', '.join(f'cm.{q(name)}' for name in SENT_FIELDS)}, "
        f"EXISTS(SELECT 1 FROM {block} WHERE owner_uid = %s AND blocked_uid = %s), "
        f"(SELECT kind FROM {account} WHERE uid = %s), "
        f"(SELECT kind FROM {account} WHERE uid = %s), "
        f"EXISTS(SELECT 1 FROM {follow} WHERE follower_uid = %s AND followee_uid = %s), "
        f"EXISTS(SELECT 1 FROM {follow} WHERE follower_uid = %s AND followee_uid = %s) "
        f"FROM (SELECT 1 AS one) AS facts "
        f"LEFT JOIN {cm} AS cm ON cm.sender_uid = %s AND cm.client_msg_id = %s"
    )
    s, r = sender_uid, receiver_uid
    with connection.cursor() as cursor:
        cursor.execute(sql, [r, s, s, r, r, s, s, r, s, client_msg_id])
        *stored, blocked, sender_kind, receiver_kind, r_follows, s_follows = cursor.fetchone()
    sent = None
    if stored[0] is not None:
        row = dict(zip(SENT_FIELDS, stored, strict=True))
        sent = ClientMessage(sender_uid=s, client_msg_id=client_msg_id, **row)
        sent.delivered = bool(sent.delivered)  # SQLite's and MariaDB's 0 / 1
    kinds = {uid: kind for uid, kind in ((s, sender_kind), (r, receiver_kind)) if kind}
    follows = {pair for pair, yes in (((r, s), r_follows), ((s, r), s_follows)) if yes}
    return SendFacts(sent, bool(blocked), kinds, follows)


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
    """A page of the owner's 1:1 conversations, newest first (``storage.convcache.model``)."""
    epoch.ensure_fresh(owner_uid)  # its unread counts, after a Redis restart (unread's rebuild)
    if settings.CONVCACHE_ENABLED:  # Redis → HBase → MySQL
        return reader.conversation_page(owner_uid, category=category, cursor=cursor, limit=limit)
    return convlist.mysql_page(owner_uid, category=category, cursor=cursor, limit=limit)


def history(
    owner_uid: int, peer_uid: int, *, before: int | None = None, limit: int = 50
) -> HistoryPage:
    page = get_inbox().page(owner_uid, peer_uid, before, limit)
    messages = _history_messages([e.msgkey for e in page.entries])
    items = [_history_item(e.msgkey, messages.get(e.msgkey)) for e in page.entries]
    cursor = str(page.next_before) if page.next_before else None
    return HistoryPage([i for i in items if i is not None], cursor)


def _history_messages(msgkeys: list[int]) -> dict[int, Message]:
    """Message bodies past the caches come from the read replica; one it has not received yet
    (the inbox entry is newer than its lag) is read from the primary, so history never drops a
    message that was just sent."""
    found = read_replica(lambda db: messages_by_key(msgkeys, db=db))
    missing = [k for k in msgkeys if k not in found]
    if missing and replica() != PRIMARY:
        found.update(messages_by_key(missing, db=PRIMARY))
    return found


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


# -- what other apps ask of messaging (bulk campaigns: their hot path, one query each) ----------
PAIRS_CHUNK = 500  # conversations read by (owner, peer) per query
FOLLOW_INDEX = "follow_followee"  # (followee_uid, follower_uid), messaging.models.Follow


def blocked_receivers(*, sender_uid: int, receiver_uids: Sequence[int]) -> set[int]:
    """Who in ``receiver_uids`` blocked ``sender_uid``: one read of the (blocked_uid, owner_uid)
    index with the uids inlined (infra/sqlvalues.py); the ORM's 1,000-item IN list cost 8 ms of
    CPU per batch, this 0.5 ms (profiled)."""
    if not receiver_uids:
        return set()
    sql = (
        f"SELECT owner_uid FROM {Block._meta.db_table} WHERE blocked_uid = %s "
        f"AND owner_uid IN ({int_list(receiver_uids)})"
    )
    with connection.cursor() as cur:
        cur.execute(sql, [sender_uid])
        return {row[0] for row in cur.fetchall()}


def sender_category(sender_uid: int) -> str | None:
    """The category every recipient files an account's messages under (its kind: business,
    system); None when ``sender_uid`` is no account, an ordinary user whose category depends on
    each recipient (followed or stranger). One primary-key read through a raw cursor: a fan-out
    batch makes it, and the ORM's model read cost 0.46 ms of client CPU, a raw read 0.19 (the
    figures of bulk.quotas.by_pk, measured)."""
    with connection.cursor() as cur:
        cur.execute(f"SELECT kind FROM {Account._meta.db_table} WHERE uid = %s", [sender_uid])
        row = cur.fetchone()
    return None if row is None else str(row[0])


def broadcast_category(sender_uid: int) -> str:
    """What recipients file a message broadcast to them (a campaign) under: the sender's account
    kind, else ``business``: a broadcast is never a followed or a stranger's message."""
    return sender_category(sender_uid) or Category.BUSINESS


def follower_count(
    followee_uid: int,
    *,
    followed_after: datetime | None = None,
    followed_before: datetime | None = None,
    db: str = PRIMARY,
) -> int:
    """How many follow ``followee_uid`` (optionally in a time window): one COUNT over the
    (followee_uid, follower_uid) index range. It sizes a campaign's audience once, before its
    planner has walked it (the console's percentage and ETA while planning goes on)."""
    rows = Follow.objects.using(db).filter(followee_uid=followee_uid)
    if followed_after is not None:
        rows = rows.filter(followed_at__gt=followed_after)
    if followed_before is not None:
        rows = rows.filter(followed_at__lt=followed_before)
    return rows.count()


def follower_uids(
    followee_uid: int,
    *,
    after: int,
    limit: int,
    followed_after: datetime | None = None,
    followed_before: datetime | None = None,
    db: str = PRIMARY,
) -> list[int]:
    """The next ``limit`` followers of ``followee_uid`` with uid > ``after``, ascending (a keyset
    walk), optionally only those who followed in a time window: one range read of
    (followee_uid, follower_uid).

    Raw SQL to pin that index: MariaDB 10.11 picks a ``ref`` on followee_uid alone and filters
    ``follower_uid > after`` row by row, so every chunk re-read all followers before the cursor
    and a walk was quadratic (ANALYZE at follower 50,000: 51,000 rows read for 1,000, 8.4 ms;
    with the index forced, 1,000 rows, 0.4 ms)."""
    where = "followee_uid = %s AND follower_uid > %s"
    params: list[Any] = [followee_uid, after]
    for op, when in ((">", followed_after), ("<", followed_before)):
        if when is not None:
            where += f" AND followed_at {op} %s"
            params.append(connection.ops.adapt_datetimefield_value(when))
    hint = f" FORCE INDEX ({FOLLOW_INDEX})" if connection.vendor == "mysql" else ""
    sql = f"SELECT follower_uid FROM {Follow._meta.db_table}{hint} WHERE {where} "
    with connections[db].cursor() as cur:
        cur.execute(sql + "ORDER BY follower_uid LIMIT %s", [*params, limit])
        return [row[0] for row in cur.fetchall()]


def big_up_cached(owner_uid: int) -> bool | None:
    """Whether the user is a big UP (their list is prewarmed), from this process's copy with no
    I/O; None when the copy is due a recheck (then call ``services.conversation_list_prewarm``)."""
    return prewarm.big_up_cached(owner_uid)


# -- what unread asks of messaging: the truth its counters are rebuilt from (unread/rebuild.py) --
def conversations_with_unread(owner_uid: int) -> Iterator[tuple[int, str, int, int, int]]:
    """``(peer, category, read_upto, last_msgkey, mtime)`` of each of the owner's conversations
    whose last message is past its read position (the others have nothing unread): one read,
    streamed 2,000 rows at a time."""
    return (
        Conversation.objects.filter(owner_uid=owner_uid, last_msgkey__gt=F("read_upto"))
        .values_list("peer_uid", "category", "read_upto", "last_msgkey", "mtime")
        .iterator(chunk_size=2000)
    )


def conversations_of_pairs(
    pairs: Sequence[tuple[int, int]],
) -> dict[tuple[int, int], tuple[str, int, int, int]]:
    """``(owner, peer) -> (category, read_upto, last_msgkey, mtime)`` of those of ``pairs`` that
    exist, from the primary: one read per PAIRS_CHUNK pairs, the owners of each peer in one
    ``IN``."""
    found: dict[tuple[int, int], tuple[str, int, int, int]] = {}
    for start in range(0, len(pairs), PAIRS_CHUNK):
        by_peer: dict[int, list[int]] = {}
        for owner, peer in pairs[start : start + PAIRS_CHUNK]:
            by_peer.setdefault(peer, []).append(owner)
        wanted = Q()
        for peer, owners in by_peer.items():
            wanted |= Q(peer_uid=peer, owner_uid__in=owners)
        rows = Conversation.objects.filter(wanted).values_list(
            "owner_uid", "peer_uid", "category", "read_upto", "last_msgkey", "mtime"
        )
        for owner, peer, category, read_upto, last, mtime in rows:
            found[(owner, peer)] = (category, read_upto, last, mtime)
    return found


def conversation_owners(*, after: int | None, limit: int) -> list[int]:
    """The next ``limit`` distinct owners of a conversation with uid > ``after`` (None: from the
    first), ascending: one step of a keyset walk over every owner."""
    qs = Conversation.objects.order_by("owner_uid").values_list("owner_uid", flat=True)
    if after is not None:
        qs = qs.filter(owner_uid__gt=after)
    return list(qs.distinct()[:limit])


def conversation_holders(owner_uids: Sequence[int]) -> set[int]:
    """Which of ``owner_uids`` hold at least one conversation: one read."""
    return set(
        Conversation.objects.filter(owner_uid__in=owner_uids)
        .values_list("owner_uid", flat=True)
        .distinct()
    )
