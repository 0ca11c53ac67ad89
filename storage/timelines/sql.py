"""SQL group-timeline backend: table ``messaging_group_timeline``, primary key (gid, seq).

The clustered key keeps a group's entries together: a page is one range read walked backwards.
A send's entry is written inside the send's transaction (``transactional``), in the same commit
as its seq, so on one machine the timeline never lags the ledger.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection, transaction

from infra.sqlvalues import int_rows
from storage.timelines.base import GroupEntry, GroupTimeline, Key

TABLE = "messaging_group_timeline"
COLUMNS = "gid, seq, msgkey, sender_uid, flags"


def upsert_sql(entries: Sequence[GroupEntry]) -> str:
    head = f"INSERT INTO {TABLE} ({COLUMNS}) VALUES {int_rows(entries)} "
    if connection.vendor != "mysql":
        return head + (
            "ON CONFLICT (gid, seq) DO UPDATE SET msgkey = excluded.msgkey, "
            "sender_uid = excluded.sender_uid, flags = excluded.flags"
        )
    return head + (
        "ON DUPLICATE KEY UPDATE msgkey = VALUES(msgkey), sender_uid = VALUES(sender_uid), "
        "flags = VALUES(flags)"
    )


class SqlGroupTimeline(GroupTimeline):
    transactional = True
    write_chunk = 1000

    def _put(self, entries: Sequence[GroupEntry]) -> None:
        with transaction.atomic(savepoint=False), connection.cursor() as cur:
            for start in range(0, len(entries), self.write_chunk):
                cur.execute(upsert_sql(entries[start : start + self.write_chunk]))

    def _scan(self, gid: int, before: int | None, limit: int) -> list[GroupEntry]:
        sql = f"SELECT {COLUMNS} FROM {TABLE} WHERE gid = %s"
        params: list[int] = [gid]
        if before is not None:
            sql += " AND seq < %s"
            params.append(before)
        with connection.cursor() as cur:
            cur.execute(sql + " ORDER BY seq DESC LIMIT %s", [*params, limit])
            return [GroupEntry(*row) for row in cur.fetchall()]

    def _delete(self, keys: Sequence[Key]) -> None:
        with transaction.atomic(), connection.cursor() as cur:
            for start in range(0, len(keys), self.write_chunk):
                chunk = keys[start : start + self.write_chunk]
                where = " OR ".join(f"(gid = {g:d} AND seq = {s:d})" for g, s in chunk)
                cur.execute(f"DELETE FROM {TABLE} WHERE {where}")

    def get(self, gid: int, seq: int) -> GroupEntry | None:
        with connection.cursor() as cur:
            cur.execute(f"SELECT {COLUMNS} FROM {TABLE} WHERE gid = %s AND seq = %s", [gid, seq])
            row = cur.fetchone()
        return GroupEntry(*row) if row else None

    def remove_group(self, gid: int) -> None:
        with connection.cursor() as cur:
            cur.execute(f"DELETE FROM {TABLE} WHERE gid = %s", [gid])
