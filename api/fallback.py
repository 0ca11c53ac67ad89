"""API reads through a primary that does not answer: the replica serves them (infra/dbrouter.py).

A GET (or HEAD) under ``/api/`` that the primary failed (``api.exceptions`` marks the request
when a 503 came from the database not answering) is run once more with the replica standing in
for the primary (``infra.dbrouter.replica_for_primary``), when a replica is configured, answered
its last check and REPLICA_FALLBACK is on. While MariaDB's primary is frozen the conversation
list, history, group history and campaign status then answer 200 from the replica instead of 503;
writes still answer 503. The first such request pays the primary's timeout first (about 2 s);
once the primary's breaker is open, the primary fails at once and the replica answers.

Counted in ``missive_replica_fallback_reads_total{outcome}`` (``served``: the replica answered;
``failed``: it could not either, the 503 stands); one WARNING per process per 10 s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from infra import metrics
from infra.dbrouter import replica_answers, replica_for_primary
from infra.logs import warn_sparsely

log = logging.getLogger(__name__)
SAFE_METHODS = frozenset({"GET", "HEAD"})
PRIMARY_OUT = "missive_primary_out"  # the request attribute api.exceptions sets


class ReplicaFallbackMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not _due(request, response):
            return response
        with replica_for_primary():
            setattr(request, PRIMARY_OUT, False)
            again = self.get_response(request)
        outcome = "served" if again.status_code < 500 else "failed"
        metrics.inc("replica_fallback_reads", outcome=outcome)
        warn_sparsely(
            log,
            "fallback",
            "the database primary did not answer; API reads are served from the replica "
            "(%s %s: %s)",
            request.method,
            request.path,
            outcome,
        )
        return again


def _due(request: HttpRequest, response: HttpResponse) -> bool:
    return (
        response.status_code == 503
        and getattr(request, PRIMARY_OUT, False)
        and request.method in SAFE_METHODS
        and request.path.startswith("/api/")
        and bool(settings.REPLICA_FALLBACK)
        and replica_answers()
    )
