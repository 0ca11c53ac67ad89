"""Campaign actions: create (or dry-run), plan, run a batch, pause, resume, cancel, sweep.

Flow (DESIGN.md "Bulk campaign flow"): ``campaign_create`` stores the content once and starts the
planner; ``campaign_plan_step`` walks the audience with a keyset cursor and writes batches of
~1,000 recipients into the ledger, then enqueues them on the campaign's channel queue;
``batch_run`` leases one batch, paces it through the channel's token bucket, admits it against
quotas and budget in one Lua call, fans it out (messaging.services.deliver_many) and completes it
in the ledger. Every step is idempotent; ``sweep`` re-enqueues what a dead worker left behind.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from api.errors import Conflict, Forbidden, InvalidInput, NotFound
from bulk import audiences, ledger, quotas
from bulk.ledger import BatchResult
from bulk.models import (
    Audience,
    BatchState,
    Campaign,
    CampaignBatch,
    CampaignStatus,
    Channel,
)
from config.sqlvalues import int_list
from messaging import msgkey as keys
from messaging.content import validate_content
from messaging.models import Account, Block, Category, Message
from messaging.services import deliver_many

BATCHES_PER_PLAN_STEP = 20
MAX_ATTEMPTS = 5
PAUSE_BUDGET = "budget"


# -- create ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AudienceChoice:
    type: str
    spec: dict[str, Any]
    audience: Audience | None


def campaign_create(
    *,
    sender_uid: int,
    content: Any,
    audience: AudienceChoice,
    channel: str,
    scheduled_at: datetime | None = None,
    client: Any = None,
    idempotency_key: str | None = None,
) -> tuple[Campaign, bool]:
    """Create and start (or schedule) a campaign; returns (campaign, created)."""
    body = validate_content(content)
    _check_sender(sender_uid, channel)
    digest = _digest(sender_uid, body, audience, channel, scheduled_at)
    if idempotency_key:
        found = Campaign.objects.filter(client=client, idempotency_key=idempotency_key).first()
        if found is not None:
            return _same_request(found, digest), False
    try:
        campaign = _insert(
            sender_uid, body, audience, channel, scheduled_at, client, idempotency_key, digest
        )
    except IntegrityError:  # a concurrent retry with the same Idempotency-Key won
        found = Campaign.objects.get(client=client, idempotency_key=idempotency_key)
        return _same_request(found, digest), False
    return campaign, True


def _check_sender(sender_uid: int, channel: str) -> None:
    if not Account.objects.filter(uid=sender_uid).exists():
        raise NotFound("Unknown sender: campaigns are sent by business accounts.")
    if channel not in Channel.values:
        raise InvalidInput("channel must be daily or priority.", {"channel": "unknown"})
    if channel == Channel.PRIORITY and not quotas.policy_for(sender_uid).priority_allowed:
        raise Forbidden("This sender is not allowed on the priority channel.")


def _digest(
    sender: int,
    body: dict[str, Any],
    audience: AudienceChoice,
    channel: str,
    scheduled_at: datetime | None,
) -> str:
    parts = [sender, body, audience.type, audience.spec, channel, str(scheduled_at)]
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _same_request(found: Campaign, digest: str) -> Campaign:
    if found.request_digest != digest:
        raise Conflict("Idempotency-Key was already used for a different campaign.")
    return found


def _insert(
    sender_uid: int,
    body: dict[str, Any],
    audience: AudienceChoice,
    channel: str,
    scheduled_at: datetime | None,
    client: Any,
    idempotency_key: str | None,
    digest: str,
) -> Campaign:
    msgkey = keys.next_msgkey()
    later = scheduled_at is not None and scheduled_at > timezone.now()
    stored = audience.audience
    with transaction.atomic():
        Message.objects.create(
            msgkey=msgkey,
            sender_uid=sender_uid,
            type=body["type"],
            body=body,
            created_at=keys.created_at(msgkey),
        )
        campaign = Campaign.objects.create(
            sender_uid=sender_uid,
            client=client,
            idempotency_key=idempotency_key,
            request_digest=digest,
            msgkey=msgkey,
            audience_type=audience.type,
            audience_spec=audience.spec,
            audience=stored,
            channel=channel,
            status=CampaignStatus.SCHEDULED if later else CampaignStatus.RUNNING,
            scheduled_at=scheduled_at,
            started_at=None if later else timezone.now(),
            skipped_invalid=stored.invalid_lines if stored else 0,
            skipped_duplicate=stored.duplicate_lines if stored else 0,
        )
        if not later:
            transaction.on_commit(lambda: enqueue_plan(campaign))
    return campaign


# -- dry run -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class DryRun:
    audience: int
    would_skip_blocked: int
    would_skip_quota: int
    would_deliver: int
    budget_remaining: int | None


def campaign_dry_run(*, sender_uid: int, audience: AudienceChoice, channel: str) -> DryRun:
    _check_sender(sender_uid, channel)
    probe = Campaign(
        sender_uid=sender_uid,
        audience_type=audience.type,
        audience_spec=audience.spec,
        audience=audience.audience,
        channel=channel,
    )
    policy = quotas.policy_for(sender_uid)
    size = blocked = capped = 0
    for chunk in audiences.iterate(probe):
        size += len(chunk)
        hit = _blocked(sender_uid, chunk)
        blocked += len(hit)
        capped += quotas.count_capped(sender_uid, [u for u in chunk if u not in hit], policy)
    return DryRun(
        size,
        blocked,
        capped,
        size - blocked - capped,
        quotas.budget_remaining(sender_uid) if channel == Channel.DAILY else None,
    )


def _blocked(sender_uid: int, uids: Sequence[int]) -> set[int]:
    """Who in ``uids`` blocked the sender: one read of the (blocked_uid, owner_uid) index with the
    uids inlined (config/sqlvalues.py); the ORM's 1,000-item IN list cost 8 ms of CPU per batch,
    this 0.5 ms (profiled)."""
    if not uids:
        return set()
    sql = (
        f"SELECT owner_uid FROM {Block._meta.db_table} WHERE blocked_uid = %s "
        f"AND owner_uid IN ({int_list(uids)})"
    )
    with connection.cursor() as cur:
        cur.execute(sql, [sender_uid])
        return {row[0] for row in cur.fetchall()}


# -- planning ----------------------------------------------------------------------------------
def enqueue_plan(campaign: Campaign) -> None:
    current_app.send_task(f"bulk.{campaign.channel}.plan", args=[campaign.pk])


def enqueue_batches(channel: str, batch_ids: Sequence[int]) -> None:
    """One broker producer for the lot, not one per message (measured: 1.5-3.6 instead of
    3.8-4 ms a message)."""
    with current_app.producer_or_acquire() as producer:
        for batch_id in batch_ids:
            current_app.send_task(f"bulk.{channel}.run_batch", args=[batch_id], producer=producer)


def campaign_plan_step(campaign_id: int) -> bool:
    """Plan the next few batches; returns True while more of the audience remains."""
    with transaction.atomic():
        campaign = Campaign.objects.select_for_update().get(pk=campaign_id)
        if campaign.planned or campaign.status != CampaignStatus.RUNNING:
            return False
        batches = _next_batches(campaign)
        CampaignBatch.objects.bulk_create(batches)
        campaign.batches_planned += len(batches)
        campaign.total += sum(b.size for b in batches)
        campaign.plan_heartbeat = timezone.now()
        campaign.save(
            update_fields=["planned", "plan_cursor", "batches_planned", "total", "plan_heartbeat"]
        )
        ids = list(
            CampaignBatch.objects.filter(
                campaign=campaign, index__gte=campaign.batches_planned - len(batches)
            ).values_list("pk", flat=True)
        )
        transaction.on_commit(lambda: _enqueue_step(campaign, ids))
    if campaign.planned:
        ledger.maybe_finish(campaign.pk)
    return not campaign.planned


def _enqueue_step(campaign: Campaign, batch_ids: Sequence[int]) -> None:
    """The step's batches with the next plan step in their middle: the planner runs while the
    second half is delivered. Queued behind all of them, it ran alone after each step while the
    other workers went idle (the ledger's lease times showed a gap after every 20 batches)."""
    half = len(batch_ids) // 2
    enqueue_batches(campaign.channel, batch_ids[:half])
    if not campaign.planned:
        enqueue_plan(campaign)
    enqueue_batches(campaign.channel, batch_ids[half:])


def _next_batches(campaign: Campaign) -> list[CampaignBatch]:
    size = quotas.channel_setting(campaign.channel).batch_size
    batches: list[CampaignBatch] = []
    now = timezone.now()
    while len(batches) < BATCHES_PER_PLAN_STEP:
        chunk = audiences.walk(campaign, campaign.plan_cursor, size)
        campaign.plan_cursor = chunk.cursor
        if chunk.uids:
            batches.append(
                CampaignBatch(
                    campaign=campaign,
                    index=campaign.batches_planned + len(batches),
                    first_uid=chunk.uids[0],
                    last_uid=chunk.uids[-1],
                    uids=chunk.uids,
                    size=len(chunk.uids),
                    enqueued_at=now,
                )
            )
        if chunk.exhausted:
            campaign.planned = True
            break
    return batches


# -- running one batch -------------------------------------------------------------------------
@dataclass(frozen=True)
class BatchRun:
    state: str  # done | inactive | leased | throttled | paused
    retry_in_ms: int = 0


def batch_run(batch_id: int) -> BatchRun:
    batch = CampaignBatch.objects.select_related("campaign").filter(pk=batch_id).first()
    if batch is None or batch.state in (BatchState.DONE, BatchState.FAILED):
        return BatchRun("done")
    if batch.campaign.status != CampaignStatus.RUNNING:
        return BatchRun("inactive")  # paused or cancelled: the batch stays pending
    # Tokens before the lease: a lease counts an attempt, and waiting for the rate limit (the
    # normal state of a busy channel) must not use up the attempts kept for real failures.
    wait_ms = quotas.take_tokens(batch.campaign.channel, batch.size)
    if wait_ms:  # it re-sends itself: the sweep need not (one UPDATE, as release() did)
        CampaignBatch.objects.filter(pk=batch_id, state=BatchState.PENDING).update(
            enqueued_at=timezone.now()
        )
        return BatchRun("throttled", wait_ms)
    token = ledger.lease(batch_id)
    if token is None:
        return BatchRun("leased")  # another worker holds a live lease on it
    return _deliver(batch, token)


def _deliver(batch: CampaignBatch, token: str) -> BatchRun:
    campaign = batch.campaign
    try:
        result = _fan_out(campaign, batch)
    except Exception:
        if batch.attempts + 1 >= MAX_ATTEMPTS:
            ledger.complete(
                batch, token, BatchResult(0, 0, 0, failed=batch.size), BatchState.FAILED
            )
        else:
            ledger.release(batch.pk, token)
        raise
    if result is None:
        ledger.release(batch.pk, token)
        campaign_pause(campaign_id=campaign.pk, reason=PAUSE_BUDGET)
        return BatchRun("paused")
    ledger.complete(batch, token, result, BatchState.DONE)
    if result.deferred:
        campaign_pause(campaign_id=campaign.pk, reason=PAUSE_BUDGET)
        return BatchRun("paused")
    return BatchRun("done")


def sender_category(sender_uid: int) -> str:
    """What recipients file a campaign sender under: its account kind, else ``business``."""
    account = quotas.by_pk(Account, sender_uid)
    return (account.kind if account else None) or Category.BUSINESS


def _fan_out(campaign: Campaign, batch: CampaignBatch) -> BatchResult | None:
    """Deliver one batch; None when the sender's daily budget cannot cover it."""
    sender = campaign.sender_uid
    blocked = _blocked(sender, batch.uids)
    candidates = [u for u in batch.uids if u not in blocked]
    admission = quotas.admit_batch(
        sender_uid=sender,
        campaign_id=campaign.pk,
        index=batch.index,
        receivers=candidates,
        channel=campaign.channel,
        policy=quotas.policy_for(sender),
    )
    if admission.budget_exhausted:
        return None
    deferred = set(admission.deferred)
    allowed = [u for u in candidates if u not in admission.capped and u not in deferred]
    deliver_many(
        sender_uid=sender,
        receiver_uids=allowed,
        msgkey=campaign.msgkey or 0,
        category=sender_category(sender),
        marker=f"b:{campaign.pk}:{batch.index}",
    )
    return BatchResult(
        len(allowed), len(admission.capped), len(blocked), deferred=admission.deferred
    )


# -- control -----------------------------------------------------------------------------------
def _transition(
    campaign_id: int,
    allowed: Sequence[str],
    change: Callable[[Campaign], None] | None = None,
    **fields: Any,
) -> Campaign:
    """Under the campaign's row lock: check its status is ``allowed``, then apply ``change``
    (a function of the locked row) and ``fields``."""
    with transaction.atomic():
        campaign = Campaign.objects.select_for_update().filter(pk=campaign_id).first()
        if campaign is None:
            raise NotFound("No such campaign.")
        if campaign.status not in allowed:
            raise Conflict(f"A {campaign.status} campaign cannot do that.")
        if change is not None:
            change(campaign)
        for name, value in fields.items():
            setattr(campaign, name, value)
        campaign.save()
    return campaign


def campaign_pause(*, campaign_id: int, reason: str = "manual") -> Campaign:
    def pause(campaign: Campaign) -> None:
        campaign.status, campaign.pause_reason = CampaignStatus.PAUSED, reason
        campaign.paused_at = campaign.paused_at or timezone.now()  # paused again: same pause

    return _transition(campaign_id, [CampaignStatus.RUNNING, CampaignStatus.PAUSED], pause)


def campaign_resume(*, campaign_id: int) -> Campaign:
    def resume(campaign: Campaign) -> None:
        campaign.status, campaign.pause_reason = CampaignStatus.RUNNING, ""
        if campaign.paused_at is not None:
            campaign.paused_s += (timezone.now() - campaign.paused_at).total_seconds()
            campaign.paused_at = None

    campaign = _transition(campaign_id, [CampaignStatus.PAUSED, CampaignStatus.RUNNING], resume)
    _kick(campaign)
    return campaign


def campaign_cancel(*, campaign_id: int) -> Campaign:
    active = [
        CampaignStatus.DRAFT,
        CampaignStatus.SCHEDULED,
        CampaignStatus.RUNNING,
        CampaignStatus.PAUSED,
        CampaignStatus.CANCELLED,
    ]
    done = Campaign.objects.filter(pk=campaign_id, status=CampaignStatus.CANCELLED).first()
    if done is not None:
        return done  # cancelling again changes nothing, finished_at included
    return _transition(
        campaign_id, active, status=CampaignStatus.CANCELLED, finished_at=timezone.now()
    )


def campaign_start(*, campaign_id: int) -> Campaign:
    campaign = _transition(
        campaign_id,
        [CampaignStatus.SCHEDULED, CampaignStatus.DRAFT],
        status=CampaignStatus.RUNNING,
        started_at=timezone.now(),
    )
    enqueue_plan(campaign)
    return campaign


def _kick(campaign: Campaign) -> None:
    """Re-enqueue everything a running campaign still owes (resume, sweep)."""
    if not campaign.planned:
        enqueue_plan(campaign)
    pending = CampaignBatch.objects.filter(campaign=campaign, state=BatchState.PENDING)
    ids = list(pending.values_list("pk", flat=True))
    pending.update(enqueued_at=timezone.now())
    enqueue_batches(campaign.channel, ids)
    ledger.maybe_finish(campaign.pk)


# -- housekeeping (beat) -----------------------------------------------------------------------
@dataclass(frozen=True)
class SweepReport:
    batches_requeued: int
    planners_requeued: int
    started: int
    resumed: int


def sweep(limit: int = 1000) -> SweepReport:
    now = timezone.now()
    stale = now - timedelta(seconds=ledger.lease_seconds())
    requeued = _requeue_stale_batches(now, stale, limit)
    # A planner that never ran (its task lost before the first step) has no heartbeat yet.
    never_planned = Q(plan_heartbeat__isnull=True, started_at__lt=stale)
    planners = Campaign.objects.filter(status=CampaignStatus.RUNNING, planned=False).filter(
        Q(plan_heartbeat__lt=stale) | never_planned
    )
    lost_planners = list(planners[:limit])  # counted before the heartbeats below refresh them
    for campaign in lost_planners:
        Campaign.objects.filter(pk=campaign.pk).update(plan_heartbeat=now)
        enqueue_plan(campaign)
    return SweepReport(requeued, len(lost_planners), _start_due(now), _resume_budget())


def _requeue_stale_batches(now: datetime, stale: datetime, limit: int) -> int:
    expired = Q(state=BatchState.RUNNING, lease_until__lt=now)
    forgotten = Q(state=BatchState.PENDING, enqueued_at__lt=stale)
    lost = CampaignBatch.objects.filter(campaign__status=CampaignStatus.RUNNING).filter(
        expired | forgotten
    )
    rows = list(lost.values_list("pk", "campaign__channel")[:limit])
    CampaignBatch.objects.filter(pk__in=[pk for pk, _ in rows]).update(enqueued_at=now)
    for pk, channel in rows:
        enqueue_batches(channel, [pk])
    return len(rows)


def _start_due(now: datetime) -> int:
    due = Campaign.objects.filter(status=CampaignStatus.SCHEDULED, scheduled_at__lte=now)
    started = 0
    for pk in due.values_list("pk", flat=True)[:100]:
        try:
            campaign_start(campaign_id=pk)
            started += 1
        except Conflict:
            continue  # started or cancelled meanwhile
    return started


def _resume_budget() -> int:
    paused = Campaign.objects.filter(status=CampaignStatus.PAUSED, pause_reason=PAUSE_BUDGET)
    resumed = 0
    for campaign in paused[:100]:
        remaining = quotas.budget_remaining(campaign.sender_uid)
        if remaining is None or remaining > 0:
            campaign_resume(campaign_id=campaign.pk)
            resumed += 1
    return resumed
