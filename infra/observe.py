"""Latency and outcome metrics of the HTTP and Celery layers, and who may read ``/metrics``.

- ``RequestMetricsMiddleware``: every request's duration into
  ``missive_http_request_duration_seconds{route, method, status}``; ``route`` is the URL pattern
  that matched (``api/v1/users/<str:uid>/unread``), ``unmatched`` for a 404 no pattern
  matched, so a scan of random paths cannot create series. The unread fast path observes its own
  answers under the same route (unread/fastpath.py).
- Celery signals (connected in ``InfraConfig.ready``): each task run's duration into
  ``missive_celery_task_duration_seconds{task, state}``, and ``missive_celery_task_retries_total``
  / ``missive_celery_task_failures_total{task}``.
- ``missive_build_info{version, python, django}`` (1), read at scrape.
- ``/metrics`` answers the addresses in METRICS_ALLOWED_IPS (addresses or networks, default
  loopback only; the address is REMOTE_ADDR: behind a proxy, the proxy's) and any request with
  ``Authorization: Bearer <METRICS_TOKEN>`` when that is set; everyone else gets 403.
"""

from __future__ import annotations

import hmac
import ipaddress
import platform
import time
from collections.abc import Callable, Iterator
from functools import cache
from importlib import metadata
from typing import Any

import django
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from infra import metrics

UNMATCHED = "unmatched"
_started: dict[str, float] = {}  # task id -> perf_counter at task_prerun, in this process


class RequestMetricsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        route = match.route if match is not None and match.route else UNMATCHED
        observe_request(route, request.method or "", response.status_code, started)
        return response


def observe_request(route: str, method: str, status: int, started: float) -> None:
    elapsed = time.perf_counter() - started
    metrics.observe(
        "http_request_duration_seconds", elapsed, route=route, method=method, status=str(status)
    )


# -- Celery ----------------------------------------------------------------------------------
def on_task_start(task_id: str | None = None, **kwargs: Any) -> None:
    if task_id is not None:
        _started[task_id] = time.perf_counter()


def on_task_end(
    task_id: str | None = None, task: Any = None, state: str | None = None, **kwargs: Any
) -> None:
    started = _started.pop(task_id, None) if task_id is not None else None
    if started is not None and task is not None:
        elapsed = time.perf_counter() - started
        metrics.observe("celery_task_duration_seconds", elapsed, task=task.name, state=str(state))


def on_task_retry(sender: Any = None, **kwargs: Any) -> None:
    metrics.inc("celery_task_retries", task=getattr(sender, "name", "unknown"))


def on_task_failure(sender: Any = None, **kwargs: Any) -> None:
    metrics.inc("celery_task_failures", task=getattr(sender, "name", "unknown"))


def connect_celery_signals() -> None:
    from celery import signals

    signals.task_prerun.connect(on_task_start, weak=False, dispatch_uid="missive-task-start")
    signals.task_postrun.connect(on_task_end, weak=False, dispatch_uid="missive-task-end")
    signals.task_retry.connect(on_task_retry, weak=False, dispatch_uid="missive-task-retry")
    signals.task_failure.connect(on_task_failure, weak=False, dispatch_uid="missive-task-fail")


# -- build info --------------------------------------------------------------------------------
@cache
def _version() -> str:
    try:
        return metadata.version("missive")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def read_build_info() -> Iterator[Metric]:
    family = GaugeMetricFamily(
        metrics.PREFIX + "build_info",
        "The running build: 1, labelled with the versions.",
        labels=["version", "python", "django"],
    )
    family.add_metric([_version(), platform.python_version(), django.get_version()], 1)
    yield family


# -- who may read /metrics ---------------------------------------------------------------------
@cache
def _networks(spec: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(part.strip()) for part in spec.split(",") if part.strip())


def metrics_allowed(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    given = request.headers.get("Authorization", "")
    if token and hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        return True
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in network for network in _networks(settings.METRICS_ALLOWED_IPS))


def metrics_refused() -> JsonResponse:
    detail = "Metrics are readable only from METRICS_ALLOWED_IPS or with METRICS_TOKEN."
    return JsonResponse({"error": "forbidden", "detail": detail}, status=403)


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus scrape endpoint (text exposition format), for whom METRICS_ALLOWED_IPS or
    METRICS_TOKEN name (``metrics_allowed``); anyone else gets a 403."""
    if not metrics_allowed(request):
        return metrics_refused()
    # the collector flushes this process's counters first (infra/metrics.py)
    return HttpResponse(generate_latest(metrics.REGISTRY), content_type=CONTENT_TYPE_LATEST)
