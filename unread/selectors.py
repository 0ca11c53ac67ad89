"""Reads of the live unread counters (one HGETALL or HMGET per request)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

from config.redis import get_redis
from unread import keys

CATEGORIES = ("followed", "stranger", "business", "system")


@dataclass(frozen=True)
class UnreadSummary:
    total: int
    by_category: dict[str, int]
    by_peer: dict[int, int] = field(default_factory=dict)


def unread_summary(uid: int) -> UnreadSummary:
    # the client is created without decode_responses: names and values are bytes
    raw = cast("dict[bytes, bytes]", get_redis().hgetall(keys.unread(uid)))
    by_category = dict.fromkeys(CATEGORIES, 0)
    by_peer: dict[int, int] = {}
    for name, value in raw.items():
        if name.startswith(keys.CATEGORY_PREFIX):
            by_category[name[2:].decode()] = int(value)
        elif name.startswith(keys.PEER_PREFIX):
            by_peer[int(name[2:])] = int(value)
    return UnreadSummary(int(raw.get(keys.TOTAL, 0)), by_category, by_peer)


def unread_for_peers(uid: int, peer_uids: Sequence[int]) -> dict[int, int]:
    if not peer_uids:
        return {}
    fields = [keys.PEER_PREFIX + str(p).encode() for p in peer_uids]
    values = get_redis().hmget(keys.unread(uid), fields)
    return {p: int(v or 0) for p, v in zip(peer_uids, values, strict=True)}


def announcements_unread(uid: int) -> int:
    """Announcements newer than the user's read mark (unread/announcements.py)."""
    from unread.announcements import announcements_unread as count

    return count(uid)
