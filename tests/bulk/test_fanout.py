"""Fan-out semantics (bulk/fanout.py) driven synchronously: exactly once under redelivery,
crashes at each step, quotas, budget, pause/resume/cancel, on both inbox backends."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from celery import current_app
from django.db import OperationalError, connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from thriftpy2.transport import TTransportException

from bulk import fanout, ledger, profile, quotas, services
from bulk.models import (
    BatchState,
    Campaign,
    CampaignBatch,
    CampaignStatus,
    ChannelSetting,
    SenderPolicy,
)
from infra import broker
from storage import inbox as inbox_module
from storage.inbox import get_inbox
from tests.bulk.helpers import (
    assert_exactly_once,
    business_with_followers,
    launch,
    run_synchronously,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=["sql", "hbase"])
def backend(request: pytest.FixtureRequest):
    inbox_module._cached.cache_clear()
    with override_settings(INBOX_BACKEND=request.param):
        yield request.param
    inbox_module._cached.cache_clear()


def test_every_batch_delivered_three_times_is_still_exactly_once(backend, uids) -> None:
    scenario = business_with_followers(uids(2501), blocked_every=50)
    campaign = launch(scenario)
    run_synchronously(campaign.pk, repeat=3)
    assert_exactly_once(
        campaign.pk, scenario.expected, scenario.sender, skipped_blocked=len(scenario.blocked)
    )
    assert CampaignBatch.objects.filter(campaign=campaign).count() == 3  # 2,500 in 1,000s


class WorkerDied(BaseException):
    """A worker process killed at this line: no handler of ours runs, the lease stays held."""


@pytest.mark.parametrize(
    "crash_in",
    [
        "messaging.services.conversations_touch_owners",
        "messaging.services.unread_incr_many",
        "messaging.services.publish_into",
        "bulk.ledger.complete",  # everything written, the ledger not yet told
        "bulk.ledger.maybe_finish",
    ],
)
def test_a_crash_at_any_step_is_repaired_by_the_next_attempt(crash_in, uids, monkeypatch) -> None:
    scenario = business_with_followers(uids(1201))
    campaign = launch(scenario)
    while fanout.campaign_plan_step(campaign.pk):
        pass
    first = CampaignBatch.objects.filter(campaign=campaign).order_by("index").first()
    assert first is not None

    def crash(*args, **kwargs):
        raise WorkerDied

    monkeypatch.setattr(crash_in, crash)
    with pytest.raises(WorkerDied):
        fanout.batch_run(first.pk)
    monkeypatch.undo()
    expire_leases(campaign.pk)  # a worker that dies keeps its lease until it expires
    run_synchronously(campaign.pk)
    fanout.sweep()  # a crash after the ledger commit leaves only the finish check to redo
    fanout.campaign_plan_step(campaign.pk)
    ledger.maybe_finish(campaign.pk)
    assert_exactly_once(campaign.pk, scenario.expected, scenario.sender)


def expire_leases(campaign_id: int) -> None:
    CampaignBatch.objects.filter(campaign_id=campaign_id, state=BatchState.RUNNING).update(
        lease_until=timezone.now() - timedelta(seconds=1)
    )


# Each step of a batch, in order, with the error its store raises when it is down mid-call.
STEPS = [
    ("bulk.fanout.blocked_receivers", OperationalError(2013, "Lost connection")),
    ("bulk.quotas.admit_batch", RedisConnectionError("Connection refused")),
    ("inbox.add_received", TTransportException(message="closed")),  # HBase; SQL: the same path
    ("messaging.services.conversations_touch_owners", OperationalError(2013, "Lost connection")),
    ("storage.convcache.writer.refresh_owners", RedisConnectionError("Connection reset")),
    ("messaging.services.unread_incr_many", RedisConnectionError("Connection refused")),
    ("messaging.services.publish_into", RedisTimeoutError("Timeout reading")),
    ("bulk.ledger.complete", OperationalError(2013, "Lost connection")),
]


@pytest.mark.parametrize(("step", "error"), STEPS, ids=[s for s, _ in STEPS])
def test_a_store_dying_before_any_step_leaves_no_half_written_recipient(
    backend, step, error, uids, monkeypatch
) -> None:
    """The store dies just before ``step``: the batch waits (paused ``store_unavailable``, its
    attempt refunded, nobody failed), resumes when the stores answer, and every recipient ends
    with exactly one entry, one conversation and unread 1."""
    scenario = business_with_followers(uids(301), blocked_every=30)
    campaign = launch(scenario)
    while fanout.campaign_plan_step(campaign.pk):
        pass
    batch = CampaignBatch.objects.get(campaign=campaign)

    def down(*args, **kwargs):
        raise error

    if step == "inbox.add_received":
        monkeypatch.setattr(type(get_inbox()), "add_received", down)
    else:
        monkeypatch.setattr(step, down)
    try:
        outcome = fanout.batch_run(batch.pk).state
    except Exception:  # past the fan-out (the ledger): the task retries, the lease runs out
        outcome = "raised"
        expire_leases(campaign.pk)
    monkeypatch.undo()
    assert outcome in ("waiting", "raised")
    stalled = Campaign.objects.get(pk=campaign.pk)
    assert stalled.failed == 0
    assert CampaignBatch.objects.get(pk=batch.pk).attempts <= 1
    fanout.sweep()  # the stores answer again: resumed, re-enqueued
    run_synchronously(campaign.pk)
    assert_exactly_once(
        campaign.pk, scenario.expected, scenario.sender, skipped_blocked=len(scenario.blocked)
    )


def test_a_plan_step_committing_during_the_finish_check_keeps_the_campaign_running(
    uids, monkeypatch
) -> None:
    """The last plan step commits between a worker's "no open batch" look and its finish."""
    monkeypatch.setattr(fanout, "BATCHES_PER_PLAN_STEP", 1)
    scenario = business_with_followers(uids(2501))
    campaign = launch(scenario)
    fanout.campaign_plan_step(campaign.pk)  # batch 0 only; two more to plan
    first = CampaignBatch.objects.get(campaign=campaign)
    real, looked = ledger.has_open_batches, list[int]()

    def stale_then_real(campaign_id: int) -> bool:
        if looked:
            return real(campaign_id)
        looked.append(campaign_id)
        while fanout.campaign_plan_step(campaign_id):  # commits batches 1-2 and `planned`
            pass
        return False  # what the look saw just before that commit

    monkeypatch.setattr(ledger, "has_open_batches", stale_then_real)
    assert fanout.batch_run(first.pk).state == "done"
    assert Campaign.objects.get(pk=campaign.pk).status == CampaignStatus.RUNNING
    monkeypatch.undo()
    run_synchronously(campaign.pk)
    assert_exactly_once(campaign.pk, scenario.expected, scenario.sender)


