"""The operators' live view of campaigns: what the admin console polls every second or two.

``campaigns_live(campaigns)`` → one body per campaign (its figures read from the row just fetched,
so they are the ledger's exact totals at that moment):

- ``status``, ``pause_reason`` (None unless paused), ``channel``, ``total`` (the planned
  recipients), ``delivered``, ``skipped`` by reason (``quota`` and ``blocked`` are recipients;
  ``invalid`` and ``duplicate`` are lines of the audience that never became recipients, so they
  are not in ``total``), ``failed``, ``processed`` = delivered + skipped quota/blocked + failed;
- ``planned``: False while the planner is still walking the audience: ``total`` is then the
  recipients planned so far and grows, so the console says "so far";
- ``expected_total``: ``total`` once planned; while planning goes on, the audience's size as the
  first plan step counted it (``estimate`` True: a stored list's count or the followers' count),
  so the console shows a percentage and an ETA for the whole run from its first seconds;
- ``percent``: processed / expected_total (0-100; 100 once finished);
- ``rate``: ``{"per_s", "over_s"}``, the rate the API shows too (``bulk.selectors.campaign_rates``:
  the batches the ledger finished in the last 30 s, or the average over the running time while
  too few did); None while the campaign does not run or nothing moved yet;
- ``eta_s``: (expected_total - processed) / ``Rate.for_eta`` (the mean of that rate and the run's
  average) while running, planned or estimated; None
  otherwise (finished, paused, cancelled, no rate yet, no estimate), never 0;
- ``recall``: None, or ``{"batches_done", "batches", "percent"}`` once the campaign's message was
  recalled (bulk/recall.py records each recalled batch);
- ``queue``, ``queued`` (tasks waiting on it) and ``no_worker``: True when the campaign runs
  and no live worker consumes its channel's queue (``infra.metrics.queue_workers``, cached
  for a couple of seconds), None when the broker did not answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.utils import timezone
from redis.exceptions import RedisError

from bulk.models import Campaign, CampaignStatus
from bulk.recall import recalled_batches
from bulk.selectors import (
    Rate,
    campaign_rates,
    estimated,
    eta_running,
    expected_total,
    skipped_by_reason,
)
from infra.metrics import queue_lengths, queue_workers
from messaging.models import Message, MessageStatus

IDS_MAX = 100


def channel_queue(channel: str) -> str:
    return f"bulk.{channel}"


def percent(campaign: Campaign) -> int:
    if campaign.status == CampaignStatus.FINISHED:
        return 100
    expected = expected_total(campaign)
    if not expected:
        return 0
    return min(100, int(100 * campaign.processed / expected))


def campaigns_live(campaigns: Sequence[Campaign]) -> list[dict[str, Any]]:
    running = [c for c in campaigns if c.status == CampaignStatus.RUNNING]
    rates = campaign_rates(running, timezone.now())
    recalled = _recalled({c.msgkey for c in campaigns if c.msgkey})
    workers = queue_workers() if running else None
    queued = _queued() if running else {}
    return [_body(c, rates.get(c.pk), c.msgkey in recalled, workers, queued) for c in campaigns]


def _body(
    campaign: Campaign,
    rate: Rate | None,
    recalled: bool,
    workers: dict[str, int] | None,
    queued: dict[str, int],
) -> dict[str, Any]:
    queue = channel_queue(campaign.channel)
    is_running = campaign.status == CampaignStatus.RUNNING
    return {
        "id": str(campaign.pk),
        "status": campaign.status,
        "pause_reason": campaign.pause_reason or None,
        "channel": campaign.channel,
        "total": campaign.total,
        "planned": campaign.planned,
        "expected_total": expected_total(campaign),
        "estimate": estimated(campaign),
        "delivered": campaign.delivered,
        "skipped": skipped_by_reason(campaign),
        "failed": campaign.failed,
        "processed": campaign.processed,
        "percent": percent(campaign),
        "rate": _rate_body(rate),
        "eta_s": None if rate is None else eta_running(campaign, rate.for_eta),
        "recall": _recall(campaign) if recalled else None,
        "queue": queue,
        "queued": queued.get(queue) if is_running else None,
        "no_worker": _no_worker(is_running, workers, queue),
    }


def _rate_body(rate: Rate | None) -> dict[str, float] | None:
    return (
        None if rate is None else {"per_s": round(rate.per_s, 2), "over_s": round(rate.over_s, 1)}
    )


def _no_worker(is_running: bool, workers: dict[str, int] | None, queue: str) -> bool | None:
    if not is_running:
        return False
    if workers is None:
        return None
    return workers.get(queue, 0) == 0


def _recalled(msgkeys: set[int]) -> set[int]:
    if not msgkeys:
        return set()
    found = Message.objects.filter(msgkey__in=msgkeys, status=MessageStatus.RECALLED)
    return set(found.values_list("msgkey", flat=True))


def _recall(campaign: Campaign) -> dict[str, int] | None:
    try:
        done = recalled_batches(campaign.pk)
    except RedisError:
        return None
    batches = campaign.batches_planned
    share = 100 if not batches else min(100, int(100 * done / batches))
    return {"batches_done": done, "batches": batches, "percent": share}


def _queued() -> dict[str, int]:
    try:
        return queue_lengths()
    except RedisError:
        return {}


def parse_ids(text: str | None) -> list[int]:
    """``ids=1,2,3`` → [1, 2, 3]; ValueError with a sentence for anything else."""
    parts = [p.strip() for p in (text or "").split(",") if p.strip()]
    if not parts:
        raise ValueError("ids is required: campaign ids separated by commas, e.g. ids=1,2,3.")
    if len(parts) > IDS_MAX:
        raise ValueError(f"ids names {len(parts)} campaigns; at most {IDS_MAX} at once.")
    bad = [p for p in parts if not (p.isascii() and p.isdigit() and 0 < int(p) < 1 << 63)]
    if bad:
        raise ValueError(f"ids must be positive integers; not {bad[0][:40]!r}.")
    return list(dict.fromkeys(int(p) for p in parts))
