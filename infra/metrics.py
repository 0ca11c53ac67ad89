"""Prometheus metrics at ``/metrics``: counters shared by every process, gauges read at scrape.

**Counters across processes are Redis-backed.** Each process (gunicorn worker, Celery worker)
adds increments to an in-memory buffer and flushes it into one Redis hash (``metrics:counters``,
one HINCRBY per series in one pipeline) at most every METRICS_FLUSH_S seconds and at exit; a
scrape flushes its own process first, and reads Redis and the broker side by side
(``side_by_side``). The hot path pays a dict update, never a round trip: a daemon thread
per process flushes (``_Flusher``), so a frozen Redis master holding the hash costs no request
its timeout. Measured before (tests/api/test_cluster_freeze.py): one request a second paid the
flush's 1-s timeout inline, e.g. a send during a master's freeze, 1 s for its write-rate bucket
and 1 s for the flush; and a quiet process's last increments waited for its next one. One
scrape sees every process of every host; nothing needs a per-host directory cleaned at restart
(prometheus-client's multiprocess mode would). A process killed mid-interval loses at most that
interval's increments. A forked child drops the buffer it inherited (its parent flushes it).

Series, each prefixed ``missive_``:
  convcache_reads_total{tier, result}   conversation-list reads: tier redis | hbase | mysql,
                                        result hit | miss | beyond | error | saturated
  convcache_hedges_total                HBase slower than the hedge delay: MySQL asked too
  convcache_hedge_wins_total{winner}    which tier answered a hedged read first
  convcache_dropped_total               owner lists a push dropped rather than guess
  prewarm_total{outcome}                attempt | success | failure
  prewarm_triggered_total{reason}       unread | burst
  fanout_recipients_total               messages written into timelines (rate() = fan-out rate)
  announcements_published_total
  bulk_outage_waits_total               batches put back to wait out a store outage
  bulk_tasks_left_to_sweep_total{what}  a campaign's plan or resume the broker did not take from
                                        the API; bulk.sweep sends it again (bulk/services.py)
  counters_epochs_total                 the counters' epoch moved on: Redis restarted (or is new)
  unread_repairs_total                  users whose counters were rebuilt lazily after that
  unread_repairs_deferred_total         repairs put off: a store they read did not answer
  replica_fallback_reads_total{outcome} API reads the primary failed, run on the replica
                                        (api/fallback.py): served | failed
  redis_refused_writes_total{reason}    writes Redis refused: OOM (maxmemory) | MISCONF (disk)
  api_writes_unthrottled_total{reason}  API writes let through, their write-rate bucket unanswered:
                                        slow (past API_WRITE_RATE_WAIT_S) | error (api/throttles.py)
  redis_global_unanswered_total{key}    unread reads served without a cluster-wide key whose node
                                        did not answer: epoch | announcements | big_ups
                                        (infra/outages.py)
  live_group_pushes_parked_total{outcome}  group pushes the broker did not take (live/tasks.py):
                                        parked (on Redis, the beat sends them) | lost
  store_breaker_state{breaker}          gauge: this process's circuit breaker per store, 0 closed,
                                        1 half-open, 2 open (infra/breakers.py)
  celery_task_retries_total{task}       task runs that ended in a retry (infra/observe.py)
  celery_task_failures_total{task}      task runs that raised
  http_request_duration_seconds{route, method, status}   histogram (infra/observe.py): route is
                                        the URL pattern (``api/v1/campaigns/<str:campaign_id>``)
  celery_task_duration_seconds{task, state}              histogram: state SUCCESS|FAILURE|RETRY
  bulk_batch_stage_seconds{stage}       histogram: each stage of every completed campaign batch
                                        (load, tokens, lease, ..., ledger: bulk/profile.py)
  build_info{version, python, django}   gauge, always 1
  celery_queue_length{queue}            gauge: LLEN of the queue on the broker (all priorities)
  celery_queue_workers{queue}           gauge: live workers consuming the queue (``queue_workers``)
  prewarm_failure_ratio                 gauge: prewarm failures / finished, last hour (messaging)
  big_ups                               gauge: owners in the big-UP sets (messaging)
  event_stream_lag{stream, group}       gauge: delivery-stream entries not yet delivered to the
                                        consumer group (XINFO lag; storage/events.py); every
                                        group found, none: no series
  event_stream_trimmed_unread_total{stream, group}   entries trimmed (stream cap) before the
                                        group read them: events a lagging gateway lost
"""

