"""Campaign actions a client (the API) or an operator (the CLI, admin) asks for: store an uploaded
audience, submit or preview a campaign, start, pause, resume, cancel. What the workers do (plan,
run a batch, sweep) is bulk.fanout; reads are bulk.selectors.

- ``audience_upload``: a streamed uid list stored once as an Audience; one without any valid uid
  is deleted and refused (NoValidUid, an InvalidInput: 400).
- ``campaign_submit``: a validated request (bulk.serializers) → the audience and the campaign in
  one transaction, so a refused create leaves no orphan audience; an Idempotency-Key replay of the
  same body returns the stored campaign (created False) and stores no list again; another body
  under the same key is a Conflict (409).
- ``campaign_create``: stores the content once (one ``Message``) and the campaign (with its
  optional ``name``, part of the idempotency digest when given), and starts the planner after
  commit (or leaves it ``scheduled``).
- ``campaign_preview``: the dry run. It stores nothing: an explicit list is written inside a
  transaction that is rolled back, so the preview walks exactly what the campaign would walk.
- control: ``campaign_pause`` / ``resume`` / ``cancel`` / ``start`` change the status under the
  campaign's row lock; a status that does not allow it is a Conflict (409). Tasks go out after
  commit. ``campaign_wait_for_stores`` is the workers' pause while a store is down.
- tasks: ``enqueue_plan`` / ``enqueue_batches`` send each channel's task objects (``PLAN_TASK``,
  ``RUN_BATCH_TASK``: infra.taskref, bound by BulkConfig.ready to bulk/tasks.py's ``PLAN`` and
  ``RUN_BATCH``; that module imports bulk.fanout, which enqueues through here).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import redis
from celery import current_app
from django.db import IntegrityError, transaction
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from api.errors import Conflict, Forbidden, InvalidInput, NotFound
from api.models import ApiClient
from bulk import audiences, ledger, quotas, selectors
from bulk.models import (
    Audience,
    AudienceType,
    BatchState,
    Campaign,
    CampaignBatch,
    CampaignStatus,
    Channel,
    SenderPolicy,
)
from infra import metrics
from infra.dbrouter import PRIMARY, read_replica
from infra.taskref import TaskRef
from messaging.selectors import blocked_receivers, sender_category
from messaging.services import message_store
from storage.content import validate_content

log = logging.getLogger(__name__)

# A campaign waiting out a store outage (bulk.fanout): paused with this reason, resumed by the
# sweep once the stores answer.
PAUSE_OUTAGE = "store_unavailable"
PAUSE_OUTAGE_TOO_LONG = "outage_too_long"  # past BULK_OUTAGE_HORIZON_S: an operator's


# -- audiences ---------------------------------------------------------------------------------
class NoValidUid(InvalidInput):
    """An upload without a single valid uid (400); it was not kept."""

    def __init__(self, invalid_lines: int, samples: list[dict[str, Any]]) -> None:
        self.invalid_lines = invalid_lines
        if not invalid_lines:
            super().__init__("The upload is empty.", {"file": "no uid lines"})
            return
        where = f"line {samples[0]['line']}: {samples[0]['reason']}"
        detail = f"No valid uid in the upload ({invalid_lines} invalid lines)."
        super().__init__(detail, {"file": where})


def audience_upload(
    *, lines: Iterable[str], client: ApiClient | None, sender_uid: int | None = None, name: str = ""
) -> Audience:
    """Store an uploaded uid list; one without any valid uid is deleted and refused."""
    audience = audiences.audience_from_lines(
        lines=lines, sender_uid=sender_uid, client=client, name=name
    )
    if audience.count == 0:
        audience.delete()
        raise NoValidUid(audience.invalid_lines, audience.invalid_samples)
    return audience


def audience_upload_once(
    *, lines: Iterable[str], client: ApiClient, key: str, name: str = ""
) -> tuple[Audience, bool]:
    """(audience, stored now) for an upload under the client's Idempotency-Key: the key's first
    upload is stored; a retry with the same name and lines returns it (the lines are read to
    compare, not stored again); the same key with other lines is a Conflict (409)."""
    hasher = hashlib.sha256(name.encode() + b"\n")
    hashed = (_hashed(hasher, line) for line in lines)
    found = Audience.objects.filter(client=client, idempotency_key=key).first()
    if found is None:
        try:
            with transaction.atomic():
                audience = audience_upload(lines=hashed, client=client, name=name)
                audience.idempotency_key, audience.request_digest = key, hasher.hexdigest()
                audience.save(update_fields=["idempotency_key", "request_digest"])
            return audience, True
        except IntegrityError:  # a concurrent retry with this key stored it first
            found = Audience.objects.filter(client=client, idempotency_key=key).first()
            if found is None:
                raise
    for _ in hashed:  # the rest of the upload, for its digest
        pass
    if found.request_digest != hasher.hexdigest():
        raise Conflict("Idempotency-Key was already used for a different upload.")
    return found, False


def _hashed(hasher: Any, line: str) -> str:
    hasher.update(line.encode() + b"\n")
    return line


@dataclass(frozen=True)
class AudienceChoice:
    type: str
    spec: dict[str, Any]  # what the campaign stores (and its idempotency digest covers)
    audience: Audience | None


def audience_choice(
    spec: Mapping[str, Any],
    *,
    sender_uid: int,
    client: ApiClient | None,
    reuse: Campaign | None = None,
) -> AudienceChoice:
    """A validated audience spec → the choice; an explicit ``uids`` list is stored (unless
    ``reuse``, an Idempotency-Key replay, stored the same one)."""
    kind = spec["type"]
    if kind == AudienceType.UPLOAD:
        audience = selectors.audience_for_client(client, spec["audience_id"])
        return AudienceChoice(kind, {"audience_id": audience.pk}, audience)
    if kind == AudienceType.UIDS:
        summary = _uids_summary(spec["uids"])
        if reuse is not None and reuse.audience_spec == summary and reuse.audience is not None:
            return AudienceChoice(kind, summary, reuse.audience)
        return AudienceChoice(kind, summary, _store_uids(spec["uids"], sender_uid, client))
    return AudienceChoice(kind, {k: v for k, v in spec.items() if k != "type"}, None)


def _uids_summary(entries: list[str]) -> dict[str, Any]:
    """What an explicit list contributes to the campaign's spec (and its idempotency digest)."""
    digest = hashlib.sha256(json.dumps(entries).encode()).hexdigest()
    return {"uids_sha256": digest, "entries": len(entries)}


