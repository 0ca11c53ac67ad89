"""Tier 3 of the conversation-list read path: MySQL, the truth.

Reads walk the ``(owner_uid, sort_key)`` index (or ``(owner_uid, category, sort_key)``) with
``ORDER BY sort_key DESC LIMIT n``: no filesort, however many conversations the owner has. The
list order is (sort_key, peer_uid) descending; asking SQL for it would make MySQL sort all of the
owner's rows (200,000 for the largest accounts) for every page, so the peer tie-break is applied
here, after one more indexed lookup of the rows that tie with the last one (in practice none).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings
from django.db.models import Q, QuerySet

from messaging.convcache import codec
from messaging.convcache.codec import Fill, Packed, Summary
from messaging.models import Conversation
from messaging.selectors import ConversationPage, items_for, messages_by_key

Cursor = tuple[int, int]  # (sort_key, peer_uid) of the last item served


def top(
    owner: int, n: int, *, after: Cursor | None = None, category: str | None = None
) -> tuple[list[Conversation], bool]:
    """The first ``n`` conversations after ``after`` in list order, and whether more follow."""
    qs = Conversation.objects.filter(owner_uid=owner)
    if category:
        qs = qs.filter(category=category)
    rows: list[Conversation] = []
    if after is not None:
        rows += qs.filter(sort_key=after[0], peer_uid__lt=after[1]).order_by("-peer_uid")[: n + 1]
        qs = qs.filter(sort_key__lt=after[0])
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


def summaries(rows: Sequence[Conversation]) -> list[Summary]:
    messages = messages_by_key(r.last_msgkey for r in rows)
    return [codec.from_row(r, messages) for r in rows]


def fill(owner: int) -> Fill:
    """The owner's first CONVCACHE_SIZE conversations, as a tier answer."""
    rows, more = top(owner, int(settings.CONVCACHE_SIZE))
    entries = [Packed.from_summary(s) for s in summaries(rows)]
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


def page(owner: int, *, category: str | None, cursor: str | None, limit: int) -> ConversationPage:
    """One page straight from MySQL (pages past the cached prefix, or no cache at all)."""
    after = None
    if cursor:
        sort_key, _, peer = cursor.partition(":")
        after = (int(sort_key), int(peer))
    rows, more = top(owner, limit, after=after, category=category)
    next_cursor = f"{rows[-1].sort_key}:{rows[-1].peer_uid}" if more and rows else None
    return ConversationPage(items_for(owner, rows), next_cursor)
