"""Prewarming big accounts' conversation lists (DESIGN.md, "Cache prewarming for big accounts").

- **Big UPs**: owners with more than BIG_UP_THRESHOLD conversations, recomputed daily by the beat
  task ``messaging.convcache_big_ups`` into Redis sets sharded by uid (``keys.big_ups``).
- **Triggers**: an unread-count request from a big UP (``on_unread_request``: one SISMEMBER), and
  a burst of new conversations for any uncached owner (more than BURST_NEW_CONVERSATIONS distinct
  peers opening a conversation within a minute, counted by a 1:1 push's probe script). Either
  enqueues ``messaging.convcache_prewarm`` at most once per PREWARM_WINDOW_S per owner (the
  ``cl:pw`` marker, SET NX EX). ``TASK`` is that task, bound by MessagingConfig.ready (its module,
  messaging/tasks.py, runs this one).
- **The task** rebuilds the owner's first CONVCACHE_SIZE conversations into HBase and Redis from
  one MySQL read (``build.rebuild``).
- **Health**: attempts, successes and failures are counted in ten-minute Redis buckets (and as
  metrics); when the failure rate over the last hour passes PREWARM_FAILURE_ALERT_RATE (with at
  least PREWARM_ALERT_MIN_ATTEMPTS attempts) an error is logged, at most once per five minutes, and
  the admin's cache-health page shows the alert.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from prometheus_client.core import GaugeMetricFamily, Metric
from redis.exceptions import RedisError

from infra import metrics
from infra.outages import global_key_unanswered
from infra.redis import get_redis
from infra.taskref import TaskRef
from storage import msgkey as clock
from storage.convcache import build, keys, mysql_tier

log = logging.getLogger(__name__)
BUCKET_S = 600
WINDOW_BUCKETS = 6  # the failure rate is taken over the last hour
ALERT_EVERY_S = 300
SADD_CHUNK = 1000
BIG_UPS_RECHECK_S = 30.0
TASK = TaskRef()  # messaging/tasks.py convcache_prewarm


# -- triggers --------------------------------------------------------------------------------
def on_unread_request(uid: int) -> bool:
    """Called on every unread-count request: prewarm a big UP's list (once per window).

    Membership is answered from a per-process copy of the big-UP sets (a few thousand uids,
    reloaded when the daily recompute moved on, checked at most every BIG_UPS_RECHECK_S), so an
    ordinary user's request costs no Redis round trip here."""
    try:
        if uid not in _big_ups():
            return False
        return trigger(uid, reason="unread")
    except RedisError:
        log.warning("convcache: prewarm trigger failed for %s", uid, exc_info=True)
        return False


@dataclass
class _BigUpsCopy:
    version: bytes | str | None = None
    members: frozenset[int] = frozenset()
    checked_at: float = float("-inf")


_copy = _BigUpsCopy()
_copy_lock = threading.Lock()


def _big_ups() -> frozenset[int]:
    with _copy_lock:
        if time.monotonic() - _copy.checked_at < BIG_UPS_RECHECK_S:
            return _copy.members
        _copy.checked_at = time.monotonic()
        try:
            _recheck()
        except RedisError as exc:  # a node that does not answer: the copy serves on, 30 s more
            global_key_unanswered(exc, "big_ups")
        return _copy.members


def _recheck() -> None:
    version = get_redis().hget(keys.BIG_UPS_META, "at")
    if version != _copy.version:
        pipe = get_redis().pipeline(transaction=False)
        for shard in range(keys.BIG_UP_SHARDS):
            pipe.smembers(keys.big_ups(shard))
        _copy.members = frozenset(int(m) for found in pipe.execute() for m in found)
        _copy.version = version


def big_up_cached(uid: int) -> bool | None:
    """Membership from this process's copy with no I/O; None when the copy is due a recheck.
    For callers on an event loop (the unread fast path), which hand anything but False to
    ``on_unread_request`` in a thread."""
    if time.monotonic() - _copy.checked_at >= BIG_UPS_RECHECK_S:
        return None
    return uid in _copy.members


def _forget_big_ups_copy() -> None:
    with _copy_lock:
        _copy.checked_at = float("-inf")


def trigger(owner: int, *, reason: str, claimed: bool = False) -> bool:
    """Enqueue a prewarm unless one was enqueued within the window (``claimed``: marker taken)."""
    marker = keys.prewarm_marker(owner)
    if not claimed and not get_redis().set(marker, 1, nx=True, ex=settings.PREWARM_WINDOW_S):
        return False
    try:
        TASK.task.apply_async(args=(owner,))
    except Exception:
        log.warning("convcache: could not enqueue a prewarm of %s", owner, exc_info=True)
        get_redis().delete(marker)
        return False
    metrics.inc("prewarm_triggered", reason=reason)
    return True