@override_settings(BULK_CHANNEL_OPEN_BATCHES=8, BULK_BATCH_SIZE=10)
def test_the_celery_planner_plans_a_wave_of_half_a_share_not_a_batch_at_a_time(uids) -> None:
    """The capped planner (the Celery task's) fills the campaign's share of the channel (8 open
    batches), plans nothing while less than half of it is free, then the next wave in one step:
    on a Redis Cluster a wave is the window a plan step orders by slot."""
    scenario = business_with_followers(uids(301))
    campaign = launch(scenario)

    def planned() -> int:
        return Campaign.objects.get(pk=campaign.pk).batches_planned

    assert fanout.campaign_plan_step(campaign.pk, capped=True)
    assert planned() == 8
    batches = list(CampaignBatch.objects.filter(campaign=campaign).order_by("index"))
    for batch in batches[:3]:
        assert fanout.batch_run(batch.pk).state == "done"
    assert fanout.campaign_plan_step(campaign.pk, capped=True)  # 3 free: alive, waiting
    assert planned() == 8
    assert fanout.batch_run(batches[3].pk).state == "done"
    assert fanout.campaign_plan_step(campaign.pk, capped=True)  # 4 free: the next wave
    assert planned() == 12
    run_synchronously(campaign.pk)
    assert_exactly_once(campaign.pk, scenario.expected, scenario.sender)


