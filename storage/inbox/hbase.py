"""HBase inbox backend (happybase over the Thrift gateway).

Table ``<prefix>_inbox``, family ``d``, one tall narrow row per entry:

    rowkey = salt (1 B: crc32(owner) mod 16) | owner (8 B) | peer (8 B) | ~msgkey (8 B)
    d:v    = direction (1 B) | flags (1 B)

The bitwise-not msgkey makes a forward prefix scan on ``salt|owner|peer`` read newest first; a page
cursor is a msgkey, turned back into a start row. The salt spreads owners over the 16 pre-split
regions so one big account never makes one hot region, while keeping each owner in one region.
Puts are idempotent (same rowkey, same value); batches go out as one Thrift mutateRows call.
"""

from __future__ import annotations

import functools
import struct
import zlib
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import happybase
from Hbase_thrift import BatchMutation, Mutation

from infra import hbase
from storage.inbox.base import RECEIVED, Inbox, InboxEntry, Key

TABLE = "inbox"
FAMILY = b"d"
COLUMN = b"d:v"
MASK64 = (1 << 64) - 1
SALTS = 16
ROW = struct.Struct(">BQQQ")  # salt, owner, peer, ~msgkey


def salt(owner: int) -> bytes:
    return bytes([zlib.crc32(struct.pack(">Q", owner)) % SALTS])


def owner_prefix(owner: int) -> bytes:
    packed = struct.pack(">Q", owner)  # packed once: the salt is taken from the same bytes
    return bytes([zlib.crc32(packed) % SALTS]) + packed


def conv_prefix(owner: int, peer: int) -> bytes:
    return owner_prefix(owner) + struct.pack(">Q", peer)


def rowkey(owner: int, peer: int, msgkey: int) -> bytes:
    salt_byte = zlib.crc32(struct.pack(">Q", owner)) % SALTS
    return ROW.pack(salt_byte, owner, peer, ~msgkey & MASK64)


@functools.cache
def _value_mutations(direction: int, flags: int) -> list[Any]:
    value = bytes([direction, flags])
    return [Mutation(column=COLUMN, value=value, isDelete=False, writeToWAL=True)]  # durable


def _mutations(entry: InboxEntry) -> list[Any]:
    """The (shared, never mutated) mutation list writing ``d:v`` for this entry's value."""
    return _value_mutations(entry.direction, entry.flags)


def parse_row(key: bytes, data: dict[bytes, bytes]) -> InboxEntry:
    owner, peer, inv = struct.unpack(">QQQ", key[1:25])
    value = data.get(COLUMN) or b"\x00\x00"  # empty under KeyOnlyFilter
    return InboxEntry(owner, peer, ~inv & MASK64, value[0], value[1])


def prefix_end(prefix: bytes) -> bytes:
    """The first row after every row that starts with ``prefix``."""
    as_int = int.from_bytes(prefix, "big") + 1
    return as_int.to_bytes(len(prefix), "big")


