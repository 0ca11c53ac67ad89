"""Writes of the unread app: the counters recomputed from the truth (``unread/rebuild.py``)."""

from __future__ import annotations

from collections.abc import Iterable

from unread import rebuild
from unread.rebuild import RebuildStats


def unread_counters_rebuild(
    owner_uids: Iterable[int], stats: RebuildStats | None = None
) -> RebuildStats:
    """Recompute these users' unread counters from the inbox and their read positions."""
    return rebuild.unread_rebuild_many(owner_uids, stats)


def unread_conversations_recount(pairs: Iterable[tuple[int, int]]) -> int:
    """Recount these ``(owner, peer)`` conversations' unread counts from the inbox and their read
    positions as they are now (0 for one that is gone), leaving the owners' other counts;
    returns how many owners."""
    return rebuild.unread_rebuild_pairs(pairs)