@override_settings(BULK_LEASE_S=0)
def test_a_batch_whose_worker_died_holding_the_lease_is_taken_over(uids) -> None:
    scenario = business_with_followers(uids(301))
    campaign = launch(scenario)
    fanout.campaign_plan_step(campaign.pk)
    batch = CampaignBatch.objects.get(campaign=campaign)
    assert ledger.lease(batch.pk) is not None  # the dead worker's lease, never completed
    report = fanout.sweep()
    assert report.batches_requeued == 1
    assert fanout.batch_run(batch.pk).state == "done"
    assert_exactly_once(campaign.pk, scenario.expected, scenario.sender)


def test_a_campaign_whose_first_plan_task_was_lost_is_planned_by_the_sweep(uids) -> None:
    """The planner task sent at create never ran (broker flushed, worker died before ack): the
    campaign has no plan heartbeat yet, and the sweep must still pick it up."""
    scenario = business_with_followers(uids(301))
    campaign = launch(scenario)  # its plan task sits in a broker no worker reads here
    assert Campaign.objects.get(pk=campaign.pk).plan_heartbeat is None
    assert fanout.sweep().planners_requeued == 0  # just started: its task may still come
    long_ago = timezone.now() - timedelta(minutes=10)
    Campaign.objects.filter(pk=campaign.pk).update(started_at=long_ago)

    report = fanout.sweep()

    assert report.planners_requeued == 1
    assert fanout.sweep().planners_requeued == 0  # re-sent once per lease, not every sweep
    run_synchronously(campaign.pk)
    assert_exactly_once(campaign.pk, scenario.expected, scenario.sender)


def test_a_campaign_that_just_took_the_channels_tokens_waits_longer_than_one_that_took_none(
    uids,
) -> None:
    """The channel's rate is shared by the campaigns drawing on it: after the big campaign
    drained the bucket, the one that has taken nothing is due first, the big one only once its
    own share (half the rate) has refilled."""
    ChannelSetting.objects.create(channel="daily", rate_per_s=1000, batch_size=500)
    big, small = uids(2)
    assert quotas.take_tokens("daily", 1000, big) == 0  # alone: the whole burst
    small_wait = quotas.take_tokens("daily", 500, small)
    big_wait = quotas.take_tokens("daily", 500, big)
    assert 0 < small_wait <= 600  # the channel's bucket refills at 1,000/s
    assert big_wait >= 700  # its own bucket refills at 1,000 / 2 campaigns per second
    assert big_wait > small_wait


def test_waiting_for_the_rate_limit_uses_none_of_a_batchs_attempts(uids, monkeypatch) -> None:
    """On a busy channel a batch meets an empty token bucket again and again; those waits are
    not failures, so one transient error afterwards is retried, not the batch given up."""
    scenario = business_with_followers(uids(301))
    campaign = launch(scenario)
    fanout.campaign_plan_step(campaign.pk)
    batch = CampaignBatch.objects.get(campaign=campaign)
    ChannelSetting.objects.create(channel="daily", rate_per_s=1, batch_size=1000)
    other_campaign = campaign.pk + 1_000_000
    assert quotas.take_tokens("daily", 1000, other_campaign) == 0  # it took the whole bucket
    for _ in range(fanout.MAX_ATTEMPTS + 1):
        assert fanout.batch_run(batch.pk).state == "throttled"

    ChannelSetting.objects.filter(channel="daily").update(rate_per_s=10_000_000)  # refilled
    real = fanout.deliver_many

    def flaky_once(*args, **kwargs):
        monkeypatch.setattr(fanout, "deliver_many", real)
        raise ConnectionError("HBase hiccup")

    monkeypatch.setattr(fanout, "deliver_many", flaky_once)
    assert fanout.batch_run(batch.pk).state == "waiting"
    assert CampaignBatch.objects.get(pk=batch.pk).state == BatchState.PENDING  # to be retried
    assert fanout.sweep().resumed_after_outage == 1  # the stores answer again
    assert fanout.batch_run(batch.pk).state == "done"
    assert_exactly_once(campaign.pk, scenario.expected, scenario.sender)


