"""Tier 1 of the conversation-list cache: Redis (key layout in keys.py, scripts in lua/).

Per owner, the top CONVCACHE_SIZE conversations as packed summaries in a hash, ordered by a
lexicographic zset, with a 24 h TTL. What the tier holds is always a *prefix* of the owner's list:
every conversation whose member (sort key, peer) is at or above the boundary member ``_b`` is
cached with its newest pushed version (or ``_a``: the whole list is cached). Pages that stay
inside the prefix are served here; a page that leaves it is answered ``beyond`` (read MySQL).

Every write is a compare-and-set on the version (mtime, tombstone wins a tie) inside one Lua
script, so out-of-order pushes never regress an entry. Dropped entries leave tombstones (at most
2 x CONVCACHE_SIZE, then the oldest are forgotten and a floor remembers their newest mtime).

A fill is a generation (``_g``): a miss starts one atomically in the read script, the caller
reads tier 2 and hands the answer to ``finish``. Pushes carry the generation they saw before
reading MySQL (``probe``), which is what lets ``apply`` decide about entries it has never seen
(see writer.py). Whenever a script cannot decide safely it drops the owner's keys: a miss is
always correct.

Redis Cluster: every script but ``generations`` takes one owner's keys (one slot); ``generations``
reads many owners and writes nothing: one call per primary over the owners of all its slots
(``ScriptRegistry.read_by_node``; one group per slot when a slot is moving); once in all on a
single Redis.

The HBase index (``cl:hbi:{u:<uid>}``, writer.py): which owners may have an HBase row, so a bulk
push reads HBase metas only for those; trusted only in the Redis run it was completed in
(``index_rebuild``, called by the beat task ``messaging.convcache_index``).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from infra.redis import by_user_slot, clustered, get_redis, run_id
from storage import msgkey as clock
from storage.convcache import codec, keys, lua
from storage.convcache.codec import Fill, Summary
from storage.counters import keys as unread_keys

FILL_DEADLINE_MS = 30_000
BURST_WINDOW_S = 60


def enabled() -> bool:
    return bool(settings.CONVCACHE_ENABLED)


def cap() -> int:
    return int(settings.CONVCACHE_SIZE)


def new_generation() -> str:
    return secrets.token_hex(8)


@dataclass(frozen=True)
class ReadResult:
    status: str  # 'hit' | 'beyond' | 'miss' | 'filling'
    generation: str = ""
    hbase_dirty: bool = False
    entries: list[Summary] = field(default_factory=list)
    unread: list[int] = field(default_factory=list)


def read(owner: int, *, cursor: str, want: int, category: str | None) -> ReadResult:
    script_keys = [*keys.cache_keys(owner), unread_keys.unread(owner), keys.hbase_dirty(owner)]
    deadline = clock.now_ms() + FILL_DEADLINE_MS
    args = [new_generation(), deadline, cursor, want, category or ""]
    reply = lua.call("read", script_keys, args)
    status = reply[0].decode()
    if status == "hit":
        counts = [int(c or 0) for c in reply[2]]
        return ReadResult(status, entries=[codec.decode(v) for v in reply[1]], unread=counts)
    if status == "beyond":
        return ReadResult(status)
    return ReadResult(status, reply[1].decode(), bool(reply[2]))


def begin(owner: int) -> tuple[str, str]:
    """Start a fill unless one runs or the cache is ready: ``(state, generation)``."""
    deadline = clock.now_ms() + FILL_DEADLINE_MS
    state, gen = lua.call("begin", keys.cache_keys(owner), [new_generation(), deadline])
    return state.decode(), gen.decode()


def finish(owner: int, generation: str, fill: Fill) -> int:
    """Hand a source's answer to the fill ``generation``: 1 done, 0 superseded, -1 dropped."""
    expires = clock.now_ms() + int(settings.CONVCACHE_TTL_S) * 1000
    head = [generation, fill.source, fill.boundary, int(fill.complete), expires, cap(), 2 * cap()]
    pairs = [v for p in fill.entries for v in (codec.field(p.peer), p.raw)]
    return int(lua.call("fill", keys.cache_keys(owner), head + pairs))


def probe_many(
    pairs: Sequence[tuple[int, int]], *, track_bursts: bool
) -> tuple[dict[int, str | None], list[int]]:
    """The cache generation of every owner, plus the owners whose burst starts a prewarm
    (bursts are counted by a script per pair; without them one script reads every owner: a
    1,000-owner bulk batch went from 7.4 to about 1 ms of client CPU, profiled)."""
    if not track_bursts:  # a bulk batch: one script call reads every owner's generation
        return probe_bulk(list(dict.fromkeys(o for o, _ in pairs))).generations, []
    pipe = get_redis().pipeline(transaction=False)
    threshold, window = settings.BURST_NEW_CONVERSATIONS, settings.PREWARM_WINDOW_S
    for owner, peer in pairs:
        script_keys = [*keys.cache_keys(owner), keys.burst(owner), keys.prewarm_marker(owner)]
        args = [peer, 1, threshold, BURST_WINDOW_S, window]
        lua.call("probe", script_keys, args, client=pipe)
    generations: dict[int, str | None] = {}
    triggered = []
    for (owner, _), (gen, trigger) in zip(pairs, pipe.execute(), strict=True):
        generations[owner] = gen.decode() if gen else None
        if trigger:
            triggered.append(owner)
    return generations, triggered


