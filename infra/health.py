"""Health endpoints for load balancers and orchestrators, at the root (not under ``/api/v1``).

``GET /healthz``: liveness. 200 ``{"status": "ok"}`` whenever the process serves requests; it
touches no store, so a store outage never gets a healthy process restarted.

``GET /readyz``: readiness. Each store this process needs is asked one cheap question, all at
once in threads, each given READY_TIMEOUT_S; the answer therefore arrives within about that
time however many stores hang. 200 ``{"status": "ok", "checks": {...}}`` when all answer, else
503 ``{"status": "unavailable", "checks": {...}}``; each check is ``{"ok": bool, "ms": float}``
plus ``"error"`` (the exception's class, never an address) when it failed.

The stores: ``mariadb`` (or ``sqlite``: the default database), ``replica`` when
DATABASE_REPLICA_URL is set, ``redis`` (every primary of a cluster), ``broker`` (the Celery
broker's Redis: the API enqueues campaign and write-behind tasks), ``hbase`` when the inbox or the
group timelines live there. Neither answer is cached: a probe every few seconds costs a few round
trips.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from functools import cache
from typing import Any

import redis
from django.conf import settings
from django.db import connections
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_safe
from redis.backoff import NoBackoff
from redis.retry import Retry

from infra import hbase
from infra.redis import clustered, ping_all

READY_TIMEOUT_S = 1.0
log = logging.getLogger(__name__)
Check = Callable[[], None]


@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@require_safe
def readyz(request: HttpRequest) -> JsonResponse:
    checks = run_checks(store_checks(), READY_TIMEOUT_S)
    down = [name for name, check in checks.items() if not check["ok"]]
    body = {"status": "unavailable" if down else "ok", "checks": checks}
    response = JsonResponse(body, status=503 if down else 200)
    if down:
        # one WARNING naming the stores, not Django's ERROR with a stack for every probe
        log.warning("readyz: not ready: %s did not answer", ", ".join(down))
        response._has_been_logged = True  # type: ignore[attr-defined]
    return response


def store_checks() -> dict[str, Check]:
    """The stores this process's settings say it needs, by the name the answer gives them."""
    engine = settings.DATABASES["default"]["ENGINE"]
    checks: dict[str, Check] = {"sqlite" if "sqlite" in engine else "mariadb": database("default")}
    if "replica" in settings.DATABASES:
        checks["replica"] = database("replica")
    checks["redis"] = _redis
    checks["broker"] = broker
    if "hbase" in (settings.INBOX_BACKEND, settings.GROUP_TIMELINE_BACKEND):
        checks["hbase"] = _hbase
    return checks


def run_checks(checks: dict[str, Check], timeout_s: float) -> dict[str, dict[str, Any]]:
    """Every check at once; one that has not answered by the deadline counts as down (its thread
    is left to finish on its own: the answer does not wait for it)."""
    pool = ThreadPoolExecutor(max_workers=len(checks), thread_name_prefix="readyz")
    started = time.monotonic()
    futures = {name: pool.submit(_timed, check) for name, check in checks.items()}
    pool.shutdown(wait=False)
    deadline = started + timeout_s
    return {name: _outcome(f, deadline, timeout_s) for name, f in futures.items()}


def _outcome(future: Future[float], deadline: float, timeout_s: float) -> dict[str, Any]:
    try:
        ms = future.result(timeout=max(0.0, deadline - time.monotonic()))
    except FutureTimeout:
        return {"ok": False, "ms": round(timeout_s * 1000, 1), "error": "timeout"}
    except Exception as exc:  # any failure means "not ready"; the class name says which kind
        return {"ok": False, "ms": getattr(exc, "ms", 0.0), "error": type(exc).__name__}
    return {"ok": True, "ms": ms}


def _timed(check: Check) -> float:
    started = time.perf_counter()
    try:
        check()
    except Exception as exc:
        exc.ms = round((time.perf_counter() - started) * 1000, 1)  # type: ignore[attr-defined]
        raise
    return round((time.perf_counter() - started) * 1000, 1)


def database(alias: str) -> Check:
    """A check of one database connection (also a start-up check, infra/checks.py)."""

    def check() -> None:
        # A thread of its own has a connection of its own: given back here (infra/mysql keeps
        # a clean one for the next request; one that failed is closed).
        try:
            with connections[alias].cursor() as cursor:
                cursor.execute("SELECT 1")
        finally:
            connections[alias].close()

    return check


@cache
def _probe_client(url: str) -> redis.Redis:
    """A client that fails fast (no retries, short timeouts), apart from the data path's."""
    return redis.Redis.from_url(
        url,
        socket_timeout=READY_TIMEOUT_S,
        socket_connect_timeout=READY_TIMEOUT_S,
        retry=Retry(NoBackoff(), 1),  # once: a connection a restarted Redis dropped
    )


def _redis() -> None:
    if clustered():
        ping_all()
    else:
        _probe_client(settings.REDIS_URL).ping()


def broker() -> None:
    """PING the Celery broker's Redis (also a start-up check, infra/checks.py)."""
    _probe_client(settings.CELERY_BROKER_URL).ping()


def _hbase() -> None:
    hbase.ping(READY_TIMEOUT_S)