def test_a_live_lease_keeps_a_redelivered_batch_from_running_twice(uids) -> None:
    scenario = business_with_followers(uids(11))
    campaign = launch(scenario)
    fanout.campaign_plan_step(campaign.pk)
    batch = CampaignBatch.objects.get(campaign=campaign)
    token = ledger.lease(batch.pk)
    assert fanout.batch_run(batch.pk).state == "leased"
    assert token is not None
    ledger.release(batch.pk, token)
    assert fanout.batch_run(batch.pk).state == "done"


@override_settings(BULK_LEASE_S=1)
def test_a_live_worker_slower_than_its_lease_keeps_its_batch(uids, monkeypatch) -> None:
    """The lease is short, but renewed while the batch works: a step three leases long neither
    lets another worker take the batch nor makes the sweep re-send it."""
    scenario = business_with_followers(uids(11))
    campaign = launch(scenario)
    fanout.campaign_plan_step(campaign.pk)
    batch = CampaignBatch.objects.get(campaign=campaign)
    broker.restarted()  # the running broker is known: the sweep below re-sends only what is owed
    real, seen = fanout.deliver_many, dict[str, object]()

    def slow(**kwargs):
        time.sleep(3 * ledger.lease_seconds())  # e.g. a store answering slowly
        seen["taken over"] = ledger.lease(batch.pk)
        seen["re-sent"] = fanout.sweep().batches_requeued
        real(**kwargs)

    monkeypatch.setattr(fanout, "deliver_many", slow)
    assert fanout.batch_run(batch.pk).state == "done"
    assert seen == {"taken over": None, "re-sent": 0}
    assert CampaignBatch.objects.get(pk=batch.pk).attempts == 1
    assert_exactly_once(campaign.pk, scenario.expected, scenario.sender)


@override_settings(BULK_LEASE_S=30)  # no renewal during the test: the takeover is the test's
def test_a_worker_whose_lease_was_taken_over_counts_nothing(uids, monkeypatch) -> None:
    """A worker stalls mid-batch past its lease; another takes the batch over and completes it.
    The first then finishes its steps (idempotent) but its completion matches nothing: the
    campaign's totals and every recipient's inbox and unread count the batch once."""
    scenario = business_with_followers(uids(301), blocked_every=30)
    campaign = launch(scenario)
    fanout.campaign_plan_step(campaign.pk)
    batch = CampaignBatch.objects.get(campaign=campaign)
    real, other = fanout.deliver_many, list[str]()

    def stalled(**kwargs):
        expire_leases(campaign.pk)  # stalled past its lease
        monkeypatch.setattr(fanout, "deliver_many", real)
        taker = threading.Thread(target=lambda: other.append(_run_elsewhere(batch.pk)))
        taker.start()
        taker.join()
        real(**kwargs)  # the stalled worker carries on where it was

    monkeypatch.setattr(fanout, "deliver_many", stalled)
    # the stalled worker's heartbeat renews nothing (a stalled process would not): a renewal
    # between the expiry above and the other worker's lease gave the batch back to the first
    monkeypatch.setattr(ledger, "renew", lambda batch_id, token: True)
    assert fanout.batch_run(batch.pk).state == "lost"
    assert other == ["done"]
    assert CampaignBatch.objects.get(pk=batch.pk).attempts == 2
    assert_exactly_once(
        campaign.pk, scenario.expected, scenario.sender, skipped_blocked=len(scenario.blocked)
    )


def _run_elsewhere(batch_id: int) -> str:
    """Another worker (a thread, with its own database connection) runs the batch."""
    try:
        return fanout.batch_run(batch_id).state
    finally:
        connection.close()


@override_settings(BULK_PROFILE=True)
def test_a_completed_batch_adds_its_stage_times_to_the_campaigns_profile(uids) -> None:
    scenario = business_with_followers(uids(2501))
    campaign = launch(scenario)
    run_synchronously(campaign.pk, repeat=2)  # the second pass completes nothing: not counted
    found = profile.read(campaign.pk)
    assert (found.batches, found.recipients) == (3, 2500)
    assert [s.stage for s in found.stages] == list(profile.ORDER)
    assert all(s.ms_per_batch > 0 for s in found.stages)
    assert sum(s.share for s in found.stages) == pytest.approx(1.0)
    assert_exactly_once(campaign.pk, scenario.expected, scenario.sender)


