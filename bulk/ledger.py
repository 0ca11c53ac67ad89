"""The batch ledger: leases, completion and exact campaign totals.

A batch moves pending → running (leased) → done | failed. ``lease`` is one conditional UPDATE, so
two workers handed the same batch (a redelivery) never both hold it; an expired lease can be taken
over, which is how a batch whose worker died is finished by another. ``complete`` moves the batch
to done and adds its results to the campaign in one transaction, guarded by the lease token: a
worker that lost its lease changes nothing, so totals are counted exactly once.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from bulk.models import BatchState, Campaign, CampaignBatch, CampaignStatus


@dataclass(frozen=True)
class BatchResult:
    delivered: int
    skipped_quota: int
    skipped_blocked: int
    failed: int = 0
    deferred: tuple[int, ...] = ()  # moved to a new batch (over today's budget)


def lease_seconds() -> int:
    return int(getattr(settings, "BULK_LEASE_S", 60))


def lease(batch_id: int) -> str | None:
    token, now = secrets.token_hex(8), timezone.now()
    taken = (
        CampaignBatch.objects.filter(pk=batch_id)
        .filter(Q(state=BatchState.PENDING) | Q(state=BatchState.RUNNING, lease_until__lt=now))
        .update(
            state=BatchState.RUNNING,
            lease_token=token,
            lease_until=now + timedelta(seconds=lease_seconds()),
            attempts=F("attempts") + 1,
        )
    )
    return token if taken else None


def release(batch_id: int, token: str) -> None:
    CampaignBatch.objects.filter(pk=batch_id, state=BatchState.RUNNING, lease_token=token).update(
        state=BatchState.PENDING, lease_token="", lease_until=None, enqueued_at=timezone.now()
    )


def complete(batch: CampaignBatch, token: str, result: BatchResult, state: str) -> bool:
    with transaction.atomic():
        moved = CampaignBatch.objects.filter(
            pk=batch.pk, state=BatchState.RUNNING, lease_token=token
        ).update(
            state=state,
            delivered=result.delivered,
            skipped_quota=result.skipped_quota,
            skipped_blocked=result.skipped_blocked,
            failed=result.failed,
            finished_at=timezone.now(),
        )
        if moved:
            Campaign.objects.filter(pk=batch.campaign_id).update(
                delivered=F("delivered") + result.delivered,
                skipped_quota=F("skipped_quota") + result.skipped_quota,
                skipped_blocked=F("skipped_blocked") + result.skipped_blocked,
                failed=F("failed") + result.failed,
            )
            if result.deferred:
                _split_off(batch, result.deferred)
    if moved:
        maybe_finish(batch.campaign_id)
    return bool(moved)


def _split_off(batch: CampaignBatch, uids: tuple[int, ...]) -> None:
    """Move ``uids`` out of a completed batch into a new pending batch (same transaction)."""
    campaign = Campaign.objects.select_for_update().get(pk=batch.campaign_id)
    CampaignBatch.objects.filter(pk=batch.pk).update(size=batch.size - len(uids))
    CampaignBatch.objects.create(
        campaign=campaign,
        index=campaign.batches_planned,
        first_uid=uids[0],
        last_uid=uids[-1],
        uids=list(uids),
        size=len(uids),
        enqueued_at=timezone.now(),
    )
    Campaign.objects.filter(pk=campaign.pk).update(batches_planned=F("batches_planned") + 1)


def maybe_finish(campaign_id: int) -> bool:
    """``finished`` only once planning is over and every batch is done or failed."""
    open_states = (BatchState.PENDING, BatchState.RUNNING)
    if CampaignBatch.objects.filter(campaign_id=campaign_id, state__in=open_states).exists():
        return False
    return bool(
        Campaign.objects.filter(pk=campaign_id, planned=True, status=CampaignStatus.RUNNING).update(
            status=CampaignStatus.FINISHED, finished_at=timezone.now()
        )
    )
