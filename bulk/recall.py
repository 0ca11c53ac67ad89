"""Recalling a campaign's message from every recipient's timeline, batch by batch.

A recall of the campaign's msgkey (``messaging.services.message_recall``: the sender within the
recall window, or an operator) flags the content recalled, stops the campaign (cancelled, if it
had not ended) and enqueues one ``bulk.recall_batch`` task per batch of the ledger on the
``messaging`` queue, so a recall never waits behind a channel's backlog (``TASK``, bound to
bulk/tasks.py's ``recall_batch`` by BulkConfig.ready: that module runs this one). A batch task:

1. owns the batch: a finished one (done or failed) is left as it is; a pending one, or one whose
   worker died, is leased and closed as done with nothing delivered, so no worker delivers it
   later; one that a live worker holds is tried again when its lease has had time to end.
2. reads which of the batch's recipients hold a copy (``Inbox.get_for_owners``: the store, not the
   ledger, so a batch a dead worker delivered in part is recalled too) and recalls them through
   ``messaging.services.copies_recall_many``, the recall step a 1:1 message takes too: the
   unflagged copies still unread counted down by one under one marker per batch, every copy
   flagged recalled, the conversations bumped so every cache tier shows the recall.

3. records the batch's index in ``recalled:{c:<campaign>}`` (bulk/keys.py) for the operators'
   recall progress (admin); a set, so a task that runs twice records it once.

Never abandoned: a batch task gives up after its retries (a long outage), and a lost broker
message is never run at all, so the beat's ``bulk.sweep`` calls ``resend_unfinished`` (once per
RESEND_EVERY_S across processes): every campaign created within RESEND_LOOKBACK whose message
is recalled has each batch not yet recorded in ``recalled:{c:<campaign>}`` enqueued again
(a batch recalled twice changes nothing, see below).

A campaign's message changed in SQL, behind the application's back (a DBA fixing a link: the
binlog follower, ``messaging.services.messages_changed_outside``): ``campaign_changed`` enqueues
one ``bulk.refresh_batch`` per batch, which bumps the batch's recipients' conversations that still
show that message, so every cache tier shows the new preview (a bump is idempotent: a task run
twice changes nothing more). A recall set in SQL takes the recall's path above. Never abandoned
either: the batches still to refresh are kept in ``refreshing:{c:<campaign>}`` (each task takes
its own out when done) and the sweep enqueues again those still there REFRESH_GRACE_S after their
campaign's last enqueue (``refreshes_resend``).

Exactly once: the decrement runs before the flags and under its marker, so a task that died
between the two finds the copies still unflagged when it runs again, and the marker stops a
second decrement; a task that ran to the end finds every copy flagged and changes nothing.
Batches are disjoint (``ledger._split_off``), so two batch tasks never count one copy down twice.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import cast

from celery import current_app
from django.db import transaction
from django.utils import timezone

from api.errors import Conflict
from bulk import keys, ledger
from bulk.ledger import BatchResult
from bulk.models import BatchState, Campaign, CampaignBatch
from bulk.services import campaign_cancel
from infra.redis import get_redis
from infra.taskref import TaskRef
from messaging.models import Message, MessageStatus
from messaging.services import conversations_showing_bump, copies_recall_many
from storage.counters.store import Sequenced
from storage.inbox import get_inbox

RETRY_IN_S = 5
RESEND_EVERY_S = 30
RESEND_LOOKBACK = timedelta(days=7)  # well inside RECALLED_TTL_S: the progress set outlives it
RECALLED_TTL_S = 30 * 86400  # the recall progress outlives any recall by far
# Past a refresh task's own retries (30, at most a minute apart: ~25 min), so the sweep re-sends
# only refreshes given up or lost, not those still queued or retrying.
REFRESH_GRACE_S = 30 * 60
TASK = TaskRef()
REFRESH_TASK = TaskRef()


@dataclass(frozen=True)
class BatchRecall:
    state: str  # recalled | busy | gone
    copies: int = 0


def campaign_recall(message: Message) -> int:
    """Stop the campaign that sent ``message`` and enqueue its batches' recall; returns how many
    batches (0: not a campaign's message)."""
    campaign = Campaign.objects.filter(msgkey=message.msgkey).first()
    if campaign is None:
        return 0
    with contextlib.suppress(Conflict):  # finished or failed: nothing left to stop
        campaign_cancel(campaign_id=campaign.pk)
    ids = list(CampaignBatch.objects.filter(campaign=campaign).values_list("pk", flat=True))
    transaction.on_commit(lambda: enqueue(ids))
    return len(ids)


def campaign_changed(message: Message) -> int:
    """Enqueue the refresh of every batch of the campaign that sent ``message``; returns how many
    batches (0: not a campaign's message)."""
    campaign = Campaign.objects.filter(msgkey=message.msgkey).first()
    if campaign is None:
        return 0
    ids = list(CampaignBatch.objects.filter(campaign=campaign).values_list("pk", flat=True))
    transaction.on_commit(lambda: _refresh_start(campaign.pk, ids))
    return len(ids)


def _refresh_start(campaign_id: int, batch_ids: Sequence[int]) -> None:
    """Record the batches to refresh (module docstring), then enqueue one task per batch."""
    if batch_ids:
        pipe = get_redis().pipeline(transaction=False)
        pipe.sadd(keys.refreshing_batches(campaign_id), *batch_ids)
        pipe.expire(keys.refreshing_batches(campaign_id), int(RESEND_LOOKBACK.total_seconds()))
        pipe.zadd(keys.refreshes_pending(), {str(campaign_id): time.time()})
        pipe.execute()
    enqueue(batch_ids, task=REFRESH_TASK)


def batch_refresh(batch_id: int) -> int:
    """Bump the batch's recipients' conversations showing the campaign's message; how many."""
    found = _batch_and_msgkey(batch_id)
    if found is None:
        return 0
    batch, msgkey = found
    bumped = conversations_showing_bump(batch.uids, batch.campaign.sender_uid, msgkey)
    get_redis().srem(keys.refreshing_batches(batch.campaign_id), batch_id)
    return bumped


def refreshes_resend() -> int:
    """Enqueue again the batches still to refresh of every campaign last enqueued more than
    REFRESH_GRACE_S ago (a task that gave up, a broker message lost); returns how many.

    The campaign leaves ``refresh:pending`` before its set is read and comes back if the set is
    not empty, so a refresh started meanwhile is never dropped from it (at worst sent twice)."""
    r, now = get_redis(), time.time()
    resent = 0
    due = cast(
        "list[bytes]", r.zrangebyscore(keys.refreshes_pending(), "-inf", now - REFRESH_GRACE_S)
    )
    for campaign_id in [int(m) for m in due]:
        r.zrem(keys.refreshes_pending(), str(campaign_id))
        ids = sorted(int(i) for i in r.smembers(keys.refreshing_batches(campaign_id)))
        if ids:
            r.zadd(keys.refreshes_pending(), {str(campaign_id): now})
            enqueue(ids, task=REFRESH_TASK)
            resent += len(ids)
    return resent


def _batch_and_msgkey(batch_id: int) -> tuple[CampaignBatch, int] | None:
    """The batch, with its campaign, and the campaign's msgkey; None if either is gone."""
    batch = CampaignBatch.objects.select_related("campaign").filter(pk=batch_id).first()
    msgkey = batch.campaign.msgkey if batch is not None else None
    return None if batch is None or msgkey is None else (batch, msgkey)


def enqueue(batch_ids: Sequence[int], countdown: float = 0.0, task: TaskRef = TASK) -> None:
    """One task per batch (a recall's, or ``task``), through one broker producer; ``countdown``
    0: right away."""
    bound = task.task
    with current_app.producer_or_acquire() as producer:
        for batch_id in batch_ids:
            bound.apply_async(args=(batch_id,), countdown=countdown, producer=producer)


def batch_recall(batch_id: int) -> BatchRecall:
    found = _batch_and_msgkey(batch_id)
    if found is None:
        return BatchRecall("gone")
    batch, msgkey = found
    if batch.state not in (BatchState.DONE, BatchState.FAILED) and not _close(batch):
        return BatchRecall("busy")
    campaign = batch.campaign
    copies = get_inbox().get_for_owners(batch.uids, campaign.sender_uid, msgkey)
    live = copies_recall_many(
        copies,
        sender_uid=campaign.sender_uid,
        msgkey=msgkey,
        marker=Sequenced(f"r:{campaign.pk}", batch.index),
    )
    _record(campaign.pk, batch.index)
    return BatchRecall("recalled", len(live))


def resend_unfinished() -> int:
    """Enqueue again every batch of a recalled campaign not recalled yet (module docstring);
    returns how many. At most once per RESEND_EVERY_S across processes."""
    if not get_redis().set(keys.recall_resend_due(), 1, nx=True, ex=RESEND_EVERY_S):
        return 0
    since = timezone.now() - RESEND_LOOKBACK
    rows = Campaign.objects.filter(created_at__gte=since, msgkey__isnull=False)
    recent = {msgkey: pk for msgkey, pk in rows.values_list("msgkey", "pk") if msgkey is not None}
    recalled = Message.objects.filter(msgkey__in=list(recent), status=MessageStatus.RECALLED)
    ids = [pk for m in recalled.values_list("msgkey", flat=True) for pk in _unfinished(recent[m])]
    enqueue(ids)
    return len(ids)


def _unfinished(campaign_id: int) -> list[int]:
    done = {int(i) for i in get_redis().smembers(keys.recalled_batches(campaign_id))}
    batches = CampaignBatch.objects.filter(campaign_id=campaign_id).values_list("pk", "index")
    return [pk for pk, index in batches if index not in done]


def _record(campaign_id: int, index: int) -> None:
    pipe = get_redis().pipeline(transaction=False)
    pipe.sadd(keys.recalled_batches(campaign_id), index)
    pipe.expire(keys.recalled_batches(campaign_id), RECALLED_TTL_S)
    pipe.execute()


def recalled_batches(campaign_id: int) -> int:
    """How many of the campaign's batches have been recalled."""
    return int(get_redis().scard(keys.recalled_batches(campaign_id)))


def _close(batch: CampaignBatch) -> bool:
    """Take a batch no live worker holds and close it, delivered to nobody; False: it is held."""
    token = ledger.lease(batch.pk)
    if token is None:
        return False
    ledger.complete(batch, token, BatchResult(0, 0, 0), BatchState.DONE)
    return True