def test_receivers_at_their_cap_are_skipped_and_counted(uids) -> None:
    scenario = business_with_followers(uids(401), limit=1)
    first = launch(scenario, text="first")
    run_synchronously(first.pk)
    second = launch(scenario, text="second")
    run_synchronously(second.pk)
    second.refresh_from_db()
    assert second.status == CampaignStatus.FINISHED
    assert (second.delivered, second.skipped_quota) == (0, 400)
    assert all(get_inbox().count(u, scenario.sender) == 1 for u in scenario.followers[:20])


def test_budget_exhaustion_pauses_and_the_renewed_budget_resumes_without_gaps(uids) -> None:
    scenario = business_with_followers(uids(2301))
    SenderPolicy.objects.filter(sender_uid=scenario.sender).update(daily_budget=1500)
    campaign = launch(scenario)
    run_synchronously(campaign.pk)
    campaign.refresh_from_db()
    assert (campaign.status, campaign.pause_reason) == (CampaignStatus.PAUSED, "budget")
    assert campaign.delivered == 1500
    assert quotas.budget_remaining(scenario.sender) == 0
    SenderPolicy.objects.filter(sender_uid=scenario.sender).update(daily_budget=5000)  # renewal
    report = fanout.sweep()
    assert report.resumed == 1
    run_synchronously(campaign.pk)
    assert_exactly_once(campaign.pk, scenario.expected, scenario.sender)


def test_pause_stops_between_batches_and_resume_neither_resends_nor_skips(uids) -> None:
    scenario = business_with_followers(uids(3001))
    campaign = launch(scenario)
    while fanout.campaign_plan_step(campaign.pk):
        pass
    batches = list(CampaignBatch.objects.filter(campaign=campaign).order_by("index"))
    fanout.batch_run(batches[0].pk)
    services.campaign_pause(campaign_id=campaign.pk)
    assert fanout.batch_run(batches[1].pk).state == "inactive"
    campaign.refresh_from_db()
    assert (campaign.status, campaign.delivered) == (CampaignStatus.PAUSED, 1000)
    services.campaign_resume(campaign_id=campaign.pk)
    run_synchronously(campaign.pk)
    assert_exactly_once(campaign.pk, scenario.expected, scenario.sender)


def test_cancel_stops_delivery_and_never_finishes(uids) -> None:
    scenario = business_with_followers(uids(2001))
    campaign = launch(scenario)
    while fanout.campaign_plan_step(campaign.pk):
        pass
    first = CampaignBatch.objects.filter(campaign=campaign).order_by("index").first()
    assert first is not None
    fanout.batch_run(first.pk)
    services.campaign_cancel(campaign_id=campaign.pk)
    run_synchronously(campaign.pk)
    campaign.refresh_from_db()
    assert (campaign.status, campaign.delivered) == (CampaignStatus.CANCELLED, 1000)
    assert CampaignBatch.objects.filter(campaign=campaign, state=BatchState.PENDING).count() == 1


def test_content_is_stored_once_and_the_sender_never_receives_it(uids) -> None:
    scenario = business_with_followers(uids(51))
    from messaging.models import Follow

    Follow.objects.create(
        follower_uid=scenario.sender, followee_uid=scenario.sender, followed_at=timezone.now()
    )
    campaign = launch(scenario)
    run_synchronously(campaign.pk)
    campaign = Campaign.objects.get(pk=campaign.pk)
    from messaging.models import Message

    assert Message.objects.filter(sender_uid=scenario.sender).count() == 1
    assert get_inbox().count(scenario.sender, scenario.sender) == 0
    assert_exactly_once(campaign.pk, scenario.expected, scenario.sender)