from __future__ import annotations

import atexit
import contextvars
import functools
import logging
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from celery import current_app as app
from django.conf import settings
from django.db import connections
from kombu.exceptions import OperationalError
from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from redis.exceptions import RedisError

from infra import broker
from infra.logs import warn_sparsely
from infra.redis import get_redis
from infra.store_errors import store_unavailable

log = logging.getLogger(__name__)
KEY = "metrics:counters"
PREFIX = "missive_"
# kombu's Redis transport keeps each priority level of a queue in its own list
PRIORITY_SUFFIXES = ("", "\x06\x163", "\x06\x166", "\x06\x169")

COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "convcache_reads": ("Conversation-list reads by tier and result.", ("tier", "result")),
    "convcache_hedges": ("Reads where HBase was slower than the hedge delay.", ()),
    "convcache_hedge_wins": ("Which tier answered a hedged read first.", ("winner",)),
    "convcache_dropped": ("Owner lists a push dropped rather than guess.", ()),
    "prewarm": ("Prewarm attempts and outcomes.", ("outcome",)),
    "prewarm_triggered": ("Prewarms enqueued, by trigger.", ("reason",)),
    "fanout_recipients": ("Messages written into recipients' timelines.", ()),
    "announcements_published": ("Announcements published to all users.", ()),
    "bulk_outage_waits": ("Batches put back because a store did not answer.", ()),
    "bulk_tasks_left_to_sweep": (
        "Campaign tasks (plan, resume) the broker did not take; bulk.sweep sends them again.",
        ("what",),
    ),
    "counters_epochs": ("Times the unread counters' epoch moved on (Redis restarted).", ()),
    "unread_repairs": ("Users whose unread counters were rebuilt after Redis restarted.", ()),
    "unread_repairs_deferred": (
        "Unread repairs (counters, group positions) put off: a store they read did not answer.",
        (),
    ),
    "replica_fallback_reads": (
        "API reads the primary failed, run again on the replica: served or failed.",
        ("outcome",),
    ),
    # gray failures (infra/outages.py): Redis answered OOM (maxmemory) or MISCONF (cannot persist)
    "redis_refused_writes": ("Writes Redis refused: OOM or MISCONF.", ("reason",)),
    "api_writes_unthrottled": (
        "API writes let through because their client's write-rate bucket did not answer: slow "
        "(past API_WRITE_RATE_WAIT_S) or error.",
        ("reason",),
    ),
    "redis_global_unanswered": (
        "Unread reads served without a cluster-wide key (epoch, announcements, big_ups) whose "
        "node did not answer.",
        ("key",),
    ),
    "delivery_events_deferred": (
        "Sends accepted while the Redis node of their delivery-event stream did not answer: "
        "the events are published by a task once it does.",
        ("kind",),
    ),
    "live_group_pushes_parked": (
        "Group pushes the broker did not take: parked on Redis for the beat to send, or lost.",
        ("outcome",),
    ),
    # Celery task outcomes per task (infra/observe.py)
    "celery_task_retries": ("Task runs that ended in a retry.", ("task",)),
    "celery_task_failures": ("Task runs that raised.", ("task",)),
}


def queues() -> tuple[str, ...]:
    """The broker queues the project's Celery app declares (``config/celery.py``), read from the
    app rather than imported, so this module imports nothing above it."""
    return tuple(queue.name for queue in app.conf.task_queues or ())


# Gauges are read at scrape time by the app that owns them: each registers a reader here from its
# AppConfig.ready (``register_gauges``), so this module imports no app.
GaugeReader = Callable[[], Iterable[Metric]]
GAUGES: list[GaugeReader] = []


def register_gauges(read: GaugeReader) -> None:
    if read not in GAUGES:
        GAUGES.append(read)