def _store_uids(entries: list[str], sender_uid: int, client: ApiClient | None) -> Audience:
    audience = audiences.audience_from_lines(lines=entries, sender_uid=sender_uid, client=client)
    if audience.count == 0:  # the caller's transaction takes the empty audience away
        raise InvalidInput(
            "audience.uids holds no valid uid.",
            {"audience.uids": f"no valid uid ({audience.invalid_lines} invalid entries)"},
        )
    return audience


# -- create ------------------------------------------------------------------------------------
def campaign_submit(
    *,
    sender_uid: int,
    content: dict[str, Any],
    audience_spec: Mapping[str, Any],
    channel: str,
    scheduled_at: datetime | None = None,
    client: ApiClient | None = None,
    idempotency_key: str | None = None,
    name: str = "",
) -> tuple[Campaign, bool]:
    """Store the audience and create (or replay) the campaign; returns (campaign, created)."""
    with transaction.atomic():
        earlier = None
        if idempotency_key:
            earlier = selectors.campaign_for_idempotency_key(client, idempotency_key)
        choice = audience_choice(audience_spec, sender_uid=sender_uid, client=client, reuse=earlier)
        return campaign_create(
            sender_uid=sender_uid,
            content=content,
            audience=choice,
            channel=channel,
            scheduled_at=scheduled_at,
            client=client,
            idempotency_key=idempotency_key,
            name=name,
        )


def campaign_create(
    *,
    sender_uid: int,
    content: dict[str, Any],
    audience: AudienceChoice,
    channel: str,
    scheduled_at: datetime | None = None,
    client: ApiClient | None = None,
    idempotency_key: str | None = None,
    name: str = "",
) -> tuple[Campaign, bool]:
    """Create and start (or schedule) a campaign; returns (campaign, created)."""
    body = validate_content(content)
    _check_sender(sender_uid, channel)
    digest = _digest(sender_uid, body, audience, channel, scheduled_at, name)
    if idempotency_key:
        found = selectors.campaign_for_idempotency_key(client, idempotency_key)
        if found is not None:
            return _same_request(found, digest), False
    try:
        campaign = _insert(
            sender_uid, body, audience, channel, scheduled_at, client, idempotency_key, digest, name
        )
    except IntegrityError:  # a concurrent retry with the same Idempotency-Key won
        found = selectors.campaign_for_idempotency_key(client, idempotency_key or "")
        if found is None:
            raise
        return _same_request(found, digest), False
    return campaign, True


