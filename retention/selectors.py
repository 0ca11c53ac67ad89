"""Retention's reads: the policy, each kind's cutoff, and what is due (nothing here writes).

Policy (settings, docs/configuration.md), days each kind is kept, 0 = for ever:
  RETENTION_CAMPAIGN_INBOX_DAYS  the recipients' copies of a campaign's message
  RETENTION_HISTORY_DAYS         every inbox entry (1:1, and campaigns too) and group messages
  RETENTION_EVENTS_DAYS          delivery-stream entries, and a campaign's batch ledger
A cutoff is a msgkey (its top bits are the send time): what was sent before ``now - days`` is due.
A campaign is due once it ended (finished, cancelled or failed) and was sent before the cutoff,
until its content row is gone: deleting that row is the last step of its expiry, so the content
row is the record of which campaigns are done.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q

from bulk.models import Campaign, CampaignBatch, CampaignStatus
from messaging.models import Conversation, Message
from storage import msgkey

ENDED = (CampaignStatus.FINISHED, CampaignStatus.CANCELLED, CampaignStatus.FAILED)
CHUNK = 1000


class RetentionError(ValueError):
    """A policy or an argument retention cannot run with (one readable sentence)."""


@dataclass(frozen=True)
class Policy:
    campaign_inbox_days: int
    history_days: int
    events_days: int


def policy() -> Policy:
    found = Policy(
        campaign_inbox_days=settings.RETENTION_CAMPAIGN_INBOX_DAYS,
        history_days=settings.RETENTION_HISTORY_DAYS,
        events_days=settings.RETENTION_EVENTS_DAYS,
    )
    for name, days in vars(found).items():
        if not isinstance(days, int) or days < 0:
            setting = f"RETENTION_{name.upper()}"
            raise RetentionError(f"{setting} must be 0 (keep for ever) or a number of days")
    return found


def cutoff(days: int, now: datetime) -> int | None:
    """The smallest msgkey kept (None: the kind is kept for ever)."""
    return msgkey.lower_bound(now - timedelta(days=days)) if days else None


def campaigns_due(before: int) -> list[Campaign]:
    """Ended campaigns sent before ``before`` whose copies have not aged out yet, oldest first."""
    sent = Campaign.objects.filter(status__in=ENDED, msgkey__lt=before).order_by("msgkey")
    rows = list(sent.only("pk", "sender_uid", "msgkey", "delivered"))
    alive = set(
        Message.objects.filter(msgkey__in=[c.msgkey for c in rows]).values_list("msgkey", flat=True)
    )
    return [c for c in rows if c.msgkey in alive]


def campaign_batches(campaign_id: int) -> Iterator[tuple[int, list[int]]]:
    """(index, recipient uids) of each batch of the ledger, read ``CHUNK`` batches at a time."""
    rows = CampaignBatch.objects.filter(campaign_id=campaign_id).order_by("index")
    yield from rows.values_list("index", "uids").iterator(chunk_size=CHUNK)


def conversation_chunks(size: int = CHUNK) -> Iterator[list[Conversation]]:
    """Every conversation, ``size`` at a time, by a keyset on the primary key."""
    after = 0
    fields = ("pk", "owner_uid", "peer_uid", "category", "last_msgkey", "read_upto", "mtime")
    while True:
        chunk = list(Conversation.objects.filter(pk__gt=after).order_by("pk").only(*fields)[:size])
        if chunk:
            yield chunk
        if len(chunk) < size:
            return
        after = chunk[-1].pk


def ledger_due(before: datetime, *, campaigns_expire: bool) -> list[int]:
    """Ended campaigns (ended before ``before``) that still hold batch rows. When campaign copies
    age out, a campaign's ledger waits for them: it is the list of recipients holding a copy."""
    ended = Q(finished_at__lt=before) | Q(finished_at__isnull=True, created_at__lt=before)
    rows = Campaign.objects.filter(ended, status__in=ENDED, batches__isnull=False).distinct()
    found = dict(rows.values_list("pk", "msgkey"))
    if campaigns_expire:
        content = Message.objects.filter(msgkey__in=[k for k in found.values() if k])
        alive = set(content.values_list("msgkey", flat=True))
        found = {pk: key for pk, key in found.items() if key not in alive}
    return sorted(found)


def kept_campaign_content(before: int) -> set[int]:
    """Content sent before ``before`` that campaigns still running (or paused) will deliver."""
    rows = Campaign.objects.filter(msgkey__lt=before).exclude(status__in=ENDED)
    return {key for key in rows.values_list("msgkey", flat=True) if key is not None}