class _Buffer:
    """The increments not yet flushed (``lock``), and ``flushing``: one flush at a time, so a
    flush() returns only after one the thread had begun, and a read after it sees every count."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.flushing = threading.Lock()
        self.pending: dict[str, int] = defaultdict(int)


class _Flusher:
    """This process's flushing thread, started by the first increment (in a forked child too:
    threads do not survive a fork). It wakes every 0.1 s and flushes once METRICS_FLUSH_S has
    passed since its last flush (read each time: a test may change it); with
    METRICS_FLUSH_S = 0 the increments flush inline instead (tests that read at once)."""

    def __init__(self) -> None:
        self.pid = 0

    def ensure(self) -> None:
        if self.pid != os.getpid():
            self.pid = os.getpid()
            threading.Thread(target=self._run, name="metrics-flush", daemon=True).start()

    def _run(self) -> None:
        flushed = time.monotonic()
        while True:
            time.sleep(0.1)
            if time.monotonic() - flushed < settings.METRICS_FLUSH_S:
                continue
            try:
                flush()
            except Exception:  # the thread outlives any one flush
                log.exception("metrics: flush failed")
            flushed = time.monotonic()


_buffer, _flusher = _Buffer(), _Flusher()


def _forked() -> None:
    """A child forked while another thread held the lock would wait on it for ever; and what
    the buffer held is the parent's to flush."""
    global _buffer
    _buffer = _Buffer()


os.register_at_fork(after_in_child=_forked)


def _added() -> None:
    """After an increment: flush now (METRICS_FLUSH_S = 0) or make sure the thread runs."""
    if settings.METRICS_FLUSH_S <= 0:
        flush()
    else:
        _flusher.ensure()


def series(name: str, labels: dict[str, str]) -> str:
    names = COUNTERS[name][1]
    return name + "|" + ",".join(f"{k}={labels[k]}" for k in names)


def inc(name: str, n: int = 1, **labels: str) -> None:
    """Count ``n`` on a counter series (flushed to Redis at most every METRICS_FLUSH_S)."""
    key = series(name, labels)
    with _buffer.lock:
        _buffer.pending[key] += n
    _added()


def flush() -> bool:
    """Adds this process's pending increments to the Redis hash; False when that Redis did not
    answer (they are kept for the next flush), True otherwise. Returns after a flush the thread
    had under way, so a read that follows sees what was counted before the call."""
    buffer = _buffer
    with buffer.flushing:
        with buffer.lock:
            pending = dict(buffer.pending)
            buffer.pending.clear()
        return _write(buffer, pending) if pending else True


def _write(buffer: _Buffer, pending: dict[str, int]) -> bool:
    try:
        pipe = get_redis().pipeline(transaction=False)
        for key, n in pending.items():
            pipe.hincrby(KEY, key, n)
        pipe.execute()
    except RedisError as exc:
        warn_sparsely(log, "flush", "metrics: flush to Redis failed; %d series kept", len(pending))
        with buffer.lock:
            for key, n in pending.items():
                buffer.pending[key] += n
        return not store_unavailable(exc)
    return True


atexit.register(flush)


# -- exposition ------------------------------------------------------------------------------
def queue_lengths() -> dict[str, int]:
    pipe = broker.client().pipeline(transaction=False)
    for queue in queues():
        for suffix in PRIORITY_SUFFIXES:
            pipe.llen(queue + suffix)
    counts = iter(broker.guarded(pipe.execute))
    return {q: sum(next(counts) for _ in PRIORITY_SUFFIXES) for q in queues()}


def _stored() -> dict[Any, Any] | None:
    """The counters' and histograms' Redis hash; None when that Redis does not answer: the
    scrape then answers with the gauges alone (each store's breaker state among them: what an
    operator reads during that outage) and ``missive_metrics_counters_up`` 0. Before, a scrape
    with Redis frozen answered 500."""
    try:
        return dict(get_redis().hgetall(KEY))
    except RedisError as exc:
        log.warning("metrics: the counters' Redis did not answer a scrape: %r", exc)
        return None


