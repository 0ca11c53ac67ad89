"""Prometheus metrics at ``/metrics``: counters shared by every process, gauges read at scrape.

**Counters across processes are Redis-backed.** Each process (gunicorn worker, Celery worker)
adds increments to an in-memory buffer and flushes it into one Redis hash (``metrics:counters``,
one HINCRBY per series in one pipeline) at most every METRICS_FLUSH_S seconds and at exit; a
scrape flushes its own process first. The hot path pays a dict update, not a round trip; one
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
  counters_epochs_total                 the counters' epoch moved on: Redis restarted (or is new)
  unread_repairs_total                  users whose counters were rebuilt lazily after that
  celery_queue_length{queue}            gauge: LLEN of the queue on the broker (all priorities)
  celery_queue_workers{queue}           gauge: live workers consuming the queue (``queue_workers``)
  prewarm_failure_ratio                 gauge: prewarm failures / finished, last hour (messaging)
  big_ups                               gauge: owners in the big-UP sets (messaging)
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from kombu.exceptions import OperationalError
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from redis.exceptions import RedisError

from config import broker
from config.celery import QUEUES, app
from config.redis import get_redis

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
    "counters_epochs": ("Times the unread counters' epoch moved on (Redis restarted).", ()),
    "unread_repairs": ("Users whose unread counters were rebuilt after Redis restarted.", ()),
}


# Gauges are read at scrape time by the app that owns them: each registers a reader here from its
# AppConfig.ready (``register_gauges``), so this module imports no app.
GaugeReader = Callable[[], Iterable[Metric]]
GAUGES: list[GaugeReader] = []


def register_gauges(read: GaugeReader) -> None:
    if read not in GAUGES:
        GAUGES.append(read)


class _Buffer:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: dict[str, int] = defaultdict(int)
        self.flushed_at = time.monotonic()
        self.pid = os.getpid()


_buffer = _Buffer()


def series(name: str, labels: dict[str, str]) -> str:
    names = COUNTERS[name][1]
    return name + "|" + ",".join(f"{k}={labels[k]}" for k in names)


def inc(name: str, n: int = 1, **labels: str) -> None:
    """Count ``n`` on a counter series (flushed to Redis at most every METRICS_FLUSH_S)."""
    key = series(name, labels)
    with _buffer.lock:
        if _buffer.pid != os.getpid():  # a forked child: the parent flushes what it inherited
            _buffer.pending.clear()
            _buffer.pid = os.getpid()
        _buffer.pending[key] += n
        due = time.monotonic() - _buffer.flushed_at >= settings.METRICS_FLUSH_S
    if due:
        flush()


def flush() -> None:
    with _buffer.lock:
        if _buffer.pid != os.getpid():
            _buffer.pending.clear()
            _buffer.pid = os.getpid()
        pending = dict(_buffer.pending)
        _buffer.pending.clear()
        _buffer.flushed_at = time.monotonic()
    if not pending:
        return
    try:
        pipe = get_redis().pipeline(transaction=False)
        for key, n in pending.items():
            pipe.hincrby(KEY, key, n)
        pipe.execute()
    except RedisError:
        log.warning("metrics: flush to Redis failed; %d series kept", len(pending))
        with _buffer.lock:
            for key, n in pending.items():
                _buffer.pending[key] += n


atexit.register(flush)


# -- exposition ------------------------------------------------------------------------------
def queue_lengths() -> dict[str, int]:
    pipe = broker.client().pipeline(transaction=False)
    for queue in QUEUES:
        for suffix in PRIORITY_SUFFIXES:
            pipe.llen(queue + suffix)
    counts = iter(pipe.execute())
    return {q: sum(next(counts) for _ in PRIORITY_SUFFIXES) for q in QUEUES}


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
    counts = dict.fromkeys(QUEUES, 0)
    for queues in replies.values():
        for name in {q.get("name") for q in queues or []}:
            if name in counts:
                counts[name] += 1
    return counts


class MissiveCollector:
    def collect(self) -> Iterator[Metric]:
        yield from self._counters()
        yield from self._gauges()

    def _counters(self) -> Iterator[Metric]:
        families = {
            name: CounterMetricFamily(PREFIX + name, help_text, labels=list(labels))
            for name, (help_text, labels) in COUNTERS.items()
        }
        for raw_key, value in get_redis().hgetall(KEY).items():
            text = raw_key.decode() if isinstance(raw_key, bytes) else str(raw_key)
            name, _, labels = text.partition("|")
            if name in families:
                values = [pair.partition("=")[2] for pair in labels.split(",")] if labels else []
                families[name].add_metric(values, float(value))
        yield from families.values()

    def _gauges(self) -> Iterator[Metric]:
        queues = GaugeMetricFamily(
            PREFIX + "celery_queue_length", "Tasks waiting on the broker.", labels=["queue"]
        )
        for queue, length in queue_lengths().items():
            queues.add_metric([queue], length)
        yield queues
        counts = queue_workers()
        if counts is not None:
            workers = GaugeMetricFamily(
                PREFIX + "celery_queue_workers",
                "Live workers consuming the queue.",
                labels=["queue"],
            )
            for queue, n in counts.items():
                workers.add_metric([queue], n)
            yield workers
        for read in GAUGES:
            yield from read()


REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(MissiveCollector())


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus scrape endpoint (text exposition format)."""
    flush()
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