def _check_sender(sender_uid: int, channel: str) -> None:
    if sender_category(sender_uid) is None:
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
    name: str,
) -> str:
    parts = [sender, body, audience.type, audience.spec, channel, str(scheduled_at)]
    if name:  # only when given: campaigns stored before names keep their digests
        parts.append(name)
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
    client: ApiClient | None,
    idempotency_key: str | None,
    digest: str,
    name: str = "",
) -> Campaign:
    later = scheduled_at is not None and scheduled_at > timezone.now()
    stored = audience.audience
    with transaction.atomic():
        msgkey = message_store(sender_uid=sender_uid, body=body).msgkey
        campaign = Campaign.objects.create(
            sender_uid=sender_uid,
            name=name,
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
            transaction.on_commit(lambda: _or_left_to_sweep("plan", campaign, enqueue_plan))
    return campaign


# -- dry run -----------------------------------------------------------------------------------
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
    """The dry run of a campaign: who it would reach and skip. Stores nothing: an explicit list
    is walked inside the transaction that wrote it and is rolled back; a followers audience,
    which writes nothing, is counted after it, on the read replica (an estimate may lag)."""
    preview: Preview | None = None
    with transaction.atomic():
        choice = audience_choice(audience_spec, sender_uid=sender_uid, client=client)
        _check_sender(sender_uid, channel)
        if choice.audience is not None:
            preview = _dry_run(sender_uid, choice, channel, db=PRIMARY)
        transaction.set_rollback(True)
    if preview is None:
        preview = read_replica(lambda db: _dry_run(sender_uid, choice, channel, db=db))
    return preview


def _dry_run(sender_uid: int, choice: AudienceChoice, channel: str, *, db: str) -> Preview:
    probe = Campaign(
        sender_uid=sender_uid,
        audience_type=choice.type,
        audience_spec=choice.spec,
        audience=choice.audience,
        channel=channel,
    )
    policy = quotas.policy_for(sender_uid)
    size = blocked = capped = 0
    for chunk in audiences.iterate(probe, db=db):
        size += len(chunk)
        hit = blocked_receivers(sender_uid=sender_uid, receiver_uids=chunk)
        blocked += len(hit)
        capped += quotas.count_capped(sender_uid, [u for u in chunk if u not in hit], policy)
    stored = choice.audience
    return Preview(
        audience=size,
        would_skip_blocked=blocked,
        would_skip_quota=capped,
        would_skip_invalid=stored.invalid_lines if stored else 0,
        would_skip_duplicate=stored.duplicate_lines if stored else 0,
        would_deliver=size - blocked - capped,
        budget_remaining=quotas.budget_remaining(sender_uid) if channel == Channel.DAILY else None,
    )


# -- tasks -------------------------------------------------------------------------------------
# Fair share of a channel's queue: a campaign's batches are sent at a broker priority that falls
# as the campaign gets further (least attained service). The Redis transport keeps one list per
# priority step and BRPOPs them in order, 0 first (kombu's PRIORITY_STEPS [0, 3, 6, 9]), so a
# campaign launched while a big one has a queue of batches out is served ahead of that queue: in
# the demo a 3,000-recipient campaign started behind a 100,000-recipient one waited 5 s (16
# batches of the big one) before this. Plan steps carry no priority: they go first.
PRIORITY_BY_INDEX = ((4, 0), (16, 3), (64, 6))  # (batches before index, priority); then 9
LAST_PRIORITY = 9


def batch_priority(index: int) -> int:
    """The broker priority of a campaign's ``index``-th batch (0 is served first)."""
    for below, priority in PRIORITY_BY_INDEX:
        if index < below:
            return priority
    return LAST_PRIORITY


PLAN_TASK = {channel: TaskRef() for channel in Channel.values}
RUN_BATCH_TASK = {channel: TaskRef() for channel in Channel.values}


def enqueue_plan(campaign: Campaign) -> None:
    PLAN_TASK[campaign.channel].task.apply_async(args=(campaign.pk,))


def _or_left_to_sweep(what: str, campaign: Campaign, send: Callable[[Campaign], None]) -> None:
    """``send(campaign)``: a committed campaign's tasks. A broker that does not take them (down,
    or frozen past its timeout: config/celery.py) is logged and counted
    (``missive_bulk_tasks_left_to_sweep_total{what}``), and the call answers all the same:
    ``bulk.sweep`` sends again what the campaign owes once the broker answers (a planner that
    never started, pending batches past their lease). Before, with the broker frozen,
    ``POST /campaigns`` raised after Celery's publish retries: no answer for over 10 s, then a
    503 for a campaign that was stored."""
    try:
        send(campaign)
    except (BrokerError, redis.RedisError, OSError) as exc:
        log.warning(
            "bulk: campaign %s: %s left to the sweep, the broker did not take it: %r",
            campaign.pk,
            what,
            exc,
        )
        metrics.inc("bulk_tasks_left_to_sweep", what=what)


def enqueue_batches(channel: str, batches: Sequence[tuple[int, int]]) -> None:
    """Send ``(batch id, index in its campaign)`` pairs, each at its ``batch_priority``. One
    broker producer for the lot, not one per message (measured: 1.5-3.6 instead of 3.8-4 ms a
    message)."""
    task = RUN_BATCH_TASK[channel].task
    with current_app.producer_or_acquire() as producer:
        for batch_id, index in batches:
            task.apply_async(args=(batch_id,), producer=producer, priority=batch_priority(index))


# -- control -----------------------------------------------------------------------------------
def _transition(
    campaign_id: int,
    verb: str,
    allowed: Sequence[str],
    change: Callable[[Campaign], None] | None = None,
    **fields: Any,
) -> Campaign:
    """Under the campaign's row lock: check its status is ``allowed`` (else a Conflict naming
    the action, ``verb``), then apply ``change`` (a function of the locked row) and ``fields``."""
    with transaction.atomic():
        campaign = Campaign.objects.select_for_update().filter(pk=campaign_id).first()
        if campaign is None:
            raise NotFound("No such campaign.")
        if campaign.status not in allowed:
            raise Conflict(f"A {campaign.status} campaign cannot be {verb}.")
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

    return _transition(
        campaign_id, "paused", [CampaignStatus.RUNNING, CampaignStatus.PAUSED], pause
    )


def campaign_wait_for_stores(*, campaign_id: int) -> bool:
    """Pause a running campaign with reason ``store_unavailable`` (bulk.sweep resumes it once the
    stores answer); False when it was not running (an operator's pause is kept as it is)."""

    def pause(campaign: Campaign) -> None:
        campaign.status, campaign.pause_reason = CampaignStatus.PAUSED, PAUSE_OUTAGE
        campaign.paused_at = campaign.paused_at or timezone.now()

    try:
        _transition(campaign_id, "paused", [CampaignStatus.RUNNING], pause)
    except Conflict:
        return False
    return True


def campaign_resume(*, campaign_id: int) -> Campaign:
    def resume(campaign: Campaign) -> None:
        if campaign.status == CampaignStatus.PAUSED:  # resuming a running one changes nothing
            campaign.resumed_at = timezone.now()
        campaign.status, campaign.pause_reason = CampaignStatus.RUNNING, ""
        if campaign.paused_at is not None:
            campaign.paused_s += (timezone.now() - campaign.paused_at).total_seconds()
            campaign.paused_at = None

    allowed = [CampaignStatus.PAUSED, CampaignStatus.RUNNING]
    campaign = _transition(campaign_id, "resumed", allowed, resume)
    _or_left_to_sweep("resume", campaign, _kick)
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
        campaign_id,
        "cancelled",
        active,
        status=CampaignStatus.CANCELLED,
        finished_at=timezone.now(),
    )