def _read_or_skip(read: GaugeReader) -> list[Metric]:
    """An app's gauges; none when the store they read did not answer (the rest of the scrape
    still answers)."""
    try:
        return list(read())
    except Exception as exc:
        if not store_unavailable(exc):
            raise
        log.warning(
            "metrics: gauges %s skipped, a store did not answer: %r", read.__qualname__, exc
        )
        return []


def _queue_lengths_or_none() -> dict[str, int] | None:
    """``queue_lengths``; None (no sample: unknown is not zero) when the broker did not answer."""
    try:
        return queue_lengths()
    except (OSError, RedisError, OperationalError):
        return None


WORKERS_CACHE_S = 2.0  # how long one answer about the workers is reused in this process
WORKERS_TIMEOUT_S = 0.5  # how long a broadcast waits for the workers' replies


class _WorkersAnswer:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.at = -WORKERS_CACHE_S
        self.counts: dict[str, int] | None = None


_workers = _WorkersAnswer()


def queue_workers() -> dict[str, int] | None:
    """Live workers consuming each queue: every worker answers a broadcast (``active_queues``)
    within WORKERS_TIMEOUT_S; the answer is reused for WORKERS_CACHE_S. None: the broker did not
    answer (unknown, which is not "no worker")."""
    with _workers.lock:
        if time.monotonic() - _workers.at < WORKERS_CACHE_S:
            return _workers.counts
        counts: dict[str, int] | None = None
        try:
            broker.client().ping()  # fails at once when it is down (kombu would retry for ~6 s)
            replies = app.control.inspect(timeout=WORKERS_TIMEOUT_S).active_queues() or {}
            counts = _consumers(replies)
        except (OSError, RedisError, OperationalError):
            pass
        _workers.at, _workers.counts = time.monotonic(), counts
        return counts


def _consumers(replies: Mapping[str, Iterable[Mapping[str, Any]] | None]) -> dict[str, int]:
    """{worker: [its queues]} → {queue: how many workers consume it}."""
    counts = dict.fromkeys(queues(), 0)
    for consumed in replies.values():
        for name in {q.get("name") for q in consumed or []}:
            if name in counts:
                counts[name] += 1
    return counts


T = TypeVar("T")


def side_by_side(reads: Sequence[Callable[[], T]]) -> list[T]:
    """``reads``' results, each read on a thread of its own (with this context: the request id
    in its log lines), so that a scrape waits for its slowest store once, not for each read in
    turn. Measured on the production server with Redis (data and broker) frozen
    (tests/api/test_pages_freezes.py): one after the other, the first scrape of the outage took
    3.0 s, three reads each paying Redis's 1-s timeout before its breaker opened."""
    if len(reads) < 2:
        return [read() for read in reads]
    with ThreadPoolExecutor(len(reads), thread_name_prefix="metrics-scrape") as pool:
        futures = [pool.submit(contextvars.copy_context().run, _closing, read) for read in reads]
        return [future.result() for future in futures]


def _closing(read: Callable[[], T]) -> T:
    try:
        return read()
    finally:
        connections.close_all()  # this thread's own, if a reader opened one


def _flushed_and_stored() -> dict[Any, Any] | None:
    """This process's increments flushed, then the hash read (None when Redis did not answer
    the flush: the read would only wait for the same timeout again)."""
    return _stored() if flush() else None


def _broker_gauges() -> tuple[dict[str, int] | None, dict[str, int] | None]:
    """(queue lengths, workers per queue); the workers not asked when the broker did not answer
    the lengths (a second timeout in the same scrape). Either None: no sample, unknown is not
    zero (an alert on "no worker" must not fire because the broker was slow)."""
    lengths = _queue_lengths_or_none()
    return lengths, (queue_workers() if lengths is not None else None)


