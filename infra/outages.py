"""Which failures mean "a store is unavailable" (wait and retry) rather than a bug or bad data.

Transport errors and timeouts from Redis, HBase (its Thrift gateway and the cluster behind it) and
the database are outages: the API answers 503 with ``Retry-After`` (``api.exceptions``), a
campaign batch is put back with backoff for as long as BULK_OUTAGE_HORIZON_S and never counted
as failed. Anything else (a Lua error, a missing table, an unknown column, bad data) is a fault
that retrying cannot fix.

The database's OperationalError covers both kinds (MySQLdb raises it for a lost connection and for
an unknown column alike), so it is told apart by the server's error code.

Two more kinds wait like an outage:
- a circuit breaker that is open (``infra.breakers.StoreOpen``): the store was just found out;
- Redis refusing writes (``OOM``: maxmemory reached, ``MISCONF``: it cannot persist, say a full
  disk): the remedy is an operator's, as for an outage, and the data is intact, so a batch waits
  instead of failing its recipients. The Redis client that meets one calls the hook this app
  registers (``report_refused_write``, from infra/apps.py), which counts it
  (``missive_redis_refused_writes_total{reason}``) and logs a WARNING saying what to do.

A read that needs a **cluster-wide key** (the counters' epoch, the announcements' version, the
big UPs' version: one key every user's unread read shares) from a Redis Cluster master that does
not answer is served without it rather than refused (``global_key_unanswered``): on a cluster
that key lives on one of the masters, and before, that master's freeze was every user's outage
for unread counts and conversation lists until its replica took over (measured in
tests/api/test_cluster_freeze.py: a 503 after 2.0-4.5 s for users whose own keys were on healthy
masters; now a 200 after ~2 s, then at once).

The classification itself (``store_unavailable``, ``store_down``, ``refused_write``) is in
infra/store_errors.py, below the clients and their breakers; this module adds what needs the
clients: probing the stores, the backoff, the refused-write report.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from html import escape
from typing import NoReturn

from celery import Task
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse

from infra import hbase, metrics
from infra.logs import warn_sparsely
from infra.redis import ping_all
from infra.store_errors import refused_write, unavailable_store
from infra.store_errors import store_unavailable as store_unavailable  # the apps ask it here

REFUSED_WRITE_ADVICE = {
    "OOM": "maxmemory is reached: raise maxmemory or free memory",
    "MISCONF": "it cannot persist (disk full or not writable?): free disk space or fix its dir",
}
log = logging.getLogger(__name__)


def stores_answer(timeout_s: float = 2.0) -> bool:
    """Whether every store a batch writes answers now: the database, Redis, and HBase when the
    inbox or the conversation-list cache lives there."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        ping_all()  # on a cluster, every primary
        if settings.INBOX_BACKEND == "hbase" or settings.CONVCACHE_HBASE:
            hbase.ping(timeout_s)
    except Exception as exc:
        if store_unavailable(exc) or isinstance(exc, OSError):
            return False
        raise
    return True


def backoff_s(attempt: int, cap_s: float) -> float:
    """Exponential backoff, capped, with jitter (half to all of the step): 1, 2, 4 ... cap."""
    step = min(cap_s, 2.0 ** min(attempt, 30))
    return step * random.uniform(0.5, 1.0)


def retry_while_unavailable(task: Task, exc: Exception, cap_s: float) -> NoReturn:
    """A task's run failed with ``exc``: retried with capped backoff (``backoff_s``) for as long
    as the store does not answer, raised as it is when it is a fault."""
    if not store_unavailable(exc):
        raise exc
    raise task.retry(exc=exc, countdown=backoff_s(task.request.retries, cap_s)) from exc


def global_key_unanswered(exc: BaseException, key: str) -> None:
    """A read of the cluster-wide ``key`` (``epoch`` | ``announcements`` | ``big_ups``) failed
    with ``exc``: raise it unless the store did not answer; otherwise count it
    (``missive_redis_global_unanswered_total{key}``) and warn at most every 10 s per process, and
    the caller answers without the key (module docstring)."""
    if not store_unavailable(exc):
        raise exc
    metrics.inc("redis_global_unanswered", key=key)
    warn_sparsely(
        log,
        f"global:{key}",
        "the Redis node holding the %s key does not answer (%r); unread answers are served "
        "without it until it or its replica does",
        key,
        exc,
    )


def report_refused_write(exc: BaseException) -> None:
    """Count a write Redis refused and tell the operator what to do (a WARNING at most every
    10 s per reason and process, ``infra.logs.warn_sparsely``: under a campaign every batch
    meets it)."""
    reason = refused_write(exc)
    if reason is None:
        return
    metrics.inc("redis_refused_writes", reason=reason)
    warn_sparsely(
        log,
        reason,
        "Redis refuses writes: %s (%s); %s. Campaign batches wait and API writes answer "
        "503 until it accepts them again.",
        reason,
        str(exc)[:200],
        REFUSED_WRITE_ADVICE[reason],
    )


PAGE_RETRY_AFTER_S = 5  # as the API's 503s (api/exceptions.py)


class StoreOutageMiddleware:
    """A page outside the API (the admin, its campaign pages) whose store did not answer: 503
    with ``Retry-After`` and one sentence naming the store, never Django's 500. The API's views
    answer their own 503 (``api.exceptions``) and never reach this. Found by calling every admin
    page with each store frozen (SIGSTOP): with MariaDB frozen every admin page answered 500
    (after the 1-s timeout, then at once with the breaker open); with Redis frozen the
    conversation-cache health page did."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        found = unavailable_store(exc)
        if found is None:
            return None
        store, said = found
        warn_sparsely(
            log,
            "page-outage",
            "%s did not answer for %s %s: %s",
            store,
            request.method,
            request.path,
            said,
        )
        return outage_page(store)


def outage_page(store: str) -> HttpResponse:
    sentence = (
        f"Missive could not answer: {store} did not answer. Nothing was changed by this request; "
        f"retry in {PAGE_RETRY_AFTER_S} seconds (your browser's back button keeps what you typed)."
    )
    title = "<!doctype html><title>503 Service Unavailable</title><h1>503</h1>"
    body = f"{title}<p>{escape(sentence)}</p>"
    response = HttpResponse(body, status=503, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(PAGE_RETRY_AFTER_S)
    return response
