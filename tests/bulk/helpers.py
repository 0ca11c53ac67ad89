"""Builders and the exactly-once oracle shared by the bulk tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.utils import timezone

from bulk import services
from bulk.models import BatchState, Campaign, CampaignBatch, CampaignStatus, SenderPolicy
from config.redis import get_redis
from messaging.counters import keys as unread_keys
from messaging.inbox import get_inbox
from messaging.models import Account, Block, Conversation, Follow


@dataclass(frozen=True)
class Scenario:
    sender: int
    followers: list[int]
    blocked: set[int]

    @property
    def expected(self) -> set[int]:
        return set(self.followers) - self.blocked


def business_with_followers(
    uids: Sequence[int], *, blocked_every: int = 0, limit: int = 1, priority: bool = True
) -> Scenario:
    sender, *followers = uids
    Account.objects.create(uid=sender, kind="business", name=f"shop {sender}")
    SenderPolicy.objects.create(
        sender_uid=sender, per_receiver_limit=limit, priority_allowed=priority
    )
    now = timezone.now()
    Follow.objects.bulk_create(
        [Follow(follower_uid=u, followee_uid=sender, followed_at=now) for u in followers]
    )
    blocked = set(followers[::blocked_every]) if blocked_every else set()
    Block.objects.bulk_create([Block(owner_uid=u, blocked_uid=sender) for u in blocked])
    return Scenario(sender, list(followers), blocked)


def launch(scenario: Scenario, channel: str = "daily", text: str = "sale") -> Campaign:
    campaign, _ = services.campaign_create(
        sender_uid=scenario.sender,
        content={"type": "text", "text": text},
        audience=services.AudienceChoice("followers", {}, None),
        channel=channel,
    )
    return campaign


def run_synchronously(campaign_id: int, repeat: int = 1) -> None:
    """Plan, then run every pending batch ``repeat`` times (a redelivered message each time)."""
    while services.campaign_plan_step(campaign_id):
        pass
    for _ in range(repeat):
        for pk in CampaignBatch.objects.filter(campaign_id=campaign_id).values_list(
            "pk", flat=True
        ):
            services.batch_run(pk)


def assert_exactly_once(
    campaign_id: int,
    delivered: set[int],
    sender: int,
    skipped_quota: int = 0,
    skipped_blocked: int = 0,
) -> None:
    """Every recipient has one inbox entry and unread 1; totals add up; nobody else got it."""
    campaign = Campaign.objects.get(pk=campaign_id)
    assert campaign.status == CampaignStatus.FINISHED
    assert (
        not CampaignBatch.objects.filter(campaign_id=campaign_id)
        .exclude(state=BatchState.DONE)
        .exists()
    )
    assert campaign.delivered == len(delivered)
    assert campaign.skipped_quota == skipped_quota
    assert campaign.skipped_blocked == skipped_blocked
    assert campaign.total == campaign.delivered + skipped_quota + skipped_blocked + campaign.failed
    inbox = get_inbox()
    assert {uid for uid in delivered if inbox.count(uid, sender) != 1} == set()
    receivers = set(
        Conversation.objects.filter(peer_uid=sender).values_list("owner_uid", flat=True)
    )
    assert receivers == delivered
    _assert_unread_is_one_each(delivered, sender)


def _assert_unread_is_one_each(owners: set[int], sender: int) -> None:
    pipe = get_redis().pipeline(transaction=False)
    ordered = sorted(owners)
    for uid in ordered:
        pipe.hmget(unread_keys.unread(uid), [f"p:{sender}", "t", "c:business"])
    wrong = {
        uid: values
        for uid, values in zip(ordered, pipe.execute(), strict=True)
        if values != [b"1", b"1", b"1"]
    }
    assert wrong == {}
