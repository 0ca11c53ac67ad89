"""Unread counters: writes (each one Lua script, so totals equal their parts) and reads (one
HGETALL or HMGET per request).

Plural first: ``unread_incr_many`` counts one message for many owners in one round trip (a bulk
batch: a few script calls in one pipeline); a 1:1 send is a fan-out of one. ``marker`` names the
change (a batch, a message) and makes it idempotent: a redelivered task finds the marker and
changes nothing. A numbered series of changes (a campaign's batches) names each one as a
``Sequenced`` marker: one bit of a bitmap per series (per slot on a cluster) instead of a key
per change.

On a Redis Cluster the owners are grouped by the slot of their ``unread:{u:<uid>}`` hash instead
(``infra.redis.by_user_slot``). Each slot's marker lives in that slot
(``unread:applied:{<slot tag>}:<marker>``, ``infra.redis.slot_tag``) and guards the same owners
on every attempt, so a batch half applied before a failover or a lost reply is completed, once,
by the next attempt. The slots' groups run as ONE script call per primary
(``ScriptRegistry.call_by_slot``), in a round trip of their own: a 1,000-owner batch spreads over
~1,000 slots, which cost ~1,000 calls when each slot was its own call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from infra.redis import by_user_slot, clustered, get_redis, slot_tag
from storage.counters import keys, lua

MARKER_TTL_S = 7 * 24 * 3600
# A recount (``unread_replace``) of a conversation touched this recently may race the delivery
# that touched it: the delivery writes the inbox and the conversation first and the counters last,
# so a recount in between counts the message and the delivery's own count would add it again.
# Such a recount, when it differs from what Redis held, leaves ``r:<peer>`` = the newest msgkey
# it counted, and incr_many.lua skips that message's count once. Found by scripts/fault_drill.py:
# a follower read for the first time after the counters' epoch moved, while their batch was
# between its conversation upsert and its counters, showed unread 2 for one message (1 of 19,802).
RECOUNT_RACE_WINDOW_MS = 3600 * 1000  # past a lease, its retries and an outage waited out
BITMAP = "2"  # incr_many.lua's kind of marker: a bit of a series' bitmap
# A series' bitmap lives this long from its first bit (a campaign longer than that starts new
# ones): long enough for any batch's retries, and small (~400 B a slot for 2,500 batches).
SERIES_TTL_S = 30 * 24 * 3600


@dataclass(frozen=True)
class Sequenced:
    """The marker of change ``seq`` of the numbered ``series`` (a campaign's batch ``seq``): a
    bit of the series' bitmap, which lives ``SERIES_TTL_S`` from its first bit.

    On a Redis Cluster a batch sorted by slot touches ~1,000 slots, each with a marker of its
    own: a key per slot and batch held ~110 bytes for 7 days (MEMORY USAGE 88 plus its expiry),
    ~210 MB per 10-million-recipient campaign (2,500 batches of the planner's slot-sorted
    waves: 32 such batches left 30,768 keys, 2.71 MB by MEMORY USAGE). One bitmap per slot
    and campaign: 16,224 keys, 1.68 MB after the same 32 batches, ~7 MB at 2,500 (313 bytes
    of bits a slot)."""

    series: str
    seq: int


Marker = str | Sequenced
# Owners go to the script in this many groups (uid mod SLICES), all in one pipeline: one call held
# Redis for 5.8 ms per 1,000 owners (10.5 ms for 2,000, measured), as long as the unread read path
# may take at p99; a group of 500 takes 2.4 ms.
# The group of an owner never changes, so each group's marker (``<marker>:<slice>``) guards the
# same owners on every attempt.
SLICES = 4


def unread_incr_many(
    *,
    owner_uids: Sequence[int],
    peer_uid: int,
    category: str,
    marker: Marker | None,
    delta: int = 1,
    client: Any = None,
    msgkey: int = 0,
) -> int:
    """Returns how many owners changed (0 on a replay); -1 when queued on a ``client`` pipeline
    (on one Redis; a cluster runs its calls at once). ``msgkey``: the new message counted, for a
    delivery (a recount that raced it already counted it: ``RECOUNT_RACE_WINDOW_MS``)."""
    if not owner_uids:
        return 0
    args = [peer_uid, category, delta, *_marker_args(marker), msgkey]
    if clustered():  # the slots' calls grouped per primary: a round trip of their own
        groups = {
            slot: [_marker_in(marker, slot_tag(slot)), *keys.unread_many(o)]
            for slot, o in by_user_slot(owner_uids).items()
        }
        changed = lua.registry.call_by_slot("incr_many", groups, args)
        return sum(int(n or 0) for n in changed.values())
    pipe = client if client is not None else get_redis().pipeline(transaction=False)
    for part, owners in _slices(owner_uids).items():
        marker_key = _marker_of_slice(marker, part)
        lua.call("incr_many", [marker_key, *keys.unread_many(owners)], args, client=pipe)
    return -1 if client is not None else sum(int(n or 0) for n in pipe.execute())


def _marker_args(marker: Marker | None) -> list[Any]:
    """incr_many.lua's ARGV[4..6]: the marker's kind, its ttl, its bit."""
    if isinstance(marker, Sequenced):
        return [BITMAP, SERIES_TTL_S, marker.seq]
    return ["1" if marker else "0", MARKER_TTL_S, 0]


def _marker_in(marker: Marker | None, tag: str) -> str:
    """The marker's key for the owners of one cluster slot (``tag`` hashes to it)."""
    if isinstance(marker, Sequenced):
        return keys.applied_bits_in(tag, marker.series)
    return keys.applied_marker_in(tag, marker or "none")


def _marker_of_slice(marker: Marker | None, part: int) -> str:
    """The marker's key for one slice of the owners on one Redis."""
    if isinstance(marker, Sequenced):
        return keys.applied_bits(f"{marker.series}:{part}")
    return keys.applied_marker(f"{marker}:{part}" if marker else "none")


def _slices(owner_uids: Sequence[int]) -> dict[int, list[int]]:
    parts: dict[int, list[int]] = {}
    for uid in owner_uids:
        parts.setdefault(uid % SLICES, []).append(uid)
    return parts


def unread_incr(*, owner_uid: int, peer_uid: int, category: str, marker: str | None) -> int:
    return unread_incr_many(
        owner_uids=[owner_uid], peer_uid=peer_uid, category=category, marker=marker
    )


def unread_set(*, owner_uid: int, peer_uid: int, category: str, count: int) -> int:
    return int(lua.call("adjust", [keys.unread(owner_uid)], [peer_uid, category, "set", count]))


def recount_guard(last_msgkey: int, touched_ms: int, now_ms: int) -> int:
    """What a recount of a conversation passes as ``counted_upto``: its newest message when a
    delivery touched it within ``RECOUNT_RACE_WINDOW_MS`` (that delivery's count may be on its
    way), else 0 (nothing to guard; the hash keeps no field for it)."""
    return last_msgkey if now_ms - touched_ms < RECOUNT_RACE_WINDOW_MS else 0


def unread_add(*, owner_uid: int, peer_uid: int, category: str, delta: int) -> int:
    return int(lua.call("adjust", [keys.unread(owner_uid)], [peer_uid, category, "add", delta]))


def unread_clear_all(*, owner_uid: int) -> None:
    get_redis().delete(keys.unread(owner_uid))


@dataclass(frozen=True)
class Replaced:
    old_total: int
    new_total: int
    conversations_changed: int
    drift: int = 0  # sum over conversations of |old count - new count|


class CountersChanged(Exception):
    """The user's counters changed between the start of a recount and its replace."""


def unread_digest(owner_uid: int) -> str:
    """A digest of the user's whole unread hash (``lua/_digest.lua``), taken before a recount
    reads the truth: ``unread_replace(unchanged_since=...)`` compares it."""
    value = lua.call("digest", [keys.unread(owner_uid)], [])
    return value.decode() if isinstance(value, bytes) else str(value)


def unread_replace(
    *,
    owner_uid: int,
    counts: Iterable[tuple[int, str, int, int]],
    unchanged_since: str | None = None,
) -> Replaced:
    """Atomically replace one user's counters with recomputed ``(peer, category, count,
    counted_upto)`` (``recount_guard``). With ``unchanged_since`` (``unread_digest`` before the
    recount), only if no write changed the hash since; else ``CountersChanged`` and the hash is
    left alone: a delivery whose inbox entry, conversation and count all landed while the truth
    was being read would otherwise be replaced away (unread 0 for its message: 1 of 19,801
    recipients in scripts/fault_drill.py, read for the first time after the epoch moved while
    their batch was delivered)."""
    args = [v for peer, category, n, upto in counts for v in (peer, category, n, upto)]
    check = "*" if unchanged_since is None else unchanged_since
    old, new, changed, drift = lua.call("replace", [keys.unread(owner_uid)], [check, *args])
    if int(old) < 0:
        raise CountersChanged(owner_uid)
    return Replaced(int(old), int(new), int(changed), int(drift))


Recounted = tuple[int, str, int, int]  # (peer, category, count, counted_upto): recount_guard
RECOUNT_PIPELINE = 1000  # owners per round trip


Pair = tuple[int, int]  # (owner, peer)


def unread_counts_of_pairs(pairs: Sequence[Pair]) -> dict[Pair, int]:
    """Each conversation's count as Redis holds it now (0: none), read before a recount of them
    begins: ``unread_recount_pairs``'s ``before``; a round trip per RECOUNT_PIPELINE."""
    found: dict[Pair, int] = {}
    for start in range(0, len(pairs), RECOUNT_PIPELINE):
        chunk = pairs[start : start + RECOUNT_PIPELINE]
        pipe = get_redis().pipeline(transaction=False)
        for owner, peer in chunk:
            pipe.hget(keys.unread(owner), f"p:{peer}")
        found.update(zip(chunk, (int(v or 0) for v in pipe.execute()), strict=True))
    return found


def unread_recount_pairs(
    counts: Mapping[int, Sequence[Recounted]], before: Mapping[Pair, int] | None = None
) -> set[Pair]:
    """Set some conversations' counts (per owner, recounted ``(peer, category, count,
    counted_upto)``) and leave each owner's others (``recount_peers.lua``); a round trip per
    RECOUNT_PIPELINE owners. With ``before`` (``unread_counts_of_pairs`` before the recount), a
    conversation whose count changed since is left as it is, and returned: a delivery or a read
    that landed whole while the truth was read is not set away (``unread_replace``'s reason)."""
    owners, left = list(counts), set[Pair]()
    for start in range(0, len(owners), RECOUNT_PIPELINE):
        chunk = owners[start : start + RECOUNT_PIPELINE]
        pipe = get_redis().pipeline(transaction=False)
        for owner in chunk:
            args = [
                v
                for peer, category, n, upto in counts[owner]
                for v in (peer, category, n, upto, "*" if before is None else before[owner, peer])
            ]
            lua.call("recount_peers", [keys.unread(owner)], args, client=pipe)
        for owner, reply in zip(chunk, pipe.execute(), strict=True):
            left.update((owner, int(peer)) for peer in reply[1:])
    return left


# -- reads -----------------------------------------------------------------------------------
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
