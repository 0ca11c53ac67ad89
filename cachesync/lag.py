"""The follower's lag, for ``/metrics`` (the gauges are read at scrape, in another process).

The follower publishes a sample at most every PUBLISH_EVERY_S into ``cachesync:lag`` (keys.py):
``lag`` = seconds between a transaction's commit on the primary and its changes reaching the
caches, 0 while the binlog is idle (the primary's heartbeat says nothing is pending); ``at`` =
when it was measured. The commit time is the newest of the binlog header's timestamp (whole
seconds) and the newest conversation ``mtime`` in the transaction (milliseconds, stamped just
before commit by the application), so a fan-out's lag is exact to the millisecond and a DBA's
change without an mtime to within a second.

Gauges: ``missive_binlog_lag_seconds`` (the last sample) and
``missive_binlog_lag_sample_age_seconds`` (now - at: a follower that died or hangs leaves an old
sample; alert on either). No sample, no series (no follower ever ran: unknown is not zero).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from redis.exceptions import RedisError

from cachesync import keys
from infra import metrics
from infra.redis import get_redis

log = logging.getLogger(__name__)
PUBLISH_EVERY_S = 0.5
SAMPLE_TTL_S = 7 * 86400


class LagPublisher:
    """Keeps the newest sample and writes it to Redis at most every PUBLISH_EVERY_S."""

    def __init__(self) -> None:
        self.lag = 0.0
        self.published_at = 0.0

    def sample(self, committed_at: float | None, *, force: bool = False) -> None:
        """``committed_at`` of the transaction just applied; None: nothing is pending."""
        now = time.time()
        self.lag = 0.0 if committed_at is None else max(0.0, now - committed_at)
        if force or now - self.published_at >= PUBLISH_EVERY_S:
            self.published_at = now
            _publish(self.lag, now)


def _publish(lag: float, at: float) -> None:
    try:
        get_redis().hset(keys.LAG, mapping={"lag": f"{lag:.3f}", "at": f"{at:.3f}"})
        get_redis().expire(keys.LAG, SAMPLE_TTL_S)
    except RedisError:  # a metric never holds the follower up
        log.debug("cachesync: lag sample not published", exc_info=True)


def read() -> tuple[float, float] | None:
    """(lag, at) of the last sample, or None."""
    raw = get_redis().hgetall(keys.LAG)
    if not raw:
        return None
    values = {k.decode() if isinstance(k, bytes) else k: float(v) for k, v in raw.items()}
    return values["lag"], values["at"]


def gauges() -> Iterator[Metric]:
    found = read()
    lag = GaugeMetricFamily(
        metrics.PREFIX + "binlog_lag_seconds",
        "Seconds from a commit on the MariaDB primary to its changes in the caches (cache_follow).",
    )
    age = GaugeMetricFamily(
        metrics.PREFIX + "binlog_lag_sample_age_seconds",
        "Seconds since cache_follow last published its lag (grows when it stops).",
    )
    if found is not None:
        lag.add_metric([], found[0])
        age.add_metric([], max(0.0, time.time() - found[1]))
    yield lag
    yield age