def campaign_start(*, campaign_id: int) -> Campaign:
    campaign = _transition(
        campaign_id,
        "started",
        [CampaignStatus.SCHEDULED, CampaignStatus.DRAFT],
        status=CampaignStatus.RUNNING,
        started_at=timezone.now(),
    )
    _or_left_to_sweep("plan", campaign, enqueue_plan)
    return campaign


def _kick(campaign: Campaign) -> None:
    """Re-enqueue everything a running campaign still owes (resume, sweep)."""
    if not campaign.planned:
        enqueue_plan(campaign)
    pending = CampaignBatch.objects.filter(campaign=campaign, state=BatchState.PENDING)
    batches = list(pending.values_list("pk", "index"))
    pending.update(enqueued_at=timezone.now())
    enqueue_batches(campaign.channel, batches)
    ledger.maybe_finish(campaign.pk)


# -- sender policies ---------------------------------------------------------------------------
POLICY_FIELDS = ("per_receiver_limit", "per_receiver_period_s", "daily_budget", "priority_allowed")


def sender_policy_set(*, sender_uid: int, changes: Mapping[str, int | bool]) -> SenderPolicy:
    """Change a sender's policy (created with the defaults first: a cap of 1 a day, no budget, no
    priority channel); every batch reads it, so the next batch of a running campaign follows."""
    unknown = set(changes) - set(POLICY_FIELDS)
    if unknown:
        raise InvalidInput(f"Unknown policy field(s): {', '.join(sorted(unknown))}.")
    if any(isinstance(v, int) and not isinstance(v, bool) and v < 0 for v in changes.values()):
        raise InvalidInput("Policy numbers cannot be negative.")
    if changes.get("per_receiver_period_s") == 0:
        raise InvalidInput("The per-receiver period must be at least one second.")
    with transaction.atomic():
        policy, _ = SenderPolicy.objects.select_for_update().get_or_create(sender_uid=sender_uid)
        for name, value in changes.items():
            setattr(policy, name, value)
        policy.save()
    return policy
