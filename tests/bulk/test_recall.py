"""Recalling a campaign's message: every recipient's copy is flagged, unread counts drop exactly
once, and a campaign still running stops delivering (bulk/recall.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import override_settings

from bulk import fanout, recall
from bulk.models import BatchState, Campaign, CampaignBatch, CampaignStatus, ChannelSetting
from messaging import selectors
from messaging.models import Message, MessageStatus
from messaging.services import conversation_mark_read, message_recall
from storage import inbox as inbox_module
from storage.counters.store import unread_for_peers, unread_summary
from storage.inbox import get_inbox
from storage.inbox.base import FLAG_RECALLED
from tests.bulk.helpers import Scenario, business_with_followers, launch, run_synchronously

pytestmark = pytest.mark.django_db
Uids = Callable[[int], list[int]]


@pytest.fixture(autouse=True, params=["sql", "hbase"])
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    inbox_module._cached.cache_clear()
    with override_settings(INBOX_BACKEND=request.param):
        yield request.param
    inbox_module._cached.cache_clear()


def recall_every_batch(campaign: Campaign) -> list[str]:
    ids = CampaignBatch.objects.filter(campaign=campaign).values_list("pk", flat=True)
    return [recall.batch_recall(pk).state for pk in ids]


def unread_from(scenario: Scenario) -> dict[int, int]:
    sender = scenario.sender
    return {u: unread_for_peers(u, [sender]).get(sender, 0) for u in scenario.followers}


def two_campaigns(uids: Uids) -> tuple[Scenario, Campaign, Campaign]:
    """Every follower gets campaign ``first`` then ``second`` (no per-receiver cap)."""
    scenario = business_with_followers(uids(31), blocked_every=10, limit=0)
    first, second = launch(scenario, text="first"), launch(scenario, text="second")
    run_synchronously(first.pk)
    run_synchronously(second.pk)
    return scenario, first, second


def test_recalling_a_campaign_takes_it_back_from_every_recipient(uids: Uids) -> None:
    scenario, first, second = two_campaigns(uids)
    readers = sorted(scenario.expected)[:5]
    for uid in readers:  # these read both messages already: nothing unread to take back
        conversation_mark_read(owner_uid=uid, peer_uid=scenario.sender)

    message_recall(msgkey=first.msgkey or 0, actor_uid=scenario.sender)
    assert set(recall_every_batch(first)) == {"recalled"}

    inbox = get_inbox()
    for uid in scenario.expected:
        copy = inbox.get(uid, scenario.sender, first.msgkey or 0)
        assert copy is not None
        assert copy.flags & FLAG_RECALLED
        history = selectors.history(uid, scenario.sender).results
        assert [m.status for m in history] == ["normal", "recalled"]
    expected = {u: 0 if u in readers or u in scenario.blocked else 1 for u in scenario.followers}
    assert unread_from(scenario) == expected  # only the second campaign is left unread
    for uid in scenario.followers:
        summary = unread_summary(uid)
        assert summary.total == sum(summary.by_category.values()) == expected[uid]
    assert Campaign.objects.get(pk=first.pk).status == CampaignStatus.FINISHED
    assert Message.objects.get(msgkey=second.msgkey or 0).status == MessageStatus.NORMAL


def test_a_recall_run_again_or_interrupted_counts_each_copy_down_once(
    uids: Uids, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario, first, _ = two_campaigns(uids)
    message_recall(msgkey=first.msgkey or 0, actor_uid=scenario.sender)
    inbox_class = type(get_inbox())
    real_recall_many = inbox_class.recall_many

    def die(*args: object, **kwargs: object) -> None:
        raise ConnectionError("worker killed between the decrement and the flags")

    monkeypatch.setattr(inbox_class, "recall_many", die)
    with pytest.raises(ConnectionError):
        recall_every_batch(first)
    monkeypatch.setattr(inbox_class, "recall_many", real_recall_many)
    recall_every_batch(first)  # the redelivered tasks
    recall_every_batch(first)  # and once more, after they finished

    expected = {u: 0 if u in scenario.blocked else 1 for u in scenario.followers}
    assert unread_from(scenario) == expected


def test_recalling_a_running_campaign_cancels_it_and_nothing_more_is_delivered(
    uids: Uids,
) -> None:
    ChannelSetting.objects.create(channel="daily", rate_per_s=3500, batch_size=10)
    scenario = business_with_followers(uids(31), limit=0)
    campaign = launch(scenario)
    while fanout.campaign_plan_step(campaign.pk):
        pass
    batches = list(CampaignBatch.objects.filter(campaign=campaign).order_by("index"))
    assert len(batches) == 3
    fanout.batch_run(batches[0].pk)  # the first batch went out before the recall
    delivered_first = set(batches[0].uids)

    message_recall(msgkey=campaign.msgkey or 0, actor_uid=scenario.sender, operator=True)
    assert Campaign.objects.get(pk=campaign.pk).status == CampaignStatus.CANCELLED
    recall_every_batch(campaign)
    for batch in batches[1:]:  # a delivery racing the recall finds its batch closed
        assert fanout.batch_run(batch.pk).state == "done"
        assert CampaignBatch.objects.get(pk=batch.pk).state == BatchState.DONE

    inbox = get_inbox()
    holders = {u for u in scenario.followers if inbox.get(u, scenario.sender, campaign.msgkey or 0)}
    assert holders == delivered_first
    assert all(v == 0 for v in unread_from(scenario).values())


def test_a_batch_a_live_worker_holds_is_recalled_once_it_is_done(uids: Uids) -> None:
    from bulk import ledger

    scenario = business_with_followers(uids(11), limit=0)
    campaign = launch(scenario)
    run_synchronously(campaign.pk)
    batch = CampaignBatch.objects.get(campaign=campaign)
    CampaignBatch.objects.filter(pk=batch.pk).update(state=BatchState.PENDING)
    token = ledger.lease(batch.pk)  # a worker is (re)delivering it right now
    assert token is not None

    message_recall(msgkey=campaign.msgkey or 0, actor_uid=scenario.sender)
    assert recall.batch_recall(batch.pk).state == "busy"
    assert all(v == 1 for v in unread_from(scenario).values())  # nothing taken back yet
    batch.refresh_from_db()
    ledger.complete(batch, token, ledger.BatchResult(0, 0, 0), BatchState.DONE)

    assert recall.batch_recall(batch.pk) == recall.BatchRecall("recalled", 10)
    assert all(v == 0 for v in unread_from(scenario).values())


@pytest.mark.worker
def test_an_abandoned_recall_is_finished_by_the_sweep(
    uids: Uids, workers: Any, backend: str
) -> None:
    """The recall's batch tasks were lost (the broker purged, as after their retries ran out):
    the sweep enqueues again the batches not recalled yet, a worker recalls them, and a sweep
    with nothing left to recall enqueues nothing."""
    from bulk import tasks
    from bulk.keys import recall_resend_due
    from config.celery import app
    from infra.redis import get_redis
    from tests.conftest import wait_for

    ChannelSetting.objects.create(channel="daily", rate_per_s=3500, batch_size=10)
    scenario = business_with_followers(uids(31), limit=0)
    campaign = launch(scenario)
    run_synchronously(campaign.pk)
    batches = list(CampaignBatch.objects.filter(campaign=campaign).order_by("index"))
    message_recall(msgkey=campaign.msgkey or 0, actor_uid=scenario.sender)
    app.control.purge()  # every recall task lost
    assert recall.batch_recall(batches[0].pk).state == "recalled"  # one went through before

    assert tasks.sweep()["recalls_resent"] == len(batches) - 1
    workers.env["INBOX_BACKEND"] = backend
    workers.start(queues="messaging", concurrency=1)
    wait_for(lambda: recall.recalled_batches(campaign.pk) == len(batches), timeout=60)
    assert all(v == 0 for v in unread_from(scenario).values())
    inbox = get_inbox()
    for uid in scenario.expected:
        copy = inbox.get(uid, scenario.sender, campaign.msgkey or 0)
        assert copy is not None
        assert copy.flags & FLAG_RECALLED
    get_redis().delete(recall_resend_due())  # the next sweep is due
    assert tasks.sweep()["recalls_resent"] == 0


@pytest.mark.worker
def test_a_refresh_given_up_is_finished_by_the_sweep(
    uids: Uids, workers: Any, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A campaign's message edited in SQL, and the batches' refresh tasks lost (the broker
    purged, as after their retries ran out): the recipients' lists keep the old text until the
    sweep enqueues again the batches not refreshed yet and a worker runs them; a sweep with
    nothing left enqueues nothing, and one within the grace period leaves them to their tasks."""
    from bulk import tasks
    from config.celery import app
    from messaging.services import messages_changed_outside
    from tests.conftest import wait_for

    ChannelSetting.objects.create(channel="daily", rate_per_s=3500, batch_size=10)
    scenario = business_with_followers(uids(31), limit=0)
    campaign = launch(scenario, text="sale at shop.exmaple")
    run_synchronously(campaign.pk)
    batches = list(CampaignBatch.objects.filter(campaign=campaign).order_by("index"))

    def previews() -> set[str]:
        return {preview(uid, scenario.sender) for uid in scenario.expected}

    assert previews() == {"sale at shop.exmaple"}
    msgkey = campaign.msgkey or 0
    Message.objects.filter(msgkey=msgkey).update(
        body={"type": "text", "text": "sale at shop.example"}
    )
    assert messages_changed_outside([msgkey], []) == 0  # the binlog follower's call
    app.control.purge()  # every refresh task lost
    assert recall.batch_refresh(batches[0].pk) == 10  # one went through before
    assert len(previews()) == 2  # that batch's recipients see the edit, the others do not

    assert tasks.sweep()["refreshes_resent"] == 0  # within the grace period: left to the tasks
    monkeypatch.setattr(recall, "REFRESH_GRACE_S", 0)
    assert tasks.sweep()["refreshes_resent"] == len(batches) - 1
    workers.env["INBOX_BACKEND"] = backend
    workers.start(queues="messaging", concurrency=1)
    wait_for(lambda: previews() == {"sale at shop.example"}, timeout=60)
    wait_for(lambda: tasks.sweep()["refreshes_resent"] == 0, timeout=10)  # each task took its own


def preview(owner: int, peer: int) -> Any:
    """The preview the owner's conversation list shows for ``peer`` (through its caches)."""
    page = selectors.conversation_list(owner, limit=50)
    return next((c.last_message or {}).get("preview") for c in page.results if c.peer_uid == peer)
