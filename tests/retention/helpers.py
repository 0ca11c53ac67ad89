"""Data sent days ago, through the application's own delivery steps (``deliver_many``): a 1:1
exchange, and a campaign with its batch ledger, under msgkeys whose time is in the past."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import timedelta

from django.utils import timezone

from bulk.models import BatchState, Campaign, CampaignBatch, CampaignStatus
from messaging.models import Account, AccountKind, Category
from messaging.services import deliver_many, message_store
from storage import msgkey as keys

DAY_MS = 86_400_000
_seq = itertools.count(1)


def key_days_ago(days: float) -> int:
    """A msgkey sent ``days`` ago (node 1023 is never leased in tests: no clash with live keys)."""
    return keys.compose(keys.now_ms() - int(days * DAY_MS), 1023, next(_seq) % 4096)


def chat(sender: int, receiver: int, days_ago: float, text: str = "hi") -> int:
    key = key_days_ago(days_ago)
    message_store(sender_uid=sender, body={"type": "text", "text": text}, msgkey=key)
    deliver_many(
        sender_uid=sender,
        receiver_uids=[receiver],
        msgkey=key,
        category=Category.STRANGER,
        marker=f"m:{key}",
        with_outbox=True,
        sender_category=Category.STRANGER,
    )
    return key


def campaign(
    sender: int,
    receivers: Sequence[int],
    days_ago: float,
    text: str = "sale",
    status: str = CampaignStatus.FINISHED,
) -> Campaign:
    """A campaign delivered ``days_ago`` to ``receivers`` in one batch of its ledger."""
    Account.objects.get_or_create(uid=sender, defaults={"kind": AccountKind.BUSINESS})
    key = key_days_ago(days_ago)
    message_store(sender_uid=sender, body={"type": "text", "text": text}, msgkey=key)
    deliver_many(
        sender_uid=sender,
        receiver_uids=receivers,
        msgkey=key,
        category=Category.BUSINESS,
        marker=f"b:{key}",
    )
    ended = timezone.now() - timedelta(days=days_ago)
    row = Campaign.objects.create(
        sender_uid=sender,
        msgkey=key,
        audience_type="uids",
        channel="daily",
        status=status,
        planned=True,
        total=len(receivers),
        delivered=len(receivers),
        finished_at=ended if status == CampaignStatus.FINISHED else None,
    )
    CampaignBatch.objects.create(
        campaign=row,
        index=0,
        first_uid=min(receivers),
        last_uid=max(receivers),
        uids=list(receivers),
        size=len(receivers),
        state=BatchState.DONE,
    )
    return row