class MissiveCollector:
    def collect(self) -> Iterator[Metric]:
        reads: list[Callable[[], Any]] = [_flushed_and_stored, _broker_gauges]
        reads += [functools.partial(_read_or_skip, read) for read in GAUGES]
        stored, (lengths, workers), *gauges = side_by_side(reads)
        up = GaugeMetricFamily(
            PREFIX + "metrics_counters_up",
            "1 when the counters' Redis answered this scrape; 0: counters and histograms are "
            "missing from it.",
        )
        up.add_metric([], 0 if stored is None else 1)
        yield up
        yield from self._counters(stored or {})
        yield from histogram_families(stored or {})
        yield from self._queues(lengths, workers)
        for metrics in gauges:
            yield from metrics

    def _counters(self, stored: Mapping[Any, Any]) -> Iterator[Metric]:
        families = {
            name: CounterMetricFamily(PREFIX + name, help_text, labels=list(labels))
            for name, (help_text, labels) in COUNTERS.items()
        }
        for raw_key, value in stored.items():
            text = raw_key.decode() if isinstance(raw_key, bytes) else str(raw_key)
            name, _, labels = text.partition("|")
            if name in families:
                values = [pair.partition("=")[2] for pair in labels.split(",")] if labels else []
                families[name].add_metric(values, float(value))
        yield from families.values()

    def _queues(
        self, lengths: dict[str, int] | None, workers: dict[str, int] | None
    ) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            PREFIX + "celery_queue_length", "Tasks waiting on the broker.", labels=["queue"]
        )
        for queue, length in (lengths or {}).items():
            family.add_metric([queue], length)
        yield family
        family = GaugeMetricFamily(
            PREFIX + "celery_queue_workers", "Live workers consuming the queue.", labels=["queue"]
        )
        for queue, n in (workers or {}).items():
            family.add_metric([queue], n)
        yield family


# -- histograms (durations), kept like the counters -----------------------------------------
# Each observation adds 1 to the series of the first bucket that holds it, and its duration in
# whole microseconds to the series' sum: integer increments in the same buffer and Redis hash
# as the counters (``h|<name>|<labels>|<le>`` and ``h|<name>|<labels>|sum_us``), summed into
# Prometheus's cumulative buckets at scrape.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
HISTOGRAMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "http_request_duration_seconds": (
        "HTTP request duration by URL pattern, method and status.",
        ("route", "method", "status"),
    ),
    "celery_task_duration_seconds": (
        "Celery task run duration by task and state.",
        ("task", "state"),
    ),
    "bulk_batch_stage_seconds": (
        "Wall time of each stage of a completed campaign batch (bulk/profile.py lists them).",
        ("stage",),
    ),
}
_UNSAFE = str.maketrans({",": "_", "=": "_", "|": "_"})  # the series key's own separators


def observe(name: str, seconds: float, **labels: str) -> None:
    """One duration on histogram ``name`` (flushed with the counters)."""
    names = HISTOGRAMS[name][1]
    base = f"h|{name}|" + ",".join(f"{k}={str(labels[k]).translate(_UNSAFE)}" for k in names)
    le = next((str(b) for b in DURATION_BUCKETS if seconds <= b), "+Inf")
    with _buffer.lock:
        _buffer.pending[f"{base}|{le}"] += 1
        _buffer.pending[f"{base}|sum_us"] += round(seconds * 1e6)
    _added()


def histogram_families(stored: Mapping[Any, Any]) -> Iterator[Metric]:
    found: dict[str, dict[str, dict[str, int]]] = {name: {} for name in HISTOGRAMS}
    for raw_key, value in stored.items():
        text = raw_key.decode() if isinstance(raw_key, bytes) else str(raw_key)
        kind, _, rest = text.partition("|")
        name, _, rest = rest.partition("|")
        labels, _, le = rest.rpartition("|")
        if kind == "h" and name in found:
            found[name].setdefault(labels, {})[le] = int(value)
    for name, series in found.items():
        help_text, label_names = HISTOGRAMS[name]
        family = HistogramMetricFamily(PREFIX + name, help_text, labels=list(label_names))
        for labels, counts in series.items():
            values = [pair.partition("=")[2] for pair in labels.split(",")]
            family.add_metric(values, _cumulative(counts), counts.get("sum_us", 0) / 1e6)
        yield family


def _cumulative(counts: Mapping[str, int]) -> list[tuple[str, float]]:
    total, buckets = 0, []
    for le in (*(str(b) for b in DURATION_BUCKETS), "+Inf"):
        total += counts.get(le, 0)
        buckets.append((le, float(total)))
    return buckets


REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(MissiveCollector())
