"""Rebuild unread counters from the truth: conversations (read position) plus the inbox.

The counters' store is the storage floor's (``storage/counters``); what they must say is
messaging's, read through ``messaging.selectors``. A conversation's unread count is
``inbox.count_after(owner, peer, read_upto)``; only conversations whose ``last_msgkey`` is past
``read_upto`` can have any, so the others cost no inbox read. Each user's recomputed counts
replace the Redis hash in one Lua call (``unread_replace``), which also reports the drift it
corrected. ``UnreadConfig.ready`` hands ``unread_rebuild_user`` to ``storage.counters.epoch``,
which repairs each user with it on their first read after a Redis restart.

Owners are walked with a keyset cursor on ``owner_uid`` (bounded memory for any number of users).
Counters that changed while a user was being recomputed are overwritten with the recomputed value:
run it on a quiet system or accept one message's worth of error for users being written to.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from infra.redis import get_redis
from messaging import selectors as messaging
from storage.counters import keys
from storage.counters.store import (
    Recounted,
    Replaced,
    recount_guard,
    unread_recount_pairs,
    unread_replace,
)
from storage.inbox import Inbox, get_inbox
from storage.msgkey import now_ms

OWNER_CHUNK = 1000


@dataclass
class RebuildStats:
    users: int = 0
    users_with_drift: int = 0
    conversations_fixed: int = 0
    total_drift: int = 0

    def add(self, replaced: Replaced) -> None:
        self.users += 1
        if replaced.conversations_changed:
            self.users_with_drift += 1
            self.conversations_fixed += replaced.conversations_changed
            self.total_drift += replaced.drift


def recount(owner_uid: int) -> list[tuple[int, str, int, int]]:
    """``(peer, category, unread, counted_upto)`` of every conversation of ``owner_uid`` with
    unread messages. Only entries up to the conversation's ``last_msgkey`` count: a newer entry's
    delivery has not reached the conversation yet, and its own count follows; one a delivery
    touched lately is guarded against that delivery's count (``store.recount_guard``)."""
    inbox, now = get_inbox(), now_ms()
    counts = (
        _counted(inbox, owner_uid, peer, category, upto, last, mtime, now)
        for peer, category, upto, last, mtime in messaging.conversations_with_unread(owner_uid)
    )
    return [c for c in counts if c[2] > 0]


def _counted(
    inbox: Inbox, owner: int, peer: int, category: str, upto: int, last: int, mtime: int, now: int
) -> Recounted:
    """One conversation's ``(peer, category, unread, counted_upto)``: its inbox entries after its
    read position up to its ``last_msgkey``, guarded against a delivery on its way."""
    unread = inbox.count_after(owner, peer, upto, last) if last > upto else 0
    return peer, category, unread, recount_guard(last, mtime, now)


def recount_pairs(pairs: Iterable[tuple[int, int]]) -> dict[int, list[Recounted]]:
    """Per owner, ``(peer, category, unread, counted_upto)`` of each ``(owner, peer)``, as
    ``recount`` counts them: from the conversation as it is now on the primary (0 when it is
    gone), so a change that arrives late never brings back an older state."""
    wanted = sorted(set(pairs))
    rows, inbox, now = messaging.conversations_of_pairs(wanted), get_inbox(), now_ms()
    counts: dict[int, list[Recounted]] = {}
    for owner, peer in wanted:
        category, upto, last, mtime = rows.get((owner, peer), ("", 0, 0, 0))
        counted = _counted(inbox, owner, peer, category, upto, last, mtime, now)
        counts.setdefault(owner, []).append(counted)
    return counts


def unread_rebuild_pairs(pairs: Iterable[tuple[int, int]]) -> int:
    """Recount these conversations and set their counts (the owners' others stay); returns how
    many owners."""
    counts = recount_pairs(pairs)
    unread_recount_pairs(counts)
    return len(counts)


def unread_rebuild_user(owner_uid: int) -> Replaced:
    return unread_replace(owner_uid=owner_uid, counts=recount(owner_uid))


def unread_rebuild_many(
    owner_uids: Iterable[int], stats: RebuildStats | None = None
) -> RebuildStats:
    stats = stats or RebuildStats()
    for owner_uid in owner_uids:
        stats.add(unread_rebuild_user(owner_uid))
    return stats


def iter_owners(chunk: int = OWNER_CHUNK) -> Iterator[int]:
    """Every owner with a conversation, ascending, ``chunk`` distinct owners per query."""
    after: int | None = None
    while True:
        owners = messaging.conversation_owners(after=after, limit=chunk)
        yield from owners
        if len(owners) < chunk:
            return
        after = owners[-1]


def iter_orphan_counters(chunk: int = OWNER_CHUNK) -> Iterator[int]:
    """Owners whose Redis unread hash exists but who hold no conversation any more."""
    batch: list[int] = []
    for name in get_redis().scan_iter(match=keys.UNREAD_SCAN, count=chunk):
        match = keys.UNREAD_UID.match(name)
        if match is None:
            continue
        batch.append(int(match[1]))
        if len(batch) >= chunk:
            yield from _without_conversations(batch)
            batch = []
    yield from _without_conversations(batch)


def _without_conversations(owner_uids: list[int]) -> list[int]:
    held = messaging.conversation_holders(owner_uids)
    return [uid for uid in owner_uids if uid not in held]
