"""Write rates per API client: a token bucket in Redis per client (``infra/lua/token_bucket.lua``).

Every request that changes something (POST, PUT, DELETE) takes one token from its client's bucket,
``API_WRITE_RATE_PER_S`` refilled per second up to ``API_WRITE_BURST``; an empty bucket answers
``429 rate_limited`` with ``Retry-After`` (the seconds until a token is back), before anything is
stored. Reads are not limited here (the unread fast path answers them in front of Django).
A Redis that does not answer lets the request through: the limiter protects the platform, it must
not be the reason a request fails, nor the reason it is slow. A request waits for its bucket at
most ``API_WRITE_RATE_WAIT_S`` (0.1 s), as Envoy's rate-limit filter waits for its service (20 ms,
then lets the request through); the call goes on, on a thread of this process, and its answer or
its timeout counts in the Redis breaker as any call's. Measured before
(tests/api/test_cluster_freeze.py): a send whose client's bucket sat on a frozen cluster master
paid the full 1-s Redis read timeout for the bucket alone, half of its 2.2-s answer.
``missive_api_writes_unthrottled_total{reason}`` counts the writes let through (``slow``: past
the wait; ``error``: no answer, the breaker open, or Redis refusing).
"""

from __future__ import annotations

import functools
import logging
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from redis.exceptions import RedisError
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from api.auth import ApiPrincipal
from infra import metrics
from infra.logs import warn_sparsely
from infra.luascripts import take_tokens

log = logging.getLogger(__name__)
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
BUCKET_THREADS = 4  # bucket calls in flight per process; past them, calls queue (each <= 1 timeout)


def bucket_key(client_id: int) -> str:
    return f"api:rate:{{c:{client_id}}}"


class ClientWriteThrottle(BaseThrottle):
    def __init__(self) -> None:
        self.wait_ms = 0

    def allow_request(self, request: Request, view: Any) -> bool:
        principal = request.auth
        if request.method not in WRITES or not isinstance(principal, ApiPrincipal):
            return True
        wait_s = settings.API_WRITE_RATE_WAIT_S
        try:
            self.wait_ms = _taken_within(principal.client_id, wait_s)
        except TimeoutError:  # the wait's, not Redis's (a RedisError)
            return _let_through("slow", "did not answer within %.2f s", wait_s)
        except RedisError as exc:
            return _let_through("error", "did not answer (%s)", type(exc).__name__)
        return self.wait_ms == 0

    def wait(self) -> float:
        return float(max(1, math.ceil(self.wait_ms / 1000)))


def _taken_within(client_id: int, wait_s: float) -> int:
    """``_taken``, waited for at most ``wait_s`` (0: inline, as long as Redis's own timeout)."""
    if wait_s <= 0:
        return _taken(client_id)
    return _pool().submit(_taken, client_id).result(timeout=wait_s)


def _taken(client_id: int) -> int:
    """One token from the client's bucket: 0 when taken, else ms until there is one."""
    return take_tokens(
        bucket_key(client_id),
        rate_per_s=settings.API_WRITE_RATE_PER_S,
        capacity=settings.API_WRITE_BURST,
        want=1,
        now_ms=time.time_ns() // 1_000_000,
    )


def _let_through(reason: str, how: str, detail: object) -> bool:
    metrics.inc("api_writes_unthrottled", reason=reason)
    warn_sparsely(log, reason, f"API: the write-rate bucket {how}; requests let through", detail)
    return True


def _pool() -> ThreadPoolExecutor:
    return _pool_of(os.getpid())  # a forked process makes its own: threads do not survive a fork


@functools.cache
def _pool_of(pid: int) -> ThreadPoolExecutor:
    """A plain executor, which queues, not storage.convcache.pools' BoundedPool, which refuses
    work when its threads are busy: with more than BUCKET_THREADS writes at once on a Redis that
    answers, a refused call would let a busy client's writes through unlimited."""
    return ThreadPoolExecutor(BUCKET_THREADS, thread_name_prefix="write-rate-bucket")
