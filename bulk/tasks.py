"""Celery interface of the bulk app: ids in, one service call each.

Task names carry the channel (``bulk.daily.*`` / ``bulk.priority.*``), and config/celery.py routes
by name, so each channel has its own queue and workers.

Tasks are sent by reference, never by a name in a string. This module imports what its tasks
run (bulk.fanout, bulk.recall) at the top, and nothing imports it back: the code that enqueues
these tasks (bulk.services, bulk.recall) sits below it, declares an ``infra.taskref.TaskRef``, and
BulkConfig.ready binds it to the task object (``PLAN`` and ``RUN_BATCH``: channel → task). The
same convention holds in every app (docs/design.md, "Layers").
"""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import Task, shared_task
from django.conf import settings

from bulk import fanout, recall
from bulk.models import Channel
from infra.outages import backoff_s, store_unavailable

log = logging.getLogger(__name__)


def _run(task: Task, batch_id: int, outage_since: float | None) -> str:
    try:
        outcome = fanout.batch_run(batch_id)
    except Exception as exc:
        if store_unavailable(exc):
            return _wait_out(task, batch_id, outage_since or time.time(), exc)
        raise task.retry(exc=exc, countdown=min(2**task.request.retries, 30)) from exc
    if outcome.retry_in_ms:  # channel out of tokens: come back later, never sleep
        priority = int((task.request.delivery_info or {}).get("priority") or 0)  # keep its place
        task.apply_async((batch_id,), countdown=outcome.retry_in_ms / 1000, priority=priority)
    return outcome.state


def _wait_out(task: Task, batch_id: int, since: float, exc: Exception) -> str:
    """A store did not answer before the batch could be put back: retry with capped exponential
    backoff and jitter until the outage horizon; past it the batch's lease runs out and the
    sweep hands it on (nothing is dropped either way)."""
    if time.time() - since > settings.BULK_OUTAGE_HORIZON_S:
        log.error("bulk: batch %s gave up retrying after the outage horizon: %r", batch_id, exc)
        return "abandoned"
    countdown = backoff_s(task.request.retries, settings.BULK_OUTAGE_BACKOFF_MAX_S)
    log.warning("bulk: batch %s retries in %.1f s, a store is down: %r", batch_id, countdown, exc)
    raise task.retry(
        args=(batch_id,), kwargs={"outage_since": since}, countdown=countdown, max_retries=None
    ) from exc


# Nobody reads a batch's or a plan step's result (the ledger is the truth): ignore_result saves a
# result-backend write per task.
BATCH_TASK: dict[str, Any] = {
    "acks_late": True,
    "ignore_result": True,
    "max_retries": fanout.MAX_ATTEMPTS,
}


@shared_task(name="bulk.daily.run_batch", bind=True, **BATCH_TASK)
def run_batch_daily(self: Task, batch_id: int, outage_since: float | None = None) -> str:
    return _run(self, batch_id, outage_since)


@shared_task(name="bulk.priority.run_batch", bind=True, **BATCH_TASK)
def run_batch_priority(self: Task, batch_id: int, outage_since: float | None = None) -> str:
    return _run(self, batch_id, outage_since)


# A plan step enqueues the next one itself (in the middle of its batches) while its campaign has
# room for more open batches, and completed batches ask for the next wave, so these only call it.
@shared_task(name="bulk.daily.plan", **BATCH_TASK)
def plan_daily(campaign_id: int) -> bool:
    return fanout.campaign_plan_step(campaign_id, capped=True)


@shared_task(name="bulk.priority.plan", **BATCH_TASK)
def plan_priority(campaign_id: int) -> bool:
    return fanout.campaign_plan_step(campaign_id, capped=True)


PLAN: dict[str, Task] = {Channel.DAILY: plan_daily, Channel.PRIORITY: plan_priority}
RUN_BATCH: dict[str, Task] = {Channel.DAILY: run_batch_daily, Channel.PRIORITY: run_batch_priority}


@shared_task(name="bulk.sweep", acks_late=True)
def sweep() -> dict[str, Any]:
    """Beat: re-enqueue batches whose lease expired, start scheduled, resume budget-paused;
    re-send recalls' and refreshes' unfinished batches (``recall.resend_unfinished``,
    ``recall.refreshes_resend``: neither is ever abandoned)."""
    return {
        **fanout.sweep().__dict__,
        "recalls_resent": recall.resend_unfinished(),
        "refreshes_resent": recall.refreshes_resend(),
    }


@shared_task(name="bulk.refresh_batch", bind=True, acks_late=True, max_retries=30)
def refresh_batch(self: Task, batch_id: int) -> int:
    """A campaign's message changed in SQL: show it in one batch's recipients' conversations."""
    try:
        return recall.batch_refresh(batch_id)
    except Exception as exc:
        raise self.retry(exc=exc, countdown=min(2**self.request.retries, 60)) from exc


@shared_task(name="bulk.recall_batch", bind=True, acks_late=True, max_retries=30)
def recall_batch(self: Task, batch_id: int) -> str:
    """A campaign's message was recalled: take it back from one batch's recipients."""
    try:
        outcome = recall.batch_recall(batch_id)
    except Exception as exc:
        raise self.retry(exc=exc, countdown=min(2**self.request.retries, 60)) from exc
    if outcome.state == "busy":  # a live worker holds the batch: back once its lease can end
        recall.enqueue([batch_id], countdown=recall.RETRY_IN_S)
    return outcome.state
