"""Reads of the bulk app: they never write. The writes are in bulk.services (what a client or an
operator asks) and bulk.fanout (what the workers do).

- ``campaign_progress(campaign)``: the campaign body of the API (API.md ``GET /campaigns/{id}``);
  ``rate_per_s`` = processed / seconds since ``started_at`` (until ``finished_at`` or now),
  ``eta_s`` = remaining / rate, None while it cannot be known (not planned, not running, no rate).
- ``campaign_page``: a keyset page of a client's campaigns, newest first (``next_cursor`` is the
  last id shown; the next page holds smaller ids).
- ``campaigns_for_client`` / ``campaign_for_client`` / ``audience_for_client``: a client sees the
  campaigns of its own senders and the audiences it uploaded; anything else is NotFound (404).
- ``campaign_for_idempotency_key``: the campaign a client already created under a key, if any.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from api.errors import NotFound
from api.models import ApiClient, ApiClientSender
from bulk.models import Audience, Campaign, CampaignStatus


# -- progress --------------------------------------------------------------------------------
def campaign_progress(campaign: Campaign, now: datetime | None = None) -> dict[str, Any]:
    rate = _rate(campaign, now or timezone.now())
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
        "rate_per_s": round(rate, 2),
        "eta_s": _eta(campaign, rate),
        "scheduled_at": campaign.scheduled_at,
        "created_at": campaign.created_at,
        "started_at": campaign.started_at,
        "finished_at": campaign.finished_at,
        "pause_reason": campaign.pause_reason or None,
    }


def _rate(campaign: Campaign, now: datetime) -> float:
    elapsed = campaign.running_s(now)
    return campaign.processed / elapsed if elapsed > 0 else 0.0


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
