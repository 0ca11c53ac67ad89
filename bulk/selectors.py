"""Reads of the bulk app: they never write. The writes are in bulk.services (what a client or an
operator asks) and bulk.fanout (what the workers do).

- ``campaign_progress(campaign)``: the campaign body of the API (API.md ``GET /campaigns/{id}``);
  ``rate_per_s`` (the recent rate) and ``eta_s`` (remaining / ``Rate.for_eta``) come from
  ``campaign_rates`` (below); ``eta_s`` is None while it cannot be known (not planned, not
  running, no rate yet).
- ``campaign_rates(campaigns, now)``: the one rate the API, the admin console and the CLI show.
  While a campaign runs: the recipients of the batches the ledger finished in the last
  RATE_WINDOW_S seconds (since the start or the last resume if that is later), over that window.
  With fewer than RATE_MIN_BATCHES batches in it (a slow or throttled campaign, or its first
  seconds), and for a campaign that does not run: processed / running time, pauses left out.
  The ledger is the source, so the figure does not depend on who polls or how often.
- ``campaign_page``: a keyset page of a client's campaigns, newest first (``next_cursor`` is the
  last id shown; the next page holds smaller ids).
- ``campaigns_for_client`` / ``campaign_for_client`` / ``audience_for_client``: a client sees the
  campaigns of its own senders and the audiences it uploaded; anything else is NotFound (404).
- ``campaign_for_idempotency_key``: the campaign a client already created under a key, if any.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from api.errors import NotFound
from api.models import ApiClient, ApiClientSender
from bulk.models import Audience, Campaign, CampaignBatch, CampaignStatus

RATE_WINDOW_S = 30.0
"""The ETA divides what is left by the mean of the last 30 s's rate and the whole run's average.
Replayed on the per-second progress of four 10M-recipient campaigns (two recordings, both inbox
backends: ``scripts/eta_replay.py``, BENCHMARKS.md), that mean was off by at most 22% at 10, 50
or 90% done (median over every sample 8.4%), the run's average alone by 27% (8.7%), the last
30 s alone by 36% (11.2%), the last 10 s (the console's former rate) by 29% (13.4%). Over nine
later 10M runs (7 Dec) the mean was within 10% at 14 of the 15 marks of the five whose rate
held (worst +13%) and off by up to 23% in the four whose rate fell late; the run's average
alone did about as well in the first five (worst 13%) and worse in the others (25%)."""
RATE_MIN_BATCHES = 3
RATE_MIN_S = 1.0


# -- progress --------------------------------------------------------------------------------
def campaign_progress(campaign: Campaign, now: datetime | None = None) -> dict[str, Any]:
    found = campaign_rates([campaign], now or timezone.now())[campaign.pk]
    return {
        "id": campaign.pk,
        "name": campaign.name,
        "sender_uid": campaign.sender_uid,
        "msgkey": campaign.msgkey,
        "status": campaign.status,
        "channel": campaign.channel,
        "audience": {"type": campaign.audience_type, "id": campaign.audience_id},
        "total": campaign.total,
        "delivered": campaign.delivered,
        "skipped": skipped_by_reason(campaign),
        "failed": campaign.failed,
        "rate_per_s": round(found.per_s, 2) if found else 0.0,
        "eta_s": _eta(campaign, found.for_eta if found else 0.0),
        "scheduled_at": campaign.scheduled_at,
        "created_at": campaign.created_at,
        "started_at": campaign.started_at,
        "finished_at": campaign.finished_at,
        "pause_reason": campaign.pause_reason or None,
    }


@dataclass(frozen=True)
class Rate:
    """``per_s`` over the last ``over_s`` seconds; ``for_eta``: the rate the ETA divides by, the
    mean of ``per_s`` and the average over the whole running time (RATE_WINDOW_S says why)."""

    per_s: float
    over_s: float
    for_eta: float


def campaign_rates(campaigns: Sequence[Campaign], now: datetime) -> dict[int, Rate | None]:
    """Each campaign's rate (module docstring); None while nothing is processed, or a running
    campaign ran for less than RATE_MIN_S. One ledger query for all the running ones."""
    starts = {c.pk: _window_start(c, now) for c in campaigns if c.status == CampaignStatus.RUNNING}
    recent = _recent_batches(starts)
    return {c.pk: _rate(c, recent.get(c.pk, []), starts.get(c.pk), now) for c in campaigns}


def _window_start(campaign: Campaign, now: datetime) -> datetime:
    starts = [now - timedelta(seconds=RATE_WINDOW_S), campaign.started_at, campaign.resumed_at]
    return max(s for s in starts if s is not None)


def _recent_batches(starts: dict[int, datetime]) -> dict[int, list[int]]:
    """The processed count of each batch finished inside each campaign's window (its start)."""
    if not starts:
        return {}
    rows = CampaignBatch.objects.filter(
        campaign_id__in=starts, finished_at__gt=min(starts.values())
    ).values_list(
        "campaign_id", "finished_at", "delivered", "skipped_quota", "skipped_blocked", "failed"
    )
    found: dict[int, list[int]] = defaultdict(list)
    for campaign_id, finished_at, *counts in rows:
        if finished_at is not None and finished_at > starts[campaign_id]:
            found[campaign_id].append(sum(counts))
    return found


def _rate(
    campaign: Campaign, recent: list[int], start: datetime | None, now: datetime
) -> Rate | None:
    running = campaign.running_s(now)
    settled = campaign.status != CampaignStatus.RUNNING  # a finished run's rate may be short
    if running <= 0 or not campaign.processed or (running < RATE_MIN_S and not settled):
        return None
    average = campaign.processed / running
    if start is None or len(recent) < RATE_MIN_BATCHES:
        return Rate(average, running, average)
    over = (now - start).total_seconds()
    per_s = sum(recent) / over
    return Rate(per_s, over, (per_s + average) / 2)


def skipped_by_reason(campaign: Campaign) -> dict[str, int]:
    return {
        "quota": campaign.skipped_quota,
        "blocked": campaign.skipped_blocked,
        "invalid": campaign.skipped_invalid,
        "duplicate": campaign.skipped_duplicate,
    }


def expected_total(campaign: Campaign) -> int:
    """The recipients the campaign will have: its total once planned; while planning goes on,
    the larger of what is planned so far and the audience's estimate (0: none yet)."""
    if campaign.planned:
        return campaign.total
    return max(campaign.total, campaign.audience_estimate or 0)


def estimated(campaign: Campaign) -> bool:
    """Planning goes on and the audience's size is estimated, not yet counted by the planner."""
    return not campaign.planned and bool(campaign.audience_estimate)


def eta_running(campaign: Campaign, rate: float) -> float | None:
    """Seconds left at ``rate`` recipients/s; None unless the campaign runs, something moves and
    its size is known: planned, or estimated while planning goes on."""
    if campaign.status != CampaignStatus.RUNNING or rate <= 0:
        return None
    if not (campaign.planned or estimated(campaign)):
        return None
    return round(max(expected_total(campaign) - campaign.processed, 0) / rate, 1)


def _eta(campaign: Campaign, rate: float) -> float | None:
    return 0.0 if campaign.status == CampaignStatus.FINISHED else eta_running(campaign, rate)


# -- what a client may see -------------------------------------------------------------------
def api_client(client_id: int) -> ApiClient:
    return ApiClient.objects.get(pk=client_id)


def _client_id(client: ApiClient | int) -> int:
    return client if isinstance(client, int) else client.pk


def campaigns_for_client(client: ApiClient | int, status: str | None = None) -> QuerySet[Campaign]:
    """Campaigns of the client's senders (whoever created them), newest first."""
    senders = ApiClientSender.objects.filter(client_id=_client_id(client)).values("uid")
    found = Campaign.objects.filter(sender_uid__in=senders)
    if status:
        found = found.filter(status=status)
    return found.order_by("-pk")


@dataclass(frozen=True)
class CampaignPage:
    results: list[dict[str, Any]]  # campaign_progress bodies
    next_cursor: str | None


def campaign_page(
    client: ApiClient | int, *, status: str | None = None, cursor: int | None = None, limit: int
) -> CampaignPage:
    """A page of the client's campaigns, newest first, from before ``cursor`` (an id)."""
    found = campaigns_for_client(client, status)
    if cursor:
        found = found.filter(pk__lt=cursor)
    rows = list(found[: limit + 1])  # one more than shown: is there a next page?
    shown = rows[:limit]
    more = len(rows) > limit
    return CampaignPage([campaign_progress(c) for c in shown], str(shown[-1].pk) if more else None)


def campaign_for_client(client: ApiClient | int, campaign_id: int) -> Campaign:
    found = campaigns_for_client(client).filter(pk=campaign_id).first()
    if found is None:
        raise NotFound("No such campaign.")
    return found


def campaign_for_idempotency_key(client: ApiClient | None, key: str) -> Campaign | None:
    found = Campaign.objects.select_related("audience")
    return found.filter(client=client, idempotency_key=key).first()


def audience_for_client(client: ApiClient | int | None, audience_id: int) -> Audience:
    """A stored audience of ``client`` (any client's when None: operators on the CLI).

    ``count`` is written when the whole list is stored, so an upload still streaming in, or one
    that broke off half way, is not found (an upload with no valid uid is deleted).
    """
    found = Audience.objects.filter(pk=audience_id, count__gt=0)
    if client is not None:
        found = found.filter(client_id=_client_id(client))
    audience = found.first()
    if audience is None:
        raise NotFound("No such audience.", {"audience.audience_id": "no audience with this id"})
    return audience
