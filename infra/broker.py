"""The Celery broker's Redis, as the rest of the platform sees it: a client for reading queue
lengths (metrics) and ``restarted()``, which tells the sweep that the broker came back from a
crash and may have lost queued messages.

The broker persists with AOF ``everysec`` (scripts/services), so a broker killed with -9 keeps
all but its last second of messages; the batch ledger in MySQL says which batches are still owed.
Without this check, a batch whose message was lost waited out BULK_LEASE_S before the sweep
handed it on (64 s in the issue's fault run); with it, the first sweep after the restart
re-enqueues every pending batch (a duplicate is harmless: the lease lets one run, the ledger
counts it once).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TypeVar

import redis
from django.conf import settings

from infra import breakers, timeouts

T = TypeVar("T")

RUN_ID_KEY = "missive:broker:run_id"


@cache
def client() -> redis.Redis:
    """Timeouts from the broker's row of STORE_TIMEOUTS: a frozen broker fails a metrics scrape
    or the sweep's restart check instead of holding it."""
    return redis.Redis.from_url(
        settings.CELERY_BROKER_URL,
        socket_connect_timeout=timeouts.connect_s("broker"),
        socket_timeout=timeouts.read_s("broker"),
    )


def guarded(call: Callable[[], T]) -> T:
    """``call()`` (reads of the broker) through the broker's circuit breaker: while the broker is
    known to be out, a metrics scrape or a campaign page fails its queue lengths at once instead
    of waiting for the read timeout on each (they took 2-3 s a page with Redis frozen)."""
    return breakers.guarded("broker", call)


def restarted() -> bool:
    """True once after each broker start (its run_id changed, or the key recording it is gone)."""
    run_id = str(client().info("server")["run_id"])
    previous = client().getset(RUN_ID_KEY, run_id)
    return previous not in (run_id, run_id.encode())
