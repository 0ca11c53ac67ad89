"""Tier 2 of the conversation-list cache: the HBase ``convlist`` table (happybase, Thrift1).

Rows ``salt | owner`` (DESIGN.md; the inbox's salt, so the 16 pre-split regions share the load) and
``salt | owner | generation``, family ``c``:

    salt|owner         c:m        meta, JSON {"g": generation, "s": "f" filling | "r" ready |
                                  "x" stale, "b": boundary member, "a": 1 when the whole list}
    salt|owner|gen:4B  c:<peer:8B>  one packed summary (codec.py) per conversation

**Versions are HBase cell timestamps.** A push writes its cell with timestamp = the conversation's
version (its mtime; a deletion's tombstone is mtime + 1). HBase serves the cell with the highest
timestamp whatever order puts arrive in, so an out-of-order push can never regress a
conversation, with no read-compare-write and no lock, and a bulk batch of 1,000 owners stays one
``mutateRowsTs`` call per distinct mtime (in practice one: a batch is stamped with one mtime).
The alternative — the version inside the value plus a guarded read-compare-write — costs a read
and a ``checkAndPut`` RPC per cell (Thrift1 does have ``checkAndPut``, on the raw client only, one
cell per call), so it is used only for the single meta cell.

**Builds use the lowest timestamp and a new generation.** A (re)build reads MySQL after moving the
meta to a new generation, and writes its entries with timestamp FILL_TS (the msgkey epoch, below
every mtime): any push into the same generation read MySQL after the build began, so it is at
least as new, and must win. Rebuilds never delete cells of the live generation: a delete marker
masks every later put with a lower or equal timestamp, so a re-put entry would vanish. Each
generation has a row of its own: the old generation's row is deleted once the new one is ready,
and its dead cells (kept by HBase until a major compaction) never slow down reads of the live
row, as they would if generations shared one row (measured: 600 live cells behind 24,000 dead
ones took 56 ms to get, against 3 ms alone). The meta cell moves only by ``checkAndPut`` on the
exact bytes read, so concurrent rebuilds and invalidations cannot interleave.

**Reading** is two gets: the meta, then the current generation's row. It serves when the meta is
ready; the valid prefix is every live entry at or above the boundary member (every entry when
``a``). Pushes add entries (new conversations at the top), so the row grows between rebuilds;
``View.cells`` tells the caller when a rebuild should compact it. Pushes write only owners whose
meta row exists (one multi-get of the meta cells per batch first). The convlist family must keep
no TTL (builds use old timestamps).
"""

from __future__ import annotations

import json
import struct
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import happybase
from django.conf import settings
from Hbase_thrift import Mutation

from infra import hbase
from storage import msgkey as clock
from storage.convcache import codec
from storage.convcache.codec import Fill, Packed, Summary
from storage.inbox.hbase import owner_prefix

TABLE = "convlist"
META = b"c:m"
META_ROW_BYTES = 9
FAMILY = b"c:"
DROP_GENERATIONS = 4  # older generation rows deleted by a finished build
FILL_TS = clock.EPOCH_MS
FILLING, READY, STALE = "f", "r", "x"
CAS_ATTEMPTS = 4


def enabled() -> bool:
    return bool(settings.CONVCACHE_ENABLED and settings.CONVCACHE_HBASE)


def rowkey(owner: int) -> bytes:
    """The meta row."""
    return owner_prefix(owner)


def entries_row(owner: int, generation: int) -> bytes:
    return owner_prefix(owner) + struct.pack(">I", generation)


def qualifier(peer: int) -> bytes:
    return FAMILY + struct.pack(">Q", peer)


@dataclass(frozen=True)
class Meta:
    generation: int
    state: str
    boundary: str = ""
    complete: bool = False

    def encode(self) -> bytes:
        body = {"g": self.generation, "s": self.state, "b": self.boundary, "a": int(self.complete)}
        return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Meta:
        d = json.loads(raw)
        return cls(int(d["g"]), d["s"], d.get("b", ""), bool(d.get("a", 0)))


@dataclass(frozen=True)
class View:
    """One owner's row: ``fill`` when the row is ready, and how many cells it holds."""

    meta: Meta | None
    fill: Fill | None
    cells: int


def _table(conn: happybase.Connection) -> happybase.Table:
    return conn.table(TABLE)


# -- pushes ----------------------------------------------------------------------------------
def metas(owners: Iterable[int]) -> dict[int, Meta]:
    """The meta of every owner that has a row (one multi-get)."""
    by_key = {rowkey(o): o for o in owners}

    def get(conn: happybase.Connection) -> list[tuple[bytes, dict[bytes, bytes]]]:
        return _table(conn).rows(list(by_key), columns=[META])

    return {by_key[k]: Meta.decode(d[META]) for k, d in hbase.call(get) if META in d}


