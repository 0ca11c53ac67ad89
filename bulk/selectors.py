"""Reads of the bulk app, and the request-shaped entry points the API and the CLI share.

Reads:
- ``campaign_progress(campaign)``: the campaign body of the API (API.md ``GET /campaigns/{id}``);
  ``rate_per_s`` = processed / seconds since ``started_at`` (until ``finished_at`` or now),
  ``eta_s`` = remaining / rate, None while it cannot be known (not planned, not running, no rate).
- ``campaigns_for_client`` / ``campaign_for_client`` / ``audience_for_client``: a client sees the
  campaigns of its own senders and the audiences it uploaded; anything else is NotFound (404).

Entry points (thin, additive wrappers over bulk.services; candidates to move there):
- ``audience_choice``: a validated audience spec (bulk.serializers) → the service's AudienceChoice.
  An explicit ``uids`` list is stored once as an Audience, the only write it makes.
- ``campaign_submit``: the audience and the campaign in one transaction, so a refused create leaves
  no orphan audience; an Idempotency-Key replay reuses the stored list instead of storing it again.
- ``campaign_preview``: the dry run. It stores nothing: an explicit list is written inside a
  transaction that is rolled back, so the preview walks exactly what the campaign would walk.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from api.errors import InvalidInput, NotFound
from api.models import ApiClient, ApiClientSender
from bulk import audiences, services
from bulk.models import Audience, AudienceType, Campaign, CampaignStatus
from bulk.services import AudienceChoice


# -- progress --------------------------------------------------------------------------------
def campaign_progress(campaign: Campaign, now: datetime | None = None) -> dict[str, Any]:
    rate = _rate(campaign, now or timezone.now())
    return {
        "id": campaign.pk,
        "sender_uid": campaign.sender_uid,
        "msgkey": campaign.msgkey,
        "status": campaign.status,
        "channel": campaign.channel,
        "audience": {"type": campaign.audience_type, "id": campaign.audience_id},
        "total": campaign.total,
        "delivered": campaign.delivered,
        "skipped": {
            "quota": campaign.skipped_quota,
            "blocked": campaign.skipped_blocked,
            "invalid": campaign.skipped_invalid,
            "duplicate": campaign.skipped_duplicate,
        },
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


def _eta(campaign: Campaign, rate: float) -> float | None:
    if campaign.status == CampaignStatus.FINISHED:
        return 0.0
    if campaign.status != CampaignStatus.RUNNING or not campaign.planned or rate <= 0:
        return None  # the total is still growing, nothing moves, or nothing has moved yet
    return round(max(campaign.total - campaign.processed, 0) / rate, 1)


# -- what a client may see -------------------------------------------------------------------
def _client_id(client: ApiClient | int) -> int:
    return client if isinstance(client, int) else client.pk


def campaigns_for_client(client: ApiClient | int, status: str | None = None) -> QuerySet[Campaign]:
    """Campaigns of the client's senders (whoever created them), newest first."""
    senders = ApiClientSender.objects.filter(client_id=_client_id(client)).values("uid")
    found = Campaign.objects.filter(sender_uid__in=senders)
    if status:
        found = found.filter(status=status)
    return found.order_by("-pk")


def campaign_for_client(client: ApiClient | int, campaign_id: int) -> Campaign:
    found = campaigns_for_client(client).filter(pk=campaign_id).first()
    if found is None:
        raise NotFound("No such campaign.")
    return found


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


# -- request → service ------------------------------------------------------------------------
def _uids_summary(entries: list[str]) -> dict[str, Any]:
    """What an explicit list contributes to the campaign's spec (and its idempotency digest)."""
    digest = hashlib.sha256(json.dumps(entries).encode()).hexdigest()
    return {"uids_sha256": digest, "entries": len(entries)}


def audience_choice(
    spec: Mapping[str, Any],
    *,
    sender_uid: int,
    client: ApiClient | None,
    reuse: Campaign | None = None,
) -> AudienceChoice:
    kind = spec["type"]
    if kind == AudienceType.UPLOAD:
        audience = audience_for_client(client, spec["audience_id"])
        return AudienceChoice(kind, {"audience_id": audience.pk}, audience)
    if kind == AudienceType.UIDS:
        summary = _uids_summary(spec["uids"])
        if reuse is not None and reuse.audience_spec == summary and reuse.audience is not None:
            return AudienceChoice(kind, summary, reuse.audience)
        return AudienceChoice(kind, summary, _store_uids(spec["uids"], sender_uid, client))
    return AudienceChoice(kind, {k: v for k, v in spec.items() if k != "type"}, None)


def _store_uids(entries: list[str], sender_uid: int, client: ApiClient | None) -> Audience:
    audience = audiences.audience_from_lines(lines=entries, sender_uid=sender_uid, client=client)
    if audience.count == 0:
        raise InvalidInput(
            "audience.uids holds no valid uid.",
            {"audience.uids": f"no valid uid ({audience.invalid_lines} invalid entries)"},
        )
    return audience


def campaign_submit(
    *,
    sender_uid: int,
    content: Any,
    audience_spec: Mapping[str, Any],
    channel: str,
    scheduled_at: datetime | None = None,
    client: ApiClient | None = None,
    idempotency_key: str | None = None,
) -> tuple[Campaign, bool]:
    """Create (or replay) a campaign; returns (campaign, created)."""
    with transaction.atomic():
        earlier = None
        if idempotency_key:
            found = Campaign.objects.select_related("audience")
            earlier = found.filter(client=client, idempotency_key=idempotency_key).first()
        choice = audience_choice(audience_spec, sender_uid=sender_uid, client=client, reuse=earlier)
        return services.campaign_create(
            sender_uid=sender_uid,
            content=content,
            audience=choice,
            channel=channel,
            scheduled_at=scheduled_at,
            client=client,
            idempotency_key=idempotency_key,
        )


@dataclass(frozen=True)
class Preview:
    audience: int
    would_skip_blocked: int
    would_skip_quota: int
    would_skip_invalid: int
    would_skip_duplicate: int
    would_deliver: int
    budget_remaining: int | None


def campaign_preview(
    *,
    sender_uid: int,
    audience_spec: Mapping[str, Any],
    channel: str,
    client: ApiClient | None = None,
) -> Preview:
    """The dry run of a campaign: who it would reach and skip. Stores nothing."""
    with transaction.atomic():
        choice = audience_choice(audience_spec, sender_uid=sender_uid, client=client)
        dry = services.campaign_dry_run(sender_uid=sender_uid, audience=choice, channel=channel)
        transaction.set_rollback(True)
    stored = choice.audience
    return Preview(
        audience=dry.audience,
        would_skip_blocked=dry.would_skip_blocked,
        would_skip_quota=dry.would_skip_quota,
        would_skip_invalid=stored.invalid_lines if stored else 0,
        would_skip_duplicate=stored.duplicate_lines if stored else 0,
        would_deliver=dry.would_deliver,
        budget_remaining=dry.budget_remaining,
    )
