"""An API client's write-rate bucket (api/throttles.py) on a frozen Redis (``scripts/services
freeze redis``: SIGSTOP, connections stay open, nothing answers; thawed in a finally).

A write waits for its bucket at most ``API_WRITE_RATE_WAIT_S`` and then goes on, counted in
``api_writes_unthrottled{reason="slow"}``, instead of waiting Redis's read timeout (5 s in this
process, a worker's: the wait is what ends it, not the timeout). After the thaw the limit holds
again: a client past its burst is refused with 429's ``wait``. Before, such a write waited the
whole read timeout for its bucket (1 s in an API process), half of a 2.2-s send on a frozen
cluster master (BENCHMARKS.md).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from api.auth import ApiPrincipal
from api.throttles import ClientWriteThrottle
from infra import metrics, timeouts
from infra.redis import get_redis
from tests.conftest import services, wait_for

pytestmark = pytest.mark.faults
CLIENT = ApiPrincipal(7_000_123, "bucket-freeze", frozenset({"send"}), is_operator=False)


def write_request() -> Request:
    request = Request(APIRequestFactory().post("/api/v1/messages"))
    request.auth = CLIENT
    return request


def let_through_slow() -> int:
    """``missive_api_writes_unthrottled_total{reason="slow"}``, this process's flushed in."""
    wait_for(metrics.flush, timeout=30)  # after the thaw, once the breaker lets it through
    slow = metrics.series("api_writes_unthrottled", {"reason": "slow"})
    return int(get_redis().hget(metrics.KEY, slow) or 0)


@override_settings(API_WRITE_RATE_PER_S=0.5, API_WRITE_BURST=2, API_WRITE_RATE_WAIT_S=0.1)
def test_a_frozen_bucket_lets_writes_through_at_once_and_limits_them_again_after(db: Any) -> None:
    throttle = ClientWriteThrottle()
    assert throttle.allow_request(write_request(), None)  # the bucket answers: one token of two
    before = let_through_slow()
    services("freeze", "redis")
    try:
        started = time.monotonic()
        allowed = [throttle.allow_request(write_request(), None) for _ in range(3)]
        seconds = time.monotonic() - started
    finally:
        services("thaw", "redis")
    print(f"\n  3 writes on a frozen bucket: {allowed} in {seconds:.2f} s")
    assert allowed == [True, True, True]  # past the burst, but nobody could say so
    assert seconds < timeouts.read_s("redis"), "a write waited for Redis's read timeout"
    # the thawed bucket counts again (once this process's Redis breaker lets calls through):
    # one token was left, and the calls made during the freeze may have taken it
    wait_for(lambda: not throttle.allow_request(write_request(), None), timeout=30)
    assert throttle.wait() >= 1  # the 429's Retry-After
    assert let_through_slow() >= before + 1
