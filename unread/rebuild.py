"""Rebuild unread counters from the truth: conversations (read position) plus the inbox.

The counters' store is the storage floor's (``storage/counters``); what they must say is
messaging's, read through ``messaging.selectors``. A conversation's unread count is
``inbox.count_after(owner, peer, read_upto)``; only conversations whose ``last_msgkey`` is past
``read_upto`` can have any, so the others cost no inbox read. Each user's recomputed counts
replace the Redis hash in one Lua call (``unread_replace``), which also reports the drift it
corrected. ``UnreadConfig.ready`` hands ``unread_rebuild_user`` to ``storage.counters.epoch``,
which repairs each user with it on their first read after a Redis restart.

Owners are walked with a keyset cursor on ``owner_uid`` (bounded memory for any number of users).
A user's counters that changed while they were being recomputed (a delivery or a read landed
meanwhile) are not overwritten: the user is recounted, up to REBUILD_TRIES times, and then left
as the writes made them (``CountersChanged``; counted in ``RebuildStats.busy``). Each
conversation's changes between the recount and the replace are guarded as below.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from infra.redis import get_redis
from messaging import selectors as messaging
from storage.counters import keys
from storage.counters.store import (
    CountersChanged,
    Recounted,
    Replaced,
    recount_guard,
    unread_counts_of_pairs,
    unread_digest,
    unread_recount_pairs,
    unread_replace,
)
from storage.inbox import get_inbox
from storage.msgkey import now_ms

OWNER_CHUNK = 1000
REBUILD_TRIES = 3  # recounts of one user whose counters writes kept changing meanwhile


@dataclass
class RebuildStats:
    users: int = 0
    users_with_drift: int = 0
    conversations_fixed: int = 0
    total_drift: int = 0
    busy: int = 0  # users left as they were: writes changed them during each recount

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
    convs = [(owner_uid, *row) for row in messaging.conversations_with_unread(owner_uid)]
    return [counted for _, counted in _recounted(convs) if counted[2] > 0]


def recount_pairs(pairs: Iterable[tuple[int, int]]) -> dict[int, list[Recounted]]:
    """Per owner, ``(peer, category, unread, counted_upto)`` of each ``(owner, peer)``, as
    ``recount`` counts them: from the conversation as it is now on the primary (0 when it is
    gone), so a change that arrives late never brings back an older state."""
    wanted = sorted(set(pairs))
    rows = messaging.conversations_of_pairs(wanted)
    convs = [(o, p, *rows.get((o, p), ("", 0, 0, 0))) for o, p in wanted]
    counts: dict[int, list[Recounted]] = {}
    for owner, counted in _recounted(convs):
        counts.setdefault(owner, []).append(counted)
    return counts


Conv = tuple[int, int, str, int, int, int]  # owner, peer, category, read_upto, last_msgkey, mtime


def _recounted(convs: Sequence[Conv]) -> list[tuple[int, Recounted]]:
    """Each conversation's owner and ``(peer, category, unread, counted_upto)``: its inbox entries
    after its read position up to its ``last_msgkey`` (all counted at once, ``count_after_many``),
    guarded against a delivery on its way."""
    now = now_ms()  # before the count, as the rows (and their mtimes) were read before it
    spans = [(o, p, upto, last) for o, p, _, upto, last, _ in convs if last > upto]
    unread = dict(zip(spans, get_inbox().count_after_many(spans), strict=True))
    return [
        (o, (p, category, unread.get((o, p, upto, last), 0), recount_guard(last, mtime, now)))
        for o, p, category, upto, last, mtime in convs
    ]


def unread_rebuild_pairs(pairs: Iterable[tuple[int, int]]) -> int:
    """Recount these conversations and set their counts (the owners' others stay); returns how
    many owners. A conversation whose count a write changed during its recount is recounted,
    up to REBUILD_TRIES times, then left as the writes made it."""
    wanted = sorted(set(pairs))
    owners = {owner for owner, _ in wanted}
    for _ in range(REBUILD_TRIES):
        before = unread_counts_of_pairs(wanted)
        wanted = sorted(unread_recount_pairs(recount_pairs(wanted), before))
        if not wanted:
            break
    return len(owners)


def unread_rebuild_user(owner_uid: int) -> Replaced:
    """Recount the user and replace their counters, unless a write changed them meanwhile (then
    recount again); ``CountersChanged`` after REBUILD_TRIES such recounts."""
    for _ in range(REBUILD_TRIES - 1):
        with contextlib.suppress(CountersChanged):
            return _replace_unless_changed(owner_uid)
    return _replace_unless_changed(owner_uid)


def _replace_unless_changed(owner_uid: int) -> Replaced:
    before = unread_digest(owner_uid)
    return unread_replace(owner_uid=owner_uid, counts=recount(owner_uid), unchanged_since=before)


def unread_rebuild_many(
    owner_uids: Iterable[int], stats: RebuildStats | None = None
) -> RebuildStats:
    stats = stats or RebuildStats()
    for owner_uid in owner_uids:
        try:
            stats.add(unread_rebuild_user(owner_uid))
        except CountersChanged:
            stats.busy += 1
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
