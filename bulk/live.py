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
- ``rate``: recipients completed per second over the last seconds, ``{"per_s", "over_s"}``:
  each read of a running campaign adds a sample (time, processed) to ``live:{c:<id>}`` (Redis,
  bulk/keys.py) and keeps the last LIVE_WINDOW_S seconds; the rate is the change of processed
  between the oldest sample kept and now, over ``over_s`` seconds (at least RATE_MIN_S). None
  while the campaign does not run, or before two samples are RATE_MIN_S apart; samples are
  dropped when it stops, so a resumed campaign's rate does not count the pause;
- ``eta_s``: (expected_total - processed) / rate while running, planned or estimated; None
  otherwise (finished, paused, cancelled, no rate yet, no estimate), never 0;
- ``recall``: None, or ``{"batches_done", "batches", "percent"}`` once the campaign's message was
  recalled (bulk/recall.py records each recalled batch);
- ``queue``, ``queued`` (tasks waiting on it) and ``no_worker``: True when the campaign runs
  and no live worker consumes its channel's queue (``infra.metrics.queue_workers``, cached
  for a couple of seconds), None when the broker did not answer.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from redis.exceptions import RedisError

from bulk import keys
from bulk.models import Campaign, CampaignStatus
from bulk.recall import recalled_batches
from bulk.selectors import estimated, eta_running, expected_total, skipped_by_reason
from infra.metrics import queue_lengths, queue_workers
from infra.redis import get_redis
from messaging.models import Message, MessageStatus

LIVE_WINDOW_S = 10.0
RATE_MIN_S = 1.0
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
    rates = _rates(campaigns)
    recalled = _recalled({c.msgkey for c in campaigns if c.msgkey})
    workers = queue_workers() if running else None
    queued = _queued() if running else {}
    return [_body(c, rates.get(c.pk), c.msgkey in recalled, workers, queued) for c in campaigns]


def _body(
    campaign: Campaign,
    rate: dict[str, float] | None,
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
        "rate": rate,
        "eta_s": _eta(campaign, rate),
        "recall": _recall(campaign) if recalled else None,
        "queue": queue,
        "queued": queued.get(queue) if is_running else None,
        "no_worker": _no_worker(is_running, workers, queue),
    }


def _no_worker(is_running: bool, workers: dict[str, int] | None, queue: str) -> bool | None:
    if not is_running:
        return False
    if workers is None:
        return None
    return workers.get(queue, 0) == 0


def _eta(campaign: Campaign, rate: dict[str, float] | None) -> float | None:
    return eta_running(campaign, rate["per_s"]) if rate else None


def _rates(campaigns: Iterable[Campaign]) -> dict[int, dict[str, float] | None]:
    """Add a sample for each running campaign and read its oldest; drop the others' samples."""
    now_ms = int(time.time() * 1000)
    since = now_ms - int(LIVE_WINDOW_S * 1000)
    listed = list(campaigns)
    try:
        pipe = get_redis().pipeline(transaction=False)
        for c in listed:
            key = keys.live_samples(c.pk)
            if c.status != CampaignStatus.RUNNING:
                pipe.delete(key)
                continue
            pipe.zadd(key, {f"{now_ms}:{c.processed}": now_ms})
            pipe.zremrangebyscore(key, "-inf", f"({since}")
            pipe.zrange(key, 0, 0)
            pipe.expire(key, int(LIVE_WINDOW_S * 3))
        replies = iter(pipe.execute())
    except RedisError:
        return {}
    rates: dict[int, dict[str, float] | None] = {}
    for c in listed:
        if c.status != CampaignStatus.RUNNING:
            next(replies)
            continue
        next(replies), next(replies)
        oldest, _ = next(replies), next(replies)
        rates[c.pk] = _rate(oldest[0] if oldest else None, now_ms, c.processed)
    return rates


def _rate(oldest: bytes | str | None, now_ms: int, processed: int) -> dict[str, float] | None:
    if oldest is None:
        return None
    text = oldest.decode() if isinstance(oldest, bytes) else oldest
    at_ms, _, then = text.partition(":")
    over_s = (now_ms - int(at_ms)) / 1000
    if over_s < RATE_MIN_S:
        return None
    return {"per_s": round((processed - int(then)) / over_s, 1), "over_s": round(over_s, 1)}


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