def test_a_batch_costs_the_same_few_queries_whatever_its_size(
    backend, uids, django_assert_max_num_queries
) -> None:
    """The hot path, pinned: load, token-bucket setting, lease, blocks, policy, sender kind, the
    rows and conversations in one transaction, the ledger in another, the finish check (a
    campaign's last batch adds the finish itself: five more)."""
    scenario = business_with_followers(uids(2001), blocked_every=100)
    campaign = launch(scenario)
    fanout.campaign_plan_step(campaign.pk)
    first = CampaignBatch.objects.get(campaign=campaign, index=0)
    with django_assert_max_num_queries(15):  # BEGIN and COMMIT count as queries
        assert fanout.batch_run(first.pk).state == "done"
    run_synchronously(campaign.pk)
    assert_exactly_once(
        campaign.pk, scenario.expected, scenario.sender, skipped_blocked=len(scenario.blocked)
    )


# The SQL queries of one batch, pinned exactly (BEGIN and COMMIT count as queries):
#  1 the batch with its campaign (one SELECT ... JOIN)
#  2 the channel's setting, for its token bucket (bulk.quotas.channel_setting)
#  3 the lease (one UPDATE, bulk.ledger.lease)
#  4 who in the batch blocks the sender (messaging.selectors.blocked_receivers: one IN list)
#  5 the sender's policy: caps and budget (bulk.quotas.policy_for)
#  6 the sender's category (messaging.selectors.broadcast_category)
#  7-10 BEGIN, the inbox rows (one INSERT ... JSON_TABLE; with the HBase inbox they go to HBase:
#       no query), the conversations (one upsert), COMMIT (messaging.services.deliver_many)
# 11-14 BEGIN, the batch's row done, the campaign's totals, COMMIT (bulk.ledger.complete)
# 15 the finish check: is any batch still open? (bulk.ledger.maybe_finish)
BATCH_QUERIES = {"sql": 15, "hbase": 14}
# The campaign's last batch also finishes it: BEGIN, the campaign's row locked, the open-batch
# look again under that lock, the UPDATE to finished, COMMIT.
FINISH_QUERIES = 5


@pytest.mark.parametrize("size", [10, 200])
def test_a_batch_makes_the_same_queries_whether_it_holds_10_or_200_recipients(
    backend, uids, size
) -> None:
    """One statement per table however many recipients: a batch's query count is the same for
    10 as for 200, in the middle of a campaign and as its last batch."""
    ChannelSetting.objects.create(channel="daily", rate_per_s=1_000_000, batch_size=size)
    scenario = business_with_followers(uids(2 * size + 1), blocked_every=5)
    campaign = launch(scenario)
    fanout.campaign_plan_step(campaign.pk)
    middle, last = CampaignBatch.objects.filter(campaign=campaign).order_by("index")
    for batch, expected in (
        (middle, BATCH_QUERIES[backend]),
        (last, BATCH_QUERIES[backend] + FINISH_QUERIES),
    ):
        assert batch.size == size
        with CaptureQueriesContext(connection) as queries:
            assert fanout.batch_run(batch.pk).state == "done"
        assert len(queries) == expected, [q["sql"][:100] for q in queries.captured_queries]
    assert_exactly_once(
        campaign.pk, scenario.expected, scenario.sender, skipped_blocked=len(scenario.blocked)
    )


def test_a_store_down_for_longer_than_every_attempt_fails_nobody(uids, monkeypatch) -> None:
    """An outage is waited out, however many tries it takes: the campaign pauses with reason
    ``store_unavailable``, stays paused while the stores do not answer, and resumes by itself."""
    scenario = business_with_followers(uids(21), blocked_every=5)

    def down(*args, **kwargs):
        raise TTransportException(message="Could not connect to 127.0.0.1:9090")

    monkeypatch.setattr(fanout, "deliver_many", down)
    campaign = launch(scenario)
    fanout.campaign_plan_step(campaign.pk)
    batch = CampaignBatch.objects.get(campaign=campaign)
    for _ in range(fanout.MAX_ATTEMPTS * 2):
        services.campaign_resume(campaign_id=campaign.pk)  # as the sweep would, too early
        assert fanout.batch_run(batch.pk).state == "waiting"
    waiting = Campaign.objects.get(pk=campaign.pk)
    assert (waiting.status, waiting.pause_reason) == (CampaignStatus.PAUSED, "store_unavailable")
    assert (waiting.failed, CampaignBatch.objects.get(pk=batch.pk).attempts) == (0, 0)

    monkeypatch.setattr(fanout, "stores_answer", lambda: False)
    assert fanout.sweep().resumed_after_outage == 0
    assert Campaign.objects.get(pk=campaign.pk).status == CampaignStatus.PAUSED
    monkeypatch.undo()
    assert fanout.sweep().resumed_after_outage == 1
    run_synchronously(campaign.pk)
    assert_exactly_once(
        campaign.pk, scenario.expected, scenario.sender, skipped_blocked=len(scenario.blocked)
    )