def put_many(items: Sequence[tuple[int, int, Summary]]) -> None:
    """Write ``(owner, generation, summary)`` cells, timestamp = version: one call per version."""
    by_ts: dict[int, list[tuple[int, int, Summary]]] = defaultdict(list)
    for item in items:
        by_ts[item[2].mtime].append(item)

    def write(conn: happybase.Connection) -> None:
        for ts, group in by_ts.items():
            with _table(conn).batch(timestamp=ts) as batch:
                for owner, gen, s in group:
                    batch.put(entries_row(owner, gen), {qualifier(s.peer): codec.encode(s)})

    hbase.call(write)


def owners_with_rows() -> list[int]:
    """Every owner with a meta row: a scan of the meta cells (the HBase index's rebuild, once per
    Redis run; a meta row is the 9-byte ``salt | owner``, an entries row is longer)."""

    def scan(conn: happybase.Connection) -> list[int]:
        rows = _table(conn).scan(columns=[META], batch_size=1000)
        return [int.from_bytes(key[1:], "big") for key, _ in rows if len(key) == META_ROW_BYTES]

    found: list[int] = hbase.call(scan)
    return found


# -- reads -----------------------------------------------------------------------------------
def read(owner: int) -> View:
    def get(conn: happybase.Connection) -> tuple[Meta | None, dict[bytes, bytes]]:
        raw = _table(conn).row(rowkey(owner), columns=[META]).get(META)
        meta = Meta.decode(raw) if raw else None
        if meta is None or meta.state != READY:
            return meta, {}
        return meta, _table(conn).row(entries_row(owner, meta.generation))

    meta, row = hbase.call(get, at=(TABLE, rowkey(owner)))  # both rows share the owner's prefix
    if meta is None or meta.state != READY:
        return View(meta, None, 0)
    return View(meta, _valid_prefix(meta, row), len(row))


def _valid_prefix(meta: Meta, row: Mapping[bytes, bytes]) -> Fill:
    live = (Packed.of(v) for v in row.values())
    entries = [p for p in live if not p.deleted and (meta.complete or p.member >= meta.boundary)]
    entries.sort(key=lambda p: p.member, reverse=True)
    return Fill(entries, meta.boundary, meta.complete, "h")


# -- builds ----------------------------------------------------------------------------------
def _cas_meta(conn: happybase.Connection, owner: int, old: bytes | None, new: Meta) -> bool:
    mutation = Mutation(column=META, value=new.encode())
    return bool(conn.client.checkAndPut(_table(conn).name, rowkey(owner), META, old, mutation, {}))


def _move_meta(owner: int, state: str) -> int | None:
    """Move the meta to a new generation in ``state``; None if others kept winning the race."""

    def move(conn: happybase.Connection) -> int | None:
        for _ in range(CAS_ATTEMPTS):
            old = _table(conn).row(rowkey(owner), columns=[META]).get(META)
            generation = (Meta.decode(old).generation if old else 0) + 1
            if _cas_meta(conn, owner, old, Meta(generation, state)):
                return generation
        return None

    return hbase.call(move)


def begin(owner: int) -> int | None:
    """Start a build: a new generation, filling. Pushes write into it from now on."""
    return _move_meta(owner, FILLING)


def invalidate(owner: int) -> None:
    """Stop serving the row (a new, stale generation); only a build makes it ready again."""

    def has_row(conn: happybase.Connection) -> bool:
        return META in _table(conn).row(rowkey(owner), columns=[META])

    if hbase.call(has_row):
        _move_meta(owner, STALE)


def finish(owner: int, generation: int, fill: Fill) -> bool:
    """Write the build's entries (lowest timestamp), then mark it ready if still current."""
    expected = Meta(generation, FILLING).encode()
    ready = Meta(generation, READY, fill.boundary, fill.complete)

    def write(conn: happybase.Connection) -> bool:
        cells = {qualifier(p.peer): p.raw for p in fill.entries}
        _table(conn).put(entries_row(owner, generation), cells, timestamp=FILL_TS)
        return _cas_meta(conn, owner, expected, ready)

    done = hbase.call(write)
    if done:
        _drop_other_generations(owner, generation)
    return bool(done)


def _drop_other_generations(owner: int, generation: int) -> None:
    """Delete the rows of the generations before this one (a newer build's row is left alone)."""

    def drop(conn: happybase.Connection) -> None:
        for old in range(max(1, generation - DROP_GENERATIONS), generation):
            _table(conn).delete(entries_row(owner, old))

    hbase.call(drop)
