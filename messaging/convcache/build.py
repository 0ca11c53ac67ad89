"""(Re)building one owner's cached list from MySQL: the HBase row, and Redis with it.

Both tiers start their new generation *before* MySQL is read (``redis_tier.begin``,
``hbase_tier.begin``): a push that commits after the read writes into the new generation, one
that committed before is in the read. The same read then fills both. A rebuild also compacts the
HBase row (the old generation's cells are dropped) and clears an HBase-dirty marker older than
its start. Background rebuilds (after an HBase miss) run on a two-thread pool, at most one per
owner at a time (``cl:fill`` marker); inside a transaction they run inline, since another
thread's connection could not see the caller's uncommitted rows.
"""

from __future__ import annotations

import logging

from django.db import connection

from config.redis import get_redis
from messaging import msgkey as clock
from messaging.convcache import hbase_tier, keys, mysql_tier, redis_tier
from messaging.convcache.pools import in_thread_with_db, pool

log = logging.getLogger(__name__)
REBUILD_CELLS_FACTOR = 2  # rebuild an HBase row grown past twice CONVCACHE_SIZE cells
BUILD_THREADS = 2
MARKER_TTL_S = 60


def rebuild(owner: int, *, redis_too: bool = False) -> bool:
    """Build the owner's HBase row (and Redis list) from one MySQL read; True: HBase ready."""
    started = clock.now_ms()
    state, redis_gen = redis_tier.begin(owner) if redis_too else ("ready", "")
    hbase_gen = hbase_tier.begin(owner) if hbase_tier.enabled() else None
    fill = mysql_tier.fill(owner)
    ready = not hbase_tier.enabled()
    if hbase_gen is not None:
        ready = hbase_tier.finish(owner, hbase_gen, fill)
        if ready:
            redis_tier.clear_hbase_dirty(owner, started)
    if state != "ready":
        redis_tier.finish(owner, redis_gen, fill)
    return ready


def rebuild_async(owner: int) -> None:
    """Rebuild the owner's HBase row in the background (at most one at a time per owner)."""
    if connection.in_atomic_block:
        _rebuild_logged(owner)
        return
    marker = keys.fill_marker(owner)
    if not get_redis().set(marker, 1, nx=True, ex=MARKER_TTL_S):
        return
    if (
        pool("build", BUILD_THREADS).submit(in_thread_with_db(lambda: _rebuild_logged(owner)))
        is None
    ):
        get_redis().delete(marker)


def _rebuild_logged(owner: int) -> None:
    try:
        rebuild(owner)
    except Exception:
        log.warning("convcache: HBase rebuild failed for %s", owner, exc_info=True)
    finally:
        get_redis().delete(keys.fill_marker(owner))
