"""Pushing conversation changes into the cache tiers (messaging.services calls this after commit).

One push (``refresh``) for a batch of (owner, peer) conversations:

  (a)  read the HBase meta cells of the owners (which rows exist, their generation): one multi-get;
       a bulk batch reads only the owners the HBase index names (below);
  (a') read the owners' Redis generation (``probe``): one pipeline;
  (b)  read the conversations' current state from MySQL (one query), only for owners cached in
       some tier: a bulk batch to uncached owners stops after (a) and (a');
  (c)  write HBase cells (timestamp = version) into the generation seen in (a), then
  (c') compare-and-set the Redis entries, passing the generation seen in (a').

Why this order. Every commit is followed by its own push, whose (a) and (a') start after the
commit, and every build or fill starts its generation before reading its source. If the generation
a push saw is still current when it writes, any newer state committed after the push's (b), so
after that generation began: its own push lands in the same generation with a higher version,
and compare-and-set keeps the newest whatever the arrival order. If the generation moved on, the
new one began after our commit: a fill from MySQL read our state or a newer one, so Redis skips
entries it has not seen (``apply.lua``), while a fill from HBase may have read HBase before our
(c), so Redis drops the cache (or taints the fill in progress) rather than guess. HBase writes
into a superseded generation land in cells nobody reads. Writing HBase before Redis is what lets a
Redis fill from HBase see every push it could have missed.

The HBase index (``cl:hbi:{u:<uid>}``): a build flags its owner in Redis before it begins an
HBase generation (build.py), so a bulk push, whose Redis read starts after its commit, finds the
flag of every owner with a generation begun before that commit, the only ones it must write (a
generation begun after the commit reads MySQL after it). Redis can lose its last second of writes
in a crash, or a failover can: the index is trusted only in the Redis run it was completed in
(``redis_tier.probe_bulk`` compares its marker with ``infra.redis.run_id``); otherwise the push
reads every owner's meta, as before the index, until ``build.index_rebuild`` (the beat task
``messaging.convcache_index``) has scanned HBase in the new run. Measured on a 1,000-recipient
batch of owners without a list: the HBase multi-get it no longer makes was ~15 ms of the
conversation-list stage's ~23 ms (BENCHMARKS.md, the batch profile).

A push never fails the send: a failed HBase write marks the owners' rows dirty in Redis (not
served until rebuilt); a failed Redis write is logged and the owners' Redis keys dropped if
Redis answers again. Deletions push tombstones (``forget``); deleting everything of an owner
drops both tiers' lists (``invalidate``). Inside ``strict()`` (the binlog follower, cachesync/)
a push whose miss nothing made up for (no dirty mark, no drop, a Redis probe that failed)
raises ``PushFailed`` after the same steps, so its caller can wait and push again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from redis.exceptions import RedisError

from infra import metrics
from storage.convcache import codec, hbase_tier, mysql_tier, prewarm, redis_tier
from storage.convcache.codec import Summary
from storage.convcache.hbase_tier import Meta

log = logging.getLogger(__name__)
BURST_MAX_PAIRS = 16  # bursts are counted on 1:1 sends; a bulk batch adds one per recipient

Pair = tuple[int, int]
_strict: ContextVar[bool] = ContextVar("convcache_strict", default=False)


class PushFailed(RuntimeError):
    """A tier missed a push and nothing made up for it (raised only inside ``strict``)."""


@contextmanager
def strict() -> Iterator[None]:
    """Pushes made inside raise ``PushFailed`` when a tier missed one uncompensated; outside,
    a push logs and carries on (a send never fails for its cache)."""
    token = _strict.set(True)
    try:
        yield
    finally:
        _strict.reset(token)


def _missed(what: str) -> None:
    if _strict.get():
        raise PushFailed(f"convcache: {what} failed and nothing made up for it")


def refresh(pairs: Iterable[Pair], *, delivered: int = 0) -> None:
    """Push the current MySQL state of these (owner, peer) conversations into both tiers."""
    batch = list(dict.fromkeys(pairs))
    if not _counted(delivered) or not batch:
        return
    metas, generations = _probe(batch)
    _push_cached([p for p in batch if generations.get(p[0]) or p[0] in metas], metas, generations)


def refresh_owners(owners: Sequence[int], peer: int, *, delivered: int = 0) -> None:
    """``refresh`` of (owner, peer) for every owner (one peer's message to a bulk batch), without
    the pairs: the probe needs only the owners, and most of them have no cache."""
    if len(owners) <= BURST_MAX_PAIRS:
        refresh([(o, peer) for o in owners], delivered=delivered)
        return
    if not _counted(delivered):
        return
    unique = list(dict.fromkeys(owners))
    metas, generations = _probe_bulk(unique)
    _push_cached(
        [(o, peer) for o in unique if generations.get(o) or o in metas], metas, generations
    )


def _counted(delivered: int) -> bool:
    """Count the delivered recipients; False when there is no cache to push into."""
    if delivered:
        metrics.inc("fanout_recipients", delivered)
    return redis_tier.enabled()


def _push_cached(
    cached: list[Pair], metas: dict[int, Meta], generations: dict[int, str | None]
) -> None:
    if cached:
        _push_for(metas, generations, mysql_tier.current(cached))


def forget(owner: int, peer: int, version: int) -> None:
    """The conversation is gone; ``version`` must exceed its last mtime (mtime + 1)."""
    forget_many([(owner, peer, version)])


def forget_many(gone: Iterable[tuple[int, int, int]]) -> None:
    """These conversations are gone, each as a tombstone of its version (owner, peer, version
    above the row's last mtime), with one cache probe for all of them: a probe per conversation
    cost 1.8 ms each (5.5 of 11.3 s to age out a 3,000-recipient campaign, measured)."""
    batch = list(gone)
    if not batch or not redis_tier.enabled():
        return
    metas, generations = _probe([(owner, peer) for owner, peer, _ in batch])
    tombs: dict[int, list[Summary]] = {}
    for owner, peer, version in batch:
        if generations.get(owner) or owner in metas:
            tombs.setdefault(owner, []).append(codec.tombstone(peer, version))
    if tombs:
        _push_for(metas, generations, tombs)


def invalidate(owner: int) -> None:
    """Every conversation of the owner changed at once (delete all): drop both tiers' lists."""
    if not redis_tier.enabled():
        return
    if not _quietly("Redis drop", lambda: redis_tier.drop([owner])):
        _missed("Redis drop")
    if hbase_tier.enabled() and not _quietly(
        "HBase invalidate", lambda: hbase_tier.invalidate(owner)
    ):
        _marked_dirty([owner])


# -- steps -----------------------------------------------------------------------------------
def _probe(batch: Sequence[Pair]) -> tuple[dict[int, Meta], dict[int, str | None]]:
    owners = list(dict.fromkeys(o for o, _ in batch))
    if len(batch) > BURST_MAX_PAIRS:
        return _probe_bulk(owners)
    metas = _hbase_metas(owners)
    try:
        generations, bursts = redis_tier.probe_many(batch, track_bursts=True)
    except RedisError:
        log.warning("convcache: Redis probe failed", exc_info=True)
        _missed("Redis probe")
        return metas, {}
    for owner in bursts:
        prewarm.trigger(owner, reason="burst", claimed=True)
    return metas, generations


def _probe_bulk(owners: list[int]) -> tuple[dict[int, Meta], dict[int, str | None]]:
    """A bulk batch: Redis first (generations, and who has an HBase row when the index is
    trusted), then HBase metas of those owners only: none for a batch of owners who never had a
    list built, instead of a multi-get of all of them."""
    try:
        probe = redis_tier.probe_bulk(owners)
    except RedisError:
        log.warning("convcache: Redis probe failed", exc_info=True)
        _missed("Redis probe")
        return _hbase_metas(owners), {}
    wanted = owners if probe.hbase is None else [o for o in owners if o in probe.hbase]
    return _hbase_metas(wanted), probe.generations


def _hbase_metas(owners: list[int]) -> dict[int, Meta]:
    if not owners or not hbase_tier.enabled():
        return {}
    try:
        return hbase_tier.metas(owners)
    except Exception:
        log.warning("convcache: HBase meta read failed; %d rows marked dirty", len(owners))
        _marked_dirty(owners)
        return {}


def _push_for(
    metas: dict[int, Meta], generations: dict[int, str | None], by_owner: dict[int, list[Summary]]
) -> None:
    hbase_items = [
        (owner, metas[owner].generation, s)
        for owner, items in by_owner.items()
        if owner in metas
        for s in items
    ]
    if hbase_items:
        try:
            hbase_tier.put_many(hbase_items)
        except Exception:
            failed = sorted({o for o, _, _ in hbase_items})
            log.warning("convcache: HBase write failed; %d rows marked dirty", len(failed))
            _marked_dirty(failed)
    pushes = {o: (generations.get(o), items) for o, items in by_owner.items()}
    try:
        outcome = redis_tier.apply_many(pushes)
    except RedisError:
        log.warning("convcache: Redis push failed for %d owners", len(pushes), exc_info=True)
        if not _quietly("Redis drop", lambda: redis_tier.drop(pushes)):
            _missed("Redis push")
        return
    dropped = sum(1 for r in outcome.values() if r < 0)
    if dropped:
        metrics.inc("convcache_dropped", dropped)


def _marked_dirty(owners: Sequence[int]) -> None:
    """An HBase step failed: its rows are not served until rebuilt (else the push missed)."""
    if not _quietly("Redis dirty mark", lambda: redis_tier.mark_hbase_dirty(owners)):
        _missed("HBase write")


def _quietly(what: str, fn: Callable[[], object]) -> bool:
    try:
        fn()
    except Exception:
        log.warning("convcache: %s failed", what, exc_info=True)
        return False
    return True