@dataclass(frozen=True)
class BulkProbe:
    """What a bulk push reads from Redis for its owners: the generation of each owner with a
    cached list (absent: none), and which of them have an HBase row (``hbase``; None when the
    index is not trusted in this Redis run)."""

    generations: dict[int, str | None]
    hbase: set[int] | None


def probe_bulk(owners: list[int]) -> BulkProbe:
    """Every owner's generation and HBase flag, and the index's trust marker: one script call
    on one Redis; on a cluster one per primary over every slot it serves
    (``ScriptRegistry.read_by_node``), then a GET of the marker; then the Redis run, read after
    them (a restart or failover in between makes the index untrusted for this push, never the
    reverse)."""
    generations: dict[int, str | None] = {}
    indexed: set[int] = set()
    if not clustered():
        script_keys = [keys.HBASE_INDEX_TRUSTED, *_probe_keys(owners)]
        marker, *found = lua.call("generations", script_keys, ["1"])
        _collect(owners, found, generations, indexed)
    else:
        groups = by_user_slot(owners)
        keyed = {slot: _probe_keys(group) for slot, group in groups.items()}
        for slots, found in lua.registry.read_by_node("generations", keyed, ["0"]):
            _collect([o for slot in slots for o in groups[slot]], found, generations, indexed)
        marker = get_redis().get(keys.HBASE_INDEX_TRUSTED)
    trusted = marker is not None and marker.decode() == run_id()
    return BulkProbe(generations, indexed if trusted else None)


def _collect(
    owners: Sequence[int],
    found: list[Any],
    generations: dict[int, str | None],
    indexed: set[int],
) -> None:
    """Read the script's sparse reply: (position, generation, flag) per owner with either."""
    for position, generation, flag in zip(found[0::3], found[1::3], found[2::3], strict=True):
        owner = owners[position]
        if generation:
            generations[owner] = generation.decode()
        if flag:
            indexed.add(owner)


def _probe_keys(owners: Sequence[int]) -> list[str]:
    """Each owner's hash and HBase flag, interleaved (built in two passes: a 4,000-owner batch
    spent 1.5 µs per owner building them pair by pair, profiled)."""
    both: list[str] = [""] * (2 * len(owners))
    both[0::2] = keys.entries_many(owners)
    both[1::2] = keys.hbase_indexed_many(owners)
    return both


def index_hbase(owner: int) -> None:
    """Flag the owner as having an HBase row; must precede the HBase generation it begins."""
    get_redis().set(keys.hbase_indexed(owner), b"1")


def index_rebuild(owners_with_rows: Iterable[int], run: str) -> int:
    """Flag every owner of ``owners_with_rows`` (an HBase scan begun in Redis run ``run``), then
    trust the index for that run; returns how many were flagged."""
    flagged = 0
    pipe = get_redis().pipeline(transaction=False)
    for owner in owners_with_rows:
        pipe.set(keys.hbase_indexed(owner), b"1")
        flagged += 1
        if flagged % 1000 == 0:
            pipe.execute()
    pipe.execute()
    get_redis().set(keys.HBASE_INDEX_TRUSTED, run)
    return flagged


def apply_many(pushes: Mapping[int, tuple[str | None, Sequence[Summary]]]) -> dict[int, int]:
    """Compare-and-set each owner's records (one script call per owner, one pipeline)."""
    pipe = get_redis().pipeline(transaction=False)
    owners = list(pushes)
    for owner in owners:
        generation, summaries = pushes[owner]
        args = [generation or "", cap(), 2 * cap(), *_pairs(summaries)]
        lua.call("apply", keys.cache_keys(owner), args, client=pipe)
    return {o: int(r) for o, r in zip(owners, pipe.execute(), strict=True)}


def drop(owners: Iterable[int]) -> None:
    client = get_redis()
    for owner in owners:
        client.delete(*keys.cache_keys(owner))


def mark_hbase_dirty(owners: Iterable[int]) -> None:
    """An HBase write for these owners failed: their HBase rows are not trusted until rebuilt."""
    now = clock.now_ms()
    pipe = get_redis().pipeline(transaction=False)
    for owner in owners:
        pipe.set(keys.hbase_dirty(owner), now, ex=30 * 24 * 3600)
    pipe.execute()


def clear_hbase_dirty(owner: int, rebuilt_from_ms: int) -> None:
    """A rebuild that began at ``rebuilt_from_ms`` covers failures up to that moment only."""
    lua.call("undirty", [keys.hbase_dirty(owner)], [rebuilt_from_ms])


def _pairs(summaries: Iterable[Summary]) -> list[Any]:
    return [v for s in summaries for v in (codec.field(s.peer), codec.encode(s))]
