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
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from django.db import connection

from infra.redis import get_redis, run_id
from storage import msgkey as clock
from storage.convcache import hbase_tier, keys, mysql_tier, redis_tier
from storage.convcache.codec import Fill
from storage.convcache.pools import in_thread_with_db, pool

log = logging.getLogger(__name__)
T = TypeVar("T")
REBUILD_CELLS_FACTOR = 2  # rebuild an HBase row grown past twice CONVCACHE_SIZE cells
BUILD_THREADS = 2
MARKER_TTL_S = 60


def rebuild(owner: int, *, redis_too: bool = False, redis_generation: str = "") -> bool:
    """Build the owner's HBase row (and Redis list) from one MySQL read; True: HBase ready.

    ``redis_generation``: a Redis fill a reader has already begun, finished with the same read."""
    started = clock.now_ms()
    state, redis_gen = ("begun", redis_generation) if redis_generation else ("ready", "")
    if redis_too and not redis_generation:
        state, redis_gen = redis_tier.begin(owner)
    hbase_gen = _quietly(lambda: _begin_hbase(owner)) if hbase_tier.enabled() else None
    fill = mysql_tier.fill(owner)
    ready = not hbase_tier.enabled()
    if hbase_gen is not None:
        ready = bool(_quietly(lambda: hbase_tier.finish(owner, hbase_gen, fill)))
        if ready:
            redis_tier.clear_hbase_dirty(owner, started)
    if state != "ready":
        redis_tier.finish(owner, redis_gen, fill)  # Redis is filled even when HBase is down
    return ready


def _begin_hbase(owner: int) -> int | None:
    """Flag the owner in the HBase index, then begin its new HBase generation (writer.py says
    why in this order; no flag, no generation)."""
    redis_tier.index_hbase(owner)
    return hbase_tier.begin(owner)


def index_rebuild() -> int:
    """Make the HBase index complete for the current Redis run: read the run, flag every owner
    with an HBase row, then mark the index trusted for that run (a restart or failover during the
    scan leaves it untrusted: the next call starts again). Returns the owners flagged, -1 when
    the index was already trusted in this run."""
    run = run_id()
    if get_redis().get(keys.HBASE_INDEX_TRUSTED) in (run, run.encode()):
        return -1
    owners = hbase_tier.owners_with_rows() if hbase_tier.enabled() else []
    return redis_tier.index_rebuild(owners, run)


def _quietly(fn: Callable[[], T]) -> T | None:
    try:
        return fn()
    except Exception:
        log.warning("convcache: HBase build step failed", exc_info=True)
        return None


def fill_later(
    owner: int, *, redis_generation: str = "", fill: Fill | None = None, hbase: bool = False
) -> None:
    """After a reader answered: finish its Redis fill (from ``fill`` if it has one, else from
    MySQL) and, with ``hbase``, rebuild the HBase row from the same MySQL read. Runs on the
    build pool (at most one HBase rebuild per owner at a time); inline inside a transaction,
    whose uncommitted rows another thread's connection could not see."""
    if fill is not None:
        job = partial(_finish_redis, owner, redis_generation, fill)
    elif hbase:
        job = partial(_rebuild_once, owner, redis_generation)
    else:
        job = partial(_redis_from_mysql, owner, redis_generation)
    if connection.in_atomic_block:
        _logged(job)
    elif pool("build", BUILD_THREADS).submit(in_thread_with_db(partial(_logged, job))) is None:
        log.info("convcache: build pool busy; %s stays unfilled for now", owner)


def rebuild_async(owner: int) -> None:
    """Rebuild the owner's HBase row in the background (at most one at a time per owner)."""
    fill_later(owner, hbase=True)


def _finish_redis(owner: int, generation: str, fill: Fill) -> None:
    if generation:
        redis_tier.finish(owner, generation, fill)


def _redis_from_mysql(owner: int, generation: str) -> None:
    if generation:
        redis_tier.finish(owner, generation, mysql_tier.fill(owner))


def _rebuild_once(owner: int, generation: str) -> None:
    marker = keys.fill_marker(owner)
    if not get_redis().set(marker, 1, nx=True, ex=MARKER_TTL_S):
        _redis_from_mysql(owner, generation)  # another rebuild runs: fill Redis only
        return
    try:
        rebuild(owner, redis_generation=generation)
    finally:
        get_redis().delete(marker)


def _logged(job: Callable[[], None]) -> None:
    try:
        job()
    except Exception:
        log.warning("convcache: background fill failed", exc_info=True)
