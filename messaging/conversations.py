"""Bulk conversation upserts, written as one multi-row statement per chunk.

Idempotent: ``last_msgkey`` and ``sort_key`` only move forward (GREATEST), so a redelivered batch or
an older message applied late changes nothing; ``mtime`` strictly increases on every applied
change (max(old + 1, now)), so cache tiers can compare versions.
The ORM's ``bulk_create(update_conflicts=...)`` cannot express GREATEST, hence raw SQL, with the
values inlined (config/sqlvalues.py: integers and allowlisted category words only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import connection

from config.sqlvalues import choice
from messaging.models import Category

CATEGORIES = frozenset(Category.values)

TABLE = "messaging_conversation"
CHUNK = 1000


@dataclass(frozen=True, slots=True)
class ConversationTouch:
    owner: int
    peer: int
    category: str
    msgkey: int


def _values(chunk: Sequence[ConversationTouch], mtime: int) -> str:
    return ",".join(
        f"({int(t.owner)},{int(t.peer)},{choice(t.category, CATEGORIES)},{int(t.msgkey)},"
        f"{int(t.msgkey)},0,0,0,{int(mtime)})"
        for t in chunk
    )


def _sql(values: str) -> str:
    head = (
        f"INSERT INTO {TABLE} (owner_uid, peer_uid, category, last_msgkey, sort_key, "
        f"read_upto, pinned, muted, mtime) VALUES {values}"
    )
    if connection.vendor == "mysql":
        return head + (
            " ON DUPLICATE KEY UPDATE category = VALUES(category), "
            "last_msgkey = GREATEST(last_msgkey, VALUES(last_msgkey)), "
            "sort_key = GREATEST(sort_key, VALUES(sort_key)), "
            "mtime = GREATEST(mtime + 1, VALUES(mtime))"
        )
    return head + (
        " ON CONFLICT (owner_uid, peer_uid) DO UPDATE SET category = excluded.category, "
        "last_msgkey = max(last_msgkey, excluded.last_msgkey), "
        "sort_key = max(sort_key, excluded.sort_key), "
        "mtime = max(mtime + 1, excluded.mtime)"
    )


def conversations_touch_many(touches: Sequence[ConversationTouch], mtime: int) -> None:
    # One lock order for every writer: a send A→B and a send B→A running at once both touch
    # (A, B) and (B, A), and InnoDB deadlocks when two statements lock them in opposite orders.
    touches = sorted(touches, key=lambda t: (t.owner, t.peer))
    with connection.cursor() as cur:
        for start in range(0, len(touches), CHUNK):
            cur.execute(_sql(_values(touches[start : start + CHUNK], mtime)))