# -- the task --------------------------------------------------------------------------------
def prewarm_owner(owner: int) -> bool:
    """Build the owner's first CONVCACHE_SIZE conversations into HBase and Redis."""
    record("attempt")
    try:
        ok = build.rebuild(owner, redis_too=True)
    except Exception:
        log.warning("convcache: prewarm of %s failed", owner, exc_info=True)
        ok = False
    record("success" if ok else "failure")
    return ok


def compute_big_ups() -> int:
    """Recompute the big-UP sets (the daily beat task); returns how many owners qualify."""
    shards: dict[int, list[int]] = defaultdict(list)
    for owner in mysql_tier.owners_above(settings.BIG_UP_THRESHOLD):
        shards[owner % keys.BIG_UP_SHARDS].append(owner)
    pipe = get_redis().pipeline(transaction=False)
    for shard in range(keys.BIG_UP_SHARDS):
        _replace_set(pipe, keys.big_ups(shard), shards.get(shard, []))
    total = sum(len(m) for m in shards.values())
    pipe.hset(keys.BIG_UPS_META, mapping={"count": total, "at": clock.now_ms()})
    pipe.execute()
    _forget_big_ups_copy()
    return total


def _replace_set(pipe: Any, key: str, members: list[int]) -> None:
    staging = f"{key}:next"  # same hash tag, so RENAME stays within one slot
    pipe.delete(staging)
    for start in range(0, len(members), SADD_CHUNK):
        pipe.sadd(staging, *members[start : start + SADD_CHUNK])
    if members:
        pipe.rename(staging, key)
    else:
        pipe.delete(key)


def big_ups_count() -> int:
    return int(get_redis().hget(keys.BIG_UPS_META, "count") or 0)


def gauges() -> list[Metric]:
    """Read at each /metrics scrape (registered by messaging's AppConfig.ready)."""
    return [
        GaugeMetricFamily(
            metrics.PREFIX + "prewarm_failure_ratio",
            "Prewarm failures / finished, last hour.",
            value=health().failure_rate,
        ),
        GaugeMetricFamily(
            metrics.PREFIX + "big_ups", "Owners in the big-UP sets.", value=big_ups_count()
        ),
    ]


# -- health ----------------------------------------------------------------------------------
FIELDS = {"attempt": "a", "success": "s", "failure": "f"}


@dataclass(frozen=True)
class PrewarmHealth:
    attempts: int
    successes: int
    failures: int
    threshold: float

    @property
    def failure_rate(self) -> float:
        done = self.successes + self.failures
        return self.failures / done if done else 0.0

    @property
    def alerting(self) -> bool:
        enough = self.attempts >= settings.PREWARM_ALERT_MIN_ATTEMPTS
        return enough and self.failure_rate > self.threshold


def record(outcome: str) -> None:
    metrics.inc("prewarm", outcome=outcome)
    try:
        key = keys.prewarm_stats(clock.now_ms() // 1000 // BUCKET_S)
        pipe = get_redis().pipeline(transaction=False)
        pipe.hincrby(key, FIELDS[outcome], 1)
        pipe.expire(key, 2 * WINDOW_BUCKETS * BUCKET_S)
        pipe.execute()
        if outcome == "failure":
            check_alert()
    except RedisError:
        log.warning("convcache: prewarm stats not recorded", exc_info=True)


def health() -> PrewarmHealth:
    """Prewarm outcomes over the last hour (six ten-minute buckets)."""
    now = clock.now_ms() // 1000 // BUCKET_S
    pipe = get_redis().pipeline(transaction=False)
    for bucket in range(now - WINDOW_BUCKETS + 1, now + 1):
        pipe.hmget(keys.prewarm_stats(bucket), ["a", "s", "f"])
    totals = [0, 0, 0]
    for row in pipe.execute():
        totals = [t + int(v or 0) for t, v in zip(totals, row, strict=True)]
    attempts, successes, failures = totals
    return PrewarmHealth(attempts, successes, failures, float(settings.PREWARM_FAILURE_ALERT_RATE))


def check_alert() -> bool:
    state = health()
    if state.alerting and get_redis().set(keys.PREWARM_ALERT, 1, nx=True, ex=ALERT_EVERY_S):
        log.error(
            "convcache: prewarm failure rate %.0f%% over the last hour (%d of %d) exceeds %.0f%%",
            100 * state.failure_rate,
            state.failures,
            state.successes + state.failures,
            100 * state.threshold,
        )
    return state.alerting