class HBaseInbox(Inbox):
    # rows per mutateRows: a 4,000-recipient bulk batch in one call (HBase CPU per recipient
    # 7.2 → 5.2 µs against 1,000 per call, scripts/bench_fanout.py --profile)
    batch_size = 4000

    def _put(self, entries: Sequence[InboxEntry]) -> None:
        """One Thrift mutateRows per ``batch_size`` rows, built without happybase's Batch: rows
        with the same value share one mutation list (a bulk batch has one value), and the key is
        one struct pack (client CPU per 1,000 rows 6.1 → 2.3 ms, measured)."""
        self._mutate([BatchMutation(rowkey(*e[:3]), _mutations(e)) for e in entries])

    def _put_received(self, owners: Sequence[int], peer: int, msgkey: int) -> None:
        """One mutation list for every row, and each key packed from the owner alone."""
        value = _value_mutations(RECEIVED, 0)
        self._mutate([BatchMutation(rowkey(owner, peer, msgkey), value) for owner in owners])

    def _mutate(self, rows: list[Any]) -> None:
        def write(conn: happybase.Connection) -> None:
            name = conn.table(TABLE).name
            for start in range(0, len(rows), self.batch_size):
                conn.client.mutateRows(name, rows[start : start + self.batch_size], {})

        hbase.call(write)

    def _scan(self, owner: int, peer: int, before: int | None, limit: int) -> list[InboxEntry]:
        if before is not None and before <= 0:
            return []
        prefix = conv_prefix(owner, peer)
        start = prefix if before is None else rowkey(owner, peer, before - 1)
        return self._rows(start, prefix_end(prefix), limit)

    def _keys(self, owner: int, peer: int) -> Iterator[Key]:
        """Streamed ``scan_chunk`` keys at a time: a big conversation never sits in memory."""
        prefix = conv_prefix(owner, peer)
        start, stop = prefix, prefix_end(prefix)
        while True:
            rows = self._rows(start, stop, self.scan_chunk, keys_only=True)
            yield from (e.key for e in rows)
            if len(rows) < self.scan_chunk:
                return
            start = rowkey(*rows[-1].key) + b"\x00"  # the first row after the last one read

    def _delete(self, keys: Sequence[Key]) -> None:
        def delete(conn: happybase.Connection) -> None:
            with conn.table(TABLE).batch(batch_size=self.batch_size) as batch:
                for owner, peer, msgkey in keys:
                    batch.delete(rowkey(owner, peer, msgkey))

        hbase.call(delete)

    def _peers(self, owner: int) -> Iterator[int]:
        """Distinct peers, skipping over each conversation with one seek (no full scan)."""
        prefix = owner_prefix(owner)
        start, stop = prefix, prefix_end(prefix)
        while True:
            rows = self._rows(start, stop, 1, keys_only=True)
            if not rows:
                return
            yield rows[0].peer
            start = prefix_end(conv_prefix(owner, rows[0].peer))

    # -- retention ----------------------------------------------------------------------------
    def _remove_range(self, owner: int, peer: int, before: int) -> int:
        """Per-row deletes, ``scan_chunk`` keys (a KeyOnlyFilter scan of the conversation's
        older range) then one batched delete, until the range is empty.

        Why not a TTL on family ``d``: the family holds every kind (1:1 history kept for ever,
        campaign copies kept N days), and a cell TTL counts from the write, which a recall's flag
        rewrite moves. Above all, a TTL makes rows vanish silently: the unread counters and the
        conversation lists would go on counting and showing messages that are gone. Deleting
        row by row from the retention run lets it count the unread copies down first and fix the
        conversations after (retention/services.py), at the cost of one tombstone per row,
        which the next major compaction drops."""
        if before <= 0:
            return 0
        start, stop = rowkey(owner, peer, before - 1), prefix_end(conv_prefix(owner, peer))
        removed = 0
        while rows := self._rows(start, stop, self.scan_chunk, keys_only=True):
            self._delete([e.key for e in rows])
            removed += len(rows)
            if len(rows) < self.scan_chunk:
                break
        return removed

    def get_for_owners(self, owners: Sequence[int], peer: int, msgkey: int) -> list[InboxEntry]:
        """One multi-get per ``batch_size`` owners (rows that do not exist are not returned)."""
        keys = [rowkey(owner, peer, msgkey) for owner in owners]

        def get(conn: happybase.Connection) -> list[InboxEntry]:
            table = conn.table(TABLE)
            return [
                parse_row(k, d)
                for start in range(0, len(keys), self.batch_size)
                for k, d in table.rows(keys[start : start + self.batch_size], columns=[COLUMN])
            ]

        return hbase.call(get)

    def newest_many(self, owners: Sequence[int], peer: int) -> dict[int, int]:
        """Each owner's first row from ``peer`` (newest first), the scans run side by side on
        the connection pool's connections: one scan per owner after another aged out 1,080
        copies a second (scripts/bench_retention.py)."""
        if len(owners) < 2:
            return super().newest_many(owners, peer)
        with ThreadPoolExecutor(max_workers=hbase.options()["POOL_SIZE"]) as threads:
            firsts = threads.map(lambda owner: self._scan(owner, peer, None, 1), owners)
            return {
                owner: rows[0].msgkey for owner, rows in zip(owners, firsts, strict=True) if rows
            }

    def count_after(self, owner: int, peer: int, msgkey: int, upto: int | None = None) -> int:
        if upto is not None and upto <= msgkey:
            return 0  # (HBase scans one row when start and stop rows are equal)
        # rows sort newest first: from ``upto``'s own row (inclusive) to ``msgkey``'s (exclusive)
        start = conv_prefix(owner, peer) if upto is None else rowkey(owner, peer, upto)
        stop = rowkey(owner, peer, msgkey)
        return sum(1 for e in self._rows(start, stop, None) if e.counts_as_unread)

    def _rows(
        self, start: bytes, stop: bytes, limit: int | None, keys_only: bool = False
    ) -> list[InboxEntry]:
        kwargs: dict[str, Any] = {"row_start": start, "row_stop": stop, "limit": limit}
        kwargs["batch_size"] = min(limit or 1000, 1000)
        if keys_only:
            kwargs["filter"] = b"KeyOnlyFilter()"

        def scan(conn: happybase.Connection) -> list[InboxEntry]:
            return [parse_row(k, d) for k, d in conn.table(TABLE).scan(**kwargs)]

        return hbase.call(scan, at=(TABLE, start))  # one owner's rows: one region
