"""SQL inbox backend: table ``messaging_inbox``, primary key (owner_uid, peer_uid, msgkey).

The clustered primary key keeps one conversation's rows together, so a page is one range read
(newest first by walking the key backwards). Writes are one multi-row upsert per batch, written
without the ORM: on MariaDB a 1,000-row batch is one ``INSERT ... ON DUPLICATE KEY UPDATE``
with the integers inlined (infra/sqlvalues.py), the owners of a bulk batch as one JSON_TABLE.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from django.db import connection, transaction

from infra.sqlvalues import int_rows, json_ids
from storage.inbox.base import FLAG_RECALLED, RECEIVED, Inbox, InboxEntry, Key, Span

TABLE = "messaging_inbox"
COLUMNS = "owner_uid, peer_uid, msgkey, direction, flags"


def unread_entry(alias: str = "") -> str:
    """The condition of an entry that counts as unread (``InboxEntry.counts_as_unread``)."""
    return f"{alias}direction = {RECEIVED} AND ({alias}flags & {FLAG_RECALLED}) = 0"


HEAD = f"INSERT INTO {TABLE} ({COLUMNS}) "
ON_DUPLICATE = " ON DUPLICATE KEY UPDATE direction = VALUES(direction), flags = VALUES(flags)"


def upsert_sql(entries: Sequence[InboxEntry]) -> str:
    if connection.vendor != "mysql":
        return (
            f"{HEAD}VALUES {int_rows(entries)} ON CONFLICT (owner_uid, peer_uid, msgkey) "
            "DO UPDATE SET direction = excluded.direction, flags = excluded.flags"
        )
    shared = entries[0][1:]
    if all(e[1:] == shared for e in entries):  # one message into many timelines
        return owners_sql([e.owner for e in entries], shared)
    return f"{HEAD}VALUES {int_rows(entries)}{ON_DUPLICATE}"  # an entry is a row, in COLUMNS order


def owners_sql(owners: Sequence[int], shared: Sequence[int]) -> str:
    """MariaDB: one message into many timelines, the owners as a JSON_TABLE beside the shared
    (peer, msgkey, direction, flags) (config/sqlvalues.json_ids)."""
    constants = ", ".join(f"{v:d}" for v in shared)
    return f"{HEAD}SELECT j.o, {constants} FROM {json_ids(owners, 'o')} AS j{ON_DUPLICATE}"


def _spans_count_sql(spans: Sequence[Span]) -> str:
    """Each span's unread entries (``count_after``'s), grouped; spans with none are absent."""
    rows = ",".join(f"[{o:d},{p:d},{a:d},{u:d}]" for o, p, a, u in spans)
    columns = ", ".join(f"{c} BIGINT PATH '$[{i}]'" for i, c in enumerate("opau"))
    return (
        f"SELECT s.o, s.p, s.a, s.u, COUNT(*) FROM JSON_TABLE('[{rows}]', '$[*]' "
        f"COLUMNS ({columns})) AS s JOIN {TABLE} i ON i.owner_uid = s.o AND i.peer_uid = s.p "
        f"AND i.msgkey > s.a AND i.msgkey <= s.u WHERE {unread_entry('i.')} "
        "GROUP BY s.o, s.p, s.a, s.u"
    )


class SqlInbox(Inbox):
    write_chunk = 1000
    count_chunk = 500  # spans per grouped count
    range_chunk = 5000  # rows per retention range delete

    def _put(self, entries: Sequence[InboxEntry]) -> None:
        # Inside the caller's transaction (deliver_many) no savepoint: two round trips fewer.
        with transaction.atomic(savepoint=False), connection.cursor() as cur:
            for start in range(0, len(entries), self.write_chunk):
                cur.execute(upsert_sql(entries[start : start + self.write_chunk]))

    def _put_received(self, owners: Sequence[int], peer: int, msgkey: int) -> None:
        if connection.vendor != "mysql":
            super()._put_received(owners, peer, msgkey)
            return
        with transaction.atomic(savepoint=False), connection.cursor() as cur:
            for start in range(0, len(owners), self.write_chunk):
                chunk = owners[start : start + self.write_chunk]
                cur.execute(owners_sql(chunk, (peer, msgkey, RECEIVED, 0)))

    def _scan(self, owner: int, peer: int, before: int | None, limit: int) -> list[InboxEntry]:
        sql = f"SELECT {COLUMNS} FROM {TABLE} WHERE owner_uid = %s AND peer_uid = %s"
        params: list[int] = [owner, peer]
        if before is not None:
            sql += " AND msgkey < %s"
            params.append(before)
        sql += " ORDER BY msgkey DESC LIMIT %s"
        with connection.cursor() as cur:
            cur.execute(sql, [*params, limit])
            return [InboxEntry(*row) for row in cur.fetchall()]

    def _keys(self, owner: int, peer: int) -> Iterator[Key]:
        for entry in self._iter_newer(owner, peer, -1):
            yield entry.key

    def _delete(self, keys: Sequence[Key]) -> None:
        by_conv: dict[tuple[int, int], list[int]] = defaultdict(list)
        for owner, peer, msgkey in keys:
            by_conv[(owner, peer)].append(msgkey)
        with transaction.atomic(), connection.cursor() as cur:
            for (owner, peer), msgkeys in by_conv.items():
                marks = ", ".join(["%s"] * len(msgkeys))
                cur.execute(
                    f"DELETE FROM {TABLE} WHERE owner_uid = %s AND peer_uid = %s "
                    f"AND msgkey IN ({marks})",
                    [owner, peer, *msgkeys],
                )

    def _peers(self, owner: int) -> Iterator[int]:
        with connection.cursor() as cur:
            cur.execute(f"SELECT DISTINCT peer_uid FROM {TABLE} WHERE owner_uid = %s", [owner])
            yield from (row[0] for row in cur.fetchall())

    # -- set-based overrides of the generic versions --------------------------------------------
    def get(self, owner: int, peer: int, msgkey: int) -> InboxEntry | None:
        # A point read; the generic ``msgkey < msgkey + 1`` range overflows SQLite at 2^63 - 1.
        where = "owner_uid = %s AND peer_uid = %s AND msgkey = %s"
        with connection.cursor() as cur:
            cur.execute(f"SELECT {COLUMNS} FROM {TABLE} WHERE {where}", [owner, peer, msgkey])
            row = cur.fetchone()
        return InboxEntry(*row) if row else None

    def get_for_owners(self, owners: Sequence[int], peer: int, msgkey: int) -> list[InboxEntry]:
        where = "AND peer_uid = %s AND msgkey = %s"
        return [InboxEntry(*row) for row in self._by_owners(COLUMNS, owners, where, [peer, msgkey])]

    def newest_many(self, owners: Sequence[int], peer: int) -> dict[int, int]:
        """One grouped read per ``write_chunk`` owners, each owner's newest entry from ``peer``
        found through the (owner_uid, peer_uid, msgkey) key: retention ran one query per owner,
        2,700 copies aged out a second (scripts/bench_retention.py)."""
        where = "AND peer_uid = %s GROUP BY owner_uid"
        rows = self._by_owners("owner_uid, MAX(msgkey)", owners, where, [peer])
        return {int(owner): int(key) for owner, key in rows}

    def _by_owners(
        self, columns: str, owners: Sequence[int], where: str, params: list[int]
    ) -> list[tuple[Any, ...]]:
        """``SELECT columns ... WHERE owner_uid IN (...) <where>``, ``write_chunk`` owners each."""
        found: list[tuple[Any, ...]] = []
        with connection.cursor() as cur:
            for start in range(0, len(owners), self.write_chunk):
                chunk = ", ".join(f"{o:d}" for o in owners[start : start + self.write_chunk])
                cur.execute(
                    f"SELECT {columns} FROM {TABLE} WHERE owner_uid IN ({chunk}) {where}", params
                )
                found += cur.fetchall()
        return found

    def count(self, owner: int, peer: int) -> int:
        return self._scalar("owner_uid = %s AND peer_uid = %s", [owner, peer])

    def count_after(self, owner: int, peer: int, msgkey: int, upto: int | None = None) -> int:
        where = f"owner_uid = %s AND peer_uid = %s AND msgkey > %s AND {unread_entry()}"
        if upto is None:
            return self._scalar(where, [owner, peer, msgkey])
        return self._scalar(where + " AND msgkey <= %s", [owner, peer, msgkey, upto])

    def count_after_many(self, spans: Sequence[Span]) -> list[int]:
        """MariaDB: one grouped count per ``count_chunk`` distinct spans, the spans a JSON_TABLE
        joined to the primary key. Measured when the binlog follower recounts a backfill of
        50,000 conversations: one query a conversation took 16 of its 23 s (BENCHMARKS.md)."""
        if connection.vendor != "mysql":
            return super().count_after_many(spans)
        distinct = sorted(set(spans))
        counts: dict[Span, int] = {}
        with connection.cursor() as cur:
            for start in range(0, len(distinct), self.count_chunk):
                cur.execute(_spans_count_sql(distinct[start : start + self.count_chunk]))
                counts.update({(o, p, a, u): int(n) for o, p, a, u, n in cur.fetchall()})
        return [counts.get(span, 0) for span in spans]

    def remove_conversation(self, owner: int, peer: int) -> None:
        with connection.cursor() as cur:
            cur.execute(
                f"DELETE FROM {TABLE} WHERE owner_uid = %s AND peer_uid = %s", [owner, peer]
            )

    def remove_all(self, owner: int) -> list[int]:
        peers = list(self._peers(owner))
        with connection.cursor() as cur:
            cur.execute(f"DELETE FROM {TABLE} WHERE owner_uid = %s", [owner])
        return peers

    # -- retention: set-based ------------------------------------------------------------------
    def remove_many(self, keys: Iterable[Key]) -> None:
        """One DELETE per message and ``write_chunk`` owners, on the primary key (a campaign
        batch's copies share the (peer, msgkey): one statement per 1,000 of them)."""
        by_message: dict[tuple[int, int], list[int]] = defaultdict(list)
        for owner, peer, msgkey in keys:
            by_message[(peer, msgkey)].append(owner)
        with transaction.atomic(), connection.cursor() as cur:
            for (peer, msgkey), owners in by_message.items():
                for start in range(0, len(owners), self.write_chunk):
                    ids = ", ".join(f"{o:d}" for o in owners[start : start + self.write_chunk])
                    cur.execute(
                        f"DELETE FROM {TABLE} WHERE owner_uid IN ({ids}) "
                        "AND peer_uid = %s AND msgkey = %s",
                        [peer, msgkey],
                    )

    def remove_before_many(self, convs: Sequence[tuple[int, int]], before: int) -> int:
        """A range delete on the primary key per conversation, ``range_chunk`` rows a statement
        (each its own short transaction: no long lock on a big history). SQLite has no
        ``DELETE ... LIMIT``: the generic scan-and-delete there."""
        if connection.vendor != "mysql":
            return super().remove_before_many(convs, before)
        removed = 0
        with connection.cursor() as cur:
            for owner, peer in convs:
                while True:
                    cur.execute(
                        f"DELETE FROM {TABLE} WHERE owner_uid = %s AND peer_uid = %s "
                        f"AND msgkey < %s LIMIT {self.range_chunk:d}",
                        [owner, peer, before],
                    )
                    removed += cur.rowcount
                    if cur.rowcount < self.range_chunk:
                        break
        return removed

    def count_before(self, owner: int, peer: int, before: int) -> int:
        return self._scalar(
            "owner_uid = %s AND peer_uid = %s AND msgkey < %s", [owner, peer, before]
        )

    def _scalar(self, where: str, params: list[int]) -> int:
        with connection.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {TABLE} WHERE {where}", params)
            return int(cur.fetchone()[0])