def test_an_outage_past_the_horizon_leaves_the_campaign_paused_for_an_operator(uids) -> None:
    scenario = business_with_followers(uids(11))
    campaign = launch(scenario)
    services.campaign_wait_for_stores(campaign_id=campaign.pk)
    Campaign.objects.filter(pk=campaign.pk).update(paused_at=timezone.now() - timedelta(days=1))
    assert fanout.sweep().resumed_after_outage == 0
    left = Campaign.objects.get(pk=campaign.pk)
    assert (left.status, left.pause_reason) == (CampaignStatus.PAUSED, "outage_too_long")
    services.campaign_resume(campaign_id=campaign.pk)  # the operator, once they have looked
    run_synchronously(campaign.pk)
    assert_exactly_once(campaign.pk, scenario.expected, scenario.sender)


def test_an_operators_pause_is_not_taken_for_an_outage(uids) -> None:
    campaign = launch(business_with_followers(uids(11)))
    services.campaign_pause(campaign_id=campaign.pk)
    assert not services.campaign_wait_for_stores(campaign_id=campaign.pk)
    fanout.sweep()
    kept = Campaign.objects.get(pk=campaign.pk)
    assert (kept.status, kept.pause_reason) == (CampaignStatus.PAUSED, "manual")


def test_a_batch_that_cannot_succeed_fails_with_a_reason_after_its_attempts(
    uids, monkeypatch
) -> None:
    """Bad data, not an outage: after MAX_ATTEMPTS the batch is failed, the error kept on it."""
    scenario = business_with_followers(uids(21), blocked_every=5)

    def bad(*args, **kwargs):
        raise ValueError("content body is not JSON-serialisable")

    monkeypatch.setattr(fanout, "deliver_many", bad)
    campaign = launch(scenario)
    fanout.campaign_plan_step(campaign.pk)
    batch = CampaignBatch.objects.get(campaign=campaign)
    for _ in range(fanout.MAX_ATTEMPTS):
        with pytest.raises(ValueError, match="JSON-serialisable"):
            fanout.batch_run(batch.pk)
    assert fanout.batch_run(batch.pk).state == "done"  # given up: nothing runs it again

    failed = Campaign.objects.get(pk=campaign.pk)
    assert (failed.status, failed.delivered, failed.failed) == (CampaignStatus.FAILED, 0, 20)
    assert failed.finished_at is not None
    kept = CampaignBatch.objects.get(pk=batch.pk)
    assert kept.state == BatchState.FAILED
    assert kept.error == "ValueError: content body is not JSON-serialisable"
    assert all(get_inbox().count(uid, scenario.sender) == 0 for uid in scenario.followers)


def test_a_restarted_broker_gets_every_pending_batch_again_at_once(uids) -> None:
    """Its queue may have lost messages: the first sweep after the restart re-enqueues every
    pending batch instead of waiting a lease for each."""
    scenario = business_with_followers(uids(2501))
    campaign = launch(scenario)
    while fanout.campaign_plan_step(campaign.pk):
        pass
    current_app.control.purge()  # the messages went with the crashed broker
    broker.restarted()  # the running broker is known
    assert fanout.sweep().batches_requeued == 0  # recently enqueued: not yet overdue
    broker.client().delete(broker.RUN_ID_KEY)  # a broker that came back without its data
    assert fanout.sweep().batches_requeued == 3
    assert fanout.sweep().batches_requeued == 0  # once per restart
    run_synchronously(campaign.pk)
    assert_exactly_once(campaign.pk, scenario.expected, scenario.sender)
