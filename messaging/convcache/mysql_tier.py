"""Tier 3 of the conversation-list read path: MySQL, the truth, read through the one indexed
pager of the read model (``messaging.convlist.top``). Fills read the read replica
(``infra.dbrouter.replica``); ``current`` (the state a push writes) reads the primary.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings
from django.db.models import Q

from infra.dbrouter import PRIMARY, caught_up_replica, read_replica
from messaging.convcache import codec
from messaging.convcache.codec import Fill, Packed, Summary
from messaging.convlist import messages_by_key, top
from messaging.models import Conversation


def summaries(rows: Sequence[Conversation], *, db: str = PRIMARY) -> list[Summary]:
    messages = messages_by_key((r.last_msgkey for r in rows), db=db)
    return [codec.from_row(r, messages) for r in rows]


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
