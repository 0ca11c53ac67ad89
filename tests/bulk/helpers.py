"""Builders and the exactly-once oracle shared by the bulk tests.

- Services: ``business_with_followers``, ``launch``, ``run_synchronously``, ``assert_exactly_once``.
- The campaign API (tests/bulk/test_api_*.py, the admin and command tests): ``shop``, ``follow``,
  ``block``, ``campaigns_api``, ``body``, ``create``, ``upload``, ``progress``, ``drive`` (runs a
  campaign to its end in the test process: plan, then every pending batch, the same service calls
  the Celery tasks make), ``received`` and ``assert_delivered`` (what recipients see).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from api.models import Scope
from bulk import fanout, services
from bulk.models import BatchState, Campaign, CampaignBatch, CampaignStatus, SenderPolicy
from infra.redis import get_redis
from messaging.models import Account, Block, Conversation, Follow
from storage.counters import keys as unread_keys
from storage.inbox import get_inbox
from tests.api.factories import API, ClientApi, make_api
from unread.selectors import unread_summary


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
    while fanout.campaign_plan_step(campaign_id):
        pass
    for _ in range(repeat):
        for pk in CampaignBatch.objects.filter(campaign_id=campaign_id).values_list(
            "pk", flat=True
        ):
            fanout.batch_run(pk)


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


# -- the campaign API ---------------------------------------------------------------------------
Uids = Callable[[int], list[int]]


def shop(uid: int, *, priority: bool = False, limit: int = 1) -> int:
    """A business account with its sending policy."""
    Account.objects.create(uid=uid, kind="business", name=f"shop {uid}")
    SenderPolicy.objects.create(sender_uid=uid, per_receiver_limit=limit, priority_allowed=priority)
    return uid


def follow(sender: int, followers: list[int], at: Any = None) -> None:
    when = at or timezone.now()
    Follow.objects.bulk_create(
        [Follow(follower_uid=u, followee_uid=sender, followed_at=when) for u in followers]
    )


def block(sender: int, owners: list[int]) -> None:
    Block.objects.bulk_create([Block(owner_uid=u, blocked_uid=sender) for u in owners])


def campaigns_api(*senders: int, scopes: tuple[str, ...] = (Scope.CAMPAIGNS,)) -> ClientApi:
    return make_api(f"client-{senders[0]}-{len(scopes)}-{time.monotonic_ns()}", scopes, senders)


def body(sender: int, audience: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "sender_uid": str(sender),
        "content": {"type": "text", "text": "Spring sale 🌸"},
        "audience": audience,
        **extra,
    }


def create(api: ClientApi, sender: int, audience: dict[str, Any], **extra: Any) -> dict[str, Any]:
    status, answer = api.call("POST", "/campaigns", body(sender, audience, **extra))
    assert status == 201, answer
    return answer


def upload(api: ClientApi, content: bytes, name: str = "uids.txt") -> tuple[int, Any]:
    response = api.http.post(
        f"{API}/audiences", {"file": SimpleUploadedFile(name, content)}, format="multipart"
    )
    return response.status_code, response.json()


def drive(campaign_id: int | str) -> Campaign:
    """Run a campaign to its end in this process, as the workers would: plan, then each batch."""
    pk = int(campaign_id)
    while fanout.campaign_plan_step(pk):
        pass
    for _ in range(10_000):
        campaign = Campaign.objects.get(pk=pk)
        pending = CampaignBatch.objects.filter(campaign_id=pk, state=BatchState.PENDING)
        if campaign.status != CampaignStatus.RUNNING or not pending.exists():
            return campaign
        for batch_id in pending.values_list("pk", flat=True):
            outcome = fanout.batch_run(batch_id)
            time.sleep(outcome.retry_in_ms / 1000)
    raise AssertionError("the campaign never settled")


def progress(api: ClientApi, campaign_id: str) -> dict[str, Any]:
    status, answer = api.call("GET", f"/campaigns/{campaign_id}")
    assert status == 200, answer
    return answer


def received(uid: int, sender: int) -> list[int]:
    """The msgkeys ``uid`` holds from ``sender``, newest first."""
    return [e.msgkey for e in get_inbox().page(uid, sender).entries]


def assert_delivered(sender: int, campaign: Campaign, expected: set[int], others: set[int]) -> None:
    """What the recipients see: one business conversation with one unread message; others none."""
    for uid in expected:
        assert received(uid, sender) == [campaign.msgkey]
        conversation = Conversation.objects.get(owner_uid=uid, peer_uid=sender)
        assert conversation.category == "business"
        summary = unread_summary(uid)
        assert (summary.total, summary.by_category["business"]) == (1, 1)
    for uid in others:
        assert received(uid, sender) == []
        assert not Conversation.objects.filter(owner_uid=uid, peer_uid=sender).exists()
        assert unread_summary(uid).total == 0
