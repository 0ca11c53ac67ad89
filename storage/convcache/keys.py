"""Redis key formats of the conversation-list cache. Per-user keys carry the ``{u:<uid>}`` hash tag,
so one owner's keys (and their ``unread:{u:<uid>}`` hash) share a Redis Cluster slot and every
script below touches one slot only.

cl:h:{u:<uid>}     hash: ``_``-prefixed meta fields plus one field per cached peer.
                   Meta: ``_g`` generation token, ``_s`` state (``f`` filling, ``r`` ready),
                   ``_src`` the filled-from tier (``m`` MySQL, ``h`` HBase), ``_b`` boundary
                   member, ``_a`` ``1`` when every conversation of the owner is cached,
                   ``_n`` live entries,
                   ``_f`` floor (newest mtime of a forgotten tombstone), ``_x`` expiry (ms),
                   ``_tnt`` set when a push may have been missed while filling from HBase.
                   Peer fields: 16 hex digits of the peer uid → packed summary (codec.py).
cl:z:{u:<uid>}     zset, every score 0: members ``<sort_key:016x><peer:016x>`` of live entries,
                   so lexicographic order is exactly (sort_key, peer_uid) over 64-bit values
                   (a float score would round msgkeys above 2**53).
cl:t:{u:<uid>}     zset: tombstoned peers (16 hex) → mtime, oldest trimmed first.
cl:hbd:{u:<uid>}   string: ms of an HBase convlist write that failed; the HBase row is not
                   trusted until a rebuild started after that moment clears it.
cl:hbi:{u:<uid>}   string ``1``: the owner may have an HBase row. Set before any HBase generation
                   of theirs begins (build.py), never removed: the index of who has one.
cl:hbi:trusted     string: the Redis run (``infra.redis.run_id``) in which the index is complete
                   (``redis_tier.index_rebuild`` scanned HBase after that run began). Any other
                   value: bulk pushes read every owner's HBase meta, as without an index.
cl:burst:{u:<uid>} set: distinct peers that opened a conversation with an uncached owner in the
                   current one-minute window (capped at the threshold + 1 members).
cl:pw:{u:<uid>}    string: a prewarm was triggered; lives PREWARM_WINDOW_S (once per window).
cl:fill:{u:<uid>}  string: a background HBase rebuild is running (dedupe, 60 s).
cl:bigups:{s<n>}   set: big UPs (owners above BIG_UP_THRESHOLD conversations), sharded by
                   uid mod BIG_UP_SHARDS so no set grows past ~5,000 members per million owners.
cl:bigups:meta     hash: ``count`` and ``at`` (ms) of the last daily recompute.
cl:pwstats:<hour>  hash: prewarm ``a`` attempts, ``s`` successes, ``f`` failures in one UTC hour.
cl:pwalert         string: set while the failure-rate error was logged (rate-limits the log).
"""

from __future__ import annotations

from collections.abc import Iterable

BIG_UP_SHARDS = 64


def entries(uid: int) -> str:
    return f"cl:h:{{u:{uid}}}"


def entries_many(uids: Iterable[int]) -> list[str]:
    return [f"cl:h:{{u:{uid}}}" for uid in uids]


def order(uid: int) -> str:
    return f"cl:z:{{u:{uid}}}"


def tombstones(uid: int) -> str:
    return f"cl:t:{{u:{uid}}}"


def cache_keys(uid: int) -> list[str]:
    """The three keys of one owner's cached list, in the order every script takes them."""
    return [entries(uid), order(uid), tombstones(uid)]


def hbase_dirty(uid: int) -> str:
    return f"cl:hbd:{{u:{uid}}}"


def hbase_indexed(uid: int) -> str:
    return f"cl:hbi:{{u:{uid}}}"


def hbase_indexed_many(uids: Iterable[int]) -> list[str]:
    return [f"cl:hbi:{{u:{uid}}}" for uid in uids]


HBASE_INDEX_TRUSTED = "cl:hbi:trusted"


def burst(uid: int) -> str:
    return f"cl:burst:{{u:{uid}}}"


def prewarm_marker(uid: int) -> str:
    return f"cl:pw:{{u:{uid}}}"


def fill_marker(uid: int) -> str:
    return f"cl:fill:{{u:{uid}}}"


def big_ups(shard: int) -> str:
    return f"cl:bigups:{{s{shard}}}"


def big_ups_for(uid: int) -> str:
    return big_ups(uid % BIG_UP_SHARDS)


BIG_UPS_META = "cl:bigups:meta"
PREWARM_ALERT = "cl:pwalert"


def prewarm_stats(hour: int) -> str:
    return f"cl:pwstats:{hour}"
