"""Tier 3 of the conversation-list read path: MySQL, the truth, read through the one indexed
pager of the read model (``messaging.convlist.top``).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings
from django.db.models import Q

from messaging.convcache import codec
from messaging.convcache.codec import Fill, Packed, Summary
from messaging.convlist import messages_by_key, top
from messaging.models import Conversation


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
