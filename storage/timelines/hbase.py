"""HBase group-timeline backend (happybase over the Thrift gateway).

Table ``<prefix>_group_timeline``, family ``d``, one row per group message:

    rowkey = salt (1 B: crc32(gid) mod 16) | gid (8 B) | ~seq (8 B)
    d:v    = msgkey (8 B) | sender_uid (8 B) | flags (1 B)

Pre-split on the salt like ``inbox``: groups spread over the 16 regions, one group's timeline
stays in one. The bitwise-not seq makes a forward prefix scan read newest first. Puts are
idempotent (same rowkey); a batch is one Thrift mutateRows call.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import Any

import happybase
from Hbase_thrift import BatchMutation, Mutation

from infra import hbase
from storage.timelines.base import GroupEntry, GroupTimeline, Key

TABLE = "group_timeline"
COLUMN = b"d:v"
MASK64 = (1 << 64) - 1
SALTS = 16
ROW = struct.Struct(">BQQ")  # salt, gid, ~seq
VALUE = struct.Struct(">QQB")  # msgkey, sender_uid, flags


def group_prefix(gid: int) -> bytes:
    packed = struct.pack(">Q", gid)
    return bytes([zlib.crc32(packed) % SALTS]) + packed


def rowkey(gid: int, seq: int) -> bytes:
    return ROW.pack(zlib.crc32(struct.pack(">Q", gid)) % SALTS, gid, ~seq & MASK64)


def prefix_end(prefix: bytes) -> bytes:
    return (int.from_bytes(prefix, "big") + 1).to_bytes(len(prefix), "big")


def parse_row(key: bytes, data: dict[bytes, bytes]) -> GroupEntry:
    gid, inv = struct.unpack(">QQ", key[1:17])
    msgkey, sender, flags = VALUE.unpack(data[COLUMN])
    return GroupEntry(gid, ~inv & MASK64, msgkey, sender, flags)


def _mutations(entry: GroupEntry) -> list[Any]:
    value = VALUE.pack(entry.msgkey, entry.sender_uid, entry.flags)
    return [Mutation(column=COLUMN, value=value, isDelete=False, writeToWAL=True)]


class HBaseGroupTimeline(GroupTimeline):
    batch_size = 1000

    def _put(self, entries: Sequence[GroupEntry]) -> None:
        rows = [BatchMutation(rowkey(e.gid, e.seq), _mutations(e)) for e in entries]

        def write(conn: happybase.Connection) -> None:
            name = conn.table(TABLE).name
            for start in range(0, len(rows), self.batch_size):
                conn.client.mutateRows(name, rows[start : start + self.batch_size], {})

        hbase.call(write)

    def _scan(self, gid: int, before: int | None, limit: int) -> list[GroupEntry]:
        if before is not None and before <= 0:
            return []
        prefix = group_prefix(gid)
        start = prefix if before is None else rowkey(gid, before - 1)
        kwargs: dict[str, Any] = {"row_start": start, "row_stop": prefix_end(prefix)}
        kwargs.update(limit=limit, batch_size=min(limit, 1000))

        def scan(conn: happybase.Connection) -> list[GroupEntry]:
            return [parse_row(k, d) for k, d in conn.table(TABLE).scan(**kwargs)]

        return hbase.call(scan, at=(TABLE, start))  # one group's rows: one region

    def _delete(self, keys: Sequence[Key]) -> None:
        def delete(conn: happybase.Connection) -> None:
            with conn.table(TABLE).batch(batch_size=self.batch_size) as batch:
                for gid, seq in keys:
                    batch.delete(rowkey(gid, seq))

        hbase.call(delete)
