"""The workers' side of a campaign: plan its batches, run one batch, sweep what dead workers left.

Flow (DESIGN.md "Bulk campaign flow"): ``campaign_plan_step`` walks the audience with a keyset
cursor and writes batches of the channel's batch size (settings.BULK_BATCH_SIZE unless set) into
the ledger, then enqueues them on the campaign's channel queue; ``batch_run`` leases one batch,
paces it through the channel's token bucket, admits it against quotas and budget in one Lua
call, fans it out (messaging.services.deliver_many) and completes it in the ledger. Every step
is idempotent; ``sweep`` (beat, every second) re-enqueues what a dead worker left behind, starts
scheduled campaigns and resumes those the daily budget paused.

Recovery in seconds: a batch's lease is short (BULK_LEASE_S, 5 s) and renewed by its process's
heartbeat while the batch works (bulk/ledger.py), so a live worker keeps a slow batch and a dead
one's batches are re-sent by the first sweep after their lease ran out (about 5 s after a kill -9,
measured in tests/bulk/test_workers.py). A worker stopped past its lease (SIGSTOP, a long GC
pause) finds the lease taken over when it resumes: it stops before its next step, and its ledger
completion would match nothing, so the batch is counted once.

Fair share of a channel: the Celery planner plans a campaign's batches in waves, each campaign
holding at most its equal share of BULK_CHANNEL_OPEN_BATCHES open batches; completed batches ask
for the next wave (``campaign_plan_step``, ``_top_up``). A campaign's first batches are sent at a
higher broker priority than those of a campaign further along (``services.batch_priority``), so
one launched behind a big campaign's queued wave is served before that wave, not after it.

Outages never fail a batch. A store that does not answer (``infra.outages``) while a batch
delivers puts the batch back, its attempt refunded, and pauses the campaign with reason
``store_unavailable``; the sweep probes the stores and resumes it as soon as they all answer, for
up to BULK_OUTAGE_HORIZON_S (then it stays paused, reason ``outage_too_long``, for an
operator). A batch task that meets the outage before it could put its batch back retries with
capped exponential backoff and jitter (bulk.tasks). Only a batch that fails MAX_ATTEMPTS times
for another reason (bad data, a bug) is ``failed``, with the error kept on the batch.

A batch costs the same number of SQL queries whatever its size (pinned in
tests/bulk/test_fanout.py): who blocks the sender and the sender's category are one query each
(messaging.selectors), the rows one multi-row statement per table.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from api.errors import Conflict
from bulk import audiences, ledger, profile, quotas
from bulk.ledger import BatchResult
from bulk.models import BatchState, Campaign, CampaignBatch, CampaignStatus
from bulk.services import (
    PAUSE_OUTAGE,
    PAUSE_OUTAGE_TOO_LONG,
    campaign_pause,
    campaign_resume,
    campaign_start,
    campaign_wait_for_stores,
    enqueue_batches,
    enqueue_plan,
)
from infra import broker, metrics, stages
from infra.outages import store_unavailable, stores_answer
from infra.redis import clustered, user_slot
from messaging.selectors import blocked_receivers, broadcast_category
from messaging.services import deliver_many
from storage.counters.store import Sequenced

log = logging.getLogger(__name__)
BATCHES_PER_PLAN_STEP = 20
PLAN_FIELDS = (
    "planned",
    "plan_cursor",
    "batches_planned",
    "total",
    "plan_heartbeat",
    "audience_estimate",
)
MAX_ATTEMPTS = 5
MIN_OPEN_BATCHES = 2  # a campaign's wave, however many share its channel
PAUSE_BUDGET = "budget"


# -- planning ----------------------------------------------------------------------------------
def campaign_plan_step(campaign_id: int, *, capped: bool = False) -> bool:
    """Plan the next few batches; returns True while more of the audience remains.

    ``capped`` (the Celery planner, bulk.tasks): plan only while the campaign has fewer batches
    open (pending or running) than its share of BULK_CHANNEL_OPEN_BATCHES (``open_cap``);
    completed batches ask for the next wave (``_top_up``). Campaigns sharing a channel then each
    hold an equal, bounded part of its queue and of the throttled batches waiting for its
    tokens, so a big campaign started first does not starve a small one started after it
    (uncapped, a throttled campaign's planner kept adding batches, every one of them competing
    for the channel's tokens).

    A wave is half the share at least: a step that finds less room plans nothing. Each step
    used to plan whatever room one completed batch had made, mostly one batch, so on a Redis
    Cluster the slot ordering (``_batches_by_slot``) sorted a window of one batch and a
    4,000-recipient batch still spread over ~3,430 slots (one exactly-once marker and one
    script group each; counted on the 6-node test cluster in a 300,000-recipient campaign),
    ~1,510 since (with the cluster's 32 open batches)."""
    with transaction.atomic():
        campaign = Campaign.objects.select_for_update().get(pk=campaign_id)
        if campaign.planned or campaign.status != CampaignStatus.RUNNING:
            return False
        room, wave = _room(campaign) if capped else (BATCHES_PER_PLAN_STEP, 1)
        if room < wave:  # most of a wave is out: the planner is alive, waiting for room
            Campaign.objects.filter(pk=campaign.pk).update(plan_heartbeat=timezone.now())
            return True
        if campaign.audience_estimate is None:  # the first step: the console's denominator
            campaign.audience_estimate = audiences.audience_estimate(campaign)
        batches = _next_batches(campaign, min(room, BATCHES_PER_PLAN_STEP))
        CampaignBatch.objects.bulk_create(batches)
        campaign.batches_planned += len(batches)
        campaign.total += sum(b.size for b in batches)
        campaign.plan_heartbeat = timezone.now()
        campaign.save(update_fields=[*PLAN_FIELDS])
        ids = list(
            CampaignBatch.objects.filter(
                campaign=campaign, index__gte=campaign.batches_planned - len(batches)
            )
            .order_by("index")
            .values_list("pk", "index")
        )
        chain = not campaign.planned and room > len(batches)  # room for another step now
        transaction.on_commit(lambda: _enqueue_step(campaign, ids, chain))
    if campaign.planned:
        ledger.maybe_finish(campaign.pk)
    return not campaign.planned


def open_cap(channel: str) -> int:
    """A campaign's share of its channel's open batches: equal among its running campaigns."""
    running = Campaign.objects.filter(channel=channel, status=CampaignStatus.RUNNING).count()
    return max(MIN_OPEN_BATCHES, settings.BULK_CHANNEL_OPEN_BATCHES // max(running, 1))


def _room(campaign: Campaign) -> tuple[int, int]:
    """How many more batches the campaign may have open, and its wave: half its share."""
    cap = open_cap(campaign.channel)
    return cap - ledger.open_batches(campaign.pk), max(1, cap // 2)


def _enqueue_step(campaign: Campaign, batch_ids: Sequence[tuple[int, int]], chain: bool) -> None:
    """The step's batches with the next plan step in their middle: the planner runs while the
    second half is delivered. Queued behind all of them, it ran alone after each step while the
    other workers went idle (the ledger's lease times showed a gap after every 20 batches)."""
    half = len(batch_ids) // 2
    enqueue_batches(campaign.channel, batch_ids[:half])
    if chain:
        enqueue_plan(campaign)
    enqueue_batches(campaign.channel, batch_ids[half:])


def _top_up(campaign: Campaign) -> None:
    """A batch of a campaign still being planned is done: once a wave has room, ask the planner
    for it, by the planner's own rule (``_room``; a concurrent ask finds the room taken and
    changes nothing but the plan heartbeat)."""
    room, wave = _room(campaign)
    if room >= wave:
        enqueue_plan(campaign)


def _next_batches(campaign: Campaign, limit: int) -> list[CampaignBatch]:
    size = quotas.channel_setting(campaign.channel).batch_size
    if clustered():
        return _batches_by_slot(campaign, limit, size)
    batches: list[CampaignBatch] = []
    while len(batches) < limit:
        chunk = audiences.walk(campaign, campaign.plan_cursor, size)
        campaign.plan_cursor = chunk.cursor
        if chunk.uids:
            batches.append(_batch(campaign, len(batches), chunk.uids))
        if chunk.exhausted:
            campaign.planned = True
            break
    return batches


def _batches_by_slot(campaign: Campaign, limit: int, size: int) -> list[CampaignBatch]:
    """On a Redis Cluster: the step's whole window of the audience (``limit`` batches' worth)
    read at once, ordered by its recipients' cluster slot and cut into batches, so a batch's
    per-user keys fall into few slots. A batch's unread, cache and presence calls run one
    script group per slot (each with its own exactly-once marker, storage.counters): 4,000
    recipients in uid order spread over ~3,550 of the 16,384 slots, in a window of 16 batches
    over ~1,000, and the three calls took 150 ms a batch against 82 ms at 800 slots (39 ms on
    one Redis; measured with the 6-node test cluster on the shared 2-core machine). The
    recipients are the same; only which batch carries whom changes."""
    chunk = audiences.walk(campaign, campaign.plan_cursor, size * limit)
    campaign.plan_cursor = chunk.cursor
    campaign.planned = chunk.exhausted
    ordered = sorted(chunk.uids, key=lambda uid: (user_slot(uid), uid))
    parts = [ordered[i : i + size] for i in range(0, len(ordered), size)]
    return [_batch(campaign, n, part) for n, part in enumerate(parts)]


def _batch(campaign: Campaign, n: int, uids: list[int]) -> CampaignBatch:
    """The step's ``n``-th new batch of ``campaign``, to ``uids``."""
    return CampaignBatch(
        campaign=campaign,
        index=campaign.batches_planned + n,
        first_uid=min(uids),
        last_uid=max(uids),
        uids=uids,
        size=len(uids),
        enqueued_at=timezone.now(),
    )


# -- running one batch -------------------------------------------------------------------------
@dataclass(frozen=True)
class BatchRun:
    state: str  # done | inactive | leased | throttled | paused | waiting | lost
    retry_in_ms: int = 0


def batch_run(batch_id: int) -> BatchRun:
    """Run one batch, its stages timed (infra.stages; kept per campaign when BULK_PROFILE)."""
    with stages.collect() as record:
        batch = CampaignBatch.objects.select_related("campaign").filter(pk=batch_id).first()
        stages.lap("load")
        run = _run(batch)
    completed = profile.COMPLETED in record.seconds  # this run delivered and completed it
    if batch is not None and completed:
        profile.observe(record)
        if settings.BULK_PROFILE:
            profile.add(batch.campaign_id, record, batch.size)
    return run


def _run(batch: CampaignBatch | None) -> BatchRun:
    if batch is None or batch.state in (BatchState.DONE, BatchState.FAILED):
        return BatchRun("done")
    if batch.campaign.status != CampaignStatus.RUNNING:
        return BatchRun("inactive")  # paused or cancelled: the batch stays pending
    # Tokens before the lease: a lease counts an attempt, and waiting for the rate limit (the
    # normal state of a busy channel) must not use up the attempts kept for real failures.
    wait_ms = quotas.take_tokens(batch.campaign.channel, batch.size, batch.campaign_id)
    stages.lap("tokens")
    if wait_ms:  # it re-sends itself: the sweep need not until it is due (one UPDATE)
        due = timezone.now() + timedelta(milliseconds=wait_ms)
        CampaignBatch.objects.filter(pk=batch.pk, state=BatchState.PENDING).update(enqueued_at=due)
        return BatchRun("throttled", wait_ms)
    token = ledger.lease(batch.pk)
    stages.lap("lease")
    if token is None:
        return BatchRun("leased")  # another worker holds a live lease on it
    with ledger.held(batch.pk, token):  # renewed while it works
        return _deliver(batch, token)


def _deliver(batch: CampaignBatch, token: str) -> BatchRun:
    campaign = batch.campaign
    try:
        result = _fan_out(campaign, batch, token)
    except LeaseLost:
        return _lost(batch)
    except Exception as exc:
        if store_unavailable(exc):
            _wait_for_stores(batch, token, exc)
            return BatchRun("waiting")
        _failed_attempt(batch, token, exc)
        raise
    if result is None:
        ledger.release(batch.pk, token)
        campaign_pause(campaign_id=campaign.pk, reason=PAUSE_BUDGET)
        return BatchRun("paused")
    if ledger.lease_lost(token) or not ledger.complete(batch, token, result, BatchState.DONE):
        return _lost(batch)  # taken over: its new holder completes it, counted once
    stages.lap(profile.COMPLETED)
    if not campaign.planned:  # as loaded when the batch started: at worst one look too many
        _top_up(campaign)
    if result.deferred:
        campaign_pause(campaign_id=campaign.pk, reason=PAUSE_BUDGET)
        return BatchRun("paused")
    return BatchRun("done")


def _lost(batch: CampaignBatch) -> BatchRun:
    log.warning("bulk: batch %s was taken over from this worker (stalled past its lease)", batch.pk)
    return BatchRun("lost")


class LeaseLost(Exception):
    """Another worker took the batch over (this one was stopped or too slow to renew)."""


def _still_held(token: str) -> None:
    if ledger.lease_lost(token):
        raise LeaseLost(token)


def _wait_for_stores(batch: CampaignBatch, token: str, exc: Exception) -> None:
    """Put the batch back (its attempt refunded) and pause the campaign until the stores answer.
    If the database is the store that is down, this raises too: the task then retries with
    backoff, and the lease runs out if it never can (the sweep hands the batch on)."""
    log.warning("bulk: batch %s waits for a store: %r", batch.pk, exc)
    metrics.inc("bulk_outage_waits")
    ledger.release(batch.pk, token, refund=True)
    campaign_wait_for_stores(campaign_id=batch.campaign_id)


def _failed_attempt(batch: CampaignBatch, token: str, exc: Exception) -> None:
    if batch.attempts + 1 < MAX_ATTEMPTS:
        ledger.release(batch.pk, token)
        return
    log.error("bulk: batch %s failed after %d attempts: %r", batch.pk, MAX_ATTEMPTS, exc)
    failed = BatchResult(0, 0, 0, failed=batch.size)
    if ledger.complete(batch, token, failed, BatchState.FAILED):  # not if taken over meanwhile
        reason = f"{type(exc).__name__}: {exc}"[:300]
        CampaignBatch.objects.filter(pk=batch.pk).update(error=reason)


def _fan_out(campaign: Campaign, batch: CampaignBatch, token: str) -> BatchResult | None:
    """Deliver one batch; None when the sender's daily budget cannot cover it."""
    sender = campaign.sender_uid
    blocked = blocked_receivers(sender_uid=sender, receiver_uids=batch.uids)
    candidates = [u for u in batch.uids if u not in blocked]
    stages.lap("blocks")
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
    category = broadcast_category(sender)
    stages.lap("quota admission")
    _still_held(token)  # a worker stopped past its lease: the batch is another's now
    deliver_many(
        sender_uid=sender,
        receiver_uids=allowed,
        msgkey=campaign.msgkey or 0,
        category=category,
        marker=Sequenced(f"b:{campaign.pk}", batch.index),
    )
    return BatchResult(
        len(allowed), len(admission.capped), len(blocked), deferred=admission.deferred
    )


# -- housekeeping (beat) -----------------------------------------------------------------------
@dataclass(frozen=True)
class SweepReport:
    batches_requeued: int
    planners_requeued: int
    started: int
    resumed: int
    resumed_after_outage: int = 0


def sweep(limit: int = 1000) -> SweepReport:
    now = timezone.now()
    stale = now - timedelta(seconds=ledger.lease_seconds())
    if broker.restarted():  # its queue may have lost messages: everything pending is owed now
        stale = now
    requeued = _requeue_stale_batches(now, stale, limit)
    return SweepReport(
        requeued,
        _requeue_lost_planners(now, stale, limit),
        _start_due(now),
        _resume_budget(),
        _resume_after_outage(now),
    )


def _resume_after_outage(now: datetime) -> int:
    """Resume the campaigns an outage paused once every store answers; give up on those that
    have waited past BULK_OUTAGE_HORIZON_S (they stay paused for an operator)."""
    waiting = Campaign.objects.filter(status=CampaignStatus.PAUSED, pause_reason=PAUSE_OUTAGE)
    found = list(waiting.values_list("pk", "paused_at")[:100])
    if not found or not stores_answer():
        return 0
    horizon = timedelta(seconds=settings.BULK_OUTAGE_HORIZON_S)
    resumed = 0
    for pk, paused_at in found:
        if paused_at is not None and now - paused_at > horizon:
            waiting.filter(pk=pk).update(pause_reason=PAUSE_OUTAGE_TOO_LONG)
            log.error("bulk: campaign %s waited past the outage horizon; left paused", pk)
            continue
        campaign_resume(campaign_id=pk)
        resumed += 1
    return resumed


def _requeue_stale_batches(now: datetime, stale: datetime, limit: int) -> int:
    """Batches owed a message: a lease that ran out (its worker died or was stopped), or pending
    and not sent for a lease (a message a dead worker held, a throttled retry it kept). A batch
    is sent again at most once per lease (``enqueued_at``), not on every beat."""
    expired = Q(state=BatchState.RUNNING, lease_until__lt=now)
    not_sent_lately = Q(enqueued_at__lt=stale) | Q(enqueued_at__isnull=True)
    lost = CampaignBatch.objects.filter(campaign__status=CampaignStatus.RUNNING).filter(
        (expired | Q(state=BatchState.PENDING)) & not_sent_lately
    )
    rows = list(lost.values_list("pk", "index", "campaign__channel")[:limit])
    CampaignBatch.objects.filter(pk__in=[pk for pk, _, _ in rows]).update(enqueued_at=now)
    for pk, index, channel in rows:
        enqueue_batches(channel, [(pk, index)])
    return len(rows)


def _requeue_lost_planners(now: datetime, stale: datetime, limit: int) -> int:
    # A planner that never ran (its task lost before the first step) has no heartbeat yet.
    never_planned = Q(plan_heartbeat__isnull=True, started_at__lt=stale)
    planners = Campaign.objects.filter(status=CampaignStatus.RUNNING, planned=False).filter(
        Q(plan_heartbeat__lt=stale) | never_planned
    )
    lost = list(planners[:limit])  # listed before the heartbeats below refresh them
    for campaign in lost:
        Campaign.objects.filter(pk=campaign.pk).update(plan_heartbeat=now)
        enqueue_plan(campaign)
    return len(lost)


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
